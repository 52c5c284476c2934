"""``sst topologies/dgx1_cdma.py -- --gpus 1024`` (128 DGX-1 nodes of eight P100s), this checkout
against another commit, measured in the same run: this checkout simulates node 0 alone and
reports every node with its figures (docs/topologies.md, "Identical nodes"); a commit before
that simulates all 128.

    python benchmarks/bench_dgx1_nodes.py [--against 7ebb46f] [--repeats 3] [--gpus 1024]

``REV`` (default ``7ebb46f``, the commit issue #32 measures against) is checked out into a
temporary git worktree, removed after; each tree is installed alike (not editable, without
dependencies) into a fresh environment that sees this one's dependencies and runs from a
folder outside it (``bench_against_commit.Tree``). The two run alternately, other first, so
the machine's load falls on both alike. CPU time is user plus system time of the ``sst``
process (``RUSAGE_CHILDREN``), imports included; the figures are medians and the ratio this /
other (target: at most 0.3). The consoles of every pair of runs are compared: every line of
the other's (each GPU's iteration and stall among them) must be in this checkout's, in order
(a later commit adds a hint line), and one further run of each tree with an output
folder (not timed) compares each GPU's entry of ``summary.json``, every figure both trees
write (a later commit may add keys; those are counted, not compared).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_against_commit import Tree  # noqa: E402
from bench_planner_against_commit import _cpu_run  # noqa: E402
from commit_tree import other_tree  # noqa: E402

TARGET = 0.3


def command(tree: Tree, gpus: int, *sst_options: str) -> list[str]:
    """``sst [SST_OPTIONS] TREE/topologies/dgx1_cdma.py -- --gpus N`` with ``tree``'s
    installed ``sst``."""
    return [str(Path(tree.python).parent / "sst"), *sst_options,
            str(tree.source / "topologies" / "dgx1_cdma.py"), "--", "--gpus", str(gpus)]


def per_gpu(tree: Tree, gpus: int, out: Path) -> list[dict[str, Any]]:
    """Each GPU's entry of the summary of one run with an output folder."""
    _cpu_run(tree, command(tree, gpus, "--output-directory", str(out)))
    entries: list[dict[str, Any]] = json.loads(
        (out / "summary.json").read_text(encoding="utf-8"))["gpus"]
    return entries


def compare_consoles(this: str, other: str) -> tuple[bool, str]:
    """Whether every line of the other tree's console is in this one's, in order (a later
    commit may add a line, such as a hint), and one line saying so and what this one adds."""
    mine = iter(this.splitlines())
    for line in other.splitlines():
        if not any(line == candidate for candidate in mine):
            return False, f"consoles: DIFFER, the other's line {line!r} is not in this one's"
    added = len(this.splitlines()) - len(other.splitlines())
    return True, (f"consoles: every line of the other's in this one's, in order; this one adds "
                  f"{added} line(s)")


def compare_entries(this: list[dict[str, Any]], other: list[dict[str, Any]]) -> str:
    """One line: how many GPUs and figures were compared and whether they agree (the first
    difference where not)."""
    if len(this) != len(other):
        return f"per-GPU summaries: DIFFER, {len(this)} GPUs here, {len(other)} there"
    figures, only_here = 0, set()
    for mine, theirs in zip(this, other):
        for key in sorted(set(mine) & set(theirs)):
            figures += 1
            if mine[key] != theirs[key]:
                return (f"per-GPU summaries: DIFFER, first at {mine.get('gpu')} {key}: "
                        f"{mine[key]!r} here, {theirs[key]!r} there")
        only_here |= set(mine) - set(theirs)
    extra = f"; keys only this checkout writes: {', '.join(sorted(only_here))}" \
        if only_here else ""
    return f"per-GPU summaries: identical, {len(this)} GPUs, {figures:,} figures{extra}"


def main(argv: list[str] | None = None) -> int:
    """Alternate the two trees, print the medians, the ratio and whether the results agree."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="7ebb46f", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gpus", type=int, default=1024)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {"this": [], "other": []}
    consoles = (True, "")
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as checkout:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "b").mkdir()
        trees = {"other": Tree(checkout, root / "b"), "this": Tree(Path(__file__).resolve()
                                                                    .parents[1], root / "a")}
        for i in range(args.repeats):
            console = {}
            for side, tree in trees.items():
                cpu, console[side] = _cpu_run(tree, command(tree, args.gpus))
                times[side].append(cpu)
                print(f"run {i + 1} {side}: {cpu:.2f} CPU-s", flush=True)
            if consoles[0]:
                consoles = compare_consoles(console["this"], console["other"])
        entries = {side: per_gpu(tree, args.gpus, root / f"out_{side}")
                   for side, tree in trees.items()}
    med = {side: statistics.median(v) for side, v in times.items()}
    ratio = med["this"] / med["other"]
    print(f"dgx1_cdma.py --gpus {args.gpus} against {args.against}, {args.repeats} alternating "
          "runs each (medians of CPU time, user + system, imports included)")
    print(f"this {med['this']:.2f} s, other {med['other']:.2f} s, ratio {ratio:.3f} "
          f"(target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'})")
    summaries = compare_entries(entries["this"], entries["other"])
    print(consoles[1])
    print(summaries)
    return 0 if consoles[0] and "identical" in summaries else 1


if __name__ == "__main__":
    sys.exit(main())
