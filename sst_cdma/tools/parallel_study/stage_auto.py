"""The table "stage-auto": what ``--policy auto`` chooses on each pipeline stage (offload,
compress, recompute or keep, per activation, for the stage's own memory pressure) as the
pipeline deepens, with a plain copy engine and with two codecs."""
from __future__ import annotations

from typing import Any

from .registry import Table, register
from .runs import gib_cells, oom_cell, pipeline_run, simulate

__all__ = ["SCRIPT", "COMMON", "DEPTHS", "ENGINES", "CHOICES", "stage_choices", "stage_auto"]

SCRIPT = "topologies/pipeline_cdma.py"
#: Llama 3 8B in bfloat16 on H100 SXM5s, 1F1B, 8 micro-batches of one 4096-token sequence: the
#: sequence of "pipeline-depth" doubled, so that more than the first stage is short of memory
COMMON = ("--network", "llama3_8b", "--batch", "1", "--seq-len", "4096", "--dtype", "bfloat16",
          "--micro-batches", "8", "--schedule", "1f1b")
DEPTHS = (2, 4, 8)
#: (row label, options): every activation kept, then the planner with each engine
ENGINES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("keep", ("--policy", "none")),
    ("auto, plain copy", ("--policy", "auto", "--algorithm", "none")),
    ("auto, ZVC", ("--policy", "auto", "--algorithm", "zvc")),
    ("auto, byte-plane Zstd", ("--policy", "auto", "--algorithm", "bplane_zstd")),
)
#: the planner's choices, in the table's column order
CHOICES = ("offload", "compress", "recompute", "keep")
HEADER = ("pp", "activations", "step ms", "x keep", "in flight per stage",
          *(f"{c} per stage" for c in CHOICES), "peak GiB per stage, first to last",
          "runs out first")


def stage_choices(summary: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Per choice, how many of a micro-batch's activations each stage's plan gave it (first
    stage to last), from the summary's ``pipeline.stages[].planner``; empty without a plan."""
    plans = [s.get("planner") for s in summary["pipeline"]["stages"]]
    if any(plan is None for plan in plans):
        return {}
    return {c: tuple(int(plan["choices"][c]) for plan in plans) for c in CHOICES}


def _counts(values: tuple[int, ...]) -> str:
    return ", ".join(str(v) for v in values)


@register("stage-auto", "what --policy auto chooses on each pipeline stage as the pipeline "
          "deepens, plain copies against ZVC and byte-plane Zstd (Llama 3 8B, H100 SXM5)")
def stage_auto() -> Table:
    """One row per depth and engine: the step against keeping every activation, the passes
    each stage holds, how many of a micro-batch's activations each stage's plan offloads,
    compresses, recomputes and keeps, each stage's peak memory and the stage that runs out of
    memory first."""
    rows = []
    for pp in DEPTHS:
        keep_step = 0.0
        for label, options in ENGINES:
            summary = simulate(SCRIPT, (*COMMON, "--pp", str(pp), *options))
            run = pipeline_run(summary)
            keep_step = keep_step or run.step_s
            choices = stage_choices(summary)
            rows.append((str(pp), label, f"{run.step_s * 1e3:.1f}",
                         f"{run.step_s / keep_step:.2f}", _counts(run.in_flight),
                         *(_counts(choices[c]) if choices else "-" for c in CHOICES),
                         gib_cells(run.peaks), oom_cell(run)))
    return Table(HEADER, tuple(rows))
