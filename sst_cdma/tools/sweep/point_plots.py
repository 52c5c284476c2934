"""The one-point drawings of ``sst-cdma report``: a point's per-layer timeline (kernel and
stall per layer boundary, from its summary.json's ``layers``: a row per layer, named, so that a
layer's forward kernel, backward kernel and update sit on one row; a legend keys the colours)
and its GPU memory over the iteration (the "GPU memory" counters of its trace.json)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, load_json
from sst_cdma.tools.sweep.execute import SUMMARY_FILE
from sst_cdma.tools.sweep.marks import display_path

#: a point's Chrome trace: an event per transfer and kernel, so the largest file a run writes
TRACE_FILE = FileKind("a trace.json", 4 * GIB)

__all__ = ["PointPlotError", "memory_tracks", "draw_timeline", "draw_memory"]

#: Timeline colours of the kernels of each phase, and what the legend calls them
PHASE_COLOURS = {"forward": "#4c72b0", "backward": "#55a868", "update": "#8172b2"}
PHASE_NAMES = {"forward": "forward kernel", "backward": "backward kernel",
               "update": "optimizer update kernel"}
#: the timeline's colour of the time the GPU waited for copies after a layer's kernel
STALL_COLOUR = "#dd8452"
#: a network of more layers is drawn a row per block (the part of a layer's name before its
#: first "/": ``blk0``, ``blk1``)
MAX_ROWS = 60
#: the most row names written on the axis (every n-th row's beyond)
MAX_ROW_LABELS = 60
#: what each entry of a summary's ``layers`` must hold, and of which type
_LAYER_FIELDS = {"start_s": (int, float), "end_s": (int, float), "kernel_ps": (int, float),
                 "phase": (str,), "layer": (str,)}


class PointPlotError(ValueError):
    """A point's summary.json cannot be drawn (the message names the file and the fault)."""


def read_summary(path: Path) -> dict[str, Any]:
    """The summary.json at ``path`` as a mapping; PointPlotError when it cannot be read or is
    not a JSON object."""
    try:
        doc = load_json(path, SUMMARY_FILE)
    except FileReadError as exc:
        raise PointPlotError(f"{display_path(path)}: cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise PointPlotError(f"{display_path(path)}: not a summary (a JSON object) but "
                             f"{type(doc).__name__}")
    return doc


def summary_layers(summary: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The summary's ``layers`` (each with numeric start_s, end_s, kernel_ps and a text
    phase); PointPlotError naming ``path`` and the first entry at fault."""
    layers = summary.get("layers") or []
    where = display_path(path)
    if not isinstance(layers, list):
        raise PointPlotError(f"{where}: 'layers' holds {type(layers).__name__} "
                             f"({repr(layers)[:40]}), not a list of layers")
    for n, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise PointPlotError(f"{where}: layers[{n}] is {type(layer).__name__} "
                                 f"({repr(layer)[:40]}), not a layer (an object)")
        for name, types in _LAYER_FIELDS.items():
            value = layer.get(name)
            if not isinstance(value, types) or isinstance(value, bool) or \
                    (isinstance(value, float) and not math.isfinite(value)):
                want = "text" if types == (str,) else "a finite number"
                raise PointPlotError(f"{where}: layers[{n}].{name} is {value!r}, not {want}")
    return layers


def timeline_rows(layers: list[dict[str, Any]]) -> tuple[list[str], list[int]]:
    """The timeline's rows, top to bottom (the layers in the order the forward pass meets
    them; a row per block when there are more than :data:`MAX_ROWS` and the names have
    blocks), and the row of each layer boundary."""
    names = [layer["layer"] for layer in layers]
    if len(set(names)) > MAX_ROWS and any("/" in name for name in names):
        names = [name.split("/", 1)[0] for name in names]
    rows = list(dict.fromkeys(names))
    index = {name: n for n, name in enumerate(rows)}
    return rows, [index[name] for name in names]


def _timeline_legend(ax: Any, layers: list[dict[str, Any]], stalls: list[float]) -> None:
    """The legend beside the timeline: the phases present, and the stalls when there are."""
    from matplotlib.patches import Patch

    phases = list(dict.fromkeys(layer["phase"] for layer in layers))
    handles = [Patch(color=PHASE_COLOURS.get(p, PHASE_COLOURS["backward"]),
                     label=PHASE_NAMES.get(p, f"{p} kernel")) for p in phases]
    if any(s > 0 for s in stalls):
        handles.append(Patch(color=STALL_COLOUR, label="stall: waiting for copies"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)


def draw_timeline(summary_path: Path, path: Path, title: str) -> bool:
    """Draw the per-layer timeline of the summary at ``summary_path`` into ``path``: a row per
    layer (or block), its kernels coloured by phase and the stalls after them; False when it
    has no layers, PointPlotError when its layers are malformed."""
    from matplotlib.figure import Figure

    layers = summary_layers(read_summary(summary_path), summary_path)
    if not layers:
        return False
    names, rows = timeline_rows(layers)
    fig = Figure(figsize=(11, min(16.0, max(4.5, 1.6 + 0.16 * len(names)))))
    fig.subplots_adjust(left=0.16, right=0.78, bottom=0.6 / fig.get_figheight(),
                        top=1 - 0.45 / fig.get_figheight())
    ax = fig.subplots()
    starts = [layer["start_s"] * 1e3 for layer in layers]
    kernels = [layer["kernel_ps"] * 1e-9 for layer in layers]
    stalls = [max(0.0, layer["end_s"] * 1e3 - start - kernel)
              for layer, start, kernel in zip(layers, starts, kernels)]
    ax.barh(rows, kernels, left=starts, height=0.8, linewidth=0,
            color=[PHASE_COLOURS.get(layer["phase"], PHASE_COLOURS["backward"])
                   for layer in layers])
    ax.barh(rows, stalls, left=[s + k for s, k in zip(starts, kernels)], height=0.8,
            linewidth=0, color=STALL_COLOUR)
    step = max(1, math.ceil(len(names) / MAX_ROW_LABELS))
    ax.set_yticks(range(0, len(names), step), names[::step], fontsize=7)
    ax.set_ylim(len(names) - 0.5, -0.5)        # the first layer on top
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xlabel("time in the iteration (ms)")
    ax.set_ylabel("layer" if len(names) == len({layer["layer"] for layer in layers})
                  else "block")
    ax.set_title(f"{title} — per-layer timeline", fontsize=9)
    _timeline_legend(ax, layers, stalls)
    fig.savefig(path, dpi=100)
    return True


def memory_tracks(trace: dict[str, Any]) -> dict[str, list[tuple[float, int]]]:
    """The "GPU memory" counter tracks of a Chrome trace (what the Reporter writes into
    trace.json): process name -> [(time in us, bytes)], in time order, processes in name
    order."""
    names: dict[Any, str] = {}
    tracks: dict[Any, list[tuple[float, int]]] = {}
    for event in trace.get("traceEvents", []):
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names[event.get("pid")] = str(event.get("args", {}).get("name", event.get("pid")))
        elif event.get("ph") == "C" and event.get("name") == "GPU memory":
            tracks.setdefault(event.get("pid"), []).append(
                (float(event["ts"]), int(event["args"]["bytes"])))
    out = {names.get(pid, str(pid)): sorted(points, key=lambda p: p[0])
           for pid, points in tracks.items()}
    return dict(sorted(out.items()))


def _capacity(point: Path) -> Optional[float]:
    try:
        capacity = load_json(point / "summary.json", SUMMARY_FILE).get(
            "gpu_memory_capacity_bytes")
    except (FileReadError, AttributeError):
        return None
    return float(capacity) if isinstance(capacity, (int, float)) and capacity > 0 else None


def draw_memory(point: Path, path: Path, title: str) -> Optional[str]:
    """Draw one point's GPU memory over time (a step line per GPU: the main system's solid,
    the baselines' dashed) from the counter tracks of its trace.json; returns None when drawn,
    else why not."""
    from matplotlib.figure import Figure

    try:
        tracks = memory_tracks(load_json(point / "trace.json", TRACE_FILE))
    except FileReadError as exc:
        return "the point has no trace.json" if exc.missing else \
            f"its trace.json cannot be read: {exc}"
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"its trace.json cannot be read: {exc}"
    if not tracks:
        return "its trace.json has no GPU memory counters"
    fig = Figure(figsize=(10, 4.5))
    fig.subplots_adjust(left=0.07, right=0.7, bottom=0.12, top=0.92)
    ax = fig.subplots()
    for name, points in tracks.items():
        main = "." not in name
        ax.step([t * 1e-3 for t, _ in points], [b / 1e9 for _, b in points], where="post",
                label=name, linewidth=1.6 if main else 1.0, linestyle="-" if main else "--")
    capacity = _capacity(point)
    peak = max(b for points in tracks.values() for _, b in points)
    if capacity and capacity <= 2 * peak:
        ax.axhline(capacity / 1e9, color="#1a1a1a", linestyle="--", linewidth=1.2,
                   label=f"capacity {capacity / 1e9:.3g} GB")
    elif capacity:  # drawn to scale it would flatten the curves at the bottom
        ax.plot([], [], color="#1a1a1a", linestyle="--", linewidth=1.2,
                label=f"capacity {capacity / 1e9:.3g} GB (above the plot)")
    ax.set_xlabel("time in the iteration (ms)")
    ax.set_ylabel("GPU memory allocated (GB)")
    ax.set_title(f"{title} — GPU memory over the iteration", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=100)
    return None
