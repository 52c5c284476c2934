"""Closing the local Dask cluster after a sweep prints nothing (issue #34: once in three runs a
sweep that succeeded ended with a ``CommClosedError`` traceback, logged by a worker or the
scheduler whose connection the close shut under it). Here the noise is made certain: a worker
plugin and a scheduler plugin log such a traceback as they close, in a fresh process whose
logging is Dask's own, as under ``sst-cdma sweep``."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[2]

NOISE = '''
import logging
from distributed.comm.core import CommClosedError
from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin


def log_closed_comm(logger):
    """What distributed logs when a heartbeat meets a closed connection: an ERROR with the
    CommClosedError's traceback."""
    try:
        raise CommClosedError("in <TCP (closed) ConnectionPool.heartbeat_worker>: Stream is "
                              "closed")
    except CommClosedError:
        logging.getLogger(logger).exception("Failed to communicate with scheduler")


class NoisyWorkerClose(WorkerPlugin):
    def teardown(self, worker):
        log_closed_comm("distributed.worker")


class NoisySchedulerClose(SchedulerPlugin):
    async def close(self):
        log_closed_comm("distributed.core")
'''

CLOSE = NOISE + '''
from sst_cdma.tools.sweep.dispatch import Dispatcher

dispatcher = Dispatcher(workers=1, executor="dask")
client = dispatcher._connect()
client.register_plugin(NoisyWorkerClose())
client.register_plugin(NoisySchedulerClose())
print("closing", flush=True)
dispatcher.close()
log_closed_comm("distributed.core")   # after the close: logging as it was
'''


def test_the_cluster_closes_without_a_word():
    done = subprocess.run([sys.executable, "-c", CLOSE], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "closing\n"
    # one traceback: the one logged after the close, none from the close itself
    assert done.stderr.count("Traceback") == 1, done.stderr
    assert done.stderr.rstrip().endswith("Stream is closed"), done.stderr


class Kept(logging.Handler):
    """A handler keeping what reaches it (attached to the logger itself: distributed's own
    logging configuration, once it is imported, stops its loggers propagating to the root,
    where pytest's caplog listens)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_quiet_shutdown_silences_only_the_block():
    from sst_cdma.tools.sweep.dispatch import quiet_shutdown

    logger = logging.getLogger("distributed.core")
    kept, level = Kept(), logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.DEBUG)    # (sst-cdma's CLI, run in-process by other tests, quiets
    try:                              # the distributed loggers to CRITICAL)
        with quiet_shutdown():
            logger.error("shut")
        assert kept.messages == []
        assert not logger.disabled
        logger.error("open")
        assert kept.messages == ["open"]
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)
