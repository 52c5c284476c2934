"""This checkout against another commit, measured in the same run: the main job's CPU and wall
time (a fresh ``sst topologies/pascal_cdma.py`` process, imports included; CPU is user + system
seconds from ``getrusage(RUSAGE_CHILDREN)``, steadier than wall time on a loaded machine) and
the event kernel's PHOLD rate (10x10 torus, events per second of the run loop).

Each tree is installed (not editable, without dependencies) into a fresh environment that sees
this one's dependencies, so both run the same way whatever their layout; the two then run
alternately, so the machine's noise falls on both alike. The figures are medians and the
ratios this / other.

    python benchmarks/bench_against_commit.py [--against REV] [--repeats 7] [--no-phold]

``REV`` (default ``HEAD~1``) is checked out into a temporary git worktree, removed after.
A time ratio above 1, or a PHOLD ratio below 1, means this checkout is slower. Where the two trees'
main-job outputs differ, the first differing line is printed.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep_against_commit import children_cpu_s  # noqa: E402
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

    def main_job(self) -> tuple[float, float, str]:
        """CPU seconds, wall seconds and standard output of one main-job process."""
        cpu0, t0 = children_cpu_s(), time.perf_counter()
        # the installed `sst` script: the same command whatever the tree's layout
        done = subprocess.run([str(Path(self.python).parent / "sst"),
                               str(self.source / "topologies" / "pascal_cdma.py")],
                              cwd=self.home, env=self.env, check=True, capture_output=True,
                              text=True)
        return children_cpu_s() - cpu0, time.perf_counter() - t0, done.stdout

    def phold_rate(self, limit: str) -> float:
        """PHOLD events per second of the run loop."""
        out = subprocess.run([self.python, "-c", PHOLD,
                              str(self.source / "topologies" / "phold_torus.py"), limit],
                             cwd=self.home, env=self.env, check=True, capture_output=True,
                             text=True)
        return float(out.stdout.strip().splitlines()[-1])


def measure(this: Tree, other: Tree, repeats: int, limit: str | None
            ) -> tuple[dict[str, list[float]], str]:
    """Alternate the two trees ``repeats`` times on each figure (PHOLD left out where ``limit``
    is None); with the figures, where the two main jobs' outputs first differ ("" if they do
    not: a commit may add a line, which is then no fault of the measurement)."""
    got: dict[str, list[float]] = {f"{figure}_{tree}": [] for figure in ("cpu", "wall", "phold")
                                   for tree in ("this", "other")}
    differ = ""
    for _ in range(repeats):
        outputs = {}
        for name, tree in (("other", other), ("this", this)):
            cpu, wall, outputs[name] = tree.main_job()
            got[f"cpu_{name}"].append(cpu)
            got[f"wall_{name}"].append(wall)
        differ = differ or first_difference(outputs["this"], outputs["other"])
        if limit is not None:
            got["phold_other"].append(other.phold_rate(limit))
            got["phold_this"].append(this.phold_rate(limit))
    return got, differ


def first_difference(this: str, other: str) -> str:
    """The first line where two outputs differ, as ``this: ... / other: ...`` ("" if none)."""
    for mine, theirs in itertools.zip_longest(this.splitlines(), other.splitlines()):
        if mine != theirs:
            return f"this: {mine!r} / other: {theirs!r}"
    return ""


def main() -> int:
    """Print both trees' medians and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="HEAD~1", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--time-limit", default="20us", help="PHOLD simulated time")
    ap.add_argument("--no-phold", action="store_true", help="the main job only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as checkout:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "b").mkdir()
        this, other = Tree(REPO, root / "a"), Tree(checkout, root / "b")
        got, differ = measure(this, other, args.repeats,
                              None if args.no_phold else args.time_limit)
    med = {k: statistics.median(v) for k, v in got.items() if v}
    print(f"against {args.against}, {args.repeats} alternating runs each (medians)")
    print("main job outputs: " + (f"differ, first at {differ}" if differ else "the same"))
    for figure, what in (("cpu", "main job CPU: "), ("wall", "main job wall:")):
        print(f"{what} this {med[f'{figure}_this']:.3f} s, other {med[f'{figure}_other']:.3f} s, "
              f"ratio {med[f'{figure}_this'] / med[f'{figure}_other']:.3f}")
    if "phold_this" in med:
        print(f"PHOLD rate:    this {med['phold_this']:,.0f} events/s, other "
              f"{med['phold_other']:,.0f} events/s, "
              f"ratio {med['phold_this'] / med['phold_other']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
