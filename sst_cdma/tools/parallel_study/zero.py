"""The table "zero": ZeRO stages 0-3 with the optimizer states on the GPU, in host memory
(ZeRO-Offload) or on the hosts' SSDs (ZeRO-Infinity), on one data-parallel pipeline: each
stage's peak memory, the step, the data-parallel time exposed and hidden, and the host CPU's
time (docs/parallel.md, sections 10 and 13)."""
from __future__ import annotations

from typing import Any

from .registry import Table, register
from .runs import GIB, gib_cells, oom_cell, pipeline_run, simulate

__all__ = ["SCRIPT", "COMMON", "ROWS", "zero"]

SCRIPT = "topologies/pipeline_cdma.py"
#: Llama 3 8B in bfloat16 over pp 2 x dp 8 H100 SXM5s (two DGX H100 nodes, one stage a
#: node), 1F1B, 8 micro-batches of one 2048-token sequence per replica, every activation
#: kept; with the states on the SSDs, two drives a socket (the hosts' drive count is the
#: user's: docs/parallel.md, section 10)
COMMON = ("--network", "llama3_8b", "--batch", "1", "--seq-len", "2048", "--dtype", "bfloat16",
          "--micro-batches", "8", "--policy", "none", "--pp", "2", "--dp", "8")
#: (ZeRO stage, where the optimizer states live): ZeRO 0 keeps every state whole on each
#: rank, and offloading needs a partition per rank (zero 0 with dp above 1 is refused)
ROWS: tuple[tuple[int, str], ...] = (
    (0, "gpu"),
    (1, "gpu"), (1, "host"), (1, "nvme"),
    (2, "gpu"), (2, "host"), (2, "nvme"),
    (3, "gpu"), (3, "host"), (3, "nvme"),
)
HEADER = ("ZeRO", "optimizer states", "step ms", "tokens/s",
          "peak GiB per stage, first to last", "room on the fullest stage, GiB",
          "DP ms exposed / hidden, per stage", "host CPU ms: step / its GPU's wait, per stage",
          "runs out first")


def options(zero_stage: int, states: str) -> tuple[str, ...]:
    """The run's options for one row."""
    placed = ("--optimizer-states", states) + (("--nvme", "2") if states == "nvme" else ())
    return (*COMMON, "--zero", str(zero_stage), *placed)


def _dp_cell(stages: list[dict[str, Any]]) -> str:
    """Each stage's exposed / hidden data-parallel time, ms."""
    return ", ".join(f"{s['dp_comm_time_s'] * 1e3:.1f} / {s['dp_hidden_time_s'] * 1e3:.1f}"
                     for s in stages)


def _host_cell(stages: list[dict[str, Any]]) -> str:
    """Each stage's host CPU step and its GPU's wait for it, ms (of the stage's rank that
    waited longest); ``-`` with the states on the GPU."""
    if not all("host" in s for s in stages):
        return "-"
    return ", ".join(f"{s['host']['cpu_step_time_s'] * 1e3:.1f} / "
                     f"{s['host']['cpu_wait_time_s'] * 1e3:.1f}" for s in stages)


@register("zero", "ZeRO 0-3 with the optimizer states on the GPU, the host or its SSDs: "
          "memory per stage, step and host time (Llama 3 8B, pp 2 x dp 8, H100 SXM5)")
def zero() -> Table:
    """One row per ZeRO stage and optimizer-state placement: the step and tokens/s, each
    stage's peak memory and what the fullest stage leaves of the GPU's, each stage's exposed
    and hidden data-parallel time, each stage's host CPU step and its GPU's wait for it, and
    the stage that runs out of memory first."""
    rows = []
    for zero_stage, states in ROWS:
        summary = simulate(SCRIPT, options(zero_stage, states))
        run = pipeline_run(summary)
        stages = summary["pipeline"]["stages"]
        rows.append((str(zero_stage), states, f"{run.step_s * 1e3:.1f}",
                     f"{run.tokens_per_s:,.0f}", gib_cells(run.peaks),
                     f"{(run.capacity - max(run.peaks)) / GIB:.1f}", _dp_cell(stages),
                     _host_cell(stages), oom_cell(run)))
    return Table(HEADER, tuple(rows))
