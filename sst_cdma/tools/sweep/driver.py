"""A whole sweep: load and check the spec, key every point, take finished points from the cache,
check the rest up front, run them, and write the results table."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional, Union

from sst_cdma.engine.atomic_files import check_replaceable
from sst_cdma.engine.file_safety import remove_tree
from sst_cdma.engine.stale_folders import left_by_dead_process
from sst_cdma.engine.stop_signals import exit_status, stop_message
from sst_cdma.tools.sweep.dispatch import (DispatchError, Dispatcher, choose_executor,
                                           forks_workers, import_the_model)
from sst_cdma.tools.sweep.execute import PointTask, load_result
from sst_cdma.tools.sweep.keys import inputs_digest, key_of, script_digest
from sst_cdma.tools.sweep.marks import SpecError, display_path
from sst_cdma.tools.sweep.pool import frozen_heap
from sst_cdma.tools.sweep.spec import Point, SweepSpec, load_spec
from sst_cdma.tools.sweep.table import (build_table, gpu_rows, point_row, table_files,
                                        write_tables)
from sst_cdma.tools.sweep.validate import validate_points


class SweepInterrupted(Exception):
    """The sweep stopped before every point ran (Ctrl-C or a lost scheduler); finished points
    are kept and a rerun resumes."""

    def __init__(self, message: str, done: int, total: int, status: int = 1) -> None:
        super().__init__(message)
        self.done = done
        self.total = total
        self.status = status  # the exit status: 128 + the signal's number when one stopped it


@dataclass
class SweepOutcome:
    """What a sweep did: point counts, where the tables are, and the tables themselves (the
    GPU table None when no point has per-GPU entries: then no ``gpus.csv`` is written)."""

    spec: SweepSpec
    output: Path
    total: int
    ran: int
    cached: int
    failed: int
    csv: Path
    parquet: Path
    table: Any
    gpus: Any = None


def default_output(spec: SweepSpec) -> Path:
    """``results/<spec name>`` under the working directory."""
    return Path("results") / (re.sub(r"[^\w.-]+", "-", spec.name).strip("-") or "sweep")


def point_tasks(spec: SweepSpec, points_dir: Path, retry_failed: bool = False
                ) -> list[tuple[Point, PointTask]]:
    """Each point with its task (and so its cache key)."""
    inputs = inputs_digest()
    scripts: dict[Path, str] = {}
    out = []
    for point in spec.points:
        if point.topology not in scripts:
            scripts[point.topology] = script_digest(point.topology)
        options, overrides = point.model_options(), point.overrides()
        key = key_of(point, scripts[point.topology], inputs, spec.full_trace)
        out.append((point, PointTask(key=key, script=str(point.topology),
                                     topology_name=point.topology_name,
                                     model_options=tuple(options), overrides=overrides,
                                     points_dir=str(points_dir.resolve()),
                                     retry_failed=retry_failed, full_trace=spec.full_trace)))
    return out


def _in_the_way(path: Path) -> Optional[tuple[Path, str]]:
    """The first of ``path`` and its parents that stops ``path`` being (or becoming) a folder,
    and why: a stale symlink, or a file. None when nothing is in the way."""
    for candidate in (path, *path.parents):
        if candidate.is_symlink() and not candidate.exists():
            return candidate, f"a stale symlink (to {os.readlink(candidate)}, which does not " \
                              "exist)"
        if candidate.exists():
            return None if candidate.is_dir() else (candidate, "a file, not a folder")
    return None


def check_output(out: Path, tasks: list[tuple[Point, PointTask]]) -> None:
    """SpecError naming the path (before anything runs) when the output folder, its
    ``points`` folder or the folder of a point still to run cannot be written as one: a file
    or a stale symlink there, or a symlink where a point's folder would be published; a
    symlink as the points folder, or anything but a plain file as ``results.csv``,
    ``results.parquet``, ``gpus.csv`` or ``gpus.parquet`` (a link planted there would redirect
    a table's write)."""
    for folder, what in ((out, "the sweep's output"), (out / "points", "its points folder")):
        fault = _in_the_way(folder)
        if fault is not None:
            where, why = fault
            whose = what if where == folder else f"in the way of {what} {display_path(folder)}"
            raise SpecError(f"{whose} is {why}", where)
    if (out / "points").is_symlink():
        raise SpecError(f"its points folder is a symlink (to {os.readlink(out / 'points')}), "
                        "which the sweep did not make: it writes only into a folder of its "
                        "own; remove the link", out / "points")
    for path in table_files(out):
        try:
            check_replaceable(path, owned=True)
        except OSError as exc:
            raise SpecError(f"{path.name} {exc.strerror}: remove it, the sweep writes its "
                            "table there", path) from None
    for point, task in tasks:
        folder = out / "points" / task.key
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            why = ("a stale symlink (to " + os.readlink(folder) + ", which does not exist)"
                   if folder.is_symlink() and not folder.exists() else
                   "a symlink, not a finished point" if folder.is_symlink() else
                   "a file, not a point's folder")
            raise SpecError(f"point {point.index}'s folder is {why}; remove it to run the "
                            "point", folder)


def _make_folder(folder: Path) -> None:
    """``mkdir -p``, or SpecError naming the folder."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"cannot create the folder: {exc.strerror or exc}", folder) from None


def _finished(tasks: list[tuple[Point, PointTask]], points_dir: Path) -> int:
    """Points whose results are on disk now."""
    return sum(load_result(points_dir, task.key) is not None for _, task in tasks)


def _remove_leftovers(points_dir: Path, todo: list[tuple[Point, PointTask]],
                      only_stale: bool = False) -> None:
    """Remove the half-written and set-aside folders of the points that were to run (every
    point has ended: they are leftovers of workers that died while writing); ``only_stale``
    (a stopped sweep, whose cancelled points may still be running on a scheduler's workers)
    removes only the half-written folders of processes of this machine that no longer exist
    (the local workers a stop signal killed mid-point), and the run's staging folders beside
    them (``KEY.tmp-<host>-<pid>-<nonce>.partial-...``, made by the same process)."""
    try:
        names = os.listdir(points_dir)  # once, not a glob per point
    except FileNotFoundError:
        return
    for _, task in todo:
        prefix = f"{task.key}.tmp-"
        if only_stale:
            found = [name for name in names if name.startswith(prefix) and
                     left_by_dead_process(name.split(".partial-", 1)[0], prefix)]
        else:
            found = [name for name in names
                     if name.startswith((prefix, f"{task.key}.old-"))]
        for stale in found:
            remove_tree(points_dir / stale)


def _from_the_cache(tasks: list[tuple[Point, PointTask]], points_dir: Path, retry_failed: bool
                    ) -> tuple[dict[str, dict[str, Any]], list[tuple[Point, PointTask]]]:
    """The records of the points finished in ``points_dir`` (a failed one only without
    ``retry_failed``), by key, and the points still to run (one per key)."""
    records: dict[str, dict[str, Any]] = {}
    todo: list[tuple[Point, PointTask]] = []
    queued: set[str] = set()
    for point, task in tasks:
        record = load_result(points_dir, task.key)
        if record is not None and (record.get("status") == "ok" or not retry_failed):
            records[task.key] = record
        elif task.key not in queued:
            queued.add(task.key)
            todo.append((point, task))
    return records, todo


def run_sweep(spec_path: Union[str, Path], output: Union[str, Path, None] = None,
              workers: int = 2, scheduler: Optional[str] = None, client: Any = None,
              progress: bool = True, retry_failed: bool = False,
              log: Optional[IO[str]] = None, executor: Optional[str] = None) -> SweepOutcome:
    """Run the sweep ``spec_path`` into ``output`` (default ``results/<name>``) and write
    ``results.csv`` / ``results.parquet`` (and ``gpus.csv`` / ``gpus.parquet``, one row per
    point and GPU, when a point has per-GPU entries). The points run in a pool of ``workers``
    processes forked from this one (``workers=1``: in this process), or on Dask when a ``scheduler``
    address or a ``client`` is given or ``executor="dask"`` (a local cluster of ``workers``):
    see :func:`~sst_cdma.tools.sweep.dispatch.choose_executor`, whose ValueError a bad
    combination raises. Points already finished there are not rerun
    (failed ones are, with ``retry_failed``). Raises SpecError before anything runs when the
    spec or a point is bad, or when the output folder cannot be one (a file or a stale symlink
    in the way: see :func:`check_output`); SweepInterrupted when stopped early. Each failed
    point is said on ``log`` (default stderr), one line each, progress bar or not."""
    choose_executor(workers, scheduler, client, executor)  # a bad combination: before all
    log = log if log is not None else sys.stderr
    spec = load_spec(spec_path)
    out = Path(output) if output is not None else default_output(spec)
    points_dir = out / "points"
    tasks = point_tasks(spec, points_dir, retry_failed)
    records, todo = _from_the_cache(tasks, points_dir, retry_failed)
    check_output(out, todo)
    if todo:
        print(f"{spec.name}: {len(tasks)} points, {len(todo)} to run ({len(tasks) - len(todo)} "
              f"cached); checking each point's options and params first", file=log, flush=True)
    cached = len(tasks) - len(todo)  # points sharing a key count as cached
    if todo and forks_workers(workers, scheduler, client, executor):
        import_the_model()  # before the heap is frozen: the workers inherit it, frozen
    with frozen_heap():  # what is imported now is walked by no collection of the sweep's
        validate_points(str(spec_path), [p for p, _ in todo])
        _make_folder(points_dir)
        _run_points(spec, tasks, todo, records, points_dir,
                    dict(workers=workers, scheduler=scheduler, client=client,
                         executor=executor), progress, log)
        _remove_leftovers(points_dir, todo)
        rows, table, gpus = _tables(spec, tasks, records, points_dir)
    try:
        csv_path, parquet_path = write_tables(table, out, gpus)
    except OSError as exc:
        where = exc.filename if exc.filename is not None else out
        raise SpecError(f"cannot write the results table: {exc.strerror or exc}", where) \
            from None
    failed = _say_failures(spec.name, rows, log)
    _check_statistics_matched(spec, rows, spec_path)
    return SweepOutcome(spec=spec, output=out, total=len(tasks), ran=len(todo),
                        cached=cached, failed=failed, csv=csv_path, parquet=parquet_path,
                        table=table, gpus=gpus)


def _run_points(spec: SweepSpec, tasks: list[tuple[Point, PointTask]],
                todo: list[tuple[Point, PointTask]], records: dict[str, dict[str, Any]],
                points_dir: Path, where: dict[str, Any], progress: bool, log: IO[str]) -> None:
    """Run the points of ``todo`` where ``where`` (:class:`Dispatcher`'s arguments) says, with
    a progress bar on ``log``, and put each one's record into ``records`` by key.
    SweepInterrupted when stopped before every point of ``tasks`` is done (Ctrl-C, a stop
    signal, a lost scheduler), after removing the half-written folders of dead workers."""
    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc=spec.name, unit="point", file=log,
               disable=not progress or not todo, leave=True, dynamic_ncols=True)
    try:
        with Dispatcher(**where) as dispatcher:
            failed_now = 0
            for task, record in dispatcher.run(t for _, t in todo):
                # the published record: the same a rerun will read (a point's worker returns
                # it; a point lost with its workers may have an earlier one published)
                records[task.key] = (load_result(points_dir, task.key) or record) \
                    if record.get("transient") else record
                failed_now += record.get("status") != "ok"
                bar.update(1)
                if failed_now:
                    bar.set_postfix(failed=failed_now)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (stop_signals.Stopped)
        _remove_leftovers(points_dir, todo, only_stale=True)
        finished = _finished(tasks, points_dir)
        if finished < len(tasks):
            raise SweepInterrupted(f"{stop_message(exc)}: {finished} of {len(tasks)} points "
                                   f"done (kept in {display_path(points_dir)}); run again to "
                                   "resume", finished, len(tasks), exit_status(exc)) from None
        # stopped while shutting down, every point done: the table can still be written
        for _, task in todo:
            records[task.key] = load_result(points_dir, task.key) or records.get(task.key)  # type: ignore[assignment]
    except DispatchError as exc:
        finished = _finished(tasks, points_dir)
        raise SweepInterrupted(f"{exc}: {finished} of {len(tasks)} points done (kept "
                               f"in {display_path(points_dir)}); run again to resume",
                               finished, len(tasks)) from None
    finally:
        bar.close()


def _tables(spec: SweepSpec, tasks: list[tuple[Point, PointTask]],
            records: dict[str, dict[str, Any]], points_dir: Path
            ) -> tuple[list[dict[str, Any]], Any, Any]:
    """The rows of the results table, the table, and the GPU table (None when no point has
    per-GPU entries)."""
    rows = [point_row(point, task.key, records[task.key], points_dir, spec.statistics,
                      spec.exclude) for point, task in tasks]
    per_gpu = [row for point, task in tasks
               for row in gpu_rows(point, task.key, records[task.key], spec.exclude)]
    return rows, build_table(rows), build_table(per_gpu) if per_gpu else None


#: the failed points a sweep names on its log, one line each; the others are counted
SAID_FAILURES = 10


def _say_failures(name: str, rows: list[dict[str, Any]], log: IO[str]) -> int:
    """Say each failed point on ``log``, one line each (``NAME: point 3 failed: ERROR``; past
    :data:`SAID_FAILURES`, one line counting the rest), with or without a progress bar;
    return how many failed."""
    failed = [row for row in rows if row["status"] != "ok"]
    for row in failed[:SAID_FAILURES]:
        print(f"{name}: point {row['point']} failed: {row['error']}", file=log)
    if len(failed) > SAID_FAILURES:
        print(f"{name}: ... and {len(failed) - SAID_FAILURES} more failed points (see the "
              "table's error column)", file=log)
    if failed:
        log.flush()
    return len(failed)


def _check_statistics_matched(spec: Any, rows: list[dict[str, Any]], spec_path: Any) -> None:
    """SpecError (after the table is written: nothing is lost) for a statistic selector that
    matched nothing in any successful point: no component matched its glob, or none enabled
    the statistic. A statistic may be absent from some points, not from all."""
    from sst_cdma.tools.sweep.stats import parse_selector

    ok = [row for row in rows if row["status"] == "ok"]
    for text in spec.statistics if ok else ():
        column = parse_selector(text, check=False).column
        if all(row.get(column) is None for row in ok):
            raise SpecError(f"statistics: selector {text!r} matched nothing in any of the "
                            f"{len(ok)} successful points (no component matches its glob, or "
                            "none records that statistic); the table is written",
                            spec_path, spec.statistics_lines.get(text))


__all__ = ["run_sweep", "SweepOutcome", "SweepInterrupted", "point_tasks", "default_output",
           "check_output"]
