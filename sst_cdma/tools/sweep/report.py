"""``sst-cdma report``: a markdown report and the few plots a person looks at, from a sweep's
``results.csv`` — the speed-up over vDNN and the performance relative to the oracle (when the
summary has them), compute against stall time, one point's per-layer timeline, GPU memory and
plan, and each figure that varies against the swept parameter. However many parameters were
swept, a plot has the x parameter on its axis, one more as colours (legend beside the plot)
and the rest as panels (small multiples, each titled with its values); axes carry units (ms,
GB, x) and ratios a line at 1.0. Constant figures, bookkeeping and figures that only repeat
another are listed, not drawn (:mod:`.figure_choice`). Points that do not fit in memory
(:mod:`.fit`) are listed first, marked on every plot and in every table, and never chosen as
the point whose timeline is drawn while another fits; a peak memory is drawn with the capacity
it is held against. A multi-GPU sweep's ``gpus.csv`` (one row per point and GPU) gives each
GPU's memory verdicts: a GPU that does not fit is listed by name beside its point. Points
that ran a pipeline get its per-stage plots (:mod:`.stage_plots`: peak memory per stage against
the capacity, the step's breakdown per stage), a panel per point.

``sst-cdma report`` on one run's output folder (a ``summary.json``, no ``results.csv``) writes
that run's report: its pipeline's per-stage plots, its GPU memory over time, its per-layer
timeline and its plan, whichever it has.

The report is written into a folder beside the output and moved in once whole: a report that
fails halfway (a full disk) leaves the previous one as it was.

The report knows no element library's summary: which summary keys describe the simulated system
rather than measure it (and so are not plotted as figures) each library declares on its package
as ``SUMMARY_SYSTEM_KEYS`` (:func:`system_keys`)."""
from __future__ import annotations

import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from sst_cdma.engine.file_safety import remove_tree
from workloads.stream import STREAM_FILE

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, read_text
from sst_cdma.engine.library import library_modules
from sst_cdma.engine.stale_folders import owner_tag, stale_folders
from sst_cdma.tools.sweep.facets import Layout, Marks, Style, draw, layout_for
from sst_cdma.tools.sweep.figure_choice import choose_figures
from sst_cdma.tools.sweep.fit import (Memory, capacity_of, does_not_fit, gpu_unfit, memories,
                                      unfit_section)
from sst_cdma.tools.sweep.figure_units import Axis, axis_for
from sst_cdma.tools.sweep.marks import display_path
from sst_cdma.tools.sweep.table import PARAM_PREFIXES
from sst_cdma.tools.sweep.point_plots import (PointPlotError, draw_memory, draw_timeline,
                                              memory_tracks, read_summary)
from sst_cdma.tools.sweep.stage_plots import (MAX_PANELS, StagePlotError, draw_stage_breakdown,
                                              draw_stage_memory, stage_breakdown, stage_memory,
                                              stage_table)

#: an earlier report.md in the output folder (read for the plots it shows)
REPORT_FILE = FileKind("a report.md", 64 * MIB)

NOT_FIGURES = {"point", "key", "topology", "status", "error", "end_reason"}
MAX_PLOTS = 40
BASELINES = (("speedup_vs_vdnn", "baselines.vdnn.iteration_time_s",
              "speed-up over vDNN (vDNN time / time)", "speed-up over vDNN (x)"),
             ("perf_vs_oracle", "baselines.oracle.iteration_time_s",
              "performance relative to the oracle (oracle time / time)",
              "performance relative to the oracle (x)"))
#: the breakdown of an iteration drawn as stacked bars: (column, what it is)
BREAKDOWN = (("compute_time_s", "compute"), ("stall_time_s", "stall"))
#: the column the report adds to the successful points: true where a point does not fit
UNFIT = "_does_not_fit"
#: what the tables write after the figure of a point that does not fit
UNFIT_NOTE = " *(does not fit)*"
#: the marks of a plot whose figure has no capacity beside it
UNFIT_MARKS = Marks(unfit=UNFIT)


#: the attribute of an element library's package naming the summary keys that describe the
#: simulated system (a GPU count, a link) rather than what the run measured
SYSTEM_KEYS_HOOK = "SUMMARY_SYSTEM_KEYS"


class ReportError(Exception):
    """The results cannot be reported (missing file, not a sweep table, a full disk)."""


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


STYLE = Style(name=_label, value=_value)


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
    from sst_cdma.tools.sweep.table import ResultsError, read_results

    try:
        return read_results(path)
    except ResultsError as exc:
        raise ReportError(str(exc)) from None


def load_tables(path: Union[str, Path]) -> tuple[Path, Any, Any]:
    """The results table at ``path`` (as :func:`load_results`), its path and the GPU table
    beside it (None when there is none); ReportError when either cannot be read."""
    from sst_cdma.tools.sweep.table import ResultsError, read_tables

    try:
        return read_tables(path)
    except ResultsError as exc:
        raise ReportError(str(exc)) from None


def swept_columns(frame: Any) -> list[str]:
    """Parameter columns holding more than one value, in table order."""
    return [c for c in frame.columns if _is_param(c) and frame[c].nunique(dropna=True) > 1]


def _point_label(row: Any, swept: list[str]) -> str:
    return ", ".join(f"{_label(c)}={_value(c, row[c])}" for c in swept) or f"point {row['point']}"


@dataclass
class _Draft:
    """A report being written: the table, where the plots go and what was written so far."""

    folder: Path            # the sweep's output folder (its points/)
    staging: Path           # where the files are written before they are moved in
    ok: Any
    swept: list[str]
    x: str
    lines: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)

    @property
    def others(self) -> list[str]:
        """The swept parameters other than the x axis."""
        return [c for c in self.swept if c != self.x]

    def plot(self, name: str, heading: str, text: str = "", alt: str = "") -> None:
        """Record the plot ``name`` (written into the staging folder) under ``heading``,
        ``alt`` its alternative text (default: the heading)."""
        self.plots.append(name)
        self.lines += [heading, ""] + ([text, ""] if text else []) + \
            [f"![{alt or heading.lstrip('# ')}]({name})", ""]


def _resolve_x(frame: Any, x: Optional[str], swept: list[str]) -> str:
    """The x parameter's column: a swept parameter by its name (``network`` is
    ``opt.network``, not the summary's own ``network`` column), else any column; ReportError
    when there is none."""
    if x is None:
        return swept[0] if swept else "point"
    candidates = [c for c in (f"opt.{x}", f"param.{x}", x) if c in frame.columns]
    found = next((c for c in candidates if c in swept), None) or \
        next((c for c in candidates if _is_param(c)), None) or \
        next(iter(candidates), None)
    if found is None:
        raise ReportError(f"--x {x}: no such column (swept: "
                          f"{', '.join(_label(c) for c in swept) or 'none'})")
    if swept and found not in swept and frame[found].nunique(dropna=True) <= 1:
        raise ReportError(f"--x {x}: {found} holds one value over the sweep "
                          f"({_fmt(frame[found].dropna().iloc[0]) if frame[found].notna().any() else 'none'}); "
                          f"swept: {', '.join(_label(c) for c in swept)}")
    return found


def _ratio_section(draft: _Draft) -> dict[str, Any]:
    """The speed-up over vDNN and the performance relative to the oracle, when the table
    has them: markdown tables and one plot each. Returns the ratios drawn (label -> values)."""
    speed = _speedups(draft.ok, draft.swept)
    if speed is None:
        return {}
    table, specs = speed
    draft.lines += ["## Speed-up per network and configuration", ""]
    network_swept = "opt.network" in draft.swept
    x = "opt.network" if network_swept else draft.x
    others = [c for c in draft.swept if c != x]
    drawn: dict[str, Any] = {}
    for name, _, title, label in specs:
        if table[name].round(12).nunique(dropna=True) <= 1:
            draft.lines += [f"The {title} is {_fmt(table[name].iloc[0])} at every point: not "
                            "drawn.", ""]
            continue
        wide = table["configuration"].nunique() > table["network"].nunique()
        cells = table.assign(cell=[_fmt(v) + (UNFIT_NOTE if unfit else "") for v, unfit in
                                   zip(table[name], draft.ok[UNFIT])])
        pivot = cells.pivot_table(index="configuration" if wide else "network",
                                  columns="network" if wide else "configuration",
                                  values="cell", aggfunc="first", sort=False)
        frame = draft.ok.assign(**{name: table[name].to_numpy()})
        draw(frame, layout_for(frame, x, others, [name]), name, Axis(label, ratio=True),
             draft.staging / f"by_network_{name}.png", title, STYLE, marks=UNFIT_MARKS)
        draft.plot(f"by_network_{name}.png", f"### {title}", _md_table(pivot.reset_index()))
        drawn[f"the {title.split(' (')[0]}"] = frame[name]
    return drawn


def _breakdown_section(draft: _Draft, timeline: Optional[int]) -> dict[str, Any]:
    """Compute against stall time of every point, and one point's timeline, GPU memory and
    plan. Returns the series drawn (label -> values)."""
    columns = [c for c, _ in BREAKDOWN]
    if not set(columns) <= set(draft.ok.columns) or not len(draft.ok):
        return {}
    ok = draft.ok
    axis = axis_for("iteration_time_s", (ok[columns[0]] + ok[columns[1]]).tolist())
    axis = Axis(axis.label.replace("iteration time", "time per iteration"), axis.scale)
    draw(ok, layout_for(ok, draft.x, draft.others, columns), columns, axis,
         draft.staging / "stall_breakdown.png", "compute and stall time per iteration", STYLE,
         stack_labels=[label for _, label in BREAKDOWN], marks=UNFIT_MARKS)
    draft.plot("stall_breakdown.png", "## Stall breakdown", "Compute time (solid) and the time "
               "the GPU waited for copies (hatched) of every point's iteration.",
               "stall breakdown")
    row = _pick_point(ok, timeline)
    point = draft.folder / "points" / str(row["key"])
    label = f"point {row['point']}: {_point_label(row, draft.swept)}" + (
        " (does not fit in memory)" if row[UNFIT] else "")
    unfit = " It does not fit in memory: not a recommendation." if row[UNFIT] else ""
    try:
        drew = (point / "summary.json").is_file() and draw_timeline(
            point / "summary.json", draft.staging / "timeline.png", label)
    except PointPlotError as exc:
        raise ReportError(str(exc)) from None
    if drew:
        draft.plot("timeline.png", "## Per-layer timeline", f"Point {row['point']}: each "
                   "layer's kernel time and the time the GPU then waited for copies, in "
                   f"iteration order.{unfit}", "per-layer timeline")
    note = draw_memory(point, draft.staging / "memory.png", label)
    if note is None:
        draft.plot("memory.png", "## GPU memory over time", f"Point {int(row['point'])}: bytes "
                   "allocated on each GPU over the iteration (the GPU memory counters of its "
                   f"trace.json); dashed: the baselines, black: the GPU's capacity.{unfit}")
    else:
        draft.lines += ["## GPU memory over time", "",
                        f"Point {int(row['point'])}: no memory plot ({note}).", ""]
    if _plan_plot(point, label, draft.staging / "plan.png"):
        draft.plot("plan.png", "## Per-tensor plan", f"Point {int(row['point'])}: what the "
                   "iteration did with each activation tensor (keep, offload, compress, "
                   "recompute, free), bytes per tensor or per transformer block."
                   f"{unfit}", "per-tensor plan")
    return {f"the stall breakdown's {label}": ok[c] for c, label in BREAKDOWN}


def _figures_section(draft: _Draft, figures: list[str], drawn: dict[str, Any]) -> None:
    """One plot per figure that varies (a family depending on x alone: one plot), the
    constant ones and those left out listed."""
    import pandas as pd

    choice = choose_figures(draft.ok, figures, [draft.x, *draft.others], drawn,
                            always=_peaks_to_draw(draft.ok, draft.memories))
    draft.lines += [f"## Figures against `{_label(draft.x)}`", ""]
    for columns in choice.plots[:MAX_PLOTS]:
        ok = draft.ok.dropna(subset=columns)
        marks = UNFIT_MARKS
        if len(columns) == 1:
            column = name = columns[0]
            memory = capacity_of(column, draft.memories)
            if memory is not None and memory.capacity in ok.columns:
                marks = Marks(UNFIT, memory.capacity, memory.capacity_label)
                columns = [column, memory.capacity]  # laid out by what the capacity varies with
            frame, layout = ok, layout_for(ok, draft.x, draft.others, columns)
            columns = [column]
        else:  # a family: its members are the colours
            column = columns[0].rsplit(".", 1)[0]
            member = column.rsplit("_by_", 1)[1] if "_by_" in column else "member"
            frame = pd.concat([ok[[draft.x, UNFIT]].assign(**{member: c.rsplit(".", 1)[1],
                                                               column: ok[c]}) for c in columns],
                              ignore_index=True)
            layout, name = Layout(draft.x, member), column
        axis = axis_for(name, [float(v) for c in columns for v in ok[c]])
        draw(frame, layout, name, axis, draft.staging / _file_name(name),
             axis.label.rsplit(" (", 1)[0], STYLE, marks=marks)
        draft.plot(_file_name(name), f"### {axis.label}", f"`{name}`" + (
            f" ({', '.join(c.rsplit('.', 1)[1] for c in columns)})" if len(columns) > 1 else ""))
    if len(choice.plots) > MAX_PLOTS:
        draft.lines += [f"({len(choice.plots) - MAX_PLOTS} more figures not drawn: see "
                        "`sst-cdma table`.)", ""]
    if choice.constant:
        draft.lines += ["Constant over the sweep: " + "; ".join(choice.constant), ""]
    for why, columns in choice.left_out.items():
        draft.lines += [f"Not drawn, {why}: " + ", ".join(f"`{c}`" for c in columns) + ".", ""]


def _peaks_to_draw(ok: Any, found: list[Memory]) -> set[str]:
    """The peaks drawn even when they do not vary (or repeat another figure): those whose
    capacity varies over the sweep (a sweep of GPUs), beside which a constant peak is the
    point."""
    return {m.peak for m in found if {m.peak, m.capacity} <= set(ok.columns)
            and ok[m.capacity].nunique(dropna=True) > 1}


def _header(csv: Path, frame: Any, ok: Any, swept: list[str]) -> list[str]:
    lines = [f"# Sweep report: {display_path(csv)}", "",
             f"{len(frame)} points: {len(ok)} ok, {len(frame) - len(ok)} failed.", ""]
    if swept:
        lines += ["## Swept parameters", ""]
        for col in swept:
            values = ", ".join(_value(col, v) for v in dict.fromkeys(frame[col].dropna()))
            lines.append(f"- `{_label(col)}`: {values}")
        lines.append("")
    return lines


def _compose(csv: Path, frame: Any, x: Optional[str], timeline: Optional[int],
             staging: Path, gpus: Any = None) -> list[str]:
    """Write the report's markdown and plots into ``staging`` (``gpus``: the GPU table, whose
    memory verdicts mark and list the points too); returns the plots' names."""
    import pandas as pd

    ok = frame[frame["status"] == "ok"].reset_index(drop=True)
    found = memories(list(frame.columns))
    per_gpu = gpu_unfit(gpus)
    ok = ok.assign(**{UNFIT: does_not_fit(ok, found, per_gpu)})
    swept = swept_columns(frame)
    draft = _Draft(csv.parent, staging, ok, swept, _resolve_x(frame, x, swept),
                   _header(csv, frame, ok, swept), memories=found)
    draft.lines += unfit_section(ok, found, lambda row: [_value(c, row[c]) for c in swept],
                                 [_label(c) for c in swept], per_gpu)
    system = system_keys()
    figures = [c for c in frame.columns if not _is_param(c) and c not in NOT_FIGURES
               and c.split(".")[0] not in system and pd.api.types.is_numeric_dtype(frame[c])
               and not pd.api.types.is_bool_dtype(frame[c])]
    drawn = _ratio_section(draft)
    drawn.update(_breakdown_section(draft, timeline))
    _sweep_stage_section(draft)
    _figures_section(draft, figures, drawn)
    failed = frame[frame["status"] != "ok"]
    if len(failed):
        cols = ["point"] + swept + ["error"]
        draft.lines += ["## Failed points", "",
                        _md_table(failed[[c for c in cols if c in failed.columns]]), ""]
    (staging / "report.md").write_text("\n".join(draft.lines), encoding="utf-8")
    return draft.plots


def _make_output(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        in_the_way = next(p for p in (out, *out.parents) if p.exists() and not p.is_dir())
        raise ReportError(f"--output {out}: {in_the_way} is a file, not a folder") from None
    except OSError as exc:
        raise ReportError(f"--output {out}: cannot create the folder: "
                          f"{exc.strerror or exc}") from None


def _earlier_plots(markdown: Path) -> set[str]:
    """The plots an earlier report in the folder drew (the images its report.md shows)."""
    try:
        text = read_text(markdown, REPORT_FILE)
    except FileReadError:
        return set()
    return {name for name in re.findall(r"!\[[^\]]*\]\(([^)/\\]+\.png)\)", text)}


def _publish(staging: Path, out: Path, plots: list[str]) -> None:
    """Move the report from ``staging`` into ``out`` (each file replaced in one step, the
    markdown last) and remove the plots of an earlier report this one no longer draws."""
    import os

    stale = _earlier_plots(out / "report.md") - set(plots)
    for name in [*plots, "report.md"]:
        os.replace(staging / name, out / name)
    for name in stale:
        (out / name).unlink(missing_ok=True)


def write_report(results: Union[str, Path], output: Union[str, Path, None] = None,
                 x: Optional[str] = None, timeline: Optional[int] = None) -> Report:
    """Write ``report.md`` and its plots into ``output`` (default ``<results folder>/report``);
    ReportError when the table cannot be read, ``x`` is not a column, a point's summary
    cannot be drawn or the report cannot be written (a full disk: the previous report is then
    left as it was). ``timeline`` picks the point whose per-layer timeline, GPU memory
    (``memory.png``, from the point's trace.json) and plan are drawn (default: the one that
    stalls most). ``results`` may also be one run's output folder (:func:`is_run_folder`):
    then its report is :func:`_compose_run`'s, and ``x`` and ``timeline`` are refused."""
    if is_run_folder(results):
        for name, value in (("--x", x), ("--timeline", timeline)):
            if value is not None:
                raise ReportError(f"{name} {value}: {display_path(Path(results))} is one run's "
                                  "output folder, not a sweep's: there is no sweep to choose in")
        folder = Path(results)
        return _write(Path(output) if output is not None else folder / "report",
                      lambda staging: _compose_run(folder, staging))
    csv, frame, gpus = load_tables(results)
    return _write(Path(output) if output is not None else csv.parent / "report",
                  lambda staging: _compose(csv, frame, x, timeline, staging, gpus))


def is_run_folder(path: Union[str, Path]) -> bool:
    """Whether ``path`` is one run's output folder (``sst --output-directory``): a folder
    holding a ``summary.json`` and no sweep table (``results.csv``)."""
    folder = Path(path)
    return folder.is_dir() and (folder / "summary.json").is_file() and \
        not (folder / "results.csv").exists()


def _write(out: Path, compose: Callable[[Path], list[str]]) -> Report:
    """Write a report into ``out`` through a staging folder: ``compose`` writes report.md and
    the plots into the folder it is given and returns the plots' names; then they are moved
    in (ReportError when that cannot be done: the previous report stays as it was)."""
    _make_output(out)
    for stale in stale_folders(out, ".report.partial-"):  # left by a killed report
        remove_tree(stale)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".report.partial-{owner_tag()}-", dir=out))
    except OSError as exc:
        raise ReportError(f"{display_path(out)}: cannot write the report: "
                          f"{exc.strerror or exc}") from None
    try:
        plots = compose(staging)
        _publish(staging, out, plots)
    except OSError as exc:
        raise ReportError(f"{display_path(out)}: cannot write the report: "
                          f"{exc.strerror or exc} (the previous report, if any, is left as "
                          "it was)") from None
    finally:
        remove_tree(staging)
    return Report(markdown=out / "report.md", plots=[out / name for name in plots])


def _stage_panels(summaries: list[tuple[str, Path]]) -> tuple[list[Any], list[Any]]:
    """The (title, stages) panels of the stage memory and breakdown plots of each (title,
    summary.json) that ran a pipeline; ReportError when one's pipeline is malformed."""
    memory, breakdown = [], []
    for title, path in summaries:
        try:
            summary = read_summary(path)
            stages = stage_memory(summary, display_path(path))
            shares = stage_breakdown(summary, display_path(path))
        except (PointPlotError, StagePlotError) as exc:
            raise ReportError(str(exc)) from None
        if stages:
            memory.append((title, stages))
            breakdown.append((title, shares))
    return memory, breakdown


def _stage_plots(draft_plot: Callable[[str, str, str], None], staging: Path,
                 summaries: list[tuple[str, Path]], what: str) -> None:
    """Draw the stage memory and breakdown plots of ``summaries`` (title, summary.json) into
    ``staging`` and record them (``draft_plot``: name, heading, text); nothing when none ran
    a pipeline. ``what`` says whose stages they are (``the run's``, ``each point's``)."""
    memory, breakdown = _stage_panels(summaries)
    if not memory:
        return
    panels = "" if len(memory) == 1 else \
        " One panel per point: " + "; ".join(title for title, _ in memory) + "."
    draw_stage_memory(memory, staging / "stage_memory.png", "peak GPU memory per stage")
    draft_plot("stage_memory.png", "## Peak memory per pipeline stage",
               f"Peak GPU memory of {what} stages (the most of a stage's GPUs) against the "
               "GPU's capacity (dashed; named in the legend when above the plot); a stage "
               "that runs out is cross-hatched, the one that runs out first named." + panels
               + ("\n\n" + stage_table(memory[0][1], breakdown[0][1]) if len(memory) == 1
                  else ""))
    draw_stage_breakdown(breakdown, staging / "stage_breakdown.png",
                         "the step's breakdown per stage")
    draft_plot("stage_breakdown.png", "## The step per pipeline stage",
               f"Each of {what} stages' busy time (its kernels), its time in tensor-parallel "
               "collectives and its idle time (the bubble, waits in recv included), as "
               "shares of the step." + panels)


def _sweep_stage_section(draft: _Draft) -> None:
    """The sweep's stage plots: a panel per successful point that ran a pipeline (the first
    :data:`MAX_PANELS`)."""
    rows = [row for _, row in draft.ok.iterrows()
            if (draft.folder / "points" / str(row["key"]) / "summary.json").is_file()]
    summaries = [(f"point {row['point']}: {_point_label(row, draft.swept)}"
                  + (" (does not fit)" if row[UNFIT] else ""),
                  draft.folder / "points" / str(row["key"]) / "summary.json")
                 for row in rows[:MAX_PANELS]]
    _stage_plots(lambda n, h, t: draft.plot(n, h, t), draft.staging, summaries,
                 "each point's")


def _compose_run(folder: Path, staging: Path) -> list[str]:
    """Write one run's report into ``staging``: its pipeline's stage plots, its GPU memory
    over time, its per-layer timeline and its plan (whichever it has); returns the plots'
    names."""
    lines = [f"# Run report: {display_path(folder)}", ""]
    plots: list[str] = []

    def plot(name: str, heading: str, text: str) -> None:
        plots.append(name)
        lines.extend([heading, "", text, "", f"![{heading.lstrip('# ')}]({name})", ""])

    summary = folder / "summary.json"
    _stage_plots(plot, staging, [("the run", summary)], "the run's")
    if draw_memory(folder, staging / "memory.png", "the run") is None:
        plot("memory.png", "## GPU memory over time", "Bytes allocated on each GPU over the "
             "iteration (the GPU memory counters of its trace.json); black: the capacity.")
    try:
        drew = draw_timeline(summary, staging / "timeline.png", "the run")
    except PointPlotError as exc:
        raise ReportError(str(exc)) from None
    if drew:
        plot("timeline.png", "## Per-layer timeline", "Each layer's kernel time and the time "
             "the GPU then waited for copies, in iteration order.")
    if _plan_plot(folder, "the run", staging / "plan.png"):
        plot("plan.png", "## Per-tensor plan", "What the iteration did with each activation "
             "tensor, bytes per tensor or per transformer block.")
    if not plots:
        lines += ["Nothing to draw: the run's summary has no pipeline, no layers and no "
                  "plan, and it wrote no trace.json.", ""]
    (staging / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return plots


def _pick_point(ok: Any, point: Optional[int]) -> Any:
    """The row of the point whose timeline and memory are drawn: ``point``, or by default the
    one that stalls most of those that fit in memory (of all, when none fits); ReportError
    when ``point`` is not a successful point."""
    if point is None:
        fits = ok[~ok[UNFIT]]
        pool = fits if len(fits) else ok
        share = pool["stall_time_s"] / pool["iteration_time_s"]
        return pool.loc[share.idxmax()]
    match = ok[ok["point"] == point]
    if match.empty:
        raise ReportError(f"--timeline {point}: no such successful point")
    return match.iloc[0]


def _stream_sizes(point: Path) -> dict[str, int]:
    """The bytes of each activation tensor of the stream a point wrote, in stream order."""
    sizes: dict[str, int] = {}
    for stream in sorted(point.glob("*.stream"))[:1]:
        try:
            text = read_text(stream, STREAM_FILE)
        except FileReadError:
            return sizes
        for line in text.splitlines():
            if line.startswith("tensor ") and "kind=activation" in line:
                parts = line.split()
                size = next((p for p in parts if p.startswith("bytes=")), None)
                if size is not None and size[len("bytes="):].isdigit():
                    sizes[parts[1]] = int(size[len("bytes="):])
    return sizes


def _plan_plot(point: Path, label: str, path: Path) -> bool:
    """Draw one point's per-tensor plan (summary.json's ``plan``, sized by the tensors of the
    stream it wrote); False when the summary has no plan, ReportError when it is malformed."""
    from sst_cdma.tools.sweep.plan_plot import PlanError, draw_plan
    from sst_cdma.tools.sweep.point_plots import read_summary

    summary = point / "summary.json"
    if not summary.is_file():
        return False
    try:
        return draw_plan(read_summary(summary), path, f"{label} — per-tensor plan",
                         _stream_sizes(point) or None, display_path(summary))
    except (PlanError, PointPlotError) as exc:
        raise ReportError(str(exc)) from None


def _speedups(ok: Any, swept: list[str]) -> Optional[tuple[Any, list[tuple[str, ...]]]]:
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
    for name, column, _, _ in present:
        table[name] = ok[column] / ok["iteration_time_s"]
    return table, present  # type: ignore[return-value]


__all__ = ["write_report", "is_run_folder", "load_results", "load_tables", "swept_columns", "memory_tracks", "system_keys",
           "Report", "ReportError", "SYSTEM_KEYS_HOOK"]
