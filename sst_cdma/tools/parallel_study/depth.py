"""The table "pipeline-depth": on which pipeline stage offloading activations pays, what
compression adds there, and recomputation beside them, as the pipeline deepens."""
from __future__ import annotations

from .registry import Table, register
from .runs import GIB, PipelineRun, gib_cells, oom_cell, pipeline_run, simulate

__all__ = ["SCRIPT", "COMMON", "DEPTHS", "POLICIES", "pipeline_depth"]

SCRIPT = "topologies/pipeline_cdma.py"
#: Llama 3 8B in bfloat16 on H100 SXM5s (the topology's default GPU, its host link PCIe gen5
#: x16), 1F1B, 8 micro-batches of one 2048-token sequence a step
COMMON = ("--network", "llama3_8b", "--batch", "1", "--seq-len", "2048", "--dtype", "bfloat16",
          "--micro-batches", "8", "--schedule", "1f1b")
DEPTHS = (2, 4, 8)
#: (row label, options): every stage runs the same policy, the terms stages accept today
POLICIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("keep", ("--policy", "none")),
    ("offload all, plain copy", ("--policy", "all", "--algorithm", "none")),
    ("offload all, ZVC", ("--policy", "all", "--algorithm", "zvc")),
    ("offload all, byte-plane Zstd", ("--policy", "all", "--algorithm", "bplane_zstd")),
    ("recompute", ("--policy", "recompute")),
)
HEADER = ("pp", "policy", "step ms", "x keep", "bubble", "of it, copy waits",
          "peak GiB per stage, first to last", "saved on the first, GiB",
          "saved on the last, GiB", "runs out first")


def _cells(pp: int, label: str, run: PipelineRun, keep: PipelineRun) -> tuple[str, ...]:
    return (str(pp), label, f"{run.step_s * 1e3:.1f}", f"{run.step_s / keep.step_s:.2f}",
            f"{run.bubble_share:.1%}", f"{run.copy_wait_share:.1%}",
            gib_cells(run.peaks),
            f"{(keep.peaks[0] - run.peaks[0]) / GIB:.1f}",
            f"{(keep.peaks[-1] - run.peaks[-1]) / GIB:.1f}", oom_cell(run))


@register("pipeline-depth", "offload, compression and recomputation per stage as the "
          "pipeline deepens (Llama 3 8B, H100 SXM5)")
def pipeline_depth() -> Table:
    """One row per depth and policy: the step, against keeping every activation; the bubble
    and the part of it spent waiting on copies; each stage's peak memory and what the policy
    saved on the first and the last stage; the stage that runs out of memory first."""
    rows = []
    for pp in DEPTHS:
        runs = [pipeline_run(simulate(SCRIPT, (*COMMON, "--pp", str(pp), *options)))
                for _, options in POLICIES]
        rows += [_cells(pp, label, run, runs[0]) for (label, _), run in zip(POLICIES, runs)]
    return Table(HEADER, tuple(rows))
