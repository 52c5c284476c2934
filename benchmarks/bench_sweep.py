"""Sweep benchmark: the same spec cold on 1 worker and on 2 workers (wall times and their
ratio, tables checked byte-identical), then rerun from the warm cache (wall time, ratio to
cold). Wall times are whole ``run_sweep`` calls: spec check, workers' start, points, tables.

    python benchmarks/bench_sweep.py [SPEC.yaml] [--workers 1,2] [--executor pool|dask]

SPEC defaults to sweeps/paper.yaml once topologies/pascal_cdma.py exists, else
sweeps/phold.yaml (PHOLD tori; no cDMA model needed). The points run as ``sst-cdma sweep``
runs them (one worker: in this process; more: the process pool), or on a local Dask cluster
with ``--executor dask``. Each cold run also prints the share of workers x wall time spent
simulating (the points' in-process run times, ``run_s``), and the CPU time spent inside
``sst_cdma.engine.runner.run`` (script, build, set-up, event loop, finish), inside
``Simulation.run`` within it (the simulation proper: set-up, event loop, finish; not the
script, the elements' build, nor what the sweep does around the run: the point's tables and
records) and inside the event loop alone (``Simulator.run``), each as a share of the workers'
CPU time (the pool's processes; one worker: this process's while the sweep ran) and of the
whole sweep's. On the paper's study (24 points of
~50 ms) the fixed costs (imports, the check of every point) are most of the wall time; on
sweeps/throughput.yaml (8 points of a second or more) the share measures the sweep's own
per-point cost. ``benchmarks/bench_sweep_against_commit.py`` compares a cold sweep's CPU time
with another commit's.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent


def default_spec() -> Path:
    """paper.yaml when the cDMA topology exists, else the PHOLD spec."""
    if (REPO / "topologies" / "pascal_cdma.py").is_file():
        return REPO / "sweeps" / "paper.yaml"
    return REPO / "sweeps" / "phold.yaml"


def timed_sweep(spec: Path, output: Path, workers: int,
                executor: Optional[str] = None) -> tuple[float, object]:
    """Wall time and outcome of one sweep."""
    from sst_cdma.tools.sweep import run_sweep

    t0 = time.perf_counter()
    outcome = run_sweep(spec, output=output, workers=workers, progress=False,
                        executor=executor)
    return time.perf_counter() - t0, outcome


#: what the share counts, as (name, module, attribute, what it covers): each a function a
#: point's run goes through, the next inside the one before
COUNTED = (("run", "sst_cdma.engine.runner", "run",
            "the run: script, build, set-up, event loop, finish"),
           ("simulation", "sst_cdma.engine.simulation", "Simulation.run",
            "the simulation proper: set-up, event loop, finish"),
           ("loop", "sst_cdma.engine.kernel", "Simulator.run", "the event loop alone"))


def _counted(real: Any, folder: Path, name: str) -> Any:
    """``real``, adding the CPU seconds each call spends to the number in
    ``folder/<pid>.<name>`` (the pid of the process that calls it)."""
    def counted(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            path = folder / f"{os.getpid()}.{name}"
            before = float(path.read_text()) if path.exists() else 0.0
            path.write_text(repr(before + time.process_time() - t0))

    return counted


def count_simulation_cpu(folder: Path) -> None:
    """From now on, in this process and every worker forked from it, add the CPU seconds
    spent inside each function of :data:`COUNTED` to ``folder/<pid>.<name>``."""
    import importlib

    for name, module, attribute, _ in COUNTED:
        owner: Any = importlib.import_module(module)
        if "." in attribute:
            cls, attribute = attribute.split(".")
            owner = getattr(owner, cls)
        setattr(owner, attribute, _counted(getattr(owner, attribute), folder, name))


def cpu_s(who: int) -> float:
    """User + system CPU seconds of ``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN``."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def cpu_share(spec: Path, output: Path, workers: int, executor: Optional[str],
              folder: Path) -> tuple[float, object, str]:
    """:func:`timed_sweep`, and lines saying the share of the workers' CPU time and of the
    whole sweep's spent in each function of :data:`COUNTED` (empty on Dask, whose workers are
    not forked from here)."""
    for old in folder.iterdir():
        old.unlink()
    own, children = cpu_s(resource.RUSAGE_SELF), cpu_s(resource.RUSAGE_CHILDREN)
    wall, outcome = timed_sweep(spec, output, workers, executor)
    own, children = cpu_s(resource.RUSAGE_SELF) - own, cpu_s(resource.RUSAGE_CHILDREN) - children
    if executor == "dask":
        return wall, outcome, ""
    pooled = workers > 1
    workers_cpu = children if pooled else own
    lines = [f"    CPU: {'the workers' if pooled else 'this process'} {workers_cpu:.2f} s; "
             f"the whole sweep {own + children:.2f} s"]
    for name, module, attribute, what in COUNTED:
        spent = sum(float(f.read_text()) for f in folder.glob(f"*.{name}")
                    if (f.stem != str(os.getpid())) == pooled)
        lines.append(f"      in {module.rsplit('.', 1)[1]}.{attribute} ({what}): {spent:.2f} s, "
                     f"{spent / workers_cpu:.0%} of the {'workers' if pooled else 'process'}' "
                     f"CPU, {spent / (own + children):.0%} of the sweep's")
    return wall, outcome, "\n".join(lines)


def point_seconds(output: Path, key: str = "wall_s") -> float:
    """Sum over the points (result.json) of their wall time (``wall_s``: run, outputs and
    folder) or of their in-process run time (``run_s``: the simulation itself)."""
    total = 0.0
    for result in (output / "points").glob("*/result.json"):
        total += json.loads(result.read_text()).get(key) or 0.0
    return total


def main() -> int:
    """Run the benchmark; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", nargs="?", type=Path, default=None)
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (1,2)")
    parser.add_argument("--executor", choices=("pool", "dask"), default=None,
                        help="as sst-cdma sweep's (default: the pool)")
    args = parser.parse_args()
    spec = args.spec or default_spec()
    counts = [int(w) for w in args.workers.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    (scratch / "cpu").mkdir()
    count_simulation_cpu(scratch / "cpu")
    print(f"spec: {os.path.relpath(spec)}   cpus: {os.cpu_count()}")
    try:
        cold: dict[int, float] = {}
        outs: dict[int, Path] = {}
        for n in counts:
            outs[n] = scratch / f"w{n}"
            cold[n], outcome, shares = cpu_share(spec, outs[n], n, args.executor,
                                                 scratch / "cpu")
            work, simulating = point_seconds(outs[n]), point_seconds(outs[n], "run_s")
            print(f"cold, {n} worker{'s' if n > 1 else ' '}: {cold[n]:7.2f} s wall  "
                  f"({outcome.total} points, {outcome.failed} failed; points' wall "
                  f"{work:.2f} s, of it simulating {simulating:.2f} s; share of workers x wall "
                  f"spent simulating {simulating / (n * cold[n]):.0%})")
            if shares:
                print(shares)
        base = counts[0]
        for n in counts[1:]:
            same = (outs[base] / "results.csv").read_bytes() == \
                (outs[n] / "results.csv").read_bytes()
            print(f"speed-up {n} vs {base} worker(s): {cold[base] / cold[n]:.2f}x   "
                  f"results.csv identical: {same}")
        last = counts[-1]
        warm, outcome = timed_sweep(spec, outs[last], last, args.executor)
        print(f"warm rerun ({last} workers):  {warm:7.2f} s wall  ({outcome.ran} run, "
              f"{outcome.cached} cached)   cold/warm: {cold[last] / warm:.1f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
