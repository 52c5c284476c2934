"""The planner of ``--policy auto``, this checkout against another commit, measured in the same
run: the CPU time (of the whole process tree) of one ``--policy auto`` GPT-2 XL point of
``sweeps/today.yaml`` (``sst``, a fresh process, imports included) and, with ``--sweep``, of a
cold ``sst-cdma sweep sweeps/today.yaml``.

    python benchmarks/bench_planner_against_commit.py [--against 7ebb46f] [--repeats 3]
        [--topology hopper_pcie5_cdma.py] [--algorithm zvc] [--sweep] [--workers 2]

``REV`` is checked out into a temporary git worktree, removed after; each tree is installed alike
(not editable, without dependencies) into a fresh environment that sees this one's dependencies,
and runs from a folder outside it (``bench_against_commit.Tree``). The two run
alternately, other first, so the machine's noise falls on both alike; every run writes to a
fresh folder (cold). CPU time is user plus system time of the process and every process it
waited for (``RUSAGE_CHILDREN``): on a machine others load too, wall time mostly measures them.
The figures are medians and the ratios this / other (below 1: this checkout is faster). The
outputs must be the same in both trees, byte for byte: every file the point writes (summary,
streams, statistics) and its console, and the sweep's results table but for its wall-time
columns and its point keys (digests of each tree's sources). Against a commit whose reports
read otherwise (a reworded line) the outputs differ for that alone: compare the results
against the commit this checkout starts from.
"""
from __future__ import annotations

import argparse
import csv
import io
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_against_commit import Tree  # noqa: E402
from bench_pricing_against_commit import TIMING, _first_difference  # noqa: E402
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the options ``sweeps/today.yaml`` gives every point, and its auto policy
POINT = ("--network", "gpt2_xl", "--batch", "32", "--seq-len", "1024", "--attention", "fused",
         "--dtype", "bfloat16", "--optimizer", "adam", "--policy", "auto")
#: the targets of issue 35, this / other
TARGETS = {"point": 0.3, "sweep": 0.5}


def _cpu_run(tree: Tree, argv: list[str]) -> tuple[float, str]:
    """CPU seconds (the process and its children, user + system) and the stdout of ``ARGV``
    run in ``tree``'s environment, from its folder."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=tree.home, env=tree.env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{tree.source}: {' '.join(argv[:3])} ... failed "
                         f"(status {done.returncode}): {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stdout


def _folder_text(folder: Path) -> str:
    """Every file under ``folder``, name and bytes, in one text to compare."""
    return "\n".join(f"== {p.relative_to(folder)}\n{p.read_text(errors='replace')}"
                     for p in sorted(folder.rglob("*")) if p.is_file())


def point(tree: Tree, out: Path, topology: str, algorithm: str) -> tuple[float, str]:
    """One ``--policy auto`` point of ``sweeps/today.yaml``: its CPU seconds, and its console
    and output files as one text."""
    sst = str(Path(tree.python).parent / "sst")  # the installed script, whatever the layout
    cpu, console = _cpu_run(tree, [sst, str(tree.source / "topologies" / topology),
                                   "--output-directory", str(out), "--", *POINT,
                                   "--algorithm", algorithm])
    return cpu, console + _folder_text(out)


def _table(folder: Path) -> str:
    """The sweep's results table without the columns that time the run or name the tree
    (``key``: a digest of the package's sources, other in every tree)."""
    with open(folder / "results.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, name in enumerate(rows[0])
            if name != "key" and not any(t in name for t in TIMING)]
    out = io.StringIO()
    csv.writer(out).writerows([[row[i] for i in keep] for row in rows])
    return out.getvalue()


def sweep(tree: Tree, out: Path, workers: int) -> tuple[float, str]:
    """A cold ``sst-cdma sweep sweeps/today.yaml``: its CPU seconds and its results table."""
    cpu, _ = _cpu_run(tree, [tree.python, "-m", "sst_cdma", "sweep",
                             str(tree.source / "sweeps" / "today.yaml"),
                             "--output", str(out), "--workers", str(workers),
                             "--no-progress"])
    return cpu, _table(out)


def main() -> int:
    """Print both trees' medians, the ratios and whether the outputs agree."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="7ebb46f", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--topology", default="hopper_pcie5_cdma.py")
    ap.add_argument("--algorithm", default="zvc")
    ap.add_argument("--sweep", action="store_true", help="also a cold sweeps/today.yaml")
    ap.add_argument("--sweep-repeats", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2, help="sweep workers")
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as checkout:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "b").mkdir()
        this, other = Tree(REPO, root / "a"), Tree(checkout, root / "b")
        jobs = [("point", i, lambda tree, out: point(tree, out, args.topology, args.algorithm))
                for i in range(args.repeats)]
        if args.sweep:
            jobs += [("sweep", i, lambda tree, out: sweep(tree, out, args.workers))
                     for i in range(args.sweep_repeats)]
        for what, i, job in jobs:
            got = {}
            for side, tree in (("other", other), ("this", this)):
                cpu, got[side] = job(tree, root / f"{what}_{side}_{i}")
                times.setdefault(f"{what}_{side}", []).append(cpu)
                print(f"{what} {i + 1} {side}: {cpu:.2f} CPU-s", flush=True)
            same[what] = same.get(what, True) and got["this"] == got["other"]
            if got["this"] != got["other"]:
                _first_difference(what, got["other"], got["this"])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"against {args.against}, alternating runs (medians of CPU time, user + system, "
          "the process tree)")
    for what, target in TARGETS.items():
        if f"{what}_this" in med:
            ratio = med[f"{what}_this"] / med[f"{what}_other"]
            print(f"{what:5s}: this {med[f'{what}_this']:.2f} s, other "
                  f"{med[f'{what}_other']:.2f} s, ratio {ratio:.3f} (target <= {target}), "
                  f"outputs {'identical' if same[what] else 'DIFFER'}")
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
