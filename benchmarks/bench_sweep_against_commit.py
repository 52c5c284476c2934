"""A cold sweep, this checkout against another commit, measured in the same run: the CPU time
of the whole process tree of ``sst-cdma sweep SPEC`` (the command, and every worker or cluster
process it started and waited for: user + system seconds from ``getrusage(RUSAGE_CHILDREN)``)
and its wall time, each run in a fresh process writing to a fresh folder (no cached point).

    python benchmarks/bench_sweep_against_commit.py [--against 7ebb46f] [--repeats 3]
        [--spec sweeps/paper.yaml] [--workers 2] [--this-option=--executor=dask]

``REV`` (default ``7ebb46f``, the commit issue #35 measures against) is checked out into a
temporary git worktree, removed after; each tree runs from its own folder with ``PYTHONPATH``
pointing at it, on its own copy of ``SPEC`` (a path relative to the tree). The two run
alternately, other first, so the machine's load falls on both alike; the figures are medians
and the ratios this / other (below 1: this checkout is cheaper). ``--this-option`` adds an
option to this checkout's command only (``--executor=dask``: this tree's Dask path against
the other). The results tables are compared too: ``results.csv`` must hold the same rows in
both trees but for the ``key`` column (a point's key hashes the model's source, which differs
between commits).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the results-table columns that differ between commits whatever the simulation (the key
#: hashes the model's source files)
UNCOMPARED = ("key",)


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's waited-for children (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_sweep(tree: Path, spec: str, output: Path, options: list[str]) -> tuple[float, float]:
    """CPU seconds of the process tree and wall seconds of one cold ``sst-cdma sweep``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    cpu0, t0 = children_cpu_s(), time.perf_counter()
    # ``python -m sst_cdma`` is sst-cdma in every layout of the package
    done = subprocess.run([sys.executable, "-m", "sst_cdma", "sweep", str(tree / spec),
                           "--output", str(output), "--no-progress", *options], cwd=tree,
                          env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu_s() - cpu0
    if done.returncode:  # a command that fails is not a measurement
        raise SystemExit(f"{tree}: sst-cdma sweep exited {done.returncode}: "
                         f"{(done.stderr.strip().splitlines() or [''])[-1]}")
    return cpu, wall


def comparable_table(folder: Path) -> str:
    """``results.csv`` without the :data:`UNCOMPARED` columns."""
    with open(folder / "results.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, name in enumerate(rows[0]) if name not in UNCOMPARED]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([[row[i] for i in keep] for row in rows])
    return out.getvalue()


def main() -> int:
    """Print both trees' medians, the ratios and whether the tables agree."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="7ebb46f", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", default="sweeps/paper.yaml", help="spec, relative to each tree")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--this-option", action="append", default=[], metavar="OPTION",
                    help="an option for this checkout's command only (repeatable)")
    args = ap.parse_args()
    got: dict[str, list[float]] = {}
    same = True
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as other:
        for i in range(args.repeats):
            tables = {}
            for side, tree, extra in (("other", other, []), ("this", REPO, args.this_option)):
                folder = Path(tmp) / f"{side}_{i}"
                cpu, wall = timed_sweep(tree, args.spec, folder,
                                        ["--workers", str(args.workers), *extra])
                got.setdefault(f"cpu_{side}", []).append(cpu)
                got.setdefault(f"wall_{side}", []).append(wall)
                tables[side] = comparable_table(folder)
                print(f"run {i + 1} {side:5s}: {cpu:6.2f} CPU-s, {wall:6.2f} s wall", flush=True)
            same = same and tables["this"] == tables["other"]
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"{args.spec} cold, --workers {args.workers}{' ' if args.this_option else ''}"
          f"{' '.join(args.this_option)} against {args.against}, {args.repeats} alternating "
          "run(s) each (medians, CPU of the whole process tree)")
    for what, unit in (("cpu", "CPU-s"), ("wall", "s wall")):
        print(f"{what:4s}: this {med[f'{what}_this']:.2f} {unit}, other "
              f"{med[f'{what}_other']:.2f} {unit}, ratio "
              f"{med[f'{what}_this'] / med[f'{what}_other']:.3f}")
    print(f"results.csv (but for {', '.join(UNCOMPARED)}): {'identical' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
