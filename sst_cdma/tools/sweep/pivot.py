"""Pivot a sweep's results table into a markdown table: one row per value of a parameter, one
column per value of another, a figure (optionally divided by another figure) in the cells. A
figure of one GPU of a multi-GPU point is named ``gpus.<N>.<field>`` (GPU N's ``field``, as
the GPU table ``gpus.csv`` holds it): such a column is joined in from that table by ``point``."""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from sst_cdma.tools.sweep.table import (GPU_COLUMN, PARAM_PREFIXES, WIDE_GPU_COLUMN, ResultsError,
                                        read_results, read_tables)


class PivotError(ValueError):
    """The table, a named column or an option is unusable (the message names which)."""


#: The most decimals ``--digits`` may ask for.
MAX_DIGITS = 30


def _column(frame: pd.DataFrame, name: str, source: str) -> str:
    for candidate in (name, f"opt.{name}"):
        if candidate in frame.columns:
            return candidate
    import difflib

    params = [c for c in frame.columns if c == "topology" or c.startswith(PARAM_PREFIXES)]
    short = {c.removeprefix("opt."): c for c in frame.columns}
    close = difflib.get_close_matches(name, list(short), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise PivotError(f"{source}: no column {name!r}{hint} (parameters: "
                     f"{', '.join(params) or 'none'}; "
                     f"{len(frame.columns) - len(params)} other columns, the header of the "
                     "table)")


def _numbers(frame: pd.DataFrame, column: str, option: str) -> pd.Series:
    """``frame[column]`` as floats; PivotError naming ``option`` and the column when it holds
    text (or booleans) rather than numbers."""
    data = frame[column]
    if pd.api.types.is_bool_dtype(data):
        raise PivotError(f"{option}: column {column!r} holds true/false, not numbers")
    if not pd.api.types.is_numeric_dtype(data):
        numeric = pd.to_numeric(data, errors="coerce")
        bad = data[numeric.isna() & data.notna()]
        if len(bad):
            raise PivotError(f"{option}: column {column!r} holds text, not numbers (e.g. "
                             f"{str(bad.iloc[0])!r})")
        data = numeric
    return data.astype(float)


def check_options(scale: float, digits: int) -> None:
    """PivotError naming the option when ``scale`` is not a finite number or ``digits`` is not
    a whole number from 0 to :data:`MAX_DIGITS`."""
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or \
            not math.isfinite(scale):
        raise PivotError(f"--scale {scale}: must be a finite number")
    if not isinstance(digits, int) or isinstance(digits, bool) or \
            not 0 <= digits <= MAX_DIGITS:
        raise PivotError(f"--digits {digits}: must be a whole number from 0 to {MAX_DIGITS}")


def with_gpu_columns(results: str | Path, frame: pd.DataFrame, names: Sequence[str]
                     ) -> pd.DataFrame:
    """``frame`` (rows of the results table) with a column for each of ``names`` that reads
    ``gpus.<N>.<field>`` and is not one of its columns: GPU N's ``field`` from the GPU table
    beside the results table, by ``point`` (empty where the point has no such GPU). Names the
    GPU table cannot give (no such field, no point with GPU N) stay absent (the caller says
    which); ResultsError when it cannot be read."""
    wanted = [(name, match) for name in dict.fromkeys(names) if name not in frame.columns
              and (match := WIDE_GPU_COLUMN.match(name))]
    if not wanted:
        return frame
    _, _, gpus = read_tables(results, sweep_columns=False, note=io.StringIO())
    for name, match in wanted if gpus is not None else ():
        field = match.group(2)
        if field in gpus.columns and "point" in frame.columns:
            of_gpu = gpus[gpus[GPU_COLUMN] == int(match.group(1))].set_index("point")[field]
            if len(of_gpu):  # no point has GPU N: the column does not exist
                frame = frame.assign(**{name: frame["point"].map(of_gpu)})
    return frame


def select_points(results: str | Path, where: Optional[list[str]] = None,
                  columns: Sequence[str] = ()) -> tuple[Path, pd.DataFrame]:
    """The results table's path and its successful points matching every ``where`` condition
    (``KEY=VALUE``, a parameter or column), with the ``gpus.<N>.<field>`` columns among
    ``columns`` and the conditions' keys joined in from the GPU table
    (:func:`with_gpu_columns`); PivotError naming the file, column or condition."""
    try:
        path, frame = read_results(results, sweep_columns=False)
        frame = with_gpu_columns(results, frame, [*columns, *(c.partition("=")[0]
                                                               for c in where or [])])
    except ResultsError as exc:
        raise PivotError(str(exc)) from None
    frame = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    for k, condition in enumerate(where or []):
        key, eq, wanted = condition.partition("=")
        if not eq:
            raise PivotError(f"--where {condition!r}: expected KEY=VALUE")
        column = _column(frame, key, str(path))
        frame = frame[frame[column].astype(str) == wanted]
        if frame.empty:
            earlier = " among the points the --where conditions before it keep" if k else ""
            raise PivotError(f"{path}: no point has {column} = {wanted!r}{earlier}")
    return path, frame


def _check_one_point_per_cell(frame: pd.DataFrame, axes: list[str], path: Path) -> None:
    """PivotError when several points fall in one cell of ``axes``, naming the parameters
    that tell them apart (to pin with --where)."""
    params = [c for c in frame.columns if (c == "topology" or c.startswith(PARAM_PREFIXES))
              and c not in axes]
    for cell, group in frame.groupby(axes, sort=False, dropna=False):
        if len(group) > 1:
            varying = [c for c in params if group[c].astype(str).nunique() > 1]
            where = ", ".join(f"{a} = {v!r}" for a, v in zip(axes, cell if isinstance(
                cell, tuple) else (cell,)))
            raise PivotError(f"{path}: {len(group)} points fall in the cell {where}; they differ "
                             f"in {', '.join(varying) or 'no parameter'}: pin "
                             f"{'it' if len(varying) == 1 else 'them'} with --where "
                             "KEY=VALUE")


def figure_name(value: str, divide_by: Optional[str] = None, invert: bool = False,
                scale: float = 1.0) -> str:
    """What a table's cells hold, as its header says it: ``stall_time_s / iteration_time_s``
    for a share, ``1 / (...)`` inverted, ``x 1000`` scaled."""
    name = f"{value} / {divide_by}" if divide_by else value
    if scale != 1.0:
        name = f"{name} x {scale:g}"
    return f"1 / ({name})" if invert else name


def pivot_markdown(results: str | Path, rows: str, value: str, cols: Optional[str] = None,
                   divide_by: Optional[str] = None, invert: bool = False, scale: float = 1.0,
                   digits: int = 3, where: Optional[list[str]] = None) -> str:
    """The markdown table of ``value`` (optionally ``value / divide_by``, or its inverse) with
    one row per ``rows`` value and one column per ``cols`` value, in the order of the sweep,
    over the points matching every ``where`` condition (``KEY=VALUE``). PivotError (naming the
    file, column or option) when the table is missing, truncated or empty, a column does not
    exist, the figure or divisor holds text, ``scale`` is not finite or ``digits`` is not from
    0 to :data:`MAX_DIGITS`."""
    check_options(scale, digits)
    path, frame = select_points(results, where,
                                [n for n in (rows, value, cols, divide_by) if n])
    r = _column(frame, rows, str(path))
    v = _column(frame, value, str(path))
    data = _numbers(frame, v, f"--value {value}") * scale
    if divide_by:
        data = data / _numbers(frame, _column(frame, divide_by, str(path)),
                               f"--divide-by {divide_by}")
    if invert:
        data = 1.0 / data
    c = _column(frame, cols, str(path)) if cols else None
    _check_one_point_per_cell(frame, [r] + ([c] if c else []), path)
    frame = pd.DataFrame({r: frame[r], "_value": data, **({c: frame[c]} if c else {})})
    for axis in (r, c):  # show a topology script's name, not its relative path
        if axis == "topology":
            frame[axis] = [Path(str(x)).stem for x in frame[axis]]
    row_order = list(dict.fromkeys(frame[r]))
    if c:
        col_order = list(dict.fromkeys(frame[c]))
        table = frame.pivot_table(index=r, columns=c, values="_value", aggfunc="first")
        table = table.reindex(index=row_order, columns=col_order)
        head = [rows, *[str(x) for x in col_order]]
    else:
        table = frame.groupby(r, sort=False)["_value"].first().to_frame()
        head = [rows, figure_name(value, divide_by, invert, scale)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in table.iterrows():
        cells = ["" if pd.isna(x) else f"{x:.{digits}f}" for x in row.tolist()]
        lines.append("| " + " | ".join([str(idx), *cells]) + " |")
    return "\n".join(lines)
