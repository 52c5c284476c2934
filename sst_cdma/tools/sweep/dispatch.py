"""Running many points: in a plain pool of worker processes forked from this one
(:mod:`sst_cdma.tools.sweep.pool`: no ``distributed`` import, no scheduler), inline in this
process (one worker), or on Dask (a LocalCluster of one-threaded worker processes when asked
for, or the workers of an existing scheduler). Results come back as they finish; a worker that
dies mid-point has its point run again by another, and a point whose workers keep dying is
reported as failed (not cached: it reruns next time)."""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import sys
import uuid
from typing import Any, Iterable, Iterator, Optional

from sst_cdma.engine.stop_signals import default_stop_signals
from sst_cdma.tools.sweep.execute import PointStorageError, PointTask, run_point
from sst_cdma.tools.sweep.pool import PointPool

#: the executors a sweep can be asked for: ``pool`` (worker processes of this machine; one
#: worker runs in this process) or ``dask`` (a local Dask cluster, or the scheduler named)
EXECUTORS = ("pool", "dask")


def import_the_model() -> None:
    """Import what every point needs, before workers are forked from this process: what
    checking the points did not import already (the modules the elements import as a run
    sets them up, jinja2 and the compiled stream template) is then imported once, not once per
    worker."""
    import zstandard  # noqa: F401  (the codecs')

    import components  # noqa: F401  (the element library, the model and the runner)
    import sst_cdma.engine.runner  # noqa: F401
    import sst_cdma.profiles  # noqa: F401  (the captured profiles the elements read)
    import sst_cdma.profiles.network_names  # noqa: F401
    import workloads.kernel_pricing  # noqa: F401
    import workloads.profiles  # noqa: F401
    from workloads.render import load_templates

    load_templates()  # each point writes its GPUs' streams with the template


@contextlib.contextmanager
def _forked_workers() -> Iterator[None]:
    """On Linux, start the local workers by forking this process rather than spawning fresh
    interpreters: a worker then starts in a fifth of the time (0.2 s instead of 0.7 s for two
    on a 2-core machine, which is most of a small sweep's wall time) and inherits the modules
    and rendered workload streams this process already has (the model's modules are imported
    first, so no worker imports them again)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import dask

    import_the_model()
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}):
        yield


#: the loggers whose shutdown noise (a heartbeat or a report that meets a connection the close
#: has just shut: CommClosedError, StreamClosedError tracebacks) is no news to a sweep's user
SHUTDOWN_LOGGERS = ("distributed", "tornado", "asyncio")


def _shutdown_loggers() -> list[logging.Logger]:
    """The loggers of :data:`SHUTDOWN_LOGGERS` and every logger under them that exists now (a
    child logs through its parents' handlers whatever their own state, so each is silenced
    itself)."""
    names = {name for name in list(logging.root.manager.loggerDict)
             if name.split(".", 1)[0] in SHUTDOWN_LOGGERS}
    return [logging.getLogger(name) for name in sorted(names | set(SHUTDOWN_LOGGERS))]


@contextlib.contextmanager
def quiet_shutdown() -> Iterator[None]:
    """Silence Dask's, Tornado's and asyncio's loggers in this process while the block runs
    (the close of a cluster), and give each back its state after."""
    saved = [(logger, logger.disabled) for logger in _shutdown_loggers()]
    for logger, _ in saved:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in saved:
            logger.disabled = disabled


def quiet_worker() -> None:
    """Run on each worker just before the cluster closes: its shutdown logs nothing (the
    process ends with the close; nothing is left to restore)."""
    for logger in _shutdown_loggers():
        logger.disabled = True


def forks_workers(workers: int, scheduler: Optional[str] = None, client: Any = None,
                  executor: Optional[str] = None) -> bool:
    """Whether the points run in workers forked from this process (the pool, or a local Dask
    cluster on Linux), which inherit what it imported: :func:`import_the_model` first."""
    where = choose_executor(workers, scheduler, client, executor)
    return where == "pool" or (where == "dask" and not scheduler and client is None)


class DispatchError(Exception):
    """The computation itself was lost (the scheduler went away, cluster failed to start)."""


def choose_executor(workers: int, scheduler: Optional[str] = None, client: Any = None,
                    executor: Optional[str] = None, inline: bool = False) -> str:
    """Where points run: ``inline`` (this process: ``inline``, or one worker of the pool),
    ``pool`` (``workers`` forked processes of this machine) or ``dask`` (a ``scheduler`` or
    ``client`` given, or ``executor="dask"``: a local cluster of ``workers``). ValueError for
    an executor not in :data:`EXECUTORS`, or ``executor="pool"`` with a scheduler or client."""
    if executor is not None and executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r}: not one of {', '.join(EXECUTORS)}")
    if scheduler or client is not None:
        if executor == "pool":
            raise ValueError("executor 'pool' runs the points on this machine; a scheduler "
                             "or client runs them on Dask's workers: give one of them")
        return "dask"
    if inline:
        return "inline"
    if executor == "dask":
        return "dask"
    return "inline" if int(workers) <= 1 else "pool"


class Dispatcher:
    """Runs :class:`PointTask` s where :func:`choose_executor` says: ``workers`` forked worker
    processes of this machine (the pool, started on first use; one worker: in this process),
    a local Dask cluster of ``workers`` (``executor="dask"``), the cluster behind ``scheduler``
    (``tcp://host:port``), or an existing Dask ``client``; ``inline=True`` runs them one by one
    in this process. Use as a context manager."""

    def __init__(self, workers: int = 2, scheduler: Optional[str] = None,
                 client: Any = None, inline: bool = False,
                 executor: Optional[str] = None) -> None:
        self.workers = max(1, int(workers))
        self.scheduler = scheduler
        self.client = client
        self.executor = choose_executor(self.workers, scheduler, client, executor, inline)
        self.inline = self.executor == "inline"
        self._own_client = False
        self._cluster: Any = None
        self._pool: Optional[PointPool] = None

    def __enter__(self) -> "Dispatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _connect(self) -> Any:
        if self.client is not None:
            return self.client
        from distributed import Client, LocalCluster

        try:
            if self.scheduler:
                self.client = Client(self.scheduler, timeout="20s")
            else:
                with default_stop_signals(), _forked_workers():
                    self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                                 processes=True, dashboard_address=":0",
                                                 silence_logs=logging.ERROR)
                self.client = Client(self._cluster)
        except (OSError, TimeoutError, RuntimeError) as exc:
            where = self.scheduler or "a local cluster"
            raise DispatchError(f"cannot start Dask on {where}: {exc}") from None
        self._own_client = True
        return self.client

    def close(self) -> None:
        """Close the client and cluster this dispatcher started (not a client it was given):
        with this process's Dask logging silenced throughout, the workers first silence their
        own shutdown logging, then the client and the cluster close, so that no connection the
        close shuts under a heartbeat (nor a worker a stop signal killed) prints a traceback.
        A pool ends its workers and waits for them."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()
        if not self._own_client and self._cluster is None:
            return
        with quiet_shutdown():  # (the broadcast too: workers a stop signal killed fail it)
            if self._cluster is not None and self.client is not None and \
                    self.client.status == "running":  # a lost scheduler would keep it waiting
                try:
                    self.client.run(quiet_worker, on_error="ignore")
                except Exception:  # a lost scheduler: the close below says nothing either way
                    pass
            if self._own_client and self.client is not None:
                try:
                    self.client.close()
                except Exception:  # closing after a lost scheduler
                    pass
                self.client = None
            if self._cluster is not None:
                try:
                    self._cluster.close()
                except Exception:
                    pass
                self._cluster = None

    def run(self, tasks: Iterable[PointTask]) -> Iterator[tuple[PointTask, dict[str, Any]]]:
        """Yield ``(task, record)`` as points finish (in completion order; inline, in order).
        A point lost to dying workers yields a record with status ``failed`` and
        ``transient: True``."""
        tasks = list(tasks)
        if not tasks:
            return
        if self.inline:
            for task in tasks:
                yield task, _run(task)
            return
        if self.executor == "pool":
            if self._pool is None:
                import_the_model()  # once, here: every forked worker inherits it
                self._pool = PointPool(self.workers, _run, _lost)
            yield from self._pool.run(tasks)
            return
        yield from self._run_on_dask(tasks)

    def _run_on_dask(self, tasks: list[PointTask]
                     ) -> Iterator[tuple[PointTask, dict[str, Any]]]:
        """:meth:`run` on Dask: each point a task of its own, first ones first."""
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        client = self._connect()
        batch = uuid.uuid4().hex[:8]
        futures = {}
        for n, task in enumerate(tasks):
            fut = client.submit(_run, task, key=f"sst-cdma-point-{task.key}-{batch}",
                                pure=False, priority=len(tasks) - n)
            futures[fut] = task
        try:
            for fut in as_completed(list(futures)):
                task = futures[fut]
                try:
                    record = fut.result()
                except KilledWorker as exc:
                    record = _lost(task, "the workers running this point kept dying "
                                         f"(KilledWorker: {exc})")
                except (FutureCancelledError, concurrent.futures.CancelledError) as exc:
                    raise DispatchError(f"lost the Dask scheduler ({type(exc).__name__})") \
                        from None
                except (OSError, TimeoutError) as exc:
                    raise DispatchError(f"lost the Dask scheduler: {exc}") from None
                except Exception as exc:  # another error outside the simulation
                    record = _lost(task, f"{type(exc).__name__}: {exc}")
                yield task, record
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                try:
                    client.cancel(pending)
                except Exception:
                    pass


def _run(task: PointTask) -> dict[str, Any]:
    """:func:`run_point`, with a point whose folder cannot be written (a path in the way, a
    full disk: :class:`PointStorageError`) returned as a failed, uncached record instead of
    raised: a worker then logs no traceback, and it is never taken for a lost scheduler."""
    try:
        return run_point(task)
    except PointStorageError as exc:
        return _lost(task, str(exc))


def _lost(task: PointTask, error: str) -> dict[str, Any]:
    """The failed, uncached record of a point lost outside the simulation."""
    return {"key": task.key, "status": "failed", "error": " ".join(error.split()),
            "sim_time_ps": None, "events": None, "end_reason": None, "summary": None,
            "transient": True}


__all__ = ["Dispatcher", "DispatchError", "EXECUTORS", "choose_executor", "forks_workers",
           "import_the_model"]
