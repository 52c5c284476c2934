"""Running one point, in whatever process it lands in (a Dask worker or this one).

A point writes into ``POINTS/<key>.tmp-<host>-<pid>-<nonce>/``: the simulation's outputs (its
statistic files, ``summary.json``...), ``run_statistics.csv`` (the statistics table),
``console.txt`` / ``output.txt`` (console statistics, what the script printed),
``result.json`` and last a ``DONE`` marker; the folder is then renamed to ``POINTS/<key>/`` in
one atomic step. So a point folder either is complete or does not exist; one without ``DONE``
(left by something else) is never taken as a result and is replaced when the point reruns.

The simulation runs with the point's folder as the working directory, so files a topology script
writes with relative names land there too. The working directory is per process, so points in
one process run one at a time (the kernel is pure Python: threads would not run them faster).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from sst_cdma.engine.file_safety import remove_tree
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.engine.json_text import indented
from sst_cdma.engine.stale_folders import owner_tag

DONE = "DONE"
RESULT = "result.json"
STATISTICS = "run_statistics.csv"
SUMMARY = "summary.json"
_CWD_LOCK = threading.Lock()
#: a point's record holds its summary, whose per-layer lists grow with the network
RESULT_FILE = FileKind("a point's result.json", 512 * MIB)
SUMMARY_FILE = FileKind("a summary.json", 512 * MIB)
_TIME_KEY = re.compile(r"(_s|_ps|_ns|_us|_ms|time|^events)$")


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point (picklable, absolute paths)."""

    key: str
    script: str
    topology_name: str
    model_options: tuple[str, ...]
    overrides: dict[str, dict[str, str]] = field(default_factory=dict, hash=False)
    points_dir: str = ""
    retry_failed: bool = False
    full_trace: bool = False


def point_dir(points_dir: os.PathLike | str, key: str) -> Path:
    """The folder of a point's results."""
    return Path(points_dir) / key


def is_complete(folder: Path) -> bool:
    """True when ``folder`` holds a finished point (``DONE`` marker and ``result.json``)."""
    return (folder / DONE).is_file() and (folder / RESULT).is_file()


def load_result(points_dir: os.PathLike | str, key: str) -> Optional[dict[str, Any]]:
    """The record of a finished point, or None when it is missing, incomplete or corrupt (its
    ``result.json`` is not a JSON object with status ``ok`` or ``failed``): such a point is
    run again and its folder replaced."""
    folder = point_dir(points_dir, key)
    if not is_complete(folder):
        return None
    try:
        record = load_json(folder / RESULT, RESULT_FILE)
    except FileReadError:  # not a regular file, too large, not UTF-8, not strict JSON, NaN
        return None
    if not isinstance(record, dict) or record.get("status") not in ("ok", "failed") or \
            _negative_time(record):
        return None
    return record


def _negative_time(record: Mapping[str, Any]) -> bool:
    """Whether a number the record gives as a time or a count (a key ending in ``_s``,
    ``_ps``, ``time`` ..., or ``events``) is negative: no run gives one."""
    stack: list[tuple[str, Any]] = list(record.items())
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.items())
        elif isinstance(value, list):
            stack.extend((key, item) for item in value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0 \
                and _TIME_KEY.search(key):
            return True
    return False


@contextlib.contextmanager
def in_directory(folder: os.PathLike | str) -> Iterator[None]:
    """Run the block with ``folder`` as the working directory (one block per process at a
    time)."""
    with _CWD_LOCK:
        saved = os.getcwd()
        os.chdir(folder)
        try:
            yield
        finally:
            os.chdir(saved)


def _package_roots() -> list[tuple[str, str]]:
    import importlib.util

    out = []
    for name in ("workloads", "components", "sst_cdma"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            out.append((str(list(spec.submodule_search_locations)[0]), name.replace(".", "/")))
    return out


def shown_paths(values: Iterable[Any]) -> dict[str, str]:
    """Absolute path -> the value as the spec wrote it, for each of ``values`` that is a file a
    spec value names (a :class:`~sst_cdma.tools.sweep.spec.SpecPath`: it remembers how it was
    written)."""
    return {str(v): v.written for v in values if isinstance(getattr(v, "written", None), str)}


def task_paths(task: "PointTask") -> dict[str, str]:
    """:func:`shown_paths` of a task's model options and param overrides."""
    values = list(task.model_options)
    for params in (task.overrides or {}).values():
        values += list(params.values())
    return shown_paths(values)


def _as_shown(text: str, paths: Mapping[str, str]) -> str:
    """``text`` with each absolute path of ``paths`` (and any path below it) shown as the spec
    wrote it, in one pass, the longest first (a folder does not eat a file inside it)."""
    if not paths:
        return text
    order = sorted(paths, key=len, reverse=True)
    pattern = "(" + "|".join(map(re.escape, order)) + r")(/|(?![\w-]|\.\w))"

    def shown(match: re.Match) -> str:
        written = paths[match.group(1)]
        return written.rstrip("/") + "/" if match.group(2) else written

    return re.sub(pattern, shown, text)


def clean_message(message: str, script: str, topology_name: str,
                  folder: Optional[os.PathLike | str] = None,
                  paths: Optional[Mapping[str, str]] = None) -> str:
    """One line, with machine-specific paths replaced: the script's absolute path by its name in
    the spec, the absolute path of each file a spec value names (``paths``: absolute path ->
    as written) by the value as written, the point's folder by ``.``, the package folders by
    their package names."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    text = text.replace(str(script), topology_name)
    text = _as_shown(text, paths or {})
    if folder is not None:
        text = text.replace(str(folder) + os.sep, "").replace(str(folder), ".")
    for root, name in _package_roots():
        text = text.replace(root, name)
    return text


def _names(message: str, where: str) -> bool:
    """True when ``message`` names ``where`` (a path, ``file:line``) as a whole word."""
    return re.search(rf"(?<![\w./-]){re.escape(where)}(?![\w/-]|\.\w)", message) is not None


def script_error(exc: BaseException, stderr: str) -> str:
    """The message of a failed script: argparse's ``error:`` line when the script exited after
    printing one, else the exception's text (without its ``where:`` prefix when the message
    names that place already: a path once)."""
    text = str(exc)
    where, message = getattr(exc, "where", ""), getattr(exc, "message", None)
    if isinstance(where, str) and where and isinstance(message, str) and _names(message, where):
        text = message
    if "exited with status" in text:
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error:" in ln]
        if errors:
            return errors[-1]
        if lines:
            return f"{text}: {lines[-1]}"
    return text


def _discard(folder: Path) -> None:
    """Remove a point folder that is not a result: renamed aside first (one step, so no one
    reads it half-deleted), then deleted. Gone already (another worker) is fine."""
    aside = folder.with_name(f"{folder.name}.old-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    remove_tree(aside)


def _publish(tmp: Path, final: Path, replace_failed: bool = False) -> Optional[dict[str, Any]]:
    """Move the finished point folder ``tmp`` to ``final``. A folder already there that is not
    a readable result (no ``DONE``, or a corrupt ``result.json``: see :func:`load_result`) is
    replaced, and so is a failed result with ``replace_failed``; a good result
    there (another worker finished the same point first) is kept, ``tmp`` dropped, and that
    result's record returned (None when ``tmp`` took the place)."""
    if final.is_dir() and not final.is_symlink():
        old = load_result(final.parent, final.name)
        if old is None or (replace_failed and old.get("status") != "ok"):
            _discard(final)
    try:
        os.rename(tmp, final)
    except OSError:
        first = load_result(final.parent, final.name)
        if first is not None:  # another worker was first
            remove_tree(tmp)
            return first
        raise
    return None


class PointStorageError(RuntimeError):
    """A point's folder could not be created, written or published (a file or a stale symlink
    in the way, no space, no permission). The message names the path, relative to the points
    folder's parent (``points/KEY``). Deliberately not an OSError: that would read as a lost
    connection to the Dask scheduler."""


def _storage_error(exc: OSError, task: PointTask) -> PointStorageError:
    """The one-line PointStorageError of ``exc``, its path relative to the points folder's
    parent."""
    root = Path(task.points_dir).parent
    names = [str(n) for n in (exc.filename2, exc.filename) if n is not None]
    where = names[0] if names else str(task.points_dir)
    where = os.path.relpath(where, root) if where.startswith(str(root) + os.sep) else where
    return PointStorageError(f"cannot write the point's folder {where}: "
                             f"{exc.strerror or type(exc).__name__}")


def run_point(task: PointTask) -> dict[str, Any]:
    """Run one point and publish its folder (unless it is already there: finished, or failed
    and ``task.retry_failed`` is false); return the published record (the ``result.json``
    this point's folder holds, another worker's where that one published the point first, as
    :func:`load_result` reads it, so the sweep need not read it again): key, status
    (``ok``/``failed``), error, sim_time_ps, events, end_reason, summary, wall_s (the whole
    point: the run, its outputs, the point's folder) and run_s (the run in this process: script,
    build, setup, event loop, finish). A failure of
    the simulation (RunError or any exception) is a record with status ``failed``, never an
    exception; a failure to write the point's folder is a :class:`PointStorageError` naming the
    path; only those and interruptions propagate."""
    try:
        return _run_point(task)
    except OSError as exc:
        raise _storage_error(exc, task) from None


def _run_point(task: PointTask) -> dict[str, Any]:
    existing = load_result(task.points_dir, task.key)
    if existing is not None and (existing.get("status") == "ok" or not task.retry_failed):
        return existing
    final = point_dir(task.points_dir, task.key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f"{task.key}.tmp-{owner_tag()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        record = _run_into(task, tmp)
        record = _publish(tmp, final, task.retry_failed) or record
    except KeyboardInterrupt:  # Ctrl-C or a stop signal where the point runs in the sweep's
        remove_tree(tmp)       # own process: no half-written folder of a live process is left
        raise                  # (gone already once published)
    return record


def result_text(record: dict[str, Any], summary_text: Optional[str] = None) -> str:
    """``result.json``'s text: ``json.dumps(record, indent=2)``'s. ``summary_text``: the text
    of ``summary.json`` that ``record["summary"]`` was read from, where it is
    ``json.dumps(summary, indent=2, sort_keys=True)``'s (as the cDMA reporter writes it): then
    the record's summary (its objects' keys in that order, every value read back as it was
    written) is written as that text, indented a level, rather than encoded again (a 64-GPU
    point's summary is 2.8 MB)."""
    if summary_text is None:
        return indented(record, 2)
    mark = json.dumps(f"@summary-{uuid.uuid4().hex}@")
    text = indented({**record, "summary": json.loads(mark)}, 2)
    return text.replace(mark, summary_text.rstrip("\n").replace("\n", "\n  "), 1)


def _run_into(task: PointTask, tmp: Path) -> dict[str, Any]:
    """Run the point with ``tmp`` as its folder and working directory, and write its files
    there (``DONE`` last); return its record."""
    from sst_cdma.engine.runner import RunError, run

    record: dict[str, Any] = {"key": task.key, "status": "ok", "error": "",
                              "sim_time_ps": None, "events": None, "end_reason": None,
                              "summary": None}
    console, output = io.StringIO(), io.StringIO()
    written: Optional[str] = None  # summary.json's text as the run's reporter wrote it
    paths = task_paths(task)
    options = [str(arg) for arg in task.model_options]
    overrides = {pattern: {name: str(value) for name, value in params.items()}
                 for pattern, params in (task.overrides or {}).items()}
    t0 = time.perf_counter()
    with in_directory(tmp), contextlib.redirect_stdout(output), \
            contextlib.redirect_stderr(output):
        try:
            result = run(task.script, options, output_directory=tmp,
                         console=console, overrides=overrides or None,
                         full_trace=task.full_trace)
            record.update(sim_time_ps=int(result.sim_time_ps), events=int(result.events),
                          end_reason=str(result.end_reason),
                          run_s=round(sum(result.timing.values()), 6))
            written = result.reports.get(SUMMARY)
            table = result.statistics_csv()
            if table:
                (tmp / STATISTICS).write_bytes(table.encode("utf-8"))
        except RunError as exc:
            record.update(status="failed", error=script_error(exc, output.getvalue()))
        except SystemExit as exc:
            record.update(status="failed",
                          error=f"the topology script exited (status {exc.code})")
        except Exception as exc:  # a bug in the model: recorded, the sweep goes on
            record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
            (tmp / "traceback.txt").write_text(traceback.format_exc(), encoding="utf-8")
    record["wall_s"] = round(time.perf_counter() - t0, 6)
    if record["status"] == "ok" and (tmp / SUMMARY).is_file():
        try:
            summary = load_json(tmp / SUMMARY, SUMMARY_FILE)
        except FileReadError as exc:
            record.update(status="failed", error=f"{SUMMARY}: not valid JSON: {exc}")
        else:
            if isinstance(summary, dict):
                record["summary"] = summary
            else:
                record.update(status="failed", error=f"{SUMMARY}: must hold a JSON object")
    record["error"] = clean_message(record["error"], task.script, task.topology_name, tmp,
                                    paths)
    if console.getvalue():
        (tmp / "console.txt").write_text(console.getvalue(), encoding="utf-8")
    if output.getvalue():
        (tmp / "output.txt").write_text(output.getvalue(), encoding="utf-8")
    if not isinstance(written, str) or record["summary"] is None or \
            (tmp / SUMMARY).read_text(encoding="utf-8") != written:
        written = None
    (tmp / RESULT).write_text(result_text(record, written) + "\n", encoding="utf-8")
    (tmp / DONE).write_text("", encoding="utf-8")
    return record


__all__ = ["PointTask", "run_point", "PointStorageError", "load_result", "is_complete",
           "point_dir", "in_directory", "clean_message", "script_error", "shown_paths",
           "task_paths", "DONE", "RESULT", "STATISTICS", "SUMMARY"]
