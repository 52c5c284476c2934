"""The pipeline drawings of ``sst-cdma report``, from a run's summary.json ``pipeline``
section (docs/parallel.md, "The simulated pipeline"): each stage's peak GPU memory against
the GPU's capacity (``stage_memory.png``: a bar per stage, a stage that runs out of memory
cross-hatched, the one that runs out first named) and the step's breakdown per stage
(``stage_breakdown.png``: its busy compute, its time in tensor-parallel collectives and its
idle time, the bubble, stacked as shares of the step). A run is one panel; a sweep gets one
panel per point. :func:`stage_memory` and :func:`stage_breakdown` give the tables the bars
are drawn from."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from sst_cdma.tools.sweep.facets import ABOVE, CAPACITY_GID, MARK_COLOUR, MAX_COLUMNS, UNFIT_GID

__all__ = ["StagePlotError", "StageMemory", "StageShares", "stage_memory", "stage_breakdown",
           "stage_table", "draw_stage_memory", "draw_stage_breakdown", "BREAKDOWN_PARTS",
           "MAX_PANELS"]

#: the parts of a stage's step, bottom to top: (field of StageShares, legend, colour)
BREAKDOWN_PARTS = (("compute", "busy: its kernels", "#4c72b0"),
                   ("tp_comm", "in tensor-parallel collectives", "#dd8452"),
                   ("idle", "idle: the bubble and waits in recv", "#bbbbbb"))
#: the colour of a stage's memory bar
MEMORY_COLOUR = "#55a868"
#: the most points a sweep's stage figures draw (one panel each)
MAX_PANELS = 24


class StagePlotError(ValueError):
    """A summary's ``pipeline`` cannot be drawn (the message names the file and the field)."""


@dataclass(frozen=True)
class StageMemory:
    """One stage's bar of the memory plot: its number, its GPUs, its peak GPU memory, the
    GPU's capacity (None where the summary has none), whether it fits and whether it is the
    stage that ran out of memory first."""

    stage: int
    gpus: tuple[str, ...]
    peak_bytes: int
    capacity_bytes: Optional[int]
    fits: bool
    runs_out_first: bool


@dataclass(frozen=True)
class StageShares:
    """One stage's stacked bar of the breakdown plot: its number and the shares of the step
    its kernels (``compute``), its tensor-parallel collectives (``tp_comm``) and its idle time
    (``idle``: the bubble, recv waits included) took; they sum to 1."""

    stage: int
    compute: float
    tp_comm: float
    idle: float


def _stages(summary: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary's ``pipeline`` and its ``stages`` ({} and [] when it has none);
    StagePlotError naming ``where`` when they are not an object and a list of objects."""
    pipeline = summary.get("pipeline")
    if pipeline is None:
        return {}, []
    if not isinstance(pipeline, dict) or not isinstance(pipeline.get("stages"), list):
        raise StagePlotError(f"{where}: 'pipeline' is not an object with a list of 'stages'")
    for n, stage in enumerate(pipeline["stages"]):
        if not isinstance(stage, dict):
            raise StagePlotError(f"{where}: pipeline.stages[{n}] is {type(stage).__name__}, "
                                 "not a stage (an object)")
    return pipeline, pipeline["stages"]


def _number(entry: Mapping[str, Any], key: str, where: str, default: Optional[float] = None
            ) -> float:
    """``entry[key]``, a finite number (``default`` when absent, if given); StagePlotError
    naming ``where`` and the key otherwise."""
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise StagePlotError(f"{where}.{key} is {value!r}, not a finite number")
    return float(value)


def stage_memory(summary: Mapping[str, Any], where: str) -> list[StageMemory]:
    """Each stage's peak memory, capacity (the summary's ``gpu_memory_capacity_bytes``: every
    stage runs on the same GPU preset) and verdicts, in stage order ([] without a
    ``pipeline``); StagePlotError naming ``where`` (the summary's file) and the field at
    fault."""
    pipeline, stages = _stages(summary, where)
    capacity = summary.get("gpu_memory_capacity_bytes")
    cap = int(capacity) if isinstance(capacity, (int, float)) and not isinstance(
        capacity, bool) and capacity > 0 else None
    oom = pipeline.get("out_of_memory") if pipeline else None
    first = oom.get("stage") if isinstance(oom, dict) else None
    out = []
    for n, s in enumerate(stages):
        at = f"{where}: pipeline.stages[{n}]"
        stage = int(_number(s, "stage", at))
        fits = s.get("fits_in_memory")
        if not isinstance(fits, bool):
            raise StagePlotError(f"{at}.fits_in_memory is {fits!r}, not true or false")
        gpus = s.get("tp_gpus", [s.get("gpu", f"stage {stage}")])
        out.append(StageMemory(stage, tuple(str(g) for g in gpus),
                               int(_number(s, "peak_memory_bytes", at)), cap, fits,
                               stage == first))
    return sorted(out, key=lambda m: m.stage)


def stage_breakdown(summary: Mapping[str, Any], where: str) -> list[StageShares]:
    """Each stage's busy, tensor-parallel and idle time as shares of the pipeline's step, in
    stage order ([] without a ``pipeline``); StagePlotError naming ``where`` and the field at
    fault (a step that is not positive among them)."""
    pipeline, stages = _stages(summary, where)
    if not stages:
        return []
    step = _number(pipeline, "step_time_s", f"{where}: pipeline")
    if step <= 0:
        raise StagePlotError(f"{where}: pipeline.step_time_s is {step!r}: no step to share")
    out = []
    for n, s in enumerate(stages):
        at = f"{where}: pipeline.stages[{n}]"
        out.append(StageShares(int(_number(s, "stage", at)),
                               _number(s, "busy_time_s", at) / step,
                               _number(s, "tp_comm_time_s", at, 0.0) / step,
                               _number(s, "idle_time_s", at) / step))
    return sorted(out, key=lambda b: b.stage)


def stage_table(memory: Sequence[StageMemory], shares: Sequence[StageShares]) -> str:
    """The numbers of one panel of both plots as a markdown table, a row per stage."""
    lines = ["| stage | GPUs | peak memory (GB) | of capacity | busy | TP collectives | idle |",
             "|---|---|---|---|---|---|---|"]
    for m, b in zip(memory, shares):
        share = f"{m.peak_bytes / m.capacity_bytes:.1%}" if m.capacity_bytes else ""
        verdict = " (runs out first)" if m.runs_out_first else \
            " (does not fit)" if not m.fits else ""
        lines.append(f"| {m.stage} | {', '.join(m.gpus)} | {m.peak_bytes / 1e9:.3f}{verdict} | "
                     f"{share} | {b.compute:.1%} | {b.tp_comm:.1%} | {b.idle:.1%} |")
    return "\n".join(lines)


def _grid(count: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``count`` panels, at most :data:`MAX_COLUMNS` a row, each ``width`` x
    ``height`` inches; its axes in reading order (the spare ones hidden)."""
    from matplotlib.figure import Figure

    cols = min(count, MAX_COLUMNS)
    rows = math.ceil(count / cols)
    wide, high = width * cols + 2.8, height * rows + 0.8
    fig = Figure(figsize=(wide, high))
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[count:]:
        ax.set_visible(False)
    fig.subplots_adjust(left=0.8 / wide, right=1 - 2.6 / wide, top=1 - 0.7 / high,
                        bottom=0.6 / high, hspace=0.7, wspace=0.35)
    return fig, axes[:count]


def _stage_labels(stages: Sequence[StageMemory]) -> list[str]:
    """A bar's label: the stage and, where few, its GPUs."""
    return [f"stage {m.stage}" + (f"\n{', '.join(m.gpus)}" if len(m.gpus) <= 2 and
                                  len(stages) <= 4 else "") for m in stages]


def _memory_panel(ax: Any, title: str, stages: Sequence[StageMemory]) -> None:
    """One panel of the memory plot: a bar per stage in GB, the capacity a dashed line (named
    in the legend when above the plot), the stages that run out cross-hatched and the first
    one named above its bar."""
    x = range(len(stages))
    peaks = [m.peak_bytes / 1e9 for m in stages]
    ax.bar(x, peaks, color=MEMORY_COLOUR, width=0.6, label="peak GPU memory")
    for n, m in enumerate(stages):
        if not m.fits:
            ax.bar([n], [peaks[n]], width=0.6, color="none", hatch="xx", edgecolor=MARK_COLOUR,
                   linewidth=0.0, gid=UNFIT_GID)
        if m.runs_out_first:
            ax.annotate("runs out first", (n, peaks[n]), ha="center", va="bottom",
                        fontsize=8, color="#c44e52", xytext=(0, 3), textcoords="offset points")
    capacity = next((m.capacity_bytes for m in stages if m.capacity_bytes), None)
    if capacity and capacity <= ABOVE * max(peaks + [1e-12]) * 1e9:
        ax.axhline(capacity / 1e9, color=MARK_COLOUR, linestyle="--", linewidth=1.2,
                   label=f"GPU capacity {capacity / 1e9:.3g} GB", gid=CAPACITY_GID)
    elif capacity:
        ax.plot([], [], color=MARK_COLOUR, linestyle="--", linewidth=1.2,
                label=f"GPU capacity {capacity / 1e9:.3g} GB (above the plot)")
    ax.set_xticks(list(x), _stage_labels(stages), fontsize=7)
    ax.set_ylabel("peak GPU memory (GB)")
    ax.margins(y=0.12)  # room for the "runs out first" note
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def draw_stage_memory(panels: Sequence[tuple[str, Sequence[StageMemory]]], path: Path,
                      title: str) -> None:
    """Draw each (title, stages) panel's peak memory per stage into ``path`` (PNG)."""
    from matplotlib.patches import Patch

    fig, axes = _grid(len(panels), 4.2, 3.4)
    for ax, (name, stages) in zip(axes, panels):
        _memory_panel(ax, name, stages)
    handles, labels = axes[0].get_legend_handles_labels()
    if any(not m.fits for _, stages in panels for m in stages):
        handles.append(Patch(facecolor="#d9d9d9", hatch="xxx", edgecolor=MARK_COLOUR))
        labels.append("does not fit in memory")
    fig.legend(handles, labels, fontsize="small", loc="center right", frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)


def draw_stage_breakdown(panels: Sequence[tuple[str, Sequence[StageShares]]], path: Path,
                         title: str) -> None:
    """Draw each (title, stages) panel's step breakdown per stage into ``path`` (PNG): the
    parts of :data:`BREAKDOWN_PARTS` stacked, in % of the step."""
    fig, axes = _grid(len(panels), 4.2, 3.4)
    for ax, (name, stages) in zip(axes, panels):
        x = list(range(len(stages)))
        bottom = [0.0] * len(stages)
        for part, label, colour in BREAKDOWN_PARTS:
            heights = [100 * getattr(s, part) for s in stages]
            ax.bar(x, heights, bottom=bottom, width=0.6, color=colour, label=label)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_xticks(x, [f"stage {s.stage}" for s in stages], fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_ylabel("share of the step (%)")
        ax.set_title(name, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="small", loc="center right", frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)
