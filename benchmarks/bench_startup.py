"""What a plain run imports, and what each import costs: ``sst topologies/pascal_cdma.py`` in
fresh processes under ``python -X importtime``, the import time of each top-level package
(the self time of all its modules, so every microsecond counts once), the medians over the
repeats, and the main job's wall time beside them.

    python benchmarks/bench_startup.py [--repeats 5] [--script topologies/pascal_cdma.py]

The table names each package, whether it is the project's, the standard library's or a
dependency, its modules, its median milliseconds and its share of all import time. Two lines
follow from one more run of the job (not under ``-X importtime``): the passes of the cyclic
garbage collector by generation, and the dataclasses made (``@dataclass`` compiles methods for
each) with the CPU milliseconds that took.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
PROJECT = ("sst_cdma", "components", "workloads")


def import_times(stderr: str) -> dict[str, tuple[int, float]]:
    """Top-level package -> (modules imported, microseconds of their own import time), from
    ``-X importtime`` output."""
    out: dict[str, tuple[int, float]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:"):].split("|")
        root = name.strip().split(".")[0]
        count, total = out.get(root, (0, 0.0))
        out[root] = (count + 1, total + float(self_us))
    return out


def kind(package: str) -> str:
    """``project``, ``stdlib`` or ``dependency``."""
    if package in PROJECT:
        return "project"
    stdlib = package in sys.stdlib_module_names or (package.startswith("_")
                                                     and not package.startswith("__editable__"))
    return "stdlib" if stdlib else "dependency"


#: runs the main job with ``importlib.import_module`` going through ``__import__``: ``-X
#: importtime`` logs the imports of the import statement alone, and the element library loads
#: the modules of the elements a run names with ``import_module``: without this the table
#: would leave out every element module (components.gpu, components.cdma_engine, ...)
LOGGED = """
import importlib, importlib.util, runpy, sys
def import_module(name, package=None):
    if name.startswith("."):
        name = importlib.util.resolve_name(name, package)
    __import__(name)
    return sys.modules[name]
importlib.import_module = import_module
sys.argv = ["sst", *sys.argv[1:]]
runpy.run_module("sst_cdma.tools.cli.sst_main", run_name="__main__")
"""


def importtime_log(script: Path) -> str:
    """The ``-X importtime`` log (stderr) of one main-job process."""
    return subprocess.run([sys.executable, "-X", "importtime", "-c", LOGGED, str(script)],
                          cwd=REPO, check=True, capture_output=True, text=True).stderr


def one_run(script: Path) -> tuple[float, dict[str, tuple[int, float]]]:
    """Wall seconds of one main-job process and its import times."""
    t0 = time.perf_counter()
    log = importtime_log(script)
    return time.perf_counter() - t0, import_times(log)


#: runs the main job in this interpreter, counting the collector's passes and the dataclasses
#: made, and prints them as JSON on stderr (the job's own output goes to stdout)
COUNTING = """
import dataclasses, gc, json, runpy, sys, time
passes, made = [0, 0, 0], [0, 0.0]
gc.callbacks.append(lambda phase, info: phase == "start"
                    and passes.__setitem__(info["generation"], passes[info["generation"]] + 1))
process = dataclasses._process_class
def counted(*args, **kwargs):
    t0 = time.process_time()
    try:
        return process(*args, **kwargs)
    finally:
        made[0] += 1
        made[1] += time.process_time() - t0
dataclasses._process_class = counted
sys.argv = ["sst", sys.argv[1]]
try:
    runpy.run_module("sst_cdma.tools.cli.sst_main", run_name="__main__")
except SystemExit:
    pass
print(json.dumps({"passes": passes, "dataclasses": made[0], "dataclass_ms": 1e3 * made[1]}),
      file=sys.stderr)
"""


def counts(script: Path) -> dict[str, object]:
    """The collector's passes by generation and the dataclasses made (and their CPU
    milliseconds) in one main-job process."""
    done = subprocess.run([sys.executable, "-c", COUNTING, str(script)], cwd=REPO, check=True,
                          capture_output=True, text=True)
    return dict(json.loads(done.stderr.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the main job ``--repeats`` times and print the import-time table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--script", type=Path, default=REPO / "topologies" / "pascal_cdma.py")
    args = ap.parse_args(argv)
    walls, runs = [], []
    for _ in range(args.repeats):
        wall, times = one_run(args.script)
        walls.append(wall)
        runs.append(times)
    packages = sorted({p for r in runs for p in r})
    rows = [(p, max(r.get(p, (0, 0))[0] for r in runs),
             statistics.median(r.get(p, (0, 0.0))[1] for r in runs) / 1e3) for p in packages]
    rows.sort(key=lambda row: -row[2])
    total = sum(ms for _, _, ms in rows)
    wall_ms = 1e3 * statistics.median(walls)
    print(f"{'package':<24} {'kind':<10} {'modules':>7} {'ms':>8} {'share':>6}")
    for package, modules, ms in rows:
        if ms >= 0.5:
            print(f"{package:<24} {kind(package):<10} {modules:>7} {ms:>8.1f} "
                  f"{100 * ms / total:>5.1f}%")
    by_kind: dict[str, float] = {}
    for package, _, ms in rows:
        by_kind[kind(package)] = by_kind.get(kind(package), 0.0) + ms
    print(f"imports: {total:.0f} ms in all ("
          + ", ".join(f"{k} {v:.0f} ms" for k, v in sorted(by_kind.items())) + ")")
    print(f"main job wall (median of {args.repeats}, under -X importtime): {wall_ms:.0f} ms; "
          f"imports are {100 * total / wall_ms:.0f}% of it")
    got = counts(args.script)
    print("cyclic collector passes by generation (0, 1, 2): "
          + ", ".join(str(n) for n in got["passes"]))  # type: ignore[attr-defined]
    print(f"dataclasses made: {got['dataclasses']}, {got['dataclass_ms']:.1f} ms of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
