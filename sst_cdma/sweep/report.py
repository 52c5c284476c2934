"""``sst-cdma report``: a markdown report and PNG plots from a sweep's ``results.csv`` — every
numeric figure against the swept parameter (one line or bar group per combination of the other
swept parameters), and, when the summary has them, the speed-up over vDNN and the performance
relative to the oracle per network and configuration; one point's per-layer timeline (from its
summary.json) and GPU memory over time (from its trace.json).

The report knows no element library's summary: which summary keys describe the simulated system
rather than measure it (and so are not plotted as figures) each library declares on its package
as ``SUMMARY_SYSTEM_KEYS`` (:func:`system_keys`)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from ..library import library_modules
from .marks import display_path

PARAM_PREFIXES = ("opt.", "param.")
NOT_FIGURES = {"point", "key", "topology", "status", "error", "end_reason"}
MAX_PLOTS = 100
BASELINES = (("speedup_vs_vdnn", "baselines.vdnn.iteration_time_s",
              "speed-up over vDNN (vDNN time / time)"),
             ("perf_vs_oracle", "baselines.oracle.iteration_time_s",
              "performance relative to the oracle (oracle time / time)"))


#: the attribute of an element library's package naming the summary keys that describe the
#: simulated system (a GPU count, a link) rather than what the run measured
SYSTEM_KEYS_HOOK = "SUMMARY_SYSTEM_KEYS"


class ReportError(Exception):
    """The results cannot be reported (missing file, not a sweep table)."""


def system_keys() -> frozenset[str]:
    """The top-level summary keys that every element library declares (its package's
    ``SUMMARY_SYSTEM_KEYS``) as describing the simulated system: their columns are not plotted
    as figures. ReportError when a library's package cannot be imported."""
    import importlib

    keys: set[str] = set()
    for library, package in library_modules().items():
        try:
            module = importlib.import_module(package)
        except ImportError as exc:
            raise ReportError(f"element library {library} (package {package}) cannot be "
                              f"imported: {exc}") from None
        keys.update(getattr(module, SYSTEM_KEYS_HOOK, ()))
    return frozenset(keys)


@dataclass
class Report:
    """What was written: the markdown file and the plots."""

    markdown: Path
    plots: list[Path] = field(default_factory=list)


#: Timeline colours of the kernels of each phase (stalls are orange).
_PHASE_COLOURS = {"forward": "#4c72b0", "backward": "#55a868", "update": "#8172b2"}


def _is_param(column: str) -> bool:
    return column == "topology" or column.startswith(PARAM_PREFIXES)


def _label(column: str) -> str:
    for prefix in PARAM_PREFIXES:
        if column.startswith(prefix):
            return column[len(prefix):]
    return column


def _file_name(column: str) -> str:
    return re.sub(r"[^\w.-]+", "_", column).strip("_") + ".png"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.6g}"
    return str(value)


def _value(column: str, value: Any) -> str:
    """A parameter value as a label (a topology by its file's stem)."""
    if column == "topology" and isinstance(value, str):
        return Path(value).stem
    return _fmt(value)


def _md_table(frame: Any) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def load_results(path: Union[str, Path]) -> tuple[Path, Any]:
    """The results table at ``path`` (a sweep output folder or its ``results.csv``);
    ReportError when it is missing, truncated, empty or not a sweep's table."""
    from .table import ResultsError, read_results

    try:
        return read_results(path)
    except ResultsError as exc:
        raise ReportError(str(exc)) from None


def swept_columns(frame: Any) -> list[str]:
    """Parameter columns holding more than one value, in table order."""
    return [c for c in frame.columns if _is_param(c) and frame[c].nunique(dropna=True) > 1]


def _series(frame: Any, others: list[str]) -> list[tuple[str, Any]]:
    if not others:
        return [("", frame)]
    out = []
    for values, group in frame.groupby(others, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        out.append((", ".join(_fmt(v) if c == "configuration" else
                              f"{_label(c)}={_value(c, v)}" for c, v in zip(others, values)),
                    group))
    return out


def _plot(frame: Any, x: str, y: str, others: list[str], path: Path, title: str) -> None:
    from matplotlib.figure import Figure

    import pandas as pd

    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    series = _series(frame, others)
    numeric_x = pd.api.types.is_numeric_dtype(frame[x])
    if numeric_x:
        for name, group in series:
            group = group.sort_values(x)
            ax.plot(group[x], group[y], marker="o", label=name or None)
    else:
        cats = list(dict.fromkeys(frame[x].astype(str)))
        width = 0.8 / max(1, len(series))
        for n, (name, group) in enumerate(series):
            pos = [cats.index(v) + (n - (len(series) - 1) / 2) * width
                   for v in group[x].astype(str)]
            ax.bar(pos, group[y], width=width, label=name or None)
        ax.set_xticks(range(len(cats)), [_value(x, c) for c in cats],
                      rotation=30 if len(cats) > 4 else 0)
    ax.set_xlabel(_label(x))
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write_report(results: Union[str, Path], output: Union[str, Path, None] = None,
                 x: Optional[str] = None, timeline: Optional[int] = None) -> Report:
    """Write ``report.md`` and its plots into ``output`` (default ``<results folder>/report``);
    ReportError when the table cannot be read or ``x`` is not a column. ``timeline`` picks the
    point whose per-layer timeline and GPU memory (``memory.png``, from the point's trace.json)
    are drawn (default: the one that stalls most)."""
    import pandas as pd

    csv, frame = load_results(results)
    out = Path(output) if output is not None else csv.parent / "report"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        in_the_way = next(p for p in (out, *out.parents) if p.exists() and not p.is_dir())
        raise ReportError(f"--output {out}: {in_the_way} is a file, not a folder") from None
    except OSError as exc:
        raise ReportError(f"--output {out}: cannot create the folder: "
                          f"{exc.strerror or exc}") from None
    ok = frame[frame["status"] == "ok"].copy()
    swept = swept_columns(frame)
    if x is not None:
        candidates = [x, f"opt.{x}", f"param.{x}"]
        found = next((c for c in candidates if c in frame.columns), None)
        if found is None:
            raise ReportError(f"--x {x}: no such column (swept: "
                              f"{', '.join(_label(c) for c in swept) or 'none'})")
        x = found
    else:
        x = swept[0] if swept else "point"
    others = [c for c in swept if c != x]
    system = system_keys()
    figures = [c for c in frame.columns if not _is_param(c) and c not in NOT_FIGURES
               and c.split(".")[0] not in system and pd.api.types.is_numeric_dtype(frame[c])]
    lines = [f"# Sweep report: {display_path(csv)}", "",
             f"{len(frame)} points: {len(ok)} ok, {len(frame) - len(ok)} failed.", ""]
    if swept:
        lines += ["## Swept parameters", ""]
        for col in swept:
            values = ", ".join(_value(col, v) for v in dict.fromkeys(frame[col].dropna()))
            lines.append(f"- `{_label(col)}`: {values}")
        lines.append("")
    report = Report(markdown=out / "report.md")

    speed = _speedups(ok, swept)
    if speed is not None:
        table, plots_spec = speed
        lines += ["## Speed-up per network and configuration", ""]
        for name, column, title in plots_spec:
            wide = table["configuration"].nunique() > table["network"].nunique()
            pivot = table.pivot_table(index="configuration" if wide else "network",
                                      columns="network" if wide else "configuration",
                                      values=name, sort=False)
            lines += [f"### {title}", "", _md_table(pivot.reset_index()), ""]
            path = out / f"by_network_{name}.png"
            sub = table.rename(columns={"network": "opt.network"})
            _plot(sub, "opt.network", name, ["configuration"] if
                  sub["configuration"].nunique() > 1 else [], path, title)
            report.plots.append(path)
            lines += [f"![{title}]({path.name})", ""]

    if {"compute_time_s", "stall_time_s"} <= set(ok.columns) and len(ok):
        path = out / "stall_breakdown.png"
        _stall_breakdown(ok, swept, path)
        report.plots.append(path)
        lines += ["## Stall breakdown", "", "Compute and stall time of every point's iteration.",
                  "", f"![stall breakdown]({path.name})", ""]
        row = _pick_point(ok, timeline)
        chosen = _timeline(csv.parent, row, swept, out / "timeline.png")
        if chosen is not None:
            report.plots.append(out / "timeline.png")
            lines += ["## Per-layer timeline", "", f"Point {chosen}: each layer's kernel time "
                      "and the time the GPU then waited for copies, in iteration order.", "",
                      "![per-layer timeline](timeline.png)", ""]
        lines += ["## GPU memory over time", ""]
        note = _memory_plot(csv.parent, row, swept, out / "memory.png")
        if note is None:
            report.plots.append(out / "memory.png")
            lines += [f"Point {int(row['point'])}: bytes allocated on each GPU over the "
                      "iteration (the GPU memory counters of its trace.json); dashed: the "
                      "baselines.", "", "![GPU memory over time](memory.png)", ""]
        else:
            lines += [f"Point {int(row['point'])}: no memory plot ({note}).", ""]
        if _plan_plot(csv.parent, row, swept, out / "plan.png"):
            report.plots.append(out / "plan.png")
            lines += ["## Per-tensor plan", "", f"Point {int(row['point'])}: what the iteration "
                      "did with each activation tensor (keep, offload, compress, recompute, "
                      "free), bytes per tensor or per transformer block.", "",
                      "![per-tensor plan](plan.png)", ""]

    lines += [f"## Figures against `{_label(x)}`", ""]
    skipped_constant, plotted = [], 0
    for col in figures:
        values = ok[col].dropna()
        if values.empty:
            continue
        if values.nunique() <= 1:
            skipped_constant.append(f"`{col}` = {_fmt(values.iloc[0])}")
            continue
        if plotted >= MAX_PLOTS or col == x:
            continue
        path = out / _file_name(col)
        _plot(ok.dropna(subset=[col]), x, col, others, path, col)
        report.plots.append(path)
        plotted += 1
        lines += [f"### {col}", "", f"![{col}]({path.name})", ""]
    if skipped_constant:
        lines += ["Constant over the sweep: " + "; ".join(skipped_constant), ""]
    failed = frame[frame["status"] != "ok"]
    if len(failed):
        lines += ["## Failed points", ""]
        cols = ["point"] + swept + ["error"]
        lines += [_md_table(failed[[c for c in cols if c in failed.columns]]), ""]
    report.markdown.write_text("\n".join(lines), encoding="utf-8")
    return report


def _point_label(row: Any, swept: list[str]) -> str:
    return ", ".join(f"{_label(c)}={_value(c, row[c])}" for c in swept) or f"point {row['point']}"


def _stall_breakdown(ok: Any, swept: list[str], path: Path) -> None:
    """Stacked bars: compute and stall seconds per point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [_point_label(row, swept) for _, row in ok.iterrows()]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(labels) + 2), 4.5))
    pos = range(len(labels))
    ax.bar(pos, ok["compute_time_s"], label="compute", color="#4c72b0")
    ax.bar(pos, ok["stall_time_s"], bottom=ok["compute_time_s"], label="stall",
           color="#dd8452")
    ax.set_xticks(list(pos), labels, rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("seconds per iteration")
    ax.set_title("compute vs stall")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _pick_point(ok: Any, point: Optional[int]) -> Any:
    """The row of the point whose timeline and memory are drawn: ``point``, or by default the
    one that stalls most; ReportError when ``point`` is not a successful point."""
    if point is None:
        share = ok["stall_time_s"] / ok["iteration_time_s"]
        return ok.loc[share.idxmax()]
    match = ok[ok["point"] == point]
    if match.empty:
        raise ReportError(f"--timeline {point}: no such successful point")
    return match.iloc[0]


def _plan_plot(folder: Path, row: Any, swept: list[str], path: Path) -> bool:
    """Draw one point's per-tensor plan (summary.json's ``plan``, sized by the tensors of the
    stream it wrote); False when the summary has no plan."""
    import json

    from .plan_plot import draw_plan

    point = folder / "points" / str(row["key"])
    summary = point / "summary.json"
    if not summary.is_file():
        return False
    sizes: dict[str, int] = {}
    for stream in sorted(point.glob("*.stream"))[:1]:
        for line in stream.read_text(encoding="utf-8").splitlines():
            if line.startswith("tensor ") and "kind=activation" in line:
                parts = line.split()
                size = next(p for p in parts if p.startswith("bytes="))
                sizes[parts[1]] = int(size[len("bytes="):])
    title = f"point {row['point']}: {_point_label(row, swept)} — per-tensor plan"
    return draw_plan(json.loads(summary.read_text(encoding="utf-8")), path, title,
                     sizes or None)


def _timeline(folder: Path, row: Any, swept: list[str], path: Path) -> Optional[int]:
    """Draw one point's per-layer timeline (kernel and stall per layer boundary) from its
    summary.json; returns the point drawn, or None when its summary has no layers."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = folder / "points" / str(row["key"]) / "summary.json"
    if not summary.is_file():
        return None
    layers = json.loads(summary.read_text(encoding="utf-8")).get("layers") or []
    if not layers:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, layer in enumerate(layers):
        start, end = layer["start_s"] * 1e3, layer["end_s"] * 1e3
        kernel = layer["kernel_ps"] * 1e-9
        colour = _PHASE_COLOURS.get(layer["phase"], "#55a868")
        ax.broken_barh([(start, kernel)], (i - 0.4, 0.8), color=colour)
        if end - start > kernel:
            ax.broken_barh([(start + kernel, end - start - kernel)], (i - 0.4, 0.8),
                           color="#dd8452")
    ax.set_xlabel("time in the iteration (ms)")
    ax.set_ylabel("layer boundary (forward, backward, update)")
    ax.set_title(f"point {row['point']}: {_point_label(row, swept)} — blue/green/purple kernels "
                 "(forward/backward/optimizer update), orange stalls", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return int(row["point"])


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


def _memory_plot(folder: Path, row: Any, swept: list[str], path: Path) -> Optional[str]:
    """Draw one point's GPU memory over time (a step line per GPU: the main system's solid,
    the baselines' dashed) from the counter tracks of its trace.json; returns None when drawn,
    else why not."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    point = folder / "points" / str(row["key"])
    trace = point / "trace.json"
    if not trace.is_file():
        return "the point has no trace.json"
    try:
        tracks = memory_tracks(json.loads(trace.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"its trace.json cannot be read: {exc}"
    if not tracks:
        return "its trace.json has no GPU memory counters"
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, points in tracks.items():
        main = "." not in name
        ax.step([t * 1e-3 for t, _ in points], [b / 1e9 for _, b in points], where="post",
                label=name, linewidth=1.6 if main else 1.0, linestyle="-" if main else "--")
    summary = point / "summary.json"
    if summary.is_file():
        try:
            capacity = json.loads(summary.read_text(encoding="utf-8")).get(
                "gpu_memory_capacity_bytes")
        except (OSError, ValueError):
            capacity = None
        peak = max(b for points in tracks.values() for _, b in points)
        if capacity and capacity <= 2 * peak:
            ax.axhline(capacity / 1e9, color="#c44e52", linestyle=":", linewidth=1.0,
                       label="capacity")
        elif capacity:  # drawn to scale it would flatten the curves at the bottom
            ax.plot([], [], color="#c44e52", linestyle=":", linewidth=1.0,
                    label=f"capacity {capacity / 1e9:.3g} GB (above the plot)")
    ax.set_xlabel("time in the iteration (ms)")
    ax.set_ylabel("GPU memory allocated (GB)")
    ax.set_title(f"point {row['point']}: {_point_label(row, swept)} — GPU memory over the "
                 "iteration", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def _speedups(ok: Any, swept: list[str]) -> Optional[tuple[Any, list[tuple[str, str, str]]]]:
    """Speed-ups per network and configuration, when the table has the columns."""
    if "opt.network" not in ok.columns or "iteration_time_s" not in ok.columns:
        return None
    present = [b for b in BASELINES if b[1] in ok.columns]
    if not present:
        return None
    config_cols = [c for c in swept if c != "opt.network"]
    table = ok[["opt.network"] + config_cols].copy()
    table.columns = ["network"] + config_cols
    if config_cols:
        table["configuration"] = [", ".join(f"{_label(c)}={_value(c, v)}" for c, v in zip(
            config_cols, values)) for values in ok[config_cols].itertuples(index=False)]
    else:
        table["configuration"] = "all"
    for name, column, _ in present:
        table[name] = ok[column] / ok["iteration_time_s"]
    return table, [(name, column, title) for name, column, title in present]


__all__ = ["write_report", "load_results", "swept_columns", "memory_tracks", "system_keys",
           "Report", "ReportError", "SYSTEM_KEYS_HOOK"]
