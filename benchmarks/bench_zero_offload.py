"""What ZeRO-Offload costs the simulator: wall time of one simulated optimizer step of a 7B
model (llama_7b) with its optimizer states and gradients on the host (the host CPU stepping
each gradient bucket, the weights copied back) against the same model with every state on
the GPU, in the same session.

    python benchmarks/bench_zero_offload.py [--network llama_7b] [--seq-len 1024] [--repeat 3]

Each run is in process and cold: the network, its priced kernels and its rendered stream are
built afresh (the loader's and renderer's caches cleared), then the step is simulated (``sst
topologies/hopper_pcie5_cdma.py`` options: batch 1, bfloat16, Adam, policy none, no
baselines). The requirement: the ZeRO-Offload run takes under 2x the plain one. The two are
interleaved run by run and each side's figure is its best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst_cdma import run  # noqa: E402
from workloads import loader, render  # noqa: E402

TARGET = 2.0
TOPOLOGY = REPO / "topologies/hopper_pcie5_cdma.py"
ZERO_OFFLOAD = ("--optimizer-states", "host", "--gradients", "host")


def cold_run(network: str, seq_len: int, options: Sequence[str] = ()) -> tuple[float, float]:
    """(wall seconds, simulated step seconds) of one cold, in-process step of ``network``."""
    for cached in (loader._load, render._iteration, render._priced):
        cached.cache_clear()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        r = run(TOPOLOGY, ["--network", network, "--batch", "1", "--seq-len", str(seq_len),
                           "--dtype", "bfloat16", "--optimizer", "adam", "--policy", "none",
                           "--no-baselines", *options],
                console=io.StringIO(), record_statistics=False)
    wall = time.perf_counter() - start
    return wall, r.results["gpu0"].iteration_time_ps * 1e-12


def measure(network: str, seq_len: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Best (wall seconds, simulated seconds) of the plain and the ZeRO-Offload step,
    interleaved."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for label, opts in (("plain", ()), ("zero-offload", ZERO_OFFLOAD)):
            wall, simulated = cold_run(network, seq_len, opts)
            if label not in best or wall < best[label][0]:
                best[label] = (wall, simulated)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    """Print both wall times, their ratio and whether the 2x requirement holds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="llama_7b")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    best = measure(args.network, args.seq_len, args.repeat)
    for label, (wall, simulated) in best.items():
        print(f"{args.network} {label:12}: {wall * 1e3:9.1f} ms wall for a "
              f"{simulated * 1e3:.3f} ms step (best of {args.repeat})")
    ratio = best["zero-offload"][0] / best["plain"][0]
    print(f"zero-offload / plain wall time: {ratio:.2f} (requirement < {TARGET:.1f}: "
          f"{'met' if ratio < TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
