"""A cold sweep, this checkout against another commit, measured in the same run: the CPU time
of the whole process tree of ``sst-cdma sweep SPEC`` (the command, and every worker or cluster
process it started and waited for: user + system seconds from ``getrusage(RUSAGE_CHILDREN)``)
and its wall time, each run in a fresh process writing to a fresh folder (no cached point).

    python benchmarks/bench_sweep_against_commit.py [--against 7ebb46f] [--repeats 3]
        [--spec sweeps/paper.yaml] [--workers 2] [--this-option=--executor=dask] [--bytecode]

``REV`` (default ``7ebb46f``, the commit issue #35 measures against) is checked out into a
temporary git worktree, removed after; each tree runs from its own folder with ``PYTHONPATH``
pointing at it, on its own copy of ``SPEC`` (a path relative to the tree). The two run
alternately, other first, so the machine's load falls on both alike; the figures are medians
and the ratios this / other (below 1: this checkout is cheaper). ``--this-option`` adds an
option to this checkout's command only (``--executor=dask``: this tree's Dask path against
the other). Where ``PYTHONDONTWRITEBYTECODE`` is set and a tree holds no bytecode, each run
compiles every module it imports from that tree from source, a cost both trees pay alike;
``--bytecode`` compiles both trees' packages first (``compileall``, into their
``__pycache__`` folders), as installing them would, and removes from this checkout after the
runs the bytecode files it wrote. The results tables are compared too: ``results.csv`` must hold the same rows in
both trees but for the ``key`` column (a point's key hashes the model's source, which differs
between commits); a tree that writes each GPU's figures as rows of ``gpus.csv`` is compared
with one that wrote them as ``gpus.<N>.*`` columns of ``results.csv`` figure by figure (empty
cells left out, numbers compared as numbers: ``3`` and ``3.0`` are one figure). The size of
each table file of each tree's last run is printed too.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: the results-table columns that differ between commits whatever the simulation (the key
#: hashes the model's source files)
UNCOMPARED = ("key",)
#: the per-GPU table a tree may write beside results.csv, and its column naming the GPU
GPU_TABLE, GPU_COLUMN = "gpus.csv", "gpu"
#: the table files whose sizes are printed
TABLE_FILES = ("results.csv", "results.parquet", "gpus.csv", "gpus.parquet")


#: the folders of a tree whose modules a sweep imports
PACKAGES = ("sst_cdma", "components", "workloads", "topologies")


@contextlib.contextmanager
def compiled(trees: list[Path]) -> Iterator[None]:
    """Write the bytecode of each tree's packages (``__pycache__``), as an install does; on
    leaving, remove the bytecode files that were not there before."""
    sources = [source for tree in trees for name in PACKAGES if (tree / name).is_dir()
               for source in (tree / name).rglob("*.py")]
    new = [Path(importlib.util.cache_from_source(str(source))) for source in sources]
    new = [path for path in new if not path.exists()]
    try:
        subprocess.run([sys.executable, "-m", "compileall", "-q",
                        *(str(tree / name) for tree in trees for name in PACKAGES
                          if (tree / name).is_dir())], check=True, capture_output=True)
        yield
    finally:
        for path in new:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # the folder, where it is now empty
                path.parent.rmdir()


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


def _cell(text: str) -> str:
    """A cell as compared: a number by its float value (``3`` and ``3.0`` alike), text as is."""
    try:
        return repr(float(text))
    except ValueError:
        return text


def _is_lead(column: str) -> bool:
    """Whether a column of the GPU table repeats its point's (``point``, ``key``, parameters)."""
    return column in ("point", "key", "topology") or column.startswith(("opt.", "param."))


def comparable_table(folder: Path) -> dict[str, dict[str, str]]:
    """Each point's figures (by its ``point``): the cells of ``results.csv`` less the
    :data:`UNCOMPARED` columns and the empty cells, with the rows of ``gpus.csv`` (where the
    tree wrote one) as ``gpus.<N>.<field>`` (a field the GPU table prefixes ``summary.`` for
    colliding with a lead column, by its own name)."""
    with open(folder / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    table = {row["point"]: {k: _cell(v) for k, v in row.items() if k not in UNCOMPARED and v}
             for row in rows}
    if (folder / GPU_TABLE).exists():
        with open(folder / GPU_TABLE, newline="") as fh:
            for row in csv.DictReader(fh):
                point, gpu = table[row["point"]], row[GPU_COLUMN]
                for field, value in row.items():
                    if _is_lead(field) or field == GPU_COLUMN or not value:
                        continue
                    name = field[len("summary."):] if field.startswith("summary.") and (
                        _is_lead(field[len("summary."):]) or
                        field[len("summary."):] == GPU_COLUMN) else field
                    point[f"gpus.{gpu}.{name}"] = _cell(value)
    return table


def _shape(path: Path) -> str:
    """`` (8 rows x 227 columns)`` for a CSV table, nothing for another file."""
    if path.suffix != ".csv":
        return ""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return f" ({len(rows) - 1} rows x {len(rows[0]) if rows else 0} columns)"


def table_sizes(folder: Path) -> str:
    """The sizes of the table files in ``folder`` (and the shapes of the CSV ones):
    ``results.csv 12,345 B (8 rows x 227 columns), ...``."""
    return ", ".join(f"{name} {(folder / name).stat().st_size:,} B{_shape(folder / name)}"
                     for name in TABLE_FILES if (folder / name).exists())


def main() -> int:
    """Print both trees' medians, the ratios and whether the tables agree."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="7ebb46f", help="git revision to compare with")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", default="sweeps/paper.yaml", help="spec, relative to each tree")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--this-option", action="append", default=[], metavar="OPTION",
                    help="an option for this checkout's command only (repeatable)")
    ap.add_argument("--bytecode", action="store_true",
                    help="compile both trees' packages first, as an install does")
    args = ap.parse_args()
    got: dict[str, list[float]] = {}
    sizes: dict[str, str] = {}
    same = True
    with tempfile.TemporaryDirectory() as tmp, other_tree(args.against) as other, \
            compiled([other, REPO] if args.bytecode else []):
        for i in range(args.repeats):
            tables = {}
            for side, tree, extra in (("other", other, []), ("this", REPO, args.this_option)):
                folder = Path(tmp) / f"{side}_{i}"
                cpu, wall = timed_sweep(tree, args.spec, folder,
                                        ["--workers", str(args.workers), *extra])
                got.setdefault(f"cpu_{side}", []).append(cpu)
                got.setdefault(f"wall_{side}", []).append(wall)
                tables[side] = comparable_table(folder)
                sizes[side] = table_sizes(folder)
                print(f"run {i + 1} {side:5s}: {cpu:6.2f} CPU-s, {wall:6.2f} s wall", flush=True)
            same = same and tables["this"] == tables["other"]
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"{args.spec} cold, --workers {args.workers}{' ' if args.this_option else ''}"
          f"{' '.join(args.this_option)} against {args.against}, {args.repeats} alternating "
          "run(s) each (medians, CPU of the whole process tree"
          f"{'; both trees compiled first' if args.bytecode else ''})")
    for what, unit in (("cpu", "CPU-s"), ("wall", "s wall")):
        print(f"{what:4s}: this {med[f'{what}_this']:.2f} {unit}, other "
              f"{med[f'{what}_other']:.2f} {unit}, ratio "
              f"{med[f'{what}_this'] / med[f'{what}_other']:.3f}")
    for side in ("this", "other"):
        print(f"tables, {side}: {sizes.get(side, '')}")
    print(f"results (but for {', '.join(UNCOMPARED)}; per-GPU figures in either layout): "
          f"{'identical' if same else 'DIFFER'}")
    if not same and len(tables) == 2:
        print(f"columns that differ: {differing_columns(tables['this'], tables['other'])}")
    return 0 if same else 1


def differing_columns(this: dict[str, dict[str, str]], other: dict[str, dict[str, str]],
                      most: int = 8) -> str:
    """The columns whose cells differ between two :func:`comparable_table` tables (a per-GPU
    column ``gpus.<N>.<field>`` as ``gpus.*.<field>``), at most ``most`` of them named."""
    names: dict[str, None] = {}
    for point in sorted(set(this) | set(other)):
        a, b = this.get(point, {}), other.get(point, {})
        for column in sorted(set(a) | set(b)):
            if a.get(column) != b.get(column):
                parts = column.split(".")
                names[".".join(["gpus", "*", *parts[2:]]) if parts[0] == "gpus" else column] = None
    shown = list(names)[:most]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


if __name__ == "__main__":
    sys.exit(main())
