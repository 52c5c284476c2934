"""Throughput of the sst_cdma codecs on sparse float32 activations.

Usage::

    python benchmarks/bench_codecs.py [--mib 256] [--density 0.35] [--repeats 5]
                                      [--algorithms zvc,rle,zlib]

Builds ``--mib`` MiB of float32 (seeded; non-zeros ~N(0, 1), zeros placed independently at
random so that a fraction ``--density`` is non-zero), then times compress and decompress of
each registered codec (``sst_cdma.codecs.registry``), a naive numpy ZVC (``np.packbits`` of the
mask plus boolean indexing, and its inverse via ``np.unpackbits`` plus masked assignment) and a
plain ``x.copy()``.  Throughput is
uncompressed bytes per second (GB = 1e9 B); each figure is the best of ``--repeats`` runs after
a warm-up run (which also JIT-compiles the numba kernels).  Every codec's output is checked to
round-trip bit-exactly.

Exit status is 1 if sst_cdma ZVC compress or decompress is less than ``--min-speedup``
(default 3.0) times faster than the naive numpy ZVC, else 0.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

import numpy as np

from sst_cdma import codecs
from sst_cdma.codecs.parallel import num_threads
from sst_cdma.codecs.registry import unknown_algorithm


def naive_zvc_compress(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference ZVC in plain numpy: packed little-endian bit mask plus the non-zeros."""
    mask = x != 0
    return np.packbits(mask, bitorder="little"), x[mask]


def naive_zvc_decompress(packed: tuple[np.ndarray, np.ndarray], n: int) -> np.ndarray:
    """Inverse of :func:`naive_zvc_compress`."""
    bits, values = packed
    mask = np.unpackbits(bits, count=n, bitorder="little").view(bool)
    out = np.zeros(n, dtype=values.dtype)
    out[mask] = values
    return out


def best_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls (after the caller's warm-up) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        result = None  # drop the previous output before allocating the next one
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def make_data(mib: int, density: float, seed: int) -> np.ndarray:
    """``mib`` MiB of float32, non-zero with probability ``density`` at independent positions."""
    n = mib * (1 << 20) // 4
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    x[rng.random(n, dtype=np.float32) >= density] = 0.0
    # The generator can return -0.0, which the value-based naive ZVC (x != 0) would turn into
    # +0.0; make every zero +0.0 so all methods are compared on the same, exact round trip.
    x[x == 0] = 0.0
    return x


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="MiB of float32 data (default 256)")
    ap.add_argument("--density", type=float, default=0.35, help="non-zero fraction")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per figure (best kept)")
    ap.add_argument("--zlib-repeats", type=int, default=1, help="timed runs for zlib (slow)")
    ap.add_argument("--algorithms", default=",".join(codecs.ALGORITHMS),
                    help="comma-separated codecs to time (default: every registered one; zvc "
                         "is always included)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-speedup", type=float, default=3.0,
                    help="required ZVC speed-up over the naive numpy ZVC")
    args = ap.parse_args(argv)
    wanted = [a for a in args.algorithms.split(",") if a]
    for name in wanted:
        if name not in codecs.ALGORITHMS:
            ap.error(unknown_algorithm(name, "--algorithms"))
    algorithms = [a for a in codecs.ALGORITHMS if a == "zvc" or a in wanted]

    x = make_data(args.mib, args.density, args.seed)
    nbytes = x.nbytes
    n = x.size
    print(f"data: {args.mib} MiB float32 ({n} elements), density "
          f"{codecs.density(x):.4f} (target {args.density}), seed {args.seed}, "
          f"codec threads {num_threads()}")

    # Warm-up: JIT compile on a small slice, then one full-size pass of everything.
    for alg in algorithms:
        codecs.decompress(codecs.compress(x[:100_003], alg))

    rows: list[tuple[str, float, float, float]] = []  # name, t_comp, t_decomp, ratio

    def measure(name: str, comp: Callable[[], Any], decomp: Callable[[Any], Any],
                size: Callable[[Any], int], check: Callable[[Any], bool], repeats: int) -> None:
        blob = comp()
        out = decomp(blob)
        if not check(out):
            raise SystemExit(f"{name}: round trip is not bit-exact")
        del out
        tc, blob = best_time(comp, repeats)
        td, _ = best_time(lambda: decomp(blob), repeats)
        rows.append((name, tc, td, nbytes / size(blob)))

    exact = lambda y: y.dtype == x.dtype and y.shape == x.shape and np.array_equal(  # noqa: E731
        y.view(np.uint32), x.view(np.uint32))
    for alg in algorithms:
        measure(f"sst_cdma {alg}", lambda a=alg: codecs.compress(x, a), codecs.decompress, len,
                exact, args.zlib_repeats if alg == "zlib" else args.repeats)
    measure("naive numpy zvc", lambda: naive_zvc_compress(x),
            lambda p: naive_zvc_decompress(p, n), lambda p: p[0].nbytes + p[1].nbytes,
            exact, args.repeats)
    measure("x.copy()", x.copy, lambda y: y.copy(), lambda y: y.nbytes, exact, args.repeats)

    print(f"\n{'method':<18} {'compress':>10} {'GB/s':>7} {'decompress':>11} {'GB/s':>7} "
          f"{'ratio':>6}")
    for name, tc, td, ratio in rows:
        print(f"{name:<18} {tc * 1e3:>8.1f}ms {nbytes / tc / 1e9:>7.2f} {td * 1e3:>9.1f}ms "
              f"{nbytes / td / 1e9:>7.2f} {ratio:>6.3f}")
    times = {name: (tc, td) for name, tc, td, _ in rows}
    zc, zd = times["sst_cdma zvc"]
    nc, nd = times["naive numpy zvc"]
    sc, sd = nc / zc, nd / zd
    print(f"\nZVC speed-up over naive numpy ZVC: compress {sc:.2f}x, decompress {sd:.2f}x "
          f"(required >= {args.min_speedup:.1f}x each)")
    print(f"analytical ZVC ratio at density {args.density}: "
          f"{codecs.zvc_ratio(args.density):.3f}")
    if sc < args.min_speedup or sd < args.min_speedup:
        print("FAIL: ZVC is not fast enough", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
