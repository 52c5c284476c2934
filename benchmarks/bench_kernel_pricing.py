"""What the fitted kernel model costs the main job: wall time of ``sst topologies/pascal_cdma.py``
(a fresh process each time, as a user runs it) with the fitted model against the same run with
``--kernel-model roofline``, measured in the same session.

    python benchmarks/bench_kernel_pricing.py [--repeat 7] [-- model options]

The requirement: the fitted model (every layer and pass priced once, before the simulation)
adds at most 10% to the main job's wall time. These machines are shared and drift, so the two
are interleaved run by run and each side's figure is its best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.10


def wall_time(options: Sequence[str]) -> float:
    """Seconds of one ``sst topologies/pascal_cdma.py -- OPTIONS`` in a fresh process."""
    cmd = [sys.executable, "-m", "sst_cdma.tools.cli.sst_main", str(REPO / "topologies/pascal_cdma.py"),
           "--", *options]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - start


def measure(repeat: int, options: Sequence[str]) -> tuple[float, float]:
    """Best wall time of the fitted model and of the roofline, interleaved."""
    fitted, roofline = [], []
    for _ in range(repeat):
        fitted.append(wall_time(options))
        roofline.append(wall_time([*options, "--kernel-model", "roofline"]))
    return min(fitted), min(roofline)


def main(argv: Sequence[str] | None = None) -> int:
    """Print both wall times, their ratio and whether the 10% requirement holds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("options", nargs="*", help="model options after --")
    args = ap.parse_args(argv)
    fitted, roofline = measure(args.repeat, args.options)
    ratio = fitted / roofline
    print(f"main job, roofline kernel times: {roofline * 1e3:8.1f} ms (best of {args.repeat})")
    print(f"main job, fitted kernel model:   {fitted * 1e3:8.1f} ms (best of {args.repeat})")
    print(f"fitted / roofline: {ratio:.3f} (requirement <= {TARGET:.2f}: "
          f"{'met' if ratio <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
