"""Per-core throughput of the sst_cdma codecs on dense model-state-like data: what the host
CPU's codec costs when it decompresses gradients and compresses weights (``--state-compression
host``, docs/workloads.md section 9).

Usage::

    NUMBA_NUM_THREADS=1 python benchmarks/bench_state_codecs.py [--mib 16] [--repeats 3]

Builds ``--mib`` MiB of float32 drawn from N(0, 0.02) (seeded: the spread of a transformer's
initialised weights; every element non-zero, as the model-state profile measures weights and
gradients to be) and the same values rounded to float16 and to bfloat16, then times compress and decompress
of every registered codec (best of ``--repeats`` after a warm-up; zlib's compress once), each
round trip checked bit-exact. Throughput is uncompressed bytes per second per codec thread
(MB = 1e6 B): run it with ``NUMBA_NUM_THREADS=1`` for one core's figure, which is what
``sst_cdma/model/cpu_codecs.py`` records. A plain ``x.copy()`` is the reference measured in
the same run, and each codec's speed is also printed as a fraction of it.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

import numpy as np

from sst_cdma import codecs
from sst_cdma.codecs.parallel import num_threads
from sst_cdma.model.dtypes import DTYPES


def best_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        result = None
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def state_data(mib: int, seed: int) -> dict[str, tuple[np.ndarray, Any]]:
    """float32 N(0, 0.02), the same in float16 and as bfloat16 words (round to nearest even), with the
    ``element_type`` each is compressed as."""
    n = mib * (1 << 20) // 4
    x = np.random.default_rng(seed).normal(0.0, 0.02, n).astype(np.float32)
    u = x.view(np.uint32)
    bf = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return {dtype: (bf, dtype) if dtype == "bfloat16" else (x.astype(dtype), None)
            for dtype in DTYPES}


def main(argv: list[str] | None = None) -> int:
    """Time every codec on every element type and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=16, help="MiB of float32 (default 16)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per figure")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"codec threads {num_threads()}; {args.mib} MiB float32 N(0, 0.02), seed {args.seed}")
    print("| dtype | codec | ratio | compress MB/s | decompress MB/s | vs x.copy() |")
    print("|---|---|---|---|---|---|")
    for dtype, (x, element_type) in state_data(args.mib, args.seed).items():
        codecs.decompress(codecs.compress(x[:100_003], "zvc", element_type=element_type))
        copy_s, _ = best_time(x.copy, args.repeats)
        for alg in codecs.ALGORITHMS:
            blob = codecs.compress(x, alg, element_type=element_type)
            if codecs.decompress(blob).view(x.dtype).tobytes() != x.tobytes():
                raise SystemExit(f"{alg} {dtype}: round trip is not bit-exact")
            tc, blob = best_time(lambda a=alg: codecs.compress(x, a, element_type=element_type),
                                 1 if alg == "zlib" else args.repeats)
            td, _ = best_time(lambda b=blob: codecs.decompress(b), args.repeats)
            print(f"| {dtype} | {alg} | {x.nbytes / len(blob):.3f} | {x.nbytes / tc / 1e6:.0f} "
                  f"| {x.nbytes / td / 1e6:.0f} | {copy_s / tc:.3f} / {copy_s / td:.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
