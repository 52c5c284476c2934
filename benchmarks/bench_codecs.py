"""Throughput of the sst_cdma codecs on sparse float32 activations.

Usage::

    python benchmarks/bench_codecs.py [--mib 256] [--density 0.35] [--repeats 5]
                                      [--algorithms zvc,rle,zlib,lz4,zstd,bplane_zstd]
    python benchmarks/bench_codecs.py --dense-report [--mib 16]

Builds ``--mib`` MiB of float32 (seeded; non-zeros ~N(0, 1), zeros placed independently at
random so that a fraction ``--density`` is non-zero), then times compress and decompress of
each registered codec (``sst_cdma.codecs.registry``), a naive numpy ZVC (``np.packbits`` of the
mask plus boolean indexing, and its inverse via ``np.unpackbits`` plus masked assignment) and a
plain ``x.copy()``.  Throughput is
uncompressed bytes per second (GB = 1e9 B); each figure is the best of ``--repeats`` runs after
a warm-up run (which also JIT-compiles the numba kernels).  Every codec's output is checked to
round-trip bit-exactly.  Beside GB/s, every method's compress and decompress speed and its
ratio are printed relative to the naive numpy ZVC measured in the same run ("vs naive").

``--dense-report`` prints instead the markdown tables of docs/codecs.md "Dense activations":
the ratio and throughput of every registered codec on post-GELU-like tensors (``--mib`` MiB of
float32, and the same values rounded to bfloat16) at densities 0.1, 0.5, 0.9 and 1.0.

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


DENSE_DENSITIES = (0.1, 0.5, 0.9, 1.0)
"""Non-zero fractions of the dense-activation report."""


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU (tanh approximation) in float32: the activation of BERT/GPT-style MLPs."""
    c = np.float32(np.sqrt(2.0 / np.pi))
    inner = c * (x + np.float32(0.044715) * x ** 3)
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))


def to_bfloat16_words(x: np.ndarray) -> np.ndarray:
    """float32 rounded to bfloat16 (round to nearest even, as PyTorch's ``.to(bfloat16)``),
    as raw ``uint16`` words (finite inputs)."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def dense_activations(n: int, density: float, seed: int) -> np.ndarray:
    """``n`` float32 post-GELU values of N(0, 1) pre-activations (no exact zeros; GELU's
    negative tail stays non-zero), with a fraction ``1 - density`` set to +0.0 at independent
    positions (masking/dropout-like zeros)."""
    rng = np.random.default_rng(seed)
    x = gelu(rng.standard_normal(n, dtype=np.float32))
    x[x == 0] = np.float32(1e-7)  # keep the non-zero fraction exactly as drawn
    x[rng.random(n, dtype=np.float32) >= density] = 0.0
    return x


def dense_rows(mib: int, repeats: int, zlib_repeats: int,
               seed: int) -> list[tuple[str, float, dict[str, tuple[float, float, float]]]]:
    """For each element type (float32, bfloat16) and density of :data:`DENSE_DENSITIES`:
    ``(type, density, {codec: (ratio, compress GB/s, decompress GB/s)})``, every codec's
    round trip checked bit-exact; ``"x.copy()"`` is the memory-copy reference (ratio 1)."""
    n = mib * (1 << 20) // 4
    rows = []
    for dtype in ("float32", "bfloat16"):
        for density in DENSE_DENSITIES:
            x = dense_activations(n, density, seed)
            element_type = None
            if dtype == "bfloat16":
                x, element_type = to_bfloat16_words(x), "bfloat16"
            cells: dict[str, tuple[float, float, float]] = {}
            for alg in codecs.ALGORITHMS:
                blob = codecs.compress(x, alg, element_type=element_type)
                if codecs.decompress(blob).view(x.dtype).tobytes() != x.tobytes():
                    raise SystemExit(f"{alg} {dtype}: round trip is not bit-exact")
                reps = zlib_repeats if alg == "zlib" else repeats
                tc, blob = best_time(
                    lambda a=alg: codecs.compress(x, a, element_type=element_type), reps)
                td, _ = best_time(lambda b=blob: codecs.decompress(b), reps)
                cells[alg] = (x.nbytes / len(blob), x.nbytes / tc / 1e9, x.nbytes / td / 1e9)
            tc, _ = best_time(x.copy, repeats)
            cells["x.copy()"] = (1.0, x.nbytes / tc / 1e9, x.nbytes / tc / 1e9)
            rows.append((dtype, density, cells))
    return rows


def print_dense_report(mib: int, repeats: int, zlib_repeats: int, seed: int) -> None:
    """Print :func:`dense_rows` as the two markdown tables of docs/codecs.md."""
    rows = dense_rows(mib, repeats, zlib_repeats, seed)
    names = list(codecs.ALGORITHMS)
    print(f"Input: {mib} MiB of float32 per tensor (bfloat16: the same values rounded, half "
          f"the bytes), GELU(N(0, 1)), seed {seed}; codec threads {num_threads()}.\n")
    print("Compression ratio (raw / stream bytes):\n")
    print("| type | density | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for dtype, density, cells in rows:
        print(f"| {dtype} | {density:.1f} | " +
              " | ".join(f"{cells[a][0]:.3f}" for a in names) + " |")
    print("\nThroughput, GB/s of uncompressed bytes, compress / decompress "
          f"(best of {repeats}, zlib {zlib_repeats}):\n")
    names.append("x.copy()")
    print("| type | density | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for dtype, density, cells in rows:
        print(f"| {dtype} | {density:.1f} | " +
              " | ".join(f"{cells[a][1]:.2f} / {cells[a][2]:.2f}" for a in names) + " |")


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
    ap.add_argument("--dense-report", action="store_true",
                    help="print the dense-activation tables of docs/codecs.md and exit")
    args = ap.parse_args(argv)
    if args.dense_report:
        print_dense_report(args.mib, args.repeats, args.zlib_repeats, args.seed)
        return 0
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

    times = {name: (tc, td) for name, tc, td, _ in rows}
    nc, nd = times["naive numpy zvc"]
    naive_ratio = next(ratio for name, _, _, ratio in rows if name == "naive numpy zvc")
    print(f"\n{'method':<22} {'compress':>10} {'GB/s':>7} {'decompress':>11} {'GB/s':>7} "
          f"{'ratio':>6}   vs naive: {'comp':>6} {'decomp':>6} {'ratio':>6}")
    for name, tc, td, ratio in rows:
        print(f"{name:<22} {tc * 1e3:>8.1f}ms {nbytes / tc / 1e9:>7.2f} {td * 1e3:>9.1f}ms "
              f"{nbytes / td / 1e9:>7.2f} {ratio:>6.3f}             {nc / tc:>5.2f}x "
              f"{nd / td:>5.2f}x {ratio / naive_ratio:>5.2f}x")
    zc, zd = times["sst_cdma zvc"]
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
