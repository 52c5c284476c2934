"""Sweep benchmark: the same spec cold on 1 worker and on 2 workers (wall times and their
ratio, tables checked byte-identical), then rerun from the warm cache (wall time, ratio to
cold). Wall times are whole ``run_sweep`` calls: spec check, cluster start, points, tables.

    python benchmarks/bench_sweep.py [SPEC.yaml] [--workers 1,2]

SPEC defaults to sweeps/paper.yaml once topologies/pascal_cdma.py exists, else
sweeps/phold.yaml (PHOLD tori; no cDMA model needed). Each cold run also prints the share of
workers x wall time spent simulating (the points' in-process run times, ``run_s``). On the
paper's study (24 points of ~50 ms) Dask's start-up alone is most of the wall time; on
sweeps/throughput.yaml (8 points of a second or more) the share measures the sweep's own
per-point cost.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def default_spec() -> Path:
    """paper.yaml when the cDMA topology exists, else the PHOLD spec."""
    if (REPO / "topologies" / "pascal_cdma.py").is_file():
        return REPO / "sweeps" / "paper.yaml"
    return REPO / "sweeps" / "phold.yaml"


def timed_sweep(spec: Path, output: Path, workers: int) -> tuple[float, object]:
    """Wall time and outcome of one sweep."""
    from sst_cdma.tools.sweep import run_sweep

    t0 = time.perf_counter()
    outcome = run_sweep(spec, output=output, workers=workers, progress=False)
    return time.perf_counter() - t0, outcome


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
    args = parser.parse_args()
    spec = args.spec or default_spec()
    counts = [int(w) for w in args.workers.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    print(f"spec: {os.path.relpath(spec)}   cpus: {os.cpu_count()}")
    try:
        cold: dict[int, float] = {}
        outs: dict[int, Path] = {}
        for n in counts:
            outs[n] = scratch / f"w{n}"
            cold[n], outcome = timed_sweep(spec, outs[n], n)
            work, simulating = point_seconds(outs[n]), point_seconds(outs[n], "run_s")
            print(f"cold, {n} worker{'s' if n > 1 else ' '}: {cold[n]:7.2f} s wall  "
                  f"({outcome.total} points, {outcome.failed} failed; points' wall "
                  f"{work:.2f} s, of it simulating {simulating:.2f} s; share of workers x wall "
                  f"spent simulating {simulating / (n * cold[n]):.0%})")
        base = counts[0]
        for n in counts[1:]:
            same = (outs[base] / "results.csv").read_bytes() == \
                (outs[n] / "results.csv").read_bytes()
            print(f"speed-up {n} vs {base} worker(s): {cold[base] / cold[n]:.2f}x   "
                  f"results.csv identical: {same}")
        last = counts[-1]
        warm, outcome = timed_sweep(spec, outs[last], last)
        print(f"warm rerun ({last} workers):  {warm:7.2f} s wall  ({outcome.ran} run, "
              f"{outcome.cached} cached)   cold/warm: {cold[last] / warm:.1f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
