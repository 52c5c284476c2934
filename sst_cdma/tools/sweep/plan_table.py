"""What each point's per-tensor plan chose, as a markdown table: one row per tensor name
(a transformer's ``blk{i}/`` prefix dropped, so a row covers that tensor in every block), one
column per point, each cell the choices with their counts (``recompute 48``,
``keep 20, recompute 28``). Read from each point's ``summary.json`` (``plan.tensors``)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from workloads.transformer import split_name

from sst_cdma.engine.file_reads import FileReadError, load_json
from sst_cdma.tools.sweep.execute import SUMMARY_FILE
from sst_cdma.tools.sweep.marks import display_path
from sst_cdma.tools.sweep.pivot import PivotError, select_points
from sst_cdma.tools.sweep.plan_plot import PlanError, plan_tensors
from sst_cdma.tools.sweep.report import _point_label, swept_columns

__all__ = ["CHOICES", "plan_rows", "plan_markdown"]

#: The order choices are listed in within a cell.
CHOICES = ("keep", "offload", "compress", "recompute", "free")


def plan_rows(tensors: dict[str, str]) -> dict[str, dict[str, int]]:
    """Tensor name without its block -> choice -> how many blocks (or 1) chose it, in the
    order the tensors come."""
    rows: dict[str, dict[str, int]] = {}
    for name, choice in tensors.items():
        counts = rows.setdefault(split_name(name)[1], {})
        counts[choice] = counts.get(choice, 0) + 1
    return rows


def _cell(counts: Optional[dict[str, int]]) -> str:
    if not counts:
        return ""
    order = [c for c in CHOICES if c in counts] + sorted(set(counts) - set(CHOICES))
    if len(order) == 1 and counts[order[0]] == 1:
        return order[0]
    return ", ".join(f"{c} {counts[c]}" for c in order)


def plan_markdown(results: str | Path, where: Optional[list[str]] = None) -> str:
    """The plan table of the successful points of a sweep (``where``: ``KEY=VALUE`` filters, as
    ``sst-cdma table`` takes them). PivotError when no selected point has a plan, or when a
    point's summary.json or its plan is malformed (naming the file and the entry)."""
    path, frame = select_points(results, where)
    swept = swept_columns(frame)
    columns: list[tuple[str, dict[str, dict[str, int]]]] = []
    for _, row in frame.iterrows():
        summary = path.parent / "points" / str(row["key"]) / "summary.json"
        try:
            try:
                doc = load_json(summary, SUMMARY_FILE)
            except FileReadError as exc:
                if exc.missing:
                    continue
                raise
            if not isinstance(doc, dict):
                raise PlanError(f"{display_path(summary)}: not a summary (a JSON object)")
            tensors = plan_tensors(doc, display_path(summary))
        except ValueError as exc:  # PlanError, or JSON that does not parse
            raise PivotError(str(exc) if isinstance(exc, PlanError) else
                             f"{display_path(summary)}: cannot be read: {exc}") from None
        if tensors:
            columns.append((_point_label(row, swept), plan_rows(tensors)))
    if not columns:
        raise PivotError(f"{path}: no selected point has a per-tensor plan (policy auto, a "
                         "per-tensor policy or --plan)")
    names = list(dict.fromkeys(n for _, rows in columns for n in rows))
    lines = ["| tensor | " + " | ".join(label for label, _ in columns) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for name in names:
        lines.append(f"| `{name}` | " + " | ".join(_cell(rows.get(name)) for _, rows in columns)
                     + " |")
    return "\n".join(lines)
