"""How cost grows with the number of GPUs: the DGX-style topology (eight P100s per node, two
per PCIe switch) at 8, 64, 256 and 1,024 GPUs (``--max 4096`` adds 2,048 and 4,096), each one
training iteration of the default job with its oracle and vDNN baselines, each size in a
fresh process of its own (so that its peak memory is its own).

    python benchmarks/bench_scale.py [--max 1024] [-- model options]

Prints wall time per run and per GPU, the configuration check and build, the event loop, the
peak resident memory of the process and that per GPU, and the growth exponent b fitted to
time = a x GPUs^b over the runs of 64 GPUs and more (8 GPUs is dominated by fixed start-up
costs). Requirements: b <= 1.1, and 1,024 GPUs in under 15 s.
"""
from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from sst_cdma.runner import run

REPO = Path(__file__).resolve().parent.parent
SIZES = (8, 64, 256, 1024, 2048, 4096)


def one_run(gpus: int, options: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Wall seconds of one run with ``gpus`` GPUs, and the runner's own phase timings."""
    start = time.perf_counter()
    result = run(REPO / "topologies/dgx1_cdma.py", ["--gpus", str(gpus), *options],
                 console=io.StringIO(), record_statistics=False)
    return time.perf_counter() - start, result.timing


def measured(gpus: int, options: Sequence[str]) -> dict[str, float]:
    """:func:`one_run` in a fresh interpreter: wall seconds, phase timings, peak RSS in MiB."""
    out = subprocess.run([sys.executable, __file__, "--one", str(gpus), "--", *options],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def growth_exponent(gpus: Sequence[int], seconds: Sequence[float]) -> float:
    """b of the least-squares fit of log(seconds) = log(a) + b log(gpus)."""
    return float(np.polyfit(np.log(gpus), np.log(seconds), 1)[0])


def main(argv: Sequence[str] | None = None) -> int:
    """Run every size up to ``--max`` and print the figures and the requirements."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=1024, help="largest GPU count (default 1024)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, as JSON
    ap.add_argument("options", nargs="*", help="model options after --")
    args = ap.parse_args(argv)
    if args.one is not None:
        wall, timing = one_run(args.one, args.options)
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(json.dumps({"wall_s": wall, **timing, "peak_mib": peak_mib}))
        return 0
    rows = []
    print(f"{'GPUs':>6} {'wall s':>8} {'ms/GPU':>8} {'build s':>8} {'setup s':>8} {'run s':>8} "
          f"{'peak MiB':>9} {'KiB/GPU':>8}")
    for gpus in (g for g in SIZES if g <= args.max):
        m = measured(gpus, args.options)
        wall = m["wall_s"]
        rows.append((gpus, wall))
        print(f"{gpus:>6} {wall:>8.2f} {1e3 * wall / gpus:>8.2f} {m['build_s']:>8.2f} "
              f"{m['setup_s']:>8.2f} {m['run_s']:>8.2f} {m['peak_mib']:>9.0f} "
              f"{1024 * m['peak_mib'] / gpus:>8.0f}", flush=True)
    fitted = [(g, s) for g, s in rows if g >= 64]
    if len(fitted) >= 2:
        b = growth_exponent([g for g, _ in fitted], [s for _, s in fitted])
        print(f"growth exponent (64 GPUs and up): {b:.2f} (requirement <= 1.1: "
              f"{'met' if b <= 1.1 else 'NOT met'})")
    big = dict(rows).get(1024)
    if big is not None:
        print(f"1,024 GPUs: {big:.1f} s (requirement < 15 s: {'met' if big < 15 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
