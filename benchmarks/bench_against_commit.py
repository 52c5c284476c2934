"""This checkout against another commit, measured in the same run: the main job's wall time
(a fresh ``sst topologies/pascal_cdma.py`` process, imports included) and the event kernel's
PHOLD rate (10x10 torus, events per second of the run loop). Both trees run alternately, so
the machine's noise falls on both alike; the figures are medians and the ratios this / other.

    python benchmarks/bench_against_commit.py [--against REV] [--repeats 7]

``REV`` (default ``HEAD~1``) is checked out into a temporary git worktree, removed after.
A ratio above 1 for wall time, or below 1 for the PHOLD rate, means this checkout is slower.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PHOLD = """
import io, sys
from sst_cdma.runner import run
r = run("topologies/phold_torus.py", ["--size", "10", "--events", "4", "--time-limit", "{limit}"],
        console=io.StringIO())
print(r.events / r.timing["run_s"])
"""


def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree))


def main_job_s(tree: Path) -> float:
    """Wall seconds of one main-job process in ``tree``."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sst_cdma.cli.sst_main", "topologies/pascal_cdma.py"],
                   cwd=tree, env=_env(tree), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def phold_rate(tree: Path, limit: str) -> float:
    """PHOLD events per second of the run loop in ``tree``."""
    out = subprocess.run([sys.executable, "-c", PHOLD.format(limit=limit)], cwd=tree,
                         env=_env(tree), check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(this: Path, other: Path, repeats: int, limit: str) -> dict[str, list[float]]:
    """Alternate the two trees ``repeats`` times on each figure."""
    got: dict[str, list[float]] = {k: [] for k in ("job_this", "job_other", "phold_this",
                                                   "phold_other")}
    for _ in range(repeats):
        got["job_other"].append(main_job_s(other))
        got["job_this"].append(main_job_s(this))
        got["phold_other"].append(phold_rate(other, limit))
        got["phold_this"].append(phold_rate(this, limit))
    return got


def main() -> int:
    """Print both trees' medians and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="HEAD~1", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--time-limit", default="20us", help="PHOLD simulated time")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), args.against],
                       cwd=REPO, check=True)
        try:
            got = measure(REPO, other, args.repeats, args.time_limit)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=REPO,
                           check=False)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"against {args.against}, {args.repeats} alternating runs each (medians)")
    print(f"main job wall:  this {med['job_this']:.3f} s, other {med['job_other']:.3f} s, "
          f"ratio {med['job_this'] / med['job_other']:.3f}")
    print(f"PHOLD rate:     this {med['phold_this']:,.0f} events/s, other "
          f"{med['phold_other']:,.0f} events/s, ratio {med['phold_this'] / med['phold_other']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
