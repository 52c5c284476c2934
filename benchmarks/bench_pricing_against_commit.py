"""Kernel pricing, this checkout against another commit, measured in the same run: the wall time
of ``sst-cdma calibrate --check`` (a fit: the same calibration sets priced at many constants)
and of a cold ``sst-cdma sweep sweeps/today.yaml`` (GPT-2 XL points, many of which run out of
GPU memory and reprice their layers, beside their baselines), each in a fresh process.

    python benchmarks/bench_pricing_against_commit.py [--against main] [--repeats 1]
        [--workers 2] [--skip calibrate|sweep]

``REV`` (default ``HEAD~1``) is checked out into a temporary git worktree, removed after; each
tree runs from its own folder with ``PYTHONPATH`` pointing at it. The two run alternately,
other first, so the machine's noise falls on both alike; each sweep writes to a fresh folder
(cold: no cached point). The figures are medians and the ratios this / other (below 1: this
checkout is faster). The outputs are compared too: ``calibrate --check``'s report and the
sweep's results table must be the same in both trees, byte for byte, but for the sweep's
wall-time columns.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: results-table columns that time the run rather than say what it simulated
TIMING = ("wall_s",)


def _run(tree: Path, args: list[str]) -> tuple[float, str]:
    """Wall seconds and the output (stdout and stderr) of ``sst-cdma ARGS`` from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    # ``python -m sst_cdma`` is sst-cdma in every layout of the package
    done = subprocess.run([sys.executable, "-m", "sst_cdma", *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    return time.perf_counter() - t0, done.stdout + done.stderr


def _table(folder: Path) -> str:
    """The sweep's results table without the columns that time the run."""
    with open(folder / "results.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, name in enumerate(rows[0]) if not any(t in name for t in TIMING)]
    out = io.StringIO()
    csv.writer(out).writerows([[row[i] for i in keep] for row in rows])
    return out.getvalue()


def _first_difference(what: str, other: str, this: str) -> None:
    """Print the first line where the two trees' ``what`` outputs differ."""
    pairs = zip(other.splitlines() + [""], this.splitlines() + [""])
    line, (a, b) = next((i, p) for i, p in enumerate(pairs, 1) if p[0] != p[1])
    print(f"{what} differs, line {line}:\n  other: {a}\n  this:  {b}")


def main() -> int:
    """Print both trees' medians, the ratios and whether the outputs agree."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="HEAD~1", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2, help="sweep workers")
    ap.add_argument("--skip", choices=("calibrate", "sweep"), action="append", default=[])
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as other:
        root = Path(tmp)
        for i in range(args.repeats):
            for side, tree in (("other", other), ("this", REPO)):
                outputs = {}
                if "calibrate" not in args.skip:
                    s, outputs["calibrate"] = _run(tree, ["calibrate", "--check"])
                    times.setdefault(f"calibrate_{side}", []).append(s)
                if "sweep" not in args.skip:
                    folder = root / f"sweep_{side}_{i}"
                    s, _ = _run(tree, ["sweep", str(tree / "sweeps" / "today.yaml"),
                                       "--output", str(folder), "--workers",
                                       str(args.workers), "--no-progress"])
                    times.setdefault(f"sweep_{side}", []).append(s)
                    outputs["sweep"] = _table(folder)
                if side == "other":
                    first = outputs
                else:
                    for key, text in outputs.items():
                        same[key] = same.get(key, True) and text == first[key]
                        if text != first[key]:
                            _first_difference(key, first[key], text)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"against {args.against}, {args.repeats} alternating run(s) each (medians)")
    for what, target in (("calibrate", 0.4), ("sweep", 0.5)):
        if f"{what}_this" in med:
            ratio = med[f"{what}_this"] / med[f"{what}_other"]
            print(f"{what:9s}: this {med[f'{what}_this']:.1f} s, other "
                  f"{med[f'{what}_other']:.1f} s, ratio {ratio:.3f} (target <= {target}), "
                  f"outputs {'identical' if same[what] else 'DIFFER'}")
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
