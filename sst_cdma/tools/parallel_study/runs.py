"""One pipeline run in this process and the figures the study's tables read off its summary
(docs/parallel.md, "Reading a run")."""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

__all__ = ["REPO", "GIB", "PipelineRun", "simulate", "pipeline_run", "gib_cells", "oom_cell"]

#: the checkout, whose topology scripts the study runs
REPO = Path(__file__).resolve().parents[3]
GIB = 2**30


@dataclass(frozen=True)
class PipelineRun:
    """What a table reads of one pipeline run: the step, the bubble share (every stage's idle
    time over the stages' time, as the summary's ``bubble_share``), the share of the stages'
    time their streams waited on the DMA engine's copies (each stage's stall less its waits in
    recv; 0 with nothing offloaded), each stage's peak GPU memory and most passes in flight,
    the GPUs' capacity, the stage that ran out of memory first (None: none did), tokens/s and
    MFU."""

    step_s: float
    bubble_share: float
    copy_wait_share: float
    peaks: tuple[int, ...]
    in_flight: tuple[int, ...]
    capacity: int
    out_of_memory_stage: int | None
    tokens_per_s: float
    mfu: float


def simulate(script: str, options: Sequence[str]) -> dict[str, Any]:
    """The summary of ``sst SCRIPT -- OPTIONS`` run here (the script relative to the
    checkout)."""
    from sst_cdma import run

    result = run(REPO / script, list(options), console=io.StringIO(), record_statistics=False)
    summary: dict[str, Any] = result.reports["summary"]
    return summary


def pipeline_run(summary: dict[str, Any]) -> PipelineRun:
    """The figures of a pipeline run's summary (its ``pipeline`` section and its GPUs')."""
    p = summary["pipeline"]
    stages = p["stages"]
    # one simulated GPU: the summary is that GPU's own, with no list of GPUs
    gpus = summary.get("gpus") or [{"gpu": stages[0]["gpu"], **summary}]
    stalls = {g["gpu"]: g["stall_time_s"] for g in gpus}
    copy_wait = sum(max(0.0, stalls[s["gpu"]] - s.get("recv_wait_time_s", 0.0)) for s in stages)
    oom = p["out_of_memory"]
    return PipelineRun(
        step_s=p["step_time_s"], bubble_share=p["bubble_share"],
        copy_wait_share=copy_wait / (p["step_time_s"] * len(stages)),
        peaks=tuple(s["peak_memory_bytes"] for s in stages),
        in_flight=tuple(s["in_flight_max"] for s in stages),
        capacity=summary["gpu_memory_capacity_bytes"],
        out_of_memory_stage=None if oom is None else oom["stage"],
        tokens_per_s=p.get("tokens_per_s", 0.0), mfu=p.get("mfu", 0.0))


def gib_cells(values: Sequence[int]) -> str:
    """Byte counts as GiB with one decimal, comma-separated (one per stage)."""
    return ", ".join(f"{value / GIB:.1f}" for value in values)


def oom_cell(run: PipelineRun) -> str:
    """``stage S`` for the stage that ran out of memory first, ``-`` when every stage fit."""
    return "-" if run.out_of_memory_stage is None else f"stage {run.out_of_memory_stage}"
