"""A plain process pool for the points of one machine: ``N`` worker processes forked from this
one (no ``distributed`` import, no scheduler), each running one point at a time.

Each worker talks to this process over a pipe of its own: it receives a task, runs it, sends
its record back, and waits for the next. The batch is cut into one run of consecutive points
per worker (its lane), taken first to last; a worker whose lane is empty takes the back half
of the longest lane left. Neighbouring points of a grid share all but its last axis (a
network, a system), so a worker builds the caches such points share (rendered workload
streams, loaded profiles) once rather than every worker each. A worker that dies mid-point
(killed, out of memory) is replaced by a fresh fork, which runs that point again first; a
point whose workers die :data:`ALLOWED_DEATHS` + 1 times is
reported as failed (not cached: the sweep's next run tries it again), as Dask reports a point
whose workers keep dying (``KilledWorker``, after ``distributed.scheduler.allowed-failures``).
What a point published before its worker died stays published: the pool loses nothing done.

Workers start with SIGINT ignored and SIGTERM/SIGHUP at their default action (as the local
Dask workers do), so Ctrl-C or a stop signal to the whole process group ends them quietly and
only this process reports; when this process stops (Ctrl-C, a stop signal, an error), the pool
ends its workers with SIGTERM and waits for them, so the half-written folders they leave are
those of dead processes, which the sweep removes. A worker whose parent is gone sees its pipe
close once its point is done, and ends.
"""
from __future__ import annotations

import collections
import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import signal
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Union

from sst_cdma.engine.stop_signals import STOP_SIGNALS, default_stop_signals
from sst_cdma.tools.sweep.execute import PointTask

#: how many times a point's worker may die before the point is reported as failed (Dask's
#: default ``distributed.scheduler.allowed-failures``)
ALLOWED_DEATHS = 3
#: seconds a worker is given to end after it is told to (SIGTERM, or the end of its tasks)
#: before it is killed
END_WAIT_S = 10.0

#: a point's record: what :func:`sst_cdma.tools.sweep.execute.run_point` returns
Record = dict[str, object]
#: runs a task in a worker; an exception it raises is turned into a record by ``lost``
RunTask = Callable[[PointTask], Record]
#: ``lost(task, error)``: the failed, uncached record of a point lost outside the simulation
LostRecord = Callable[[PointTask, str], Record]


def _fork_context() -> Union[multiprocessing.context.ForkContext,
                             multiprocessing.context.SpawnContext]:
    """Fork where the platform has it (workers inherit the imported model), else spawn."""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Run the block with every object this process holds now moved out of the cyclic
    collector's reach (``gc.freeze``: the modules, the caches), and back after
    (``gc.unfreeze``) unless something had frozen objects before: the collections the block
    sets off walk only what it made. A worker forked inside the block keeps its inheritance
    frozen, so its collections never walk (nor copy the pages of) what it inherited."""
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


def _worker_signals() -> None:
    """In a worker: Ctrl-C ignored, the stop signals at their default action (one this process
    was started ignoring, as under ``nohup``, stays ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)


def _serve(conn: multiprocessing.connection.Connection,
           others: list[multiprocessing.connection.Connection], run: RunTask,
           lost: LostRecord) -> None:
    """A worker's loop: take a task, send back its record, until told to stop (``None``) or
    the pipe closes. ``others``: the pool's ends of every worker's pipe, this one's included,
    inherited by the fork and closed here, so that each pipe closes when the pool's process
    ends (a worker whose parent was killed then ends after its point)."""
    _worker_signals()
    for other in others:
        other.close()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            record = run(task)
        except Exception as exc:  # an error outside the simulation: the point is lost
            record = lost(task, f"{type(exc).__name__}: {exc}")
        try:
            conn.send(record)
        except OSError:  # the pool's process is gone: what the point published stays
            return


@dataclass
class _Worker:
    """One worker process, the pool's end of its pipe, and the task it runs (its index in the
    batch), if any."""

    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    busy: Optional[int] = None
    lane: int = 0


class _Lanes:
    """The points of a batch still to run (their indices), cut into ``lanes`` runs of
    consecutive points, one per worker."""

    def __init__(self, count: int, lanes: int) -> None:
        self._lanes = [collections.deque(range(i * count // lanes, (i + 1) * count // lanes))
                       for i in range(lanes)]

    def __bool__(self) -> bool:
        return any(self._lanes)

    def next(self, lane: int) -> Optional[int]:
        """The next point of ``lane``; from an empty lane, the first of the back half of the
        longest lane, the rest of that half moved to ``lane``. None when none is left."""
        own = self._lanes[lane]
        if not own:
            donor = max(self._lanes, key=len)
            stolen = [donor.pop() for _ in range((len(donor) + 1) // 2)]
            own.extend(reversed(stolen))
        return own.popleft() if own else None

    def put_back(self, lane: int, index: int) -> None:
        """Make ``index`` the next point of ``lane`` again."""
        self._lanes[lane].appendleft(index)


def _death(exitcode: Optional[int]) -> str:
    """How a worker ended: ``killed by SIGKILL`` or ``exit status 1``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class PointPool:
    """``workers`` forked worker processes running tasks with ``run`` (an exception it raises
    becomes ``lost(task, error)``'s record). Workers start on the first :meth:`run`; use as a
    context manager, or call :meth:`close`."""

    def __init__(self, workers: int, run: RunTask, lost: LostRecord) -> None:
        self.workers = max(1, int(workers))
        self._run_task = run
        self._lost = lost
        self._context = _fork_context()
        self._pool: list[_Worker] = []

    def __enter__(self) -> "PointPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> _Worker:
        """Fork one worker (its signals set before it can receive one) and keep the pool's end
        of its pipe."""
        mine, theirs = self._context.Pipe(duplex=True)
        others = [w.conn for w in self._pool] + [mine]  # (the pool's ends, its own too)
        process = self._context.Process(target=_serve, daemon=True, name="sst-cdma-point",
                                        args=(theirs, others, self._run_task, self._lost))
        with default_stop_signals(), frozen_heap():
            process.start()
        theirs.close()
        worker = _Worker(process, mine)
        self._pool.append(worker)
        return worker

    def _end(self, worker: _Worker) -> None:
        """End one worker now (SIGTERM, SIGKILL if it lingers) and reap it."""
        self._pool.remove(worker)
        if worker.process.is_alive():
            worker.process.terminate()
        worker.process.join(END_WAIT_S)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()

    def run(self, tasks: Iterable[PointTask]) -> Iterator[tuple[PointTask, Record]]:
        """Yield ``(task, record)`` as points finish (in completion order). A point whose
        workers keep dying yields ``lost``'s record. Stopped early (an interrupt, the consumer
        gone), the workers still running a point of this batch are ended."""
        batch = list(tasks)
        if not batch:
            return
        deaths: collections.Counter[int] = collections.Counter()
        while len(self._pool) < min(self.workers, len(batch)):
            self._start()
        for lane, worker in enumerate(self._pool):
            worker.lane = lane
        lanes = _Lanes(len(batch), len(self._pool))
        try:
            while lanes or any(w.busy is not None for w in self._pool):
                self._hand_out(batch, lanes)
                yield from self._collect(batch, lanes, deaths)
        finally:
            for worker in [w for w in self._pool if w.busy is not None]:
                self._end(worker)

    def _hand_out(self, batch: list[PointTask], lanes: _Lanes) -> None:
        """Send each idle worker the next point of its lane."""
        for worker in self._pool:
            if worker.busy is None:
                worker.busy = lanes.next(worker.lane)
                if worker.busy is None:
                    return
                try:
                    worker.conn.send(batch[worker.busy])
                except OSError:  # it died since its last point: _collect sees it dead
                    pass

    def _collect(self, batch: list[PointTask], lanes: _Lanes,
                 deaths: collections.Counter[int]) -> Iterator[tuple[PointTask, Record]]:
        """Wait for a busy worker to answer or die; yield the records that came back, and give
        the point of a dead worker to its replacement, first (or yield it as lost)."""
        busy = [w for w in self._pool if w.busy is not None]
        handles: list[Union[multiprocessing.connection.Connection, int]] = \
            [*(w.conn for w in busy), *(w.process.sentinel for w in busy)]
        waits: dict[object, _Worker] = dict(zip(handles, busy + busy))
        ready = multiprocessing.connection.wait(handles)
        for worker in {id(waits[r]): waits[r] for r in ready}.values():
            index = worker.busy
            assert index is not None
            record = self._answer(worker)
            if record is not None:
                worker.busy = None
                yield batch[index], record
                continue
            self._end(worker)
            deaths[index] += 1
            if deaths[index] > ALLOWED_DEATHS:
                yield batch[index], self._lost(
                    batch[index], f"the workers running this point kept dying ({deaths[index]} "
                                  f"times; the last {_death(worker.process.exitcode)})")
            else:
                lanes.put_back(worker.lane, index)
            if lanes:
                self._start().lane = worker.lane

    @staticmethod
    def _answer(worker: _Worker) -> Optional[Record]:
        """The record a worker sent, or None when it died instead."""
        try:
            if worker.conn.poll():
                record: Record = worker.conn.recv()
                return record
        except (EOFError, OSError):
            pass
        return None

    def close(self) -> None:
        """Tell the idle workers to end, end the busy ones (SIGTERM), and reap them all."""
        for worker in list(self._pool):
            if worker.busy is None and worker.process.is_alive():
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        for worker in list(self._pool):
            if worker.busy is None:
                worker.process.join(END_WAIT_S)
            self._end(worker)


__all__ = ["PointPool", "ALLOWED_DEATHS", "frozen_heap"]
