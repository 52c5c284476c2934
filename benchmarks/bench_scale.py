"""How cost grows with the number of GPUs: the DGX-style topology (eight P100s per node, two
per PCIe switch) at 8, 64, 256 and 1,024 GPUs (``--max 4096`` adds 2,048 and 4,096), each one
training iteration of the default job with its oracle and vDNN baselines, every node simulated
(``--simulate-every-node``: by default node 0 alone is, docs/topologies.md, "Identical
nodes"), each size in a fresh process of its own (so that its peak memory is its own); then
the ``--ratio-gpus`` case (default 1,024; the options as given, so node 0 alone in this
checkout) against another commit (``--against``, default ``HEAD~1``), measured in the same
run.

    python benchmarks/bench_scale.py [--max 1024] [--against REV | --no-against]
        [--ratio-gpus 1024] [--repeats 1] [-- model options]

Prints, per size, wall and CPU seconds of the run (imports left out), wall time per GPU, the
configuration check and build, the event loop, the peak resident memory of the process and the
memory per GPU (the peak's growth over what the process held before the run, per GPU); the
growth exponent b fitted to time = a x GPUs^b over the runs of 64 GPUs and more (8 GPUs is
dominated by fixed start-up costs); and the ratio this / other of the ``--ratio-gpus`` case,
the two trees run alternately ``--repeats`` times each (medians), with whether they simulated
the same thing (summary and simulated time; events delivered). Requirements: b <= 1.1, and
1,024 GPUs in at most 0.6x the time of the commit before the solver's rework.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_tree import other_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SIZES = (8, 64, 256, 1024, 2048, 4096)
RATIO_TARGET = 0.6
EXPONENT_TARGET = 1.1


def one_run(gpus: int, options: Sequence[str], tree: Path = REPO) -> tuple[float, dict[str, float]]:
    """Wall seconds of one run with ``gpus`` GPUs (``tree``'s topology, with whatever
    ``sst_cdma`` this process imports), and the runner's own phase timings."""
    wall, timing, _ = _timed_run(gpus, options, tree)
    return wall, timing


def _timed_run(gpus: int, options: Sequence[str], tree: Path) -> tuple[float, dict[str, float],
                                                                        Any]:
    from sst_cdma import run  # the public API: the same in every layout of the package

    start = time.perf_counter()
    result = run(tree / "topologies/dgx1_cdma.py", ["--gpus", str(gpus), *options],
                 console=io.StringIO(), record_statistics=False)
    return time.perf_counter() - start, result.timing, result


def _child(gpus: int, options: Sequence[str], tree: Path) -> dict[str, Any]:
    """What a fresh process measures of one run: wall and CPU seconds, phase timings, peak RSS
    and the RSS before the run in MiB, and a digest of what it simulated."""
    import sst_cdma  # noqa: F401  (imports before the baseline memory figure)

    base_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    cpu = time.process_time()
    wall, timing, result = _timed_run(gpus, options, tree)
    cpu = time.process_time() - cpu
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    simulated = json.dumps({"summary": result.reports.get("summary"),
                            "sim_time_ps": result.sim_time_ps}, sort_keys=True, default=str)
    return {"wall_s": wall, "cpu_s": cpu, **timing, "peak_mib": peak_mib, "base_mib": base_mib,
            "events": result.events, "digest": hashlib.sha256(simulated.encode()).hexdigest()}


def measured(gpus: int, options: Sequence[str], tree: Path = REPO) -> dict[str, Any]:
    """:func:`_child` in a fresh interpreter that imports ``sst_cdma`` from ``tree``: wall
    seconds, phase timings, peak RSS in MiB and the rest."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, __file__, "--one", str(gpus), "--tree", str(tree),
                          "--", *options], check=True, capture_output=True, text=True, env=env,
                         cwd=tree).stdout
    return json.loads(out.splitlines()[-1])


def growth_exponent(gpus: Sequence[int], seconds: Sequence[float]) -> float:
    """b of the least-squares fit of log(seconds) = log(a) + b log(gpus)."""
    return float(np.polyfit(np.log(gpus), np.log(seconds), 1)[0])


def per_gpu_kib(m: dict[str, Any], gpus: int) -> float:
    """KiB per GPU the run added to the process's peak (over what it held before the run)."""
    return 1024 * (m["peak_mib"] - m.get("base_mib", 0.0)) / gpus


def sweep(sizes: Sequence[int], options: Sequence[str]) -> list[tuple[int, float]]:
    """Measure each size in this checkout, print its row; (GPUs, wall s) of each."""
    rows = []
    print(f"{'GPUs':>6} {'wall s':>8} {'CPU s':>8} {'ms/GPU':>8} {'build s':>8} {'setup s':>8} "
          f"{'run s':>8} {'peak MiB':>9} {'KiB/GPU':>8}")
    for gpus in sizes:
        m = measured(gpus, ["--simulate-every-node", *options])
        rows.append((gpus, m["wall_s"]))
        print(f"{gpus:>6} {m['wall_s']:>8.2f} {m['cpu_s']:>8.2f} {1e3 * m['wall_s'] / gpus:>8.2f} "
              f"{m['build_s']:>8.2f} {m['setup_s']:>8.2f} {m['run_s']:>8.2f} "
              f"{m['peak_mib']:>9.0f} {per_gpu_kib(m, gpus):>8.0f}", flush=True)
    fitted = [(g, s) for g, s in rows if g >= 64]
    if len(fitted) >= 2:
        b = growth_exponent([g for g, _ in fitted], [s for _, s in fitted])
        print(f"growth exponent ({', '.join(str(g) for g, _ in fitted)} GPUs): {b:.2f} "
              f"(requirement <= {EXPONENT_TARGET}: "
              f"{'met' if b <= EXPONENT_TARGET else 'NOT met'})")
    return rows


def against(rev: str, gpus: int, repeats: int, options: Sequence[str]) -> bool:
    """Run ``gpus`` GPUs in ``rev`` and in this checkout alternately, other first; print the
    medians and ratios. True when both simulated the same thing every time."""
    got: dict[str, list[dict[str, Any]]] = {"other": [], "this": []}
    with other_tree(rev) as other:
        for _ in range(repeats):
            got["other"].append(measured(gpus, options, other))
            got["this"].append(measured(gpus, options, REPO))
    med = {side: {k: statistics.median(m[k] for m in runs)
                  for k in ("wall_s", "cpu_s", "run_s", "peak_mib", "base_mib")}
           for side, runs in got.items()}
    same = len({m["digest"] for runs in got.values() for m in runs}) == 1
    events = {side: {m["events"] for m in runs} for side, runs in got.items()}
    print(f"{gpus:,} GPUs against {rev}, {repeats} alternating run(s) each (medians):")
    for key, what in (("wall_s", "wall"), ("cpu_s", "CPU"), ("run_s", "event loop")):
        ratio = med["this"][key] / med["other"][key]
        target = f" (target <= {RATIO_TARGET}: {'met' if ratio <= RATIO_TARGET else 'NOT met'})" \
            if key == "wall_s" else ""
        print(f"  {what:10s}: this {med['this'][key]:.2f} s, other {med['other'][key]:.2f} s, "
              f"ratio = this tree / {rev} = {ratio:.3f}{target}")
    for side in ("this", "other"):
        print(f"  memory {side:5s}: peak {med[side]['peak_mib']:.0f} MiB, "
              f"{per_gpu_kib(med[side], gpus):.0f} KiB per GPU")
    print(f"  simulated results (summary, simulated time): {'identical' if same else 'DIFFER'}; "
          f"events delivered: this {sorted(events['this'])}, other {sorted(events['other'])}")
    return same


def main(argv: Sequence[str] | None = None) -> int:
    """Run every size up to ``--max``, then the comparison, and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=1024, help="largest GPU count (default 1024)")
    ap.add_argument("--against", default="HEAD~1", metavar="REV",
                    help="git revision to compare with (default HEAD~1)")
    ap.add_argument("--no-against", action="store_true", help="skip the comparison")
    ap.add_argument("--ratio-gpus", type=int, default=1024,
                    help="GPU count of the comparison (default 1024)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each tree in the comparison")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, as JSON
    ap.add_argument("--tree", type=Path, default=REPO, help=argparse.SUPPRESS)
    ap.add_argument("options", nargs="*", help="model options after --")
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(_child(args.one, args.options, args.tree)))
        return 0
    for name, value in (("--max", args.max), ("--ratio-gpus", args.ratio_gpus),
                        ("--repeats", args.repeats)):
        if value < 1:
            ap.error(f"{name} must be a positive number, got {value}")
    sweep([g for g in SIZES if g <= args.max], args.options)
    same: Optional[bool] = None
    if not args.no_against:
        same = against(args.against, args.ratio_gpus, args.repeats, args.options)
    return 0 if same is not False else 1


if __name__ == "__main__":
    sys.exit(main())
