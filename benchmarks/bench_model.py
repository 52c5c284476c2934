"""cDMA model speed: one training iteration of every network in both transfer modes, with the
event rate of the model compared with the kernel's raw rate on PHOLD measured in the same run.

    python benchmarks/bench_model.py [--batch 64] [--algorithm zvc]

The requirement is that the components cost no more than half the kernel's raw rate, i.e.
model events/s >= 0.5 x PHOLD events/s; the last line says whether that holds.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from sst_cdma.runner import run
from sst_cdma.workloads import NETWORKS

REPO = Path(__file__).resolve().parent.parent


def phold_rate() -> float:
    """Events/s of the kernel on the PHOLD benchmark model."""
    r = run(REPO / "topologies/phold_torus.py", ["--time-limit", "5us"], console=io.StringIO())
    return r.events / r.timing["run_s"]


def model_run(network: str, mode: str, batch: int, algorithm: str) -> tuple[int, float, float]:
    """(events, run-loop seconds, total wall seconds) of one iteration."""
    with contextlib.redirect_stdout(io.StringIO()):
        r = run(REPO / "topologies/pascal_cdma.py",
                ["--network", network, "--batch", str(batch), "--policy", "all",
                 "--algorithm", algorithm, "--mode", mode, "--no-baselines"],
                console=io.StringIO())
    return r.events, r.timing["run_s"], sum(r.timing.values())


def main() -> int:
    """Print the table and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--algorithm", default="zvc")
    args = ap.parse_args()
    kernel = max(phold_rate() for _ in range(3))
    print(f"kernel PHOLD rate: {kernel:,.0f} events/s")
    print(f"{'network':<12}{'mode':<7}{'events':>9}{'run s':>10}{'wall s':>9}{'events/s':>12}"
          f"{'vs PHOLD':>10}")
    total_events = total_run = 0.0
    for network in NETWORKS:
        for mode in ("flow", "chunk"):
            events, run_s, wall = model_run(network, mode, args.batch, args.algorithm)
            total_events += events
            total_run += run_s
            rate = events / run_s
            print(f"{network:<12}{mode:<7}{events:>9}{run_s:>10.4f}{wall:>9.3f}{rate:>12,.0f}"
                  f"{rate / kernel:>10.3f}")
    overall = total_events / total_run
    ratio = overall / kernel
    print(f"all runs: {overall:,.0f} model events/s = {ratio:.3f} x the kernel's PHOLD rate "
          f"(requirement >= 0.5: {'met' if ratio >= 0.5 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
