"""Report benchmark: how long ``sst-cdma report`` takes against the sweep it reports on, both
measured in this run, each as its own command (``sst-cdma sweep``, cold, Dask's start
included; then ``sst-cdma report`` on its results, matplotlib's import included): wall time
and CPU time (user + system of the command and the processes it waited for: the sweep's
workers), and the ratios report / sweep. A report should take less than its sweep. On a
shared machine wall times follow the load; CPU times much less so.

    python benchmarks/bench_report.py [SPEC.yaml] [--workers 2] [--x network]

SPEC defaults to sweeps/paper.yaml (24 points of the cDMA paper; EVALUATION.md draws its
report with ``--x network``, the default here).
"""
from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``sst-cdma ARGS`` in a fresh interpreter."""
    command = [sys.executable, "-m", "sst_cdma.tools.cli.sst_cdma_main", *args]
    cpu, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:1])} failed: {done.stderr.strip()}")
    return wall, _children_cpu() - cpu


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", nargs="?", type=Path, default=REPO / "sweeps" / "paper.yaml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--x", default="network", help="the report's --x ('' for its default)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-report-"))
    results = scratch / "results"
    try:
        sweep = timed(["sweep", str(args.spec), "--output", str(results), "--workers",
                       str(args.workers), "--no-progress"])
        report = timed(["report", str(results)] + (["--x", args.x] if args.x else []))
        points = sum(1 for _ in (results / "points").iterdir())
        plots = len(list((results / "report").glob("*.png")))
        print(f"spec: {args.spec.name}   points: {points}   workers: {args.workers}")
        print(f"sweep (cold): {sweep[0]:7.2f} s wall  {sweep[1]:7.2f} s CPU")
        print(f"report:       {report[0]:7.2f} s wall  {report[1]:7.2f} s CPU  ({plots} plots)")
        print(f"report / sweep: {report[0] / sweep[0]:.2f} wall, {report[1] / sweep[1]:.2f} CPU"
              "  (requirement < 1)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
