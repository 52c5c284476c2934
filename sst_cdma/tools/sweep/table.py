"""The results table of a sweep: one row per point in spec order — its parameters, status and
error, the run's figures (sim_time_ps, events, end_reason), selected statistics and the
flattened ``summary.json`` — written as CSV and Parquet. Nothing in it depends on where or when
a point ran (no wall times, worker names or absolute paths), so the same spec gives the same
bytes whatever the number of workers."""
from __future__ import annotations

import fnmatch
import io
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from sst_cdma.engine.atomic_files import replace_whole
from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, open_regular, read_bytes
from sst_cdma.tools.sweep.execute import STATISTICS, point_dir
from sst_cdma.tools.sweep.spec import Point
from sst_cdma.tools.sweep.stats import parse_selector, select

RUN_COLUMNS = ("status", "error", "sim_time_ps", "events", "end_reason")
#: the statuses a sweep writes for a point
STATUSES = ("ok", "failed")
MAX_LIST_ITEMS = 64  # longer lists in a summary are detail, not figures: left out
LEAD_COLUMNS = ("point", "key", "topology")
#: a sweep's results.csv: a row per point, a column per figure
RESULTS_TABLE = FileKind("a results table", 2 * GIB)
#: a point's statistics table: a row per statistic of each element
STATISTICS_TABLE = FileKind("a point's statistics table", 2 * GIB)


def flatten(value: Any, prefix: str = "", exclude: Sequence[str] = (),
            max_items: int = MAX_LIST_ITEMS) -> dict[str, Any]:
    """Nested dicts and lists as one level: keys joined with ``.``, list items by index
    (``gpus.0.iteration_time_s``). Empty containers, lists longer than ``max_items`` and keys
    matching an ``exclude`` glob are left out."""
    out: dict[str, Any] = {}
    name = prefix[:-1]
    if name and any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude):
        return out
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}.", exclude, max_items))
    elif isinstance(value, (list, tuple)):
        if len(value) <= max_items:
            for i, item in enumerate(value):
                out.update(flatten(item, f"{prefix}{i}.", exclude, max_items))
    elif prefix:
        out[name] = value
    return out


def read_statistics(folder: Path) -> Any:
    """A point's statistics table (``run_statistics.csv``), or None."""
    import pandas as pd

    try:
        fh = open_regular(folder / STATISTICS, STATISTICS_TABLE)
    except FileReadError as exc:
        if exc.missing:
            return None
        raise ValueError(f"{folder / STATISTICS}: {exc}") from None
    with fh:
        return pd.read_csv(fh, dtype={"ComponentName": str, "StatisticName": str,
                                      "StatisticSubId": str}, keep_default_na=False)


def run_values(record: Mapping[str, Any], folder: Optional[Path],
               selectors: Sequence[str] = (), exclude: Sequence[str] = ()) -> dict[str, Any]:
    """The figures of a finished point: sim_time_ps, events, end_reason, ``stat.*`` for each
    selector, and the flattened summary (less the ``exclude`` globs)."""
    values: dict[str, Any] = {k: record.get(k) for k in ("sim_time_ps", "events", "end_reason")}
    if selectors:
        stats = read_statistics(folder) if folder is not None and \
            record.get("status") == "ok" else None
        for text in selectors:
            sel = parse_selector(text)
            values[sel.column] = select(stats, sel) if stats is not None else None
    reserved = set(LEAD_COLUMNS) | set(RUN_COLUMNS)
    for key, item in flatten(record.get("summary") or {}, exclude=exclude).items():
        name = f"summary.{key}" if key in reserved or key.startswith(("opt.", "param.", "stat."))\
            else key
        values[name] = item
    return values


def point_row(point: Point, key: str, record: Mapping[str, Any], points_dir: Path,
              selectors: Sequence[str] = (), exclude: Sequence[str] = ()) -> dict[str, Any]:
    """The table row of one point."""
    row: dict[str, Any] = {"point": point.index, "key": key}
    row.update(point.columns())
    row["status"] = record.get("status", "failed")
    row["error"] = record.get("error", "")
    row.update(run_values(record, point_dir(points_dir, key), selectors, exclude))
    return row


def _column_dtype(values: list[Any]) -> str:
    present = [v for v in values if v is not None and not (isinstance(v, float) and
                                                            math.isnan(v))]
    if not present:
        return "str"
    if all(isinstance(v, bool) for v in present):
        return "boolean"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "Int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float64"
    return "str"


def build_table(rows: Iterable[Mapping[str, Any]]) -> Any:
    """A DataFrame of the rows (sorted by ``point``), columns in a stable order, each column
    typed from its values: nullable integers, floats, booleans or strings."""
    import pandas as pd

    rows = sorted(rows, key=lambda r: r["point"])
    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, None)
    data: dict[str, list[Any]] = {c: [row.get(c) for row in rows] for c in columns}
    frame = {}
    for name, values in data.items():
        dtype = _column_dtype(values)
        if dtype == "str":
            values = [None if v is None else (format(v) if not isinstance(v, bool) else
                                              ("true" if v else "false")) for v in values]
            frame[name] = pd.array(values, dtype="string")
        elif dtype == "float64":
            frame[name] = pd.array([math.nan if v is None else float(v) for v in values],
                                   dtype="float64")
        else:
            frame[name] = pd.array(values, dtype=dtype)
    return pd.DataFrame(frame, columns=list(columns))


def write_tables(table: Any, output: Path) -> tuple[Path, Path]:
    """Write ``results.csv`` and ``results.parquet`` into ``output`` (each replaced atomically,
    never written through a link: OSError for one there); return their paths."""
    output.mkdir(parents=True, exist_ok=True)
    csv_path, parquet_path = output / "results.csv", output / "results.parquet"
    replace_whole(csv_path, lambda p: table.to_csv(p, index=False, lineterminator="\n"),
                  owned=True)
    replace_whole(parquet_path, lambda p: table.to_parquet(p, index=False), owned=True)
    return csv_path, parquet_path


class ResultsError(ValueError):
    """A results table cannot be read: missing, truncated, empty or not a sweep's table. The
    message starts with the file's path."""


def read_results(path: Union[str, Path], sweep_columns: bool = True) -> tuple[Path, Any]:
    """The results table at ``path`` (a sweep's output folder or its ``results.csv``) and its
    path. ResultsError when it is missing or unreadable, when its last line is incomplete (the
    file was cut short: a table is always written whole, ending with a newline), when it has
    no rows, when a row has fewer fields than the header or a status other than
    :data:`STATUSES`, and, with ``sweep_columns``, when it lacks the ``point`` and ``status``
    columns."""
    import pandas as pd

    from sst_cdma.tools.sweep.marks import display_path

    path = Path(path)
    csv = path / "results.csv" if path.is_dir() else path
    where = display_path(csv)
    try:
        data = read_bytes(csv, RESULTS_TABLE)
    except FileReadError as exc:
        if not exc.missing:
            raise ResultsError(f"{where}: cannot read: {exc}") from None
        if path.is_dir() and (path / "summary.json").is_file():
            raise ResultsError(f"{where}: no such results table: {display_path(path)} holds one "
                               "run's output; a results table is what 'sst-cdma sweep --output "
                               "DIR' writes") from None
        raise ResultsError(f"{where}: no such results table") from None
    if not data.strip():
        raise ResultsError(f"{where}: the results table is empty")
    if data.lstrip()[:1] in (b"{", b"["):
        raise ResultsError(f"{where}: not a results table (a CSV file) but JSON: a results "
                           "table is what 'sst-cdma sweep --output DIR' writes")
    if not data.endswith(b"\n"):
        raise ResultsError(f"{where}: truncated: the last line of the results table is "
                           "incomplete (run the sweep again to rewrite it)")
    try:
        frame = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # pandas' parser errors, a file that is not text
        text = " ".join(str(exc).split())
        raise ResultsError(f"{where}: not a results table (a CSV file): {type(exc).__name__}: "
                           f"{text}") from None
    if sweep_columns and ("status" not in frame.columns or "point" not in frame.columns):
        raise ResultsError(f"{where}: not a sweep results table (no point/status columns)")
    if frame.empty:
        raise ResultsError(f"{where}: the results table has a header but no points "
                           "(truncated? run the sweep again to rewrite it)")
    _check_rows(data, where)
    return csv, frame


def _check_rows(data: bytes, where: str) -> None:
    """ResultsError naming the line when a row has fewer fields than the header (pandas fills
    them in as empty) or a status that no sweep writes."""
    import csv as csv_module

    reader = csv_module.reader(io.StringIO(data.decode("utf-8", errors="replace")))
    header = next(reader)
    status = header.index("status") if "status" in header else None
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            raise ResultsError(f"{where}: line {reader.line_num}: {len(row)} fields where the "
                               f"header has {len(header)} (a short row: the table was edited "
                               "or mixed; run the sweep again to rewrite it)")
        if status is not None and row[status] not in STATUSES:
            raise ResultsError(f"{where}: line {reader.line_num}: unknown status "
                               f"{row[status]!r} (a sweep writes {' or '.join(STATUSES)})")


__all__ = ["flatten", "build_table", "write_tables", "point_row", "run_values",
           "read_statistics", "read_results", "ResultsError", "RUN_COLUMNS", "LEAD_COLUMNS",
           "STATUSES"]
