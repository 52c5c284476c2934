"""``sst-cdma calibrate --check``, this checkout against another commit, measured in the same run:
the CPU time (user + system) of the whole process tree of each run, a fresh process each time.

    python benchmarks/bench_calibrate_check.py [--against 7ebb46f] [--repeats 5]

``REV`` is checked out into a temporary git worktree, removed after; each tree runs from its own
folder with ``PYTHONPATH`` pointing at it (``python -m sst_cdma``: sst-cdma in every layout of
the package), so both run alike. The two run alternately, other first, so the machine's noise
falls on both alike. The figures are medians and the ratio this / other (below 1: this checkout
is faster). Each run must pass (exit 0: the committed constants are the refit's) and print the
same report in both trees, byte for byte: a command that fails is not a measurement.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the command measured, after ``sst-cdma``
COMMAND = ("calibrate", "--check")


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every child process waited for so far, theirs included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(tree: Path, command: Sequence[str] = COMMAND) -> tuple[float, int, str]:
    """CPU seconds of the process tree of one ``sst-cdma COMMAND`` run from ``tree``, its exit
    status and its output (stdout, then stderr) with the tree's path taken out."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = children_cpu_s()
    done = subprocess.run([sys.executable, "-m", "sst_cdma", *command], cwd=tree, env=env,
                          capture_output=True, text=True)
    cpu = children_cpu_s() - before
    return cpu, done.returncode, (done.stdout + done.stderr).replace(str(tree), "TREE")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print both trees' median CPU seconds and the ratio; exit 1 when a run fails or the
    reports differ."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="7ebb46f", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=5, help="alternating runs of each tree")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats: must be at least 1, got {args.repeats}")
    cpu: dict[str, list[float]] = {"other": [], "this": []}
    reports: dict[str, set[str]] = {"other": set(), "this": set()}
    with other_tree(args.against) as other:
        for _ in range(args.repeats):
            for side, tree in (("other", other), ("this", REPO)):
                seconds, status, report = run_once(tree)
                if status:
                    print(f"{side} ({tree}): sst-cdma {' '.join(COMMAND)} exited {status}:\n"
                          f"{report}", file=sys.stderr)
                    return 1
                cpu[side].append(seconds)
                reports[side].add(report)
    med = {side: statistics.median(v) for side, v in cpu.items()}
    same = reports["this"] == reports["other"] and len(reports["this"]) == 1
    print(f"sst-cdma {' '.join(COMMAND)} against {args.against}, {args.repeats} alternating "
          f"run(s) each, CPU of the process tree (medians)")
    print("other: " + " ".join(f"{s:.2f}" for s in cpu["other"]) + f" s, median {med['other']:.2f} s")
    print("this:  " + " ".join(f"{s:.2f}" for s in cpu["this"]) + f" s, median {med['this']:.2f} s")
    print(f"ratio this / other: {med['this'] / med['other']:.3f}; reports "
          f"{'identical' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
