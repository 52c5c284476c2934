"""What a transformer costs the simulator per kernel: wall time of one simulated training
iteration of a transformer (default gpt2_small) divided by its kernels, against AlexNet's in
the same session.

    python benchmarks/bench_transformer.py [--network gpt2_small] [--repeat 3]

Each run is in process and cold: the network, its priced kernels and its rendered stream are
built afresh (the loader's and renderer's caches cleared), then the iteration is simulated
(``sst topologies/hopper_pcie5_cdma.py`` options, policy all, bfloat16, no baselines). A kernel
is one compute op of the stream (each layer's forward and backward kernel). The requirement:
a transformer's wall time per kernel is at most 1.5x AlexNet's. The two are interleaved run by
run and each side's figure is its best of ``--repeat``.
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

TARGET = 1.5
TOPOLOGY = REPO / "topologies/hopper_pcie5_cdma.py"


def cold_run(network: str, batch: int, options: Sequence[str] = ()) -> tuple[int, float]:
    """(kernels, wall seconds) of one cold, in-process iteration of ``network``."""
    for cached in (loader._load, render._iteration, render._priced):
        cached.cache_clear()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        r = run(TOPOLOGY, ["--network", network, "--batch", str(batch), "--dtype", "bfloat16",
                           "--policy", "all", "--no-baselines", *options],
                console=io.StringIO(), record_statistics=False)
    wall = time.perf_counter() - start
    gpu = r.simulation.components["gpu0"]
    return sum(op.op == "compute" for op in gpu.ops), wall


def measure(network: str, batch: int, repeat: int, options: Sequence[str] = ()
            ) -> tuple[tuple[int, float], tuple[int, float]]:
    """Best (kernels, wall seconds) of ``network`` and of AlexNet (batch 64), interleaved."""
    best: dict[str, tuple[int, float]] = {}
    for _ in range(repeat):
        for name, b, opts in ((network, batch, options), ("alexnet", 64, ())):
            kernels, wall = cold_run(name, b, opts)
            if name not in best or wall < best[name][1]:
                best[name] = (kernels, wall)
    return best[network], best["alexnet"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print both figures per kernel, their ratio and whether the 1.5x requirement holds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="gpt2_small")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    (tk, tw), (ak, aw) = measure(args.network, args.batch, args.repeat)
    per_t, per_a = tw / tk, aw / ak
    print(f"{args.network} batch {args.batch}: {tk} kernels, {tw * 1e3:8.1f} ms, "
          f"{per_t * 1e6:7.1f} us/kernel (best of {args.repeat})")
    print(f"alexnet batch 64: {ak} kernels, {aw * 1e3:8.1f} ms, "
          f"{per_a * 1e6:7.1f} us/kernel (best of {args.repeat})")
    ratio = per_t / per_a
    print(f"{args.network} / alexnet per kernel: {ratio:.2f} (requirement <= {TARGET:.1f}: "
          f"{'met' if ratio <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
