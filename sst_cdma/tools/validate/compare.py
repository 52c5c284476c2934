"""The simulated beside the measured: each configuration a validation run measured is simulated
in this process (``sst_cdma.run`` on ``topologies/pascal_cdma.py`` with the measured device's
``--gpu`` preset), and the figures are put side by side, per layer and per step.

- Layers: each network and dtype timed by part (a), simulated without offload (``--policy
  none``); each layer's forward and backward kernel time (the summary's ``layers``,
  ``kernel_ps``) against the measured.
- Steps: each training step of part (d), simulated as a float32 step with Adam (``--optimizer
  adam``), with every activation offloaded uncompressed (``--policy all --algorithm none``) or
  none kept off the GPU (``--policy none``): step, forward, backward and update time, the
  peak GPU memory, the bytes offloaded, and each layer's span of the timeline.
- Rates: the best measured device copy and pinned host copies against the preset's DRAM
  bandwidth and the host link's rate the simulation used; the host CPU's Adam per core
  against the shipped measurement the simulator takes by default.
"""
from __future__ import annotations

import io
import math
from typing import Any, Optional, Sequence

import pandas as pd

import sst_cdma
from sst_cdma.model.cpu_adam import load_cpu_adam
from sst_cdma.model.gpus import GPUS
from sst_cdma.tools.cli.topology_list import path_of
from sst_cdma.tools.validate.bandwidth import BandwidthFigure
from sst_cdma.tools.validate.layers import LayerRun
from sst_cdma.tools.validate.training import StepTiming

__all__ = ["COLUMNS", "TOPOLOGY", "simulate", "layer_rows", "step_rows", "rate_rows",
           "markdown", "comparison"]

#: the topology every configuration is simulated on (its --gpu preset set per run)
TOPOLOGY = "pascal_cdma"
#: the comparison table's columns
COLUMNS = ("part", "config", "layer", "what", "measured", "simulated", "unit",
           "simulated_over_measured")

Summary = dict[str, Any]


def simulate(network: str, batch: int, dtype: str, preset: str,
             options: Sequence[str] = ()) -> Summary | str:
    """The summary of one simulated iteration, or the one-line reason the simulator refused
    it (a dtype the preset cannot run...)."""
    argv = ["--network", network, "--batch", str(batch), "--dtype", dtype, "--gpu", preset,
            "--no-baselines", *options]
    try:
        result = sst_cdma.run(path_of(TOPOLOGY), argv, console=io.StringIO())
    except sst_cdma.RunError as exc:
        return f"the simulator refused it: {exc}"
    summary: Summary = result.reports["summary"]
    return summary


def _row(part: str, config: str, layer: str, what: str, measured: Optional[float],
         simulated: Optional[float], unit: str) -> dict[str, Any]:
    ratio = simulated / measured if measured and simulated is not None else math.nan
    return {"part": part, "config": config, "layer": layer, "what": what,
            "measured": math.nan if measured is None else measured,
            "simulated": math.nan if simulated is None else simulated, "unit": unit,
            "simulated_over_measured": ratio}


def _sim_kernels(summary: Summary) -> dict[tuple[str, str], float]:
    """(layer, phase) -> the summed simulated kernel ms."""
    out: dict[tuple[str, str], float] = {}
    for entry in summary.get("layers", []):
        key = (entry["layer"], entry["phase"])
        out[key] = out.get(key, 0.0) + entry.get("kernel_ps", 0) / 1e9
    return out


def layer_rows(run: LayerRun, summary: Summary | str) -> list[dict[str, Any]]:
    """Each layer's measured and simulated forward and backward ms of one timed network, then
    the network's totals of each (layer ``(all)``)."""
    config = f"{run.times.network} batch {run.batch} {run.dtype}"
    sim = _sim_kernels(summary) if isinstance(summary, dict) else {}
    rows = []
    totals: dict[str, list[float]] = {"forward": [0.0, 0.0], "backward": [0.0, 0.0]}
    for layer, passes in run.times.times_ps.items():
        for key, phase in (("fwd", "forward"), ("bwd", "backward")):
            simulated = sim.get((layer, phase)) if sim else None
            rows.append(_row("layers", config, layer, phase, passes[key] / 1e9, simulated,
                             "ms"))
            totals[phase][0] += passes[key] / 1e9
            totals[phase][1] += simulated or 0.0
    rows += [_row("layers", config, "(all)", phase, measured, simulated if sim else None, "ms")
             for phase, (measured, simulated) in totals.items()]
    return rows


def step_rows(step: StepTiming, summary: Summary | str) -> list[dict[str, Any]]:
    """The step's phases, peak memory and per-layer spans, measured and simulated."""
    config = (f"{step.network} batch {step.batch} {step.dtype} "
              + ("activations offloaded" if step.offload else "no offload"))
    sim = summary if isinstance(summary, dict) else {}
    rows = [_row("step", config, "", what, measured * 1e3,
                 sim[key] * 1e3 if key in sim else None, "ms")
            for what, measured, key in (
                ("step", step.step_s, "iteration_time_s"),
                ("forward", step.forward_s, "forward_time_s"),
                ("backward", step.backward_s, "backward_time_s"),
                ("update", step.update_s, "update_time_s"))]
    rows.append(_row("step", config, "", "peak memory",
                     None if step.peak_memory is None else step.peak_memory / 2**20,
                     sim["peak_gpu_memory_bytes"] / 2**20 if sim else None, "MiB"))
    if step.offload:
        rows.append(_row("step", config, "", "offloaded", step.offloaded_bytes / 2**20,
                         sim["offloaded_bytes"] / 2**20 if sim else None, "MiB"))
    spans: dict[tuple[str, str], float] = {}
    for entry in sim.get("layers", []):
        key = (entry["layer"], entry["phase"])
        spans[key] = spans.get(key, 0.0) + (entry["end_ps"] - entry["start_ps"]) / 1e9
    for span in step.spans:
        if span.phase != "update":
            rows.append(_row("timeline", config, span.layer, span.phase, span.seconds * 1e3,
                             spans.get((span.layer, span.phase)) if sim else None, "ms"))
    return rows


def rate_rows(preset: Optional[str], device: Sequence[BandwidthFigure],
              copies: Sequence[BandwidthFigure], link_Bps: Optional[float],
              adam: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    """The best measured rates against the model's figures (GB/s, M parameters/s)."""
    def best(figures: Sequence[BandwidthFigure], what: str) -> Optional[float]:
        rates = [f.bytes_per_s / 1e9 for f in figures if f.what == what]
        return max(rates) if rates else None

    model_dram = GPUS[preset].dram_bandwidth_Bps / 1e9 if preset else None
    link = link_Bps / 1e9 if link_Bps else None
    rows = [_row("rates", preset or "", "", "device copy (DRAM peak)",
                 best(device, "device copy"), model_dram, "GB/s"),
            _row("rates", preset or "", "", "add kernel (DRAM peak)",
                 best(device, "add kernel"), model_dram, "GB/s")]
    for what in ("host to device", "device to host"):
        rows.append(_row("rates", preset or "", "", f"pinned {what} (host link)",
                         best(copies, what), link, "GB/s"))
    if adam is not None:
        shipped = load_cpu_adam()
        rows.append(_row("rates", "host CPU", "", "CPU Adam per core (shipped default)",
                         adam["params_per_s_per_core"] / 1e6,
                         shipped.params_per_s_per_core / 1e6, "M params/s"))
    return rows


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def markdown(table: pd.DataFrame, notes: Sequence[str]) -> str:
    """The comparison as markdown: the notes, then a table per part."""
    lines = [f"- {n}" for n in notes] + ([""] if notes else [])
    titles = {"rates": "Rates", "step": "Training steps", "layers": "Layers",
              "timeline": "Training steps, per layer"}
    columns = [c for c in COLUMNS if c != "part"]
    for part, title in titles.items():
        rows = table[table["part"] == part]
        if rows.empty:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(columns) + " |",
                  "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_cell(row[c]) for c in columns) + " |"
                  for _, row in rows.iterrows()]
        lines.append("")
    return "\n".join(lines)


def comparison(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a table with :data:`COLUMNS`."""
    return pd.DataFrame(list(rows), columns=list(COLUMNS))

