"""The plan drawing of ``sst-cdma report``: what one point's iteration did with each
activation tensor (keep, offload, compress, recompute, free), from its summary.json's
``plan``. One bar per tensor in forward order, its height the tensor's bytes, coloured by
choice; a transformer (tensors named ``blk{i}/...``) gets one stacked bar per block instead.
The summary lists the tensors by name (``blk0, blk1, blk10``): the bars follow the order of the
tensors in the point's stream (forward order), or, without one, names in natural order
(``blk2`` before ``blk10``)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

#: Colour of each choice in the plan drawing.
CHOICE_COLOURS = {"keep": "#4c72b0", "offload": "#dd8452", "compress": "#55a868",
                  "recompute": "#c44e52", "free": "#bbbbbb"}
#: Above this many tensors, a per-tensor drawing is unreadable: one bar per block instead.
MAX_BARS = 160

__all__ = ["CHOICE_COLOURS", "PlanError", "draw_plan", "plan_bars", "plan_tensors",
           "natural_key"]


class PlanError(ValueError):
    """A summary's plan is malformed (the message names the file and the entry at fault)."""


def natural_key(name: str) -> list[Any]:
    """A sort key ordering the numbers inside names by value: ``blk2`` before ``blk10``."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", name) if part]


def plan_tensors(summary: Mapping[str, Any], where: str) -> dict[str, str]:
    """The ``plan.tensors`` of a summary (tensor name -> choice, both text; empty when the
    summary has no plan); PlanError naming ``where`` (the summary's file) and the entry at
    fault otherwise."""
    plan = summary.get("plan") or {}
    if not isinstance(plan, Mapping):
        raise PlanError(f"{where}: 'plan' holds {type(plan).__name__}, not an object")
    tensors = plan.get("tensors") or {}
    if not isinstance(tensors, Mapping):
        raise PlanError(f"{where}: 'plan.tensors' holds {type(tensors).__name__}, not an "
                        "object of tensor name -> choice")
    for name, choice in tensors.items():
        if not isinstance(name, str) or not isinstance(choice, str):
            raise PlanError(f"{where}: plan.tensors: tensor {name!r} -> {choice!r}: a tensor "
                            "name and its choice must both be text")
    return dict(tensors)


def _ordered(names: list[str], order: Mapping[str, Any]) -> list[str]:
    """``names`` in the order of ``order``'s keys (a stream's tensors), the rest after them
    in natural order."""
    rank = {name: n for n, name in enumerate(order)}
    return sorted(names, key=lambda n: (0, rank[n], []) if n in rank else
                  (1, 0, natural_key(n)))


def plan_bars(tensors: Mapping[str, str], sizes: Mapping[str, int]
              ) -> tuple[list[str], dict[str, list[float]]]:
    """Bar labels and, per choice, the bytes of each bar: one bar per tensor, or, for a
    transformer with many tensors, one per block (tensors outside blocks keep their own)."""
    from workloads.policies import split_block

    names = _ordered(list(tensors), sizes)
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
    for name in names:
        choice = tensors[name]
        block = split_block(name)[0] if blocked else None
        label = f"blk{block}" if block is not None else name
        heights.setdefault(choice, [0.0] * len(labels))
        heights[choice][index[label]] += sizes.get(name, 1)
    return labels, heights


def draw_plan(summary: Mapping[str, Any], path: Path, title: str,
              sizes: Optional[Mapping[str, int]] = None, where: str = "summary.json") -> bool:
    """Draw ``summary``'s plan into ``path`` (PNG); False when it has none, PlanError naming
    ``where`` when it is malformed. ``sizes`` gives tensor bytes in forward order (default:
    every tensor counts 1, bars then count tensors, in natural order of their names)."""
    from matplotlib.figure import Figure

    tensors = plan_tensors(summary, where)
    if not tensors:
        return False
    labels, heights = plan_bars(tensors, sizes or {})
    top = max(sum(values) for values in zip(*heights.values()))
    unit, scale = ("tensors", 1.0) if not sizes else ("GB", 1e9) if top >= 1e8 else ("MB", 1e6)
    width = max(8.0, min(24.0, 0.12 * len(labels) + 4))
    longest = max(len(label) for label in labels) if len(labels) <= 60 else 0
    height = 4.5 + 0.045 * longest  # the tensors' names stand under the bars
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.8 / width, right=1 - 1.5 / width,
                        bottom=(0.5 + 0.045 * longest) / height, top=0.92)
    ax = fig.subplots()
    bottom = [0.0] * len(labels)
    xs = list(range(len(labels)))
    counts = (summary.get("plan") or {}).get("counts") or {}
    for choice, values in heights.items():
        if not any(values):
            continue
        ys = [v / scale for v in values]
        n = counts.get(choice, sum(1 for t in tensors.values() if t == choice))
        ax.bar(xs, ys, bottom=bottom, color=CHOICE_COLOURS.get(choice, "#8172b2"),
               label=f"{choice} ({n})", width=0.85)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlim(-0.7, len(labels) - 0.3)
    ax.set_ylim(0, max(bottom) * 1.05 or 1.0)
    if len(labels) <= 60:
        ax.set_xticks(xs, labels, rotation=90, fontsize=6)
    blocks = any(label.startswith("blk") and "/" not in label for label in labels)
    ax.set_xlabel("block (forward order)" if blocks else "tensor (forward order)" if sizes
                  else "tensor")
    ax.set_ylabel(f"activation {'size' if sizes else 'count'} ({unit})")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=100)
    return True
