"""Pivot a sweep's results table into a markdown table: one row per value of a parameter, one
column per value of another, a figure (optionally divided by another figure) in the cells."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd


class PivotError(ValueError):
    """The table or a named column does not exist."""


def _column(frame: pd.DataFrame, name: str, source: str) -> str:
    for candidate in (name, f"opt.{name}"):
        if candidate in frame.columns:
            return candidate
    raise PivotError(f"{source}: no column {name!r} (columns: {', '.join(frame.columns)})")


def pivot_markdown(results: str | Path, rows: str, value: str, cols: Optional[str] = None,
                   divide_by: Optional[str] = None, invert: bool = False, scale: float = 1.0,
                   digits: int = 3, where: Optional[list[str]] = None) -> str:
    """The markdown table of ``value`` (optionally ``value / divide_by``, or its inverse) with
    one row per ``rows`` value and one column per ``cols`` value, in the order of the sweep,
    over the points matching every ``where`` condition (``KEY=VALUE``)."""
    path = Path(results)
    if path.is_dir():
        path = path / "results.csv"
    if not path.is_file():
        raise PivotError(f"{results}: no results.csv")
    frame = pd.read_csv(path)
    frame = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    for condition in where or []:
        key, eq, wanted = condition.partition("=")
        if not eq:
            raise PivotError(f"--where {condition!r}: expected KEY=VALUE")
        column = _column(frame, key, str(path))
        frame = frame[frame[column].astype(str) == wanted]
        if frame.empty:
            raise PivotError(f"{path}: no point has {column} = {wanted!r}")
    r = _column(frame, rows, str(path))
    v = _column(frame, value, str(path))
    data = frame[v].astype(float) * scale
    if divide_by:
        data = data / frame[_column(frame, divide_by, str(path))].astype(float)
    if invert:
        data = 1.0 / data
    frame = pd.DataFrame({r: frame[r], "_value": data,
                          **({_column(frame, cols, str(path)): frame[_column(frame, cols, str(path))]}
                             if cols else {})})
    if r == "topology":  # show the script's name, not its relative path
        frame[r] = [Path(str(x)).stem for x in frame[r]]
    row_order = list(dict.fromkeys(frame[r]))
    if cols:
        c = _column(frame, cols, str(path))
        col_order = list(dict.fromkeys(frame[c]))
        table = frame.pivot_table(index=r, columns=c, values="_value", aggfunc="first")
        table = table.reindex(index=row_order, columns=col_order)
        head = [rows, *[str(x) for x in col_order]]
    else:
        table = frame.groupby(r, sort=False)["_value"].first().to_frame()
        head = [rows, value]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in table.iterrows():
        cells = ["" if pd.isna(x) else f"{x:.{digits}f}" for x in row.tolist()]
        lines.append("| " + " | ".join([str(idx), *cells]) + " |")
    return "\n".join(lines)
