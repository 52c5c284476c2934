"""Wall time and peak memory of the DGX H100 cluster topology at scale, one data-parallel
replica simulated and of each of its stages the tensor-parallel rank 0 (docs/parallel.md,
"Symmetry" and "The cluster topology"): Llama 3 70B on
512 GPUs (tp 8, pp 4, dp 16, 16 micro-batches) and Llama 3 405B on 16,384 GPUs (tp 8, pp 16,
dp 128, the layout its authors trained it with), each in a fresh process of its own so that
its peak memory is its own.

    python benchmarks/bench_parallel.py [--cases 70b,405b] [--micro-batches-405b 16]

Prints, per case, the command's options, the wall and CPU seconds of the run (imports left
out), the peak resident memory of the process, the simulated step, tokens/s and MFU, and the
stage that ran out of memory first. The issue's target for the 405B case: under 60 s of wall
time and 4 GiB on one core.
"""
from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
TOPOLOGY = REPO / "topologies" / "dgx_h100_cluster.py"
#: the cases: their options (seq 4096 at bfloat16, one sample a micro-batch)
CASES = {
    "70b": "--network llama3_70b --tp 8 --pp 4 --dp 16 --micro-batches 16",
    "405b": "--network llama3_405b --tp 8 --pp 16 --dp 128 --micro-batches {mb405} "
            "--stage-split " + ",".join(["7"] + ["8"] * 14 + ["7"]),
}
#: the 405B case's split: its 126 blocks do not divide over 16 stages; the end stages, which
#: hold the embedding and the LM head, take one block fewer (docs/parallel.md, "The cluster
#: topology", says where that choice comes from)
COMMON = "--batch 1 --seq-len 4096 --dtype bfloat16"
TARGET_S, TARGET_GIB = 60.0, 4.0
#: the 405B case's micro-batches a replica unless --micro-batches-405b says otherwise
MICRO_BATCHES_405B = 16


def one_case(options: str) -> dict[str, Any]:
    """Run ``options`` in this process: wall and CPU seconds, peak RSS (and the RSS before
    the run, imports done) and the figures."""
    from sst_cdma import run

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(TOPOLOGY, options, console=io.StringIO(), record_statistics=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    p = result.reports["summary"]["pipeline"]
    oom = p["out_of_memory"]
    return {"wall_s": wall, "cpu_s": cpu,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "base_rss_gib": base,
            "step_s": p["step_time_s"], "tokens_per_s": p["tokens_per_s"], "mfu": p["mfu"],
            "ranks": len(p["ranks"]), "simulated": len({e["gpu"] for e in p["ranks"]}),
            "out_of_memory_stage": None if oom is None else oom["stage"]}


def in_fresh_process(options: str) -> dict[str, Any]:
    """:func:`one_case` in a child process of its own (its own peak memory)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bench_parallel as b; "
            "print(json.dumps(b.one_case(sys.argv[2])))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), options],
                         capture_output=True, text=True, cwd=REPO, check=False)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def line(name: str, options: str, r: dict[str, Any]) -> str:
    """One case's report line."""
    if "error" in r:
        return f"{name}: {options}\n  failed: {r['error']}"
    met = (f" (target: {TARGET_S:.0f} s, {TARGET_GIB:.0f} GiB: "
           f"{'met' if r['wall_s'] < TARGET_S and r['peak_rss_gib'] < TARGET_GIB else 'NOT met'})"
           if name == "405b" else "")
    oom = r["out_of_memory_stage"]
    return (f"{name}: {options}\n  {r['ranks']} ranks, {r['simulated']} simulated: wall "
            f"{r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_rss_gib']:.2f} GiB"
            f"{met}\n  step {r['step_s'] * 1e3:.1f} ms, {r['tokens_per_s']:,.0f} tokens/s, MFU "
            f"{r['mfu']:.1%}, " + ("every stage fits" if oom is None
                                   else f"stage {oom} runs out of memory first"))


def main(argv: Sequence[str] = ()) -> int:
    """Run the cases and print their lines."""
    parser = argparse.ArgumentParser(prog="bench_parallel.py", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="70b,405b",
                        help=f"comma-separated cases of {', '.join(CASES)} (default: all)")
    parser.add_argument("--micro-batches-405b", type=int, default=MICRO_BATCHES_405B,
                        metavar="N",
                        help="micro-batches of the 405B case (default: 16, a multiple of pp)")
    o = parser.parse_args(list(argv))
    names = [c.strip() for c in o.cases.split(",") if c.strip()]
    bad = [c for c in names if c not in CASES]
    if bad:
        parser.error(f"--cases: {bad[0]!r} is none of {', '.join(CASES)}")
    for name in names:
        options = f"{CASES[name].format(mb405=o.micro_batches_405b)} {COMMON}"
        print(line(name, options, in_fresh_process(options)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
