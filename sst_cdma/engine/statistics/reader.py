"""Reading statistic files back into a typed table: :func:`read_statistics`.

Each field column takes the type its name declares (``Sum.u64`` unsigned 64-bit, ``Min.i32``
signed 32-bit, ``Max.f32`` float32, ...), so byte counts and times stay exact integers;
``ComponentName``, ``StatisticName``, ``StatisticSubId`` and ``StatisticType`` are strings and
``SimTime`` and ``Rank`` integers. The run's own table (:attr:`sst_cdma.RunResult.statistics`)
is built by :func:`typed_table` too, so a CSV read back has the columns and types of the run
that wrote it.

What each output holds decides what comes back:

- CSV (``sst.statOutputCSV``): everything. The separator is read off the header (SST writes
  ``", "``; a ``separator`` param changes it), names lose SST's leading spaces. A file written
  with ``outputtopheader=0`` has no header to name its columns and is refused.
- TXT (``sst.statOutputTXT``): everything, but a line names a statistic
  ``COMPONENT.STATISTIC[.SUBID]`` as one word: a last part of digits after at least two others
  is read as the sub-id (SST's sub-ids are numbers), else the statistic has none.
- JSON (``sst.statOutputJSON``): component, statistic, SimTime and the values by position
  (``Values``, a tuple of ints and floats); SST's JSON names neither the fields, their types,
  the statistic type nor the sub-id.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, read_text
from sst_cdma.engine.output_folder import incomplete_marker
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads

__all__ = ["FIELD_DTYPES", "StatisticsFileError", "column_dtype", "read_statistics",
           "typed_table"]

#: a field column's type suffix -> its numpy type
FIELD_DTYPES = {"u32": np.uint32, "u64": np.uint64, "i32": np.int32, "i64": np.int64,
                "f32": np.float32, "f64": np.float64}
#: a statistics file: a line per statistic of each element, per output period
STATISTICS_FILE = FileKind("a statistics file", 2 * GIB)
TEXT_COLUMNS = ("ComponentName", "StatisticName", "StatisticSubId", "StatisticType")
INTEGER_COLUMNS = ("SimTime", "Rank")
FORMATS = ("csv", "json", "txt")


class StatisticsFileError(ValueError):
    """A statistics file that cannot be read: the message names the file (and line)."""


def column_dtype(column: str) -> Any:
    """The numpy type of a statistics table column (``object`` for the text columns)."""
    if column in INTEGER_COLUMNS:
        return np.int64
    suffix = column.rpartition(".")[2]
    if column not in TEXT_COLUMNS and suffix in FIELD_DTYPES:
        return FIELD_DTYPES[suffix]
    return object


def _typed_column(values: Sequence[Any], dtype: Any) -> np.ndarray:
    if dtype is object:
        return np.array(values, dtype=object)
    return np.array(values, dtype=dtype)


def typed_table(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> Any:
    """A pandas DataFrame of ``rows`` (column -> value) with ``columns`` in order, each of the
    type :func:`column_dtype` gives it; a field a row lacks is 0, as in SST's CSV."""
    import pandas as pd

    rows = list(rows)
    data = {}
    for column in columns:
        dtype = column_dtype(column)
        default = "" if dtype is object else 0
        data[column] = _typed_column([row.get(column, default) for row in rows], dtype)
    return pd.DataFrame(data, columns=list(columns))


def read_statistics(path: Union[str, Path], format: Optional[str] = None) -> Any:
    """The statistics in an SST statistics file (CSV, JSON or TXT, by its suffix unless
    ``format`` says) as a pandas DataFrame with typed columns (see the module docstring);
    :class:`StatisticsFileError` naming the file and line for anything else."""
    path = Path(path)
    kind = (format or path.suffix.lstrip(".")).lower()
    if kind not in FORMATS:
        raise StatisticsFileError(f"{path}: not a statistics file SST writes (.csv, .json or "
                                  ".txt; or say which with format=)")
    marker = incomplete_marker(path.parent)
    if marker is not None:
        raise StatisticsFileError(f"{path}: its folder is marked incomplete ({marker}): a run "
                                  "was stopped while copying its files in, so they may come "
                                  "from two runs (run again, or remove the marker to read it "
                                  "anyway)")
    try:
        text = read_text(path, STATISTICS_FILE)
    except FileReadError as exc:
        raise StatisticsFileError(f"{path}: {exc}" if exc.missing else
                                  f"{path}: cannot read it: {exc}") from None
    reader = {"csv": _read_csv, "json": _read_json, "txt": _read_txt}[kind]
    return reader(text, str(path))


def _convert(cell: str, column: str, where: str) -> Any:
    """One CSV/TXT cell as its column's type; StatisticsFileError naming ``where``."""
    dtype = column_dtype(column)
    if dtype is object:
        return cell
    try:
        value = float(cell) if dtype in (np.float32, np.float64) else int(cell)
    except ValueError:
        raise StatisticsFileError(f"{where}: {column}: {cell!r} is not a number of its type") \
            from None
    if not isinstance(value, float):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise StatisticsFileError(f"{where}: {column}: {value} does not fit its type")
    return value


def _read_csv(text: str, name: str) -> Any:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("ComponentName"):
        raise StatisticsFileError(f"{name}: no header line (a CSV written with "
                                  "outputtopheader=0 has none to name its columns)")
    head = lines[0]
    after = head[len("ComponentName"):]
    end = after.find("StatisticName")
    sep = after[:end] if end > 0 else ","
    columns = [c.strip() for c in head.split(sep)]
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(sep)]
        if len(cells) != len(columns):
            raise StatisticsFileError(f"{name}:{number}: {len(cells)} cells where the header "
                                      f"has {len(columns)} columns")
        where = f"{name}:{number}"
        rows.append({c: _convert(v, c, where) for c, v in zip(columns, cells)})
    return typed_table(rows, columns)


def split_full_name(full: str) -> tuple[str, str, str]:
    """``COMPONENT.STATISTIC[.SUBID]`` (as TXT and console outputs print it) -> (component,
    statistic, sub-id): a last part of digits after at least two others is the sub-id."""
    parts = full.split(".")
    if len(parts) >= 3 and parts[-1].isdigit():
        return ".".join(parts[:-2]), parts[-2], parts[-1]
    if len(parts) >= 2:
        return ".".join(parts[:-1]), parts[-1], ""
    return full, "", ""


def _read_txt(text: str, name: str) -> Any:
    columns = list(TEXT_COLUMNS)
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        head = line.strip().split(" : ", 2)
        if len(head) != 3:
            raise StatisticsFileError(f"{where}: not a statistic line ('NAME : TYPE : "
                                      "Field = value; ...')")
        component, statistic, subid = split_full_name(head[0])
        row: dict[str, Any] = dict(zip(TEXT_COLUMNS, (component, statistic, subid, head[1])))
        for pair in filter(None, (p.strip() for p in head[2].split(";"))):
            key, eq, value = pair.partition(" = ")
            if not eq:
                raise StatisticsFileError(f"{where}: {pair!r} is not 'Field = value'")
            row[key] = _convert(value.strip(), key, where)
            if key not in columns:
                columns.append(key)
        rows.append(row)
    return typed_table(rows, columns)


def _read_json(text: str, name: str) -> Any:
    try:
        data = json_loads(text, finite=False)  # a statistic may be NaN (a mean of nothing)
    except StrictParseError as exc:
        raise StatisticsFileError(f"{name}: not valid JSON: {exc}") from None
    rows = []
    try:
        for block in data["components"]:
            for stat in block["statistics"]:
                rows.append({"ComponentName": str(block["name"]),
                             "StatisticName": str(stat["stat"]),
                             "SimTime": int(block["simtime"]),
                             "Values": tuple(stat["values"])})
    except (KeyError, TypeError, ValueError) as exc:
        raise StatisticsFileError(f"{name}: not SST's statistics JSON (components[].name, "
                                  f"simtime, statistics[].stat, values): {exc!r}") from None
    import pandas as pd

    frame = typed_table(rows, ["ComponentName", "StatisticName", "SimTime"])
    frame["Values"] = pd.Series([row["Values"] for row in rows], dtype=object)
    return frame
