"""The results tables of a sweep, written as CSV and Parquet. ``results.csv``: one row per point
in spec order — its parameters, status and error, the run's figures (sim_time_ps, events,
end_reason), selected statistics and the flattened ``summary.json`` less its per-GPU entries.
``gpus.csv``: one row per point and GPU of the points whose summary has per-GPU entries
(``gpus``, a multi-GPU run) — the point's ``point``, ``key`` and parameters, ``gpu`` (the
entry's index) and the entry flattened — joined to ``results.csv`` by ``point`` (or ``key``).
Nothing in either depends on where or when a point ran (no wall times, worker names or
absolute paths), so the same spec gives the same bytes whatever the number of workers.

Tables written before the per-GPU table existed hold the entries as columns of each row
(``gpus.<N>.<field>``): :func:`read_results` reads such a table without them (saying so in
one line) and :func:`read_tables` turns them into the rows of the per-GPU table."""
from __future__ import annotations

import fnmatch
import io
import math
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from sst_cdma.engine.atomic_files import check_replaceable, replace_whole
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
#: the summary key of a multi-GPU run holding one entry per GPU: the rows of the GPU table
GPU_LIST = "gpus"
#: the GPU table's column naming a row's GPU (the entry's index in the summary's list)
GPU_COLUMN = "gpu"
#: the file names of the two tables (``.csv`` and ``.parquet`` each)
RESULTS_NAME, GPUS_NAME = "results", "gpus"
#: a column of a table written before the GPU table: ``gpus.<N>.<field>``
WIDE_GPU_COLUMN = re.compile(r"^gpus\.(\d+)\.(.+)$")
#: the columns that name a point's parameters (copied into each of its GPU rows)
PARAM_PREFIXES = ("opt.", "param.")


def flatten(value: Any, prefix: str = "", exclude: Sequence[str] = (),
            max_items: int = MAX_LIST_ITEMS) -> dict[str, Any]:
    """Nested dicts and lists as one level: keys joined with ``.``, list items by index
    (``gpus.0.iteration_time_s``). Empty containers, lists longer than ``max_items`` and keys
    matching an ``exclude`` glob are left out."""
    out: dict[str, Any] = {}
    _flatten_into(out, value, prefix, _excluder(tuple(exclude)), max_items)
    return out


@lru_cache(maxsize=32)
def _excluder(exclude: tuple[str, ...]) -> Optional[Callable[[str], Any]]:
    """One matcher for all the ``exclude`` globs (what ``fnmatchcase`` matches against any of
    them), or None for none."""
    if not exclude:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in exclude)).match


def _flatten_into(out: dict[str, Any], value: Any, prefix: str,
                  excluded: Optional[Callable[[str], Any]], max_items: int) -> None:
    name = prefix[:-1]
    if name and excluded is not None and excluded(name):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten_into(out, item, f"{prefix}{key}.", excluded, max_items)
    elif isinstance(value, (list, tuple)):
        if len(value) <= max_items:
            for i, item in enumerate(value):
                _flatten_into(out, item, f"{prefix}{i}.", excluded, max_items)
    elif prefix:
        out[name] = value


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


def _gpu_entries(summary: Mapping[str, Any]) -> Optional[list[Any]]:
    """The summary's per-GPU entries (its ``gpus`` list), or None when it has none."""
    entries = summary.get(GPU_LIST)
    return entries if isinstance(entries, list) else None


def run_values(record: Mapping[str, Any], folder: Optional[Path],
               selectors: Sequence[str] = (), exclude: Sequence[str] = (),
               per_gpu: bool = True) -> dict[str, Any]:
    """The figures of a finished point: sim_time_ps, events, end_reason, ``stat.*`` for each
    selector, and the flattened summary (less the ``exclude`` globs); without ``per_gpu``,
    less its per-GPU entries too (they go to the GPU table: :func:`gpu_rows`)."""
    values: dict[str, Any] = {k: record.get(k) for k in ("sim_time_ps", "events", "end_reason")}
    if selectors:
        stats = read_statistics(folder) if folder is not None and \
            record.get("status") == "ok" else None
        for text in selectors:
            sel = parse_selector(text)
            values[sel.column] = select(stats, sel) if stats is not None else None
    reserved = set(LEAD_COLUMNS) | set(RUN_COLUMNS)
    summary = record.get("summary") or {}
    if not per_gpu and _gpu_entries(summary) is not None:
        summary = {k: v for k, v in summary.items() if k != GPU_LIST}
    for key, item in flatten(summary, exclude=exclude).items():
        name = f"summary.{key}" if key in reserved or key.startswith(("opt.", "param.", "stat."))\
            else key
        values[name] = item
    return values


def point_row(point: Point, key: str, record: Mapping[str, Any], points_dir: Path,
              selectors: Sequence[str] = (), exclude: Sequence[str] = ()) -> dict[str, Any]:
    """The results-table row of one point (its per-GPU entries left to :func:`gpu_rows`)."""
    row: dict[str, Any] = {"point": point.index, "key": key}
    row.update(point.columns())
    row["status"] = record.get("status", "failed")
    row["error"] = record.get("error", "")
    row.update(run_values(record, point_dir(points_dir, key), selectors, exclude,
                          per_gpu=False))
    return row


def gpu_rows(point: Point, key: str, record: Mapping[str, Any],
             exclude: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The GPU-table rows of one point: one per entry of its summary's ``gpus`` list (none
    for a point without one), each the point's ``point``, ``key`` and parameters, ``gpu`` (the
    entry's index) and the entry flattened. The ``exclude`` globs match the names the entry's
    keys would have in the summary (``gpus.*`` leaves every entry out, ``*.layers`` the
    entries' layers); an entry key that collides with the lead columns is prefixed
    ``summary.`` (the entry's own ``gpu``, its component's name, is ``summary.gpu``)."""
    entries = _gpu_entries(record.get("summary") or {})
    if entries is None or any(fnmatch.fnmatchcase(GPU_LIST, p) for p in exclude):
        return []
    lead: dict[str, Any] = {"point": point.index, "key": key, **point.columns()}
    rows = []
    for index, entry in enumerate(entries):
        prefix = f"{GPU_LIST}.{index}."
        values = flatten(entry, prefix, exclude)
        if not values:
            continue
        row = {**lead, GPU_COLUMN: index}
        for name, item in values.items():
            field = name[len(prefix):]
            row[f"summary.{field}" if field in lead or field == GPU_COLUMN else field] = item
        rows.append(row)
    return rows


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
    """A DataFrame of the rows (sorted by ``point``, then by ``gpu`` where rows have one),
    columns in a stable order, each column typed from its values: nullable integers, floats,
    booleans or strings."""
    import pandas as pd

    rows = sorted(rows, key=lambda r: (r["point"], r.get(GPU_COLUMN, 0)))
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


def table_files(output: Path) -> tuple[Path, ...]:
    """The files a sweep writes its tables to in ``output``: ``results.csv``,
    ``results.parquet``, ``gpus.csv``, ``gpus.parquet``."""
    return tuple(output / f"{name}.{ext}" for name in (RESULTS_NAME, GPUS_NAME)
                 for ext in ("csv", "parquet"))


def _write_pair(table: Any, csv_path: Path, parquet_path: Path) -> None:
    replace_whole(csv_path, lambda p: table.to_csv(p, index=False, lineterminator="\n"),
                  owned=True)
    replace_whole(parquet_path, lambda p: table.to_parquet(p, index=False), owned=True)


def write_tables(table: Any, output: Path, gpus: Any = None) -> tuple[Path, Path]:
    """Write ``results.csv`` and ``results.parquet`` into ``output``, and ``gpus.csv`` and
    ``gpus.parquet`` when ``gpus`` (the GPU table) has rows — otherwise remove those an
    earlier sweep wrote there, which would describe other points (each file replaced
    atomically, never written through a link: OSError for one there); return the paths of
    the results table."""
    output.mkdir(parents=True, exist_ok=True)
    csv_path, parquet_path, gpus_csv, gpus_parquet = table_files(output)
    if gpus is not None and len(gpus):
        _write_pair(gpus, gpus_csv, gpus_parquet)
    else:
        for path in (gpus_csv, gpus_parquet):
            check_replaceable(path, owned=True)
            path.unlink(missing_ok=True)
    _write_pair(table, csv_path, parquet_path)
    return csv_path, parquet_path


class ResultsError(ValueError):
    """A results table cannot be read: missing, truncated, empty or not a sweep's table. The
    message starts with the file's path."""


def read_results(path: Union[str, Path], sweep_columns: bool = True,
                 note: Optional[IO[str]] = None) -> tuple[Path, Any]:
    """The results table at ``path`` (a sweep's output folder or its ``results.csv``) and its
    path. ResultsError when it is missing or unreadable, when its last line is incomplete (the
    file was cut short: a table is always written whole, ending with a newline), when it has
    no rows, when a row has fewer fields than the header or a status other than
    :data:`STATUSES`, and, with ``sweep_columns``, when it lacks the ``point`` and ``status``
    columns. A table written before the GPU table existed is read without its per-GPU
    columns (``gpus.<N>.*``: :func:`read_tables` reads them as rows), one line on ``note``
    (default stderr) saying so."""
    csv, whole = _read_whole(path, sweep_columns)
    return csv, _without_wide_columns(whole, csv, note)


def read_tables(path: Union[str, Path], sweep_columns: bool = True,
                note: Optional[IO[str]] = None) -> tuple[Path, Any, Any]:
    """The results table (as :func:`read_results` reads it), its path, and the GPU table
    beside it: ``gpus.csv``, or for a table written before it existed the rows its
    ``gpus.<N>.*`` columns make (as a sweep writes them today: :func:`gpu_rows`); None when
    neither is there (no point of the sweep ran several GPUs). ResultsError as for
    :func:`read_results`, and when ``gpus.csv`` cannot be read, lacks the ``point`` and ``gpu``
    columns or holds a point ``results.csv`` does not (the tables of two sweeps)."""
    from sst_cdma.tools.sweep.marks import display_path

    csv, whole = _read_whole(path, sweep_columns)
    frame = _without_wide_columns(whole, csv, note)
    gpus_csv = csv.parent / f"{GPUS_NAME}.csv"
    if gpus_csv.exists() or gpus_csv.is_symlink():
        gpus = _read_csv_table(gpus_csv, "GPU table")
        where = display_path(gpus_csv)
        if "point" not in gpus.columns or GPU_COLUMN not in gpus.columns:
            raise ResultsError(f"{where}: not a sweep's GPU table (no point/gpu columns)")
        _check_same_sweep(gpus, frame, where, display_path(csv))
    else:
        gpus = _melt_wide_columns(whole) if frame is not whole else None
    return csv, frame, gpus


def _check_same_sweep(gpus: Any, frame: Any, where: str, results: str) -> None:
    """ResultsError when the GPU table holds a point (by key) the results table does not."""
    if "key" not in gpus.columns or "key" not in frame.columns:
        return
    stray = set(gpus["key"].astype(str)) - set(frame["key"].astype(str))
    if stray:
        raise ResultsError(f"{where}: rows of a point that {results} does not hold (key "
                           f"{sorted(stray)[0]}): the tables of two sweeps; run the sweep "
                           "again to rewrite both")


def _read_whole(path: Union[str, Path], sweep_columns: bool) -> tuple[Path, Any]:
    """The results table as written (old per-GPU columns included) and its path."""
    from sst_cdma.tools.sweep.marks import display_path

    path = Path(path)
    csv = path / f"{RESULTS_NAME}.csv" if path.is_dir() else path
    if path.is_dir() and not csv.exists() and not csv.is_symlink() and \
            (path / "summary.json").is_file():
        raise ResultsError(f"{display_path(csv)}: no such results table: {display_path(path)} "
                           "holds one run's output; a results table is what 'sst-cdma sweep "
                           "--output DIR' writes")
    frame = _read_csv_table(csv, "results table")
    where = display_path(csv)
    if sweep_columns and ("status" not in frame.columns or "point" not in frame.columns):
        raise ResultsError(f"{where}: not a sweep results table (no point/status columns)")
    return csv, frame


def _read_csv_table(csv: Path, what: str) -> Any:
    """One of a sweep's CSV tables (``what``: "results table", "GPU table"); ResultsError
    naming the file when it is missing, unreadable, empty, JSON, cut short, not CSV, without
    rows or with a short row or an unknown status."""
    import pandas as pd

    from sst_cdma.tools.sweep.marks import display_path

    where = display_path(csv)
    try:
        data = read_bytes(csv, RESULTS_TABLE)
    except FileReadError as exc:
        if not exc.missing:
            raise ResultsError(f"{where}: cannot read: {exc}") from None
        raise ResultsError(f"{where}: no such {what}") from None
    if not data.strip():
        raise ResultsError(f"{where}: the {what} is empty")
    if data.lstrip()[:1] in (b"{", b"["):
        raise ResultsError(f"{where}: not a {what} (a CSV file) but JSON: a {what} "
                           "is what 'sst-cdma sweep --output DIR' writes")
    if not data.endswith(b"\n"):
        raise ResultsError(f"{where}: truncated: the last line of the {what} is "
                           "incomplete (run the sweep again to rewrite it)")
    try:
        frame = pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # pandas' parser errors, a file that is not text
        text = " ".join(str(exc).split())
        raise ResultsError(f"{where}: not a {what} (a CSV file): {type(exc).__name__}: "
                           f"{text}") from None
    if frame.empty:
        raise ResultsError(f"{where}: the {what} has a header but no "
                           f"{'points' if what == 'results table' else 'rows'} "
                           "(truncated? run the sweep again to rewrite it)")
    _check_rows(data, where)
    return frame


def _without_wide_columns(whole: Any, csv: Path, note: Optional[IO[str]]) -> Any:
    """``whole`` less its ``gpus.<N>.*`` columns (a table written before the GPU table
    existed: one line on ``note``, default stderr, says so); ``whole`` itself when it has
    none."""
    from sst_cdma.tools.sweep.marks import display_path

    wide = [c for c in whole.columns if WIDE_GPU_COLUMN.match(c)]
    if not wide:
        return whole
    print(f"note: {display_path(csv)}: an older results table, with each GPU's figures in "
          f"columns of its row ({len(wide)} gpus.<N>.* columns): read as rows of a GPU table "
          "(a sweep writes gpus.csv now; run it again to rewrite both)",
          file=note if note is not None else sys.stderr)
    return whole.drop(columns=wide)


def _melt_wide_columns(whole: Any) -> Any:
    """The GPU table that the ``gpus.<N>.<field>`` columns of an older results table make:
    one row per point and GPU with any figure, the point's ``point``, ``key`` and parameters,
    ``gpu`` and the fields (named as :func:`gpu_rows` names them); None when there is none."""
    import pandas as pd

    by_gpu: dict[int, dict[str, str]] = {}
    lead = [c for c in whole.columns
            if c in LEAD_COLUMNS or c.startswith(PARAM_PREFIXES)]
    for column in whole.columns:
        if match := WIDE_GPU_COLUMN.match(column):
            field = match.group(2)
            by_gpu.setdefault(int(match.group(1)), {})[column] = \
                f"summary.{field}" if field in lead or field == GPU_COLUMN else field
    parts = []
    for index in sorted(by_gpu):
        part = whole[lead + list(by_gpu[index])].rename(columns=by_gpu[index])
        part = part[part[list(by_gpu[index].values())].notna().any(axis=1)]
        parts.append(part.assign(**{GPU_COLUMN: index}))
    gpus = pd.concat(parts) if parts else None
    if gpus is None or gpus.empty:
        return None
    order = lead + [GPU_COLUMN] + [c for c in gpus.columns if c not in lead and
                                   c != GPU_COLUMN]
    return gpus[order].sort_values(["point", GPU_COLUMN], kind="stable").reset_index(drop=True)


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


__all__ = ["flatten", "build_table", "write_tables", "point_row", "gpu_rows", "run_values",
           "read_statistics", "read_results", "read_tables", "table_files", "ResultsError",
           "RUN_COLUMNS", "LEAD_COLUMNS", "STATUSES", "GPU_COLUMN", "GPU_LIST"]
