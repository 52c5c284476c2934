"""The plan drawing of ``sst-cdma report``: what one point's iteration did with each
activation tensor (keep, offload, compress, recompute, free), from its summary.json's
``plan``. One bar per tensor in forward order, its height the tensor's bytes, coloured by
choice; a transformer (tensors named ``blk{i}/...``) gets one stacked bar per block instead."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

#: Colour of each choice in the plan drawing.
CHOICE_COLOURS = {"keep": "#4c72b0", "offload": "#dd8452", "compress": "#55a868",
                  "recompute": "#c44e52", "free": "#bbbbbb"}
#: Above this many tensors, a per-tensor drawing is unreadable: one bar per block instead.
MAX_BARS = 160

__all__ = ["CHOICE_COLOURS", "draw_plan", "plan_bars"]


def plan_bars(tensors: Mapping[str, str], sizes: Mapping[str, int]
              ) -> tuple[list[str], dict[str, list[float]]]:
    """Bar labels and, per choice, the bytes of each bar: one bar per tensor, or, for a
    transformer with many tensors, one per block (tensors outside blocks keep their own)."""
    from workloads.policies import split_block

    names = list(tensors)
    blocked = len(names) > MAX_BARS and any(split_block(n)[0] is not None for n in names)
    labels: list[str] = []
    index: dict[str, int] = {}
    for name in names:
        block = split_block(name)[0] if blocked else None
        label = f"blk{block}" if block is not None else name
        if label not in index:
            index[label] = len(labels)
            labels.append(label)
    heights = {c: [0.0] * len(labels) for c in CHOICE_COLOURS}
    for name, choice in tensors.items():
        block = split_block(name)[0] if blocked else None
        label = f"blk{block}" if block is not None else name
        heights.setdefault(choice, [0.0] * len(labels))
        heights[choice][index[label]] += sizes.get(name, 1)
    return labels, heights


def draw_plan(summary: Mapping[str, Any], path: Path, title: str,
              sizes: Optional[Mapping[str, int]] = None) -> bool:
    """Draw ``summary``'s plan into ``path`` (PNG); False when it has none. ``sizes`` gives
    tensor bytes (default: every tensor counts 1, bars then count tensors)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = summary.get("plan") or {}
    tensors = plan.get("tensors") or {}
    if not tensors:
        return False
    labels, heights = plan_bars(tensors, sizes or {})
    unit, scale = ("MB", 1e6) if sizes else ("tensors", 1.0)
    fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, 0.12 * len(labels) + 4)), 4.5))
    bottom = [0.0] * len(labels)
    xs = list(range(len(labels)))
    for choice, values in heights.items():
        if not any(values):
            continue
        ys = [v / scale for v in values]
        ax.bar(xs, ys, bottom=bottom, color=CHOICE_COLOURS.get(choice, "#8172b2"),
               label=f"{choice} ({plan.get('counts', {}).get(choice, 0)})", width=0.85)
        bottom = [b + y for b, y in zip(bottom, ys)]
    if len(labels) <= 60:
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=90, fontsize=6)
    else:
        ax.set_xlabel("tensor (forward order)" if labels[0] != "blk0" else "block")
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
