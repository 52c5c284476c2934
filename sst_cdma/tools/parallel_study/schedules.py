"""The table "schedules": GPipe, 1F1B and interleaved 1F1B (2 and 4 model chunks a stage):
each stage's passes in flight and peak memory, and the throughput."""
from __future__ import annotations

from .registry import Table, register
from .runs import GIB, gib_cells, oom_cell, pipeline_run, simulate

__all__ = ["SCRIPT", "COMMON", "DEPTHS", "SCHEDULES", "schedules"]

SCRIPT = "topologies/pipeline_cdma.py"
#: Llama 3 8B in bfloat16 on H100 SXM5s, every activation kept, 8 micro-batches of one
#: 2048-token sequence (a multiple of pp, as interleaving needs)
COMMON = ("--network", "llama3_8b", "--batch", "1", "--seq-len", "2048", "--dtype", "bfloat16",
          "--micro-batches", "8", "--policy", "none")
DEPTHS = (4, 8)
#: (row label, its vpp, options)
SCHEDULES: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("GPipe", 1, ("--schedule", "gpipe")),
    ("1F1B", 1, ("--schedule", "1f1b")),
    ("interleaved", 2, ("--schedule", "interleaved", "--vpp", "2")),
    ("interleaved", 4, ("--schedule", "interleaved", "--vpp", "4")),
)
HEADER = ("pp", "schedule", "vpp", "step ms", "tokens/s", "MFU", "bubble",
          "passes in flight per stage, first to last", "micro-batches' activations on the first",
          "peak GiB per stage, first to last", "first stage's peak - 1F1B's, GiB",
          "runs out first")


@register("schedules", "1F1B against GPipe and interleaved 1F1B: memory per stage and "
          "throughput (Llama 3 8B, H100 SXM5)")
def schedules() -> Table:
    """One row per depth and schedule: the step, tokens/s and MFU, the bubble, each stage's
    most (micro-batch, chunk) passes in flight (a pass holds one chunk, 1/vpp of the stage's
    blocks: the first stage's in micro-batches' worth beside it), each stage's peak memory and
    the first stage's against 1F1B's, and the stage that runs out of memory first."""
    rows = []
    for pp in DEPTHS:
        runs = [(label, vpp, pipeline_run(simulate(SCRIPT, (*COMMON, "--pp", str(pp), *opts))))
                for label, vpp, opts in SCHEDULES]
        one_f_one_b = runs[1][2]
        for label, vpp, run in runs:
            rows.append((str(pp), label, str(vpp), f"{run.step_s * 1e3:.1f}",
                         f"{run.tokens_per_s:,.0f}", f"{run.mfu:.1%}", f"{run.bubble_share:.1%}",
                         ", ".join(str(n) for n in run.in_flight),
                         f"{run.in_flight[0] / vpp:g}",
                         gib_cells(run.peaks),
                         f"{(run.peaks[0] - one_f_one_b.peaks[0]) / GIB:+.1f}",
                         oom_cell(run)))
    return Table(HEADER, tuple(rows))
