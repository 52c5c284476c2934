"""Run GIL-free work (numba ``nogil`` kernels, ``zlib.crc32``) on several threads.

Large jobs are cut into more pieces than there are threads and scheduled dynamically: pool
threads and the calling thread repeatedly take the next unstarted piece, so a core that is
busy with something else slows the job down by its share only.  The thread count follows
``NUMBA_NUM_THREADS`` (numba's own knob; default: the number of CPUs).  Jobs below
:data:`PARALLEL_MIN_ITEMS` work items run inline, so small arrays pay no threading overhead.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Generic, Sequence, TypeVar

import numba

__all__ = [
    "PARALLEL_MIN_ITEMS",
    "PIECES_PER_THREAD",
    "num_threads",
    "split_ranges",
    "Job",
    "run_tasks",
    "run_ranges",
]

T = TypeVar("T")

PARALLEL_MIN_ITEMS = 1 << 20
"""Work items (elements or bytes) below which everything runs in the calling thread."""

PIECES_PER_THREAD = 4
"""Pieces per thread a parallel job is cut into, for dynamic load balancing."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def num_threads() -> int:
    """Threads used for large inputs (``numba.config.NUMBA_NUM_THREADS``, at least 1)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=num_threads(), thread_name_prefix="sst-codec")
        return _pool


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but none of its threads: start afresh.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def split_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """Split ``range(total)`` into at most ``parts`` contiguous, non-empty, balanced ranges."""
    parts = max(1, min(parts, total))
    step, extra = divmod(total, parts)
    out, start = [], 0
    for i in range(parts):
        end = start + step + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return out


class Job(Generic[T]):
    """A list of independent tasks run by pool threads and, in :meth:`wait`, the caller."""

    def __init__(self, tasks: Sequence[Callable[[], T]]) -> None:
        self._tasks = list(tasks)
        self._results: list[Any] = [None] * len(self._tasks)
        self._next = 0
        self._lock = threading.Lock()
        self._futures: list[Future[None]] = []

    def _work(self) -> None:
        while True:
            with self._lock:
                i = self._next
                if i >= len(self._tasks):
                    return
                self._next = i + 1
            self._results[i] = self._tasks[i]()

    def start(self, helpers: int) -> "Job[T]":
        """Let up to ``helpers`` pool threads start taking tasks in the background."""
        helpers = min(helpers, len(self._tasks))
        if helpers > 0:
            pool = _executor()
            self._futures = [pool.submit(self._work) for _ in range(helpers)]
        return self

    def wait(self) -> list[T]:
        """Run remaining tasks in the calling thread, wait for all; results in task order.

        Helpers still queued behind other work are cancelled rather than waited for, so the
        job completes even if no pool thread ever becomes free.  Every started task has
        finished when this returns or raises (the first exception of any task is re-raised).
        """
        error: BaseException | None = None
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - re-raised below after the helpers stop
            error = exc
            with self._lock:
                self._next = len(self._tasks)
        for fut in self._futures:
            if fut.cancel():
                continue  # a helper that never started (pool busy): nothing left for it
            try:
                fut.result()
            except BaseException as exc:  # noqa: BLE001
                error = error or exc
        if error is not None:
            raise error
        return self._results


def run_tasks(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent tasks on the pool plus the calling thread; results in task order."""
    if len(tasks) <= 1 or num_threads() == 1:
        return [task() for task in tasks]
    return Job(tasks).start(num_threads() - 1).wait()


def run_ranges(
    fn: Callable[..., T], total: int, work_items: int, *args: Any
) -> list[T]:
    """Call ``fn(*args, lo, hi)`` over a partition of ``range(total)``; results in order.

    ``work_items`` sizes the job: below :data:`PARALLEL_MIN_ITEMS` (or with one thread) one
    call covers everything in the calling thread; otherwise the range is cut into
    :data:`PIECES_PER_THREAD` pieces per thread, run concurrently (``fn`` must release the
    GIL to gain anything).
    """
    threads = num_threads()
    if total <= 1 or threads == 1 or work_items < PARALLEL_MIN_ITEMS:
        return [fn(*args, 0, total)]
    ranges = split_ranges(total, threads * PIECES_PER_THREAD)
    return run_tasks([lambda lo=lo, hi=hi: fn(*args, lo, hi) for lo, hi in ranges])  # type: ignore[misc]
