"""Fixtures of the sweep tests: a counting test topology and shared Dask clusters."""
from __future__ import annotations

import logging
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from sst_cdma.tools.sweep.execute import DONE

# A tiny topology that records every real run (not the up-front check, which runs in a scratch
# folder) in RUNS, can sleep, can fail in its real run (an Echo with its required port left
# unconnected, which the build refuses: added only in the real run, as a fault the up-front
# check cannot foresee), and writes a summary.json. Point ``--hold N`` holds its worker on its
# first real run: it writes the worker's pid to HELD.pid, then waits until HELD.release exists
# (two minutes at most). Each real run's record line names the process it ran in; ``--die``
# kills that process (SIGKILL) in each real run.
COUNTING_TOPOLOGY = '''
import argparse, json, os, signal, sys, time
import sst

RUNS = {runs!r}
HELD = {held!r}
parser = argparse.ArgumentParser(prog="counting.py")
parser.add_argument("--n", type=int, required=True)
parser.add_argument("--value", type=float, default=1.0)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--fail", action="store_true")
parser.add_argument("--mode", choices=["a", "b"], default="a")
parser.add_argument("--data", default="", help="a file holding the value")
parser.add_argument("--hold", type=int, default=0, help="point n holds on its first run")
parser.add_argument("--die", action="store_true", help="kill the process in real runs")
args = parser.parse_args(sys.argv[1:])
if args.data:
    with open(args.data) as f:
        args.value = float(f.read())

real = os.sep + "points" + os.sep in os.getcwd() + os.sep
if real:
    record = os.path.join(RUNS, f"{{args.n}}.{{args.mode}}")
    first = not os.path.exists(record)
    with open(record, "a") as f:
        f.write(f"run {{os.getpid()}}\\n")
    if args.die:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(args.sleep)
    if args.hold == args.n and first:
        with open(HELD + ".pid.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(HELD + ".pid.tmp", HELD + ".pid")
        deadline = time.monotonic() + 120
        while not os.path.exists(HELD + ".release") and time.monotonic() < deadline:
            time.sleep(0.02)

probe = sst.Component("probe", "testElement.StatProbe")
probe.addParams({{"count": args.n + 1, "seed": 7}})
sst.setStatisticLoadLevel(4)
sst.enableAllStatisticsForAllComponents()
if args.fail and real:
    sst.Component("lonely", "testElement.Echo")     # required port unconnected: build fails
summary = {{"network": "toy", "iteration_time_s": args.value * (args.n + 1),
           "baselines": {{"vdnn": {{"iteration_time_s": 2.0 * args.value * (args.n + 1)}}}},
           "gpus": [{{"t": args.n}}, {{"t": args.n + 1}}], "fits_in_memory": args.n % 2 == 0}}
with open("summary.json", "w") as f:
    json.dump(summary, f)
'''


class Counting:
    """The counting topology and its run records."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs = folder / "runs"
        self.runs.mkdir(parents=True, exist_ok=True)
        self.script = folder / "counting.py"
        self.held = folder / "held"
        self.script.write_text(COUNTING_TOPOLOGY.format(runs=str(self.runs), held=str(self.held)),
                               encoding="utf-8")

    def count(self, n: int, mode: str = "a") -> int:
        """How many times point n (in mode) really ran."""
        path = self.runs / f"{n}.{mode}"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def pids(self, n: int, mode: str = "a") -> list[int]:
        """The process of each real run of point n (in mode), in order."""
        path = self.runs / f"{n}.{mode}"
        lines = path.read_text().splitlines() if path.exists() else []
        return [int(line.split()[1]) for line in lines]

    @staticmethod
    def finished(points: Path) -> set[str]:
        """The keys of the points published finished in ``points`` (not a worker's folder
        still being written, which holds ``DONE`` a moment before it is renamed into place: a
        worker killed then leaves it unfinished)."""
        if not points.exists():
            return set()
        return {p.name for p in points.glob("*")
                if ".tmp-" not in p.name and ".old-" not in p.name and (p / DONE).is_file()}

    def total(self) -> int:
        """Real runs of every point together."""
        return sum(len(p.read_text().splitlines()) for p in self.runs.iterdir())

    def held_pid(self, timeout: float = 120) -> int:
        """The pid of the process running the point given ``--hold`` (its worker), once that
        point holds; AssertionError after ``timeout`` seconds without one."""
        deadline = time.monotonic() + timeout
        while not self.held.with_suffix(".pid").exists():
            assert time.monotonic() < deadline, "the held point never started"
            time.sleep(0.02)
        return int(self.held.with_suffix(".pid").read_text())

    def release(self) -> None:
        """Let the held point go on (if it still runs)."""
        self.held.with_suffix(".release").touch()

    def spec(self, body: str, name: str = "spec.yaml") -> Path:
        """Write a spec (dedented) next to the script; ``{script}`` is the script's name."""
        path = self.folder / name
        text = textwrap.dedent(body).lstrip("\n").replace("{script}", self.script.name)
        path.write_text(text, encoding="utf-8")
        return path


@pytest.fixture
def counting(tmp_path: Path) -> Counting:
    """A counting topology in a fresh folder."""
    return Counting(tmp_path)


def _cluster(workers: int):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    return cluster, client


HERE = Path(__file__).resolve().parent
#: the local Dask clusters the tests of this folder share, by their number of workers
_CLUSTERS: dict[int, tuple[Any, Any]] = {}


def _shared_client(workers: int):
    """The client of a local Dask cluster of ``workers`` workers, started on first use and
    shared by the tests of this folder until the run leaves it."""
    if workers not in _CLUSTERS:
        _CLUSTERS[workers] = _cluster(workers)
    return _CLUSTERS[workers][1]


def _close_clusters() -> None:
    while _CLUSTERS:
        _, (cluster, client) = _CLUSTERS.popitem()
        client.close()
        cluster.close()


def pytest_runtest_teardown(item, nextitem) -> None:
    """Close the shared clusters once the next test is not one of this folder's (idle, their
    workers' and scheduler's heartbeats would take a tenth of a core from every test after)."""
    if nextitem is None or HERE not in Path(nextitem.path).resolve().parents:
        _close_clusters()


@pytest.fixture(scope="module")
def client2():
    """A 2-worker local Dask cluster shared by the sweep tests."""
    return _shared_client(2)


@pytest.fixture(scope="module")
def client1():
    """A 1-worker local Dask cluster."""
    return _shared_client(1)
