"""How the cost of the DGX H100 cluster topology grows with the ranks it simulates, every rank
simulated (``--simulate-every-rank``, no symmetry; docs/parallel.md, "Cost at scale"): Llama 3
8B split tp 8 x pp 2 over dp 4 to 64 replicas (64 to 1,024 GPUs), two micro-batches of 512
tokens, each size in a fresh process of its own (``bench_parallel.in_fresh_process``: its
peak memory is its own).

    python benchmarks/bench_parallel_scaling.py [--sizes 64,128,256,512,1024] [--repeats 1]

Prints, per size, the CPU and wall seconds of the run (imports left out; with ``--repeats N``
the run of least CPU time of N, each in its own process: on a machine others load, the
least-disturbed figure), the peak resident
memory and the memory per rank (the peak's growth over what the process held before the run,
over the ranks), then the exponent b of the least-squares fit of log(CPU s) = log(a) +
b log(ranks) over the sizes (``bench_scale.growth_exponent``). The issue's target: b <= 1.1.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parallel import in_fresh_process  # noqa: E402
from bench_scale import growth_exponent  # noqa: E402

SIZES = (64, 128, 256, 512, 1024)
#: tp x pp GPUs a replica; dp fills the size
TP, PP = 8, 2
OPTIONS = (f"--network llama3_8b --tp {TP} --pp {PP} --dp {{dp}} --micro-batches 2 --batch 1 "
           "--seq-len 512 --dtype bfloat16 --simulate-every-rank")
TARGET = 1.1


def sizes_of(text: str) -> list[int]:
    """``--sizes``: GPU counts, each two or more replicas of tp x pp GPUs (the summary lists
    the ranks of a data-parallel layout; ValueError naming the fault)."""
    sizes = [int(word) for word in text.split(",") if word.strip()]
    bad = [g for g in sizes if g < 2 * TP * PP or g % (TP * PP)]
    if bad or len(sizes) < 2:
        raise ValueError(f"--sizes {text!r}: give two or more GPU counts, each a multiple of "
                         f"tp x pp = {TP * PP} and at least {2 * TP * PP}"
                         + (f" ({bad[0]} is not)" if bad else ""))
    return sizes


def row(gpus: int, r: dict[str, Any]) -> str:
    """One size's line."""
    per_rank = 2**20 * (r["peak_rss_gib"] - r["base_rss_gib"]) / r["simulated"]
    return (f"{gpus:>6} {r['simulated']:>10} {r['cpu_s']:>8.2f} {r['wall_s']:>8.2f} "
            f"{1e3 * r['cpu_s'] / r['simulated']:>10.2f} {1024 * r['peak_rss_gib']:>9.0f} "
            f"{per_rank:>9.0f}")


def main(argv: Sequence[str] = ()) -> int:
    """Run each size, print its line and the fitted exponent."""
    ap = argparse.ArgumentParser(prog="bench_parallel_scaling.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated GPU counts (default: 64 to 1,024, doubling)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each size, the one of least CPU time kept (default: 1)")
    o = ap.parse_args(list(argv))
    if o.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {o.repeats}")
    try:
        sizes = sizes_of(o.sizes)
    except ValueError as exc:
        ap.error(str(exc))
    print(f"{OPTIONS.format(dp='N')} (N = GPUs / {TP * PP})")
    print(f"{'GPUs':>6} {'simulated':>10} {'CPU s':>8} {'wall s':>8} {'CPU ms/rank':>10} "
          f"{'peak MiB':>9} {'KiB/rank':>9}")
    cpu: list[float] = []
    for gpus in sizes:
        runs = [in_fresh_process(OPTIONS.format(dp=gpus // (TP * PP)))
                for _ in range(o.repeats)]
        failed = next((r for r in runs if "error" in r), None)
        if failed is not None:
            print(f"{gpus:>6} failed: {failed['error']}")
            return 1
        r = min(runs, key=lambda run: run["cpu_s"])
        cpu.append(r["cpu_s"])
        print(row(gpus, r), flush=True)
    b = growth_exponent(sizes, cpu)
    print(f"growth exponent of CPU time over {sizes[0]}-{sizes[-1]} ranks: {b:.2f} (target "
          f"<= {TARGET}: {'met' if b <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
