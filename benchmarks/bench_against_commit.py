"""This checkout against another commit, measured in the same run: the main job's wall time
(a fresh ``sst topologies/pascal_cdma.py`` process, imports included) and the event kernel's
PHOLD rate (10x10 torus, events per second of the run loop).

Each tree is installed (not editable, without dependencies) into a fresh environment that sees
this one's dependencies, so both run the same way whatever their layout; the two then run
alternately, so the machine's noise falls on both alike. The figures are medians and the
ratios this / other.

    python benchmarks/bench_against_commit.py [--against REV] [--repeats 7]

``REV`` (default ``HEAD~1``) is checked out into a temporary git worktree, removed after.
A wall-time ratio above 1, or a PHOLD ratio below 1, means this checkout is slower.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

PHOLD = """
import io, sys
from sst_cdma import run
r = run(sys.argv[1], ["--size", "10", "--events", "4", "--time-limit", sys.argv[2]],
        console=io.StringIO())
print(r.events / r.timing["run_s"])
"""


class Tree:
    """One source tree installed into its own environment, run from a folder outside it."""

    def __init__(self, source: Path, home: Path) -> None:
        self.source = source
        self.home = home
        venv.create(home / "env", system_site_packages=True, with_pip=False)
        self.python = str(home / "env" / "bin" / "python")
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, "-m", "pip", "--python", self.python, "install", "-q",
                        "--no-deps", "--no-build-isolation", "--no-index", str(source)],
                       check=True, capture_output=True, env=self.env)

    def main_job_s(self) -> float:
        """Wall seconds of one main-job process."""
        t0 = time.perf_counter()
        # the installed `sst` script: the same command whatever the tree's layout
        subprocess.run([str(Path(self.python).parent / "sst"),
                        str(self.source / "topologies" / "pascal_cdma.py")], cwd=self.home,
                       env=self.env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0

    def phold_rate(self, limit: str) -> float:
        """PHOLD events per second of the run loop."""
        out = subprocess.run([self.python, "-c", PHOLD,
                              str(self.source / "topologies" / "phold_torus.py"), limit],
                             cwd=self.home, env=self.env, check=True, capture_output=True,
                             text=True)
        return float(out.stdout.strip().splitlines()[-1])


def measure(this: Tree, other: Tree, repeats: int, limit: str) -> dict[str, list[float]]:
    """Alternate the two trees ``repeats`` times on each figure."""
    got: dict[str, list[float]] = {k: [] for k in ("job_this", "job_other", "phold_this",
                                                   "phold_other")}
    for _ in range(repeats):
        got["job_other"].append(other.main_job_s())
        got["job_this"].append(this.main_job_s())
        got["phold_other"].append(other.phold_rate(limit))
        got["phold_this"].append(this.phold_rate(limit))
    return got


def main() -> int:
    """Print both trees' medians and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="HEAD~1", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--time-limit", default="20us", help="PHOLD simulated time")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as checkout:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "b").mkdir()
        this, other = Tree(REPO, root / "a"), Tree(checkout, root / "b")
        got = measure(this, other, args.repeats, args.time_limit)
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"against {args.against}, {args.repeats} alternating runs each (medians)")
    print(f"main job wall:  this {med['job_this']:.3f} s, other {med['job_other']:.3f} s, "
          f"ratio {med['job_this'] / med['job_other']:.3f}")
    print(f"PHOLD rate:     this {med['phold_this']:,.0f} events/s, other "
          f"{med['phold_other']:,.0f} events/s, ratio {med['phold_this'] / med['phold_other']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
