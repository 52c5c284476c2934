"""Small multiples for ``sst-cdma report``: a figure of a sweep drawn against one parameter
(the x axis), one colour per value of a second (the hue, in a legend beside the panels) and
one panel per combination of the rest (the facets, each titled with its values), however many
parameters were swept. Bars for a categorical x (in sweep order), lines for a numeric one;
ratios get a dashed line at 1.0; stacked bars (compute under stall) on request. Points that do
not fit in memory are marked (:class:`Marks`: their bars cross-hatched, their line points
crossed out) and a peak can have each point's capacity drawn beside it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from sst_cdma.tools.sweep.figure_units import Axis

__all__ = ["Layout", "Marks", "layout_for", "depends_on", "draw", "UNFIT_GID",
           "CAPACITY_GID"]

#: panels per row of a figure
MAX_COLUMNS = 3
#: the colours of the hue's values (matplotlib's tab10), in order
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")
#: the colour of what a plot says about memory: the cross-hatching of the points that do not
#: fit and the capacity lines
MARK_COLOUR = "#1a1a1a"
#: the ``gid`` of the artists marking points that do not fit, and of the capacity lines
UNFIT_GID, CAPACITY_GID = "does-not-fit", "capacity"
#: a capacity more than this many times the figure's largest value is named, not drawn (drawn
#: to scale, it would flatten every bar at the bottom)
ABOVE = 2.0


@dataclass
class Marks:
    """What a plot marks beside its figure: ``unfit``, a boolean column true where the point
    does not fit in memory (its bar cross-hatched, its line point crossed out), and
    ``capacity``, a column of capacities drawn as a dashed line level with each bar or along
    each line (``capacity_label`` its legend entry)."""

    unfit: Optional[str] = None
    capacity: Optional[str] = None
    capacity_label: str = "capacity"
    unfit_label: str = "does not fit in memory"


@dataclass
class Layout:
    """Which parameter is the x axis, which the colour (or none) and which the panels."""

    x: str
    hue: Optional[str] = None
    facets: list[str] = field(default_factory=list)


def _key(value: Any) -> Any:
    return round(value, 9 - int(math.floor(math.log10(abs(value))))) \
        if isinstance(value, float) and math.isfinite(value) and value else value


def depends_on(frame: Any, column: str, param: str, swept: Sequence[str]) -> bool:
    """Whether ``column`` changes with ``param`` when every other swept parameter is held
    (to 9 significant digits): a figure that does not is drawn without it."""
    held = [c for c in swept if c != param]
    groups = frame.groupby(held, sort=False, dropna=False) if held else [((), frame)]
    return any(group[column].map(_key).nunique(dropna=False) > 1 for _, group in groups)


def layout_for(frame: Any, x: str, others: Sequence[str], columns: Sequence[str]) -> Layout:
    """The layout of ``columns`` against ``x``: the other swept parameters they depend on
    become the hue (the one with the fewest values) and the panels (the rest, in table
    order)."""
    swept = [x, *others]
    needed = [p for p in others if any(depends_on(frame, c, p, swept) for c in columns)]
    if not needed:
        return Layout(x)
    hue = min(reversed(needed), key=lambda p: frame[p].nunique(dropna=False))
    return Layout(x, hue, [p for p in needed if p != hue])


def _groups(frame: Any, columns: list[str]) -> list[tuple[tuple[Any, ...], Any]]:
    if not columns:
        return [((), frame)]
    out = []
    for values, group in frame.groupby(columns, sort=False, dropna=False):
        out.append((values if isinstance(values, tuple) else (values,), group))
    return out


@dataclass
class Style:
    """How values and parameters are written on a figure."""

    name: Callable[[str], str]              # a parameter's name
    value: Callable[[str, Any], str]        # a parameter's value


def _capacity_values(rows: Any, marks: Marks, axis: Axis, limit: float) -> list[float]:
    """The capacity of each row in the axis' unit, NaN where it is missing or above
    ``limit`` (named in the legend instead)."""
    import pandas as pd

    if marks.capacity is None:
        return [math.nan] * len(rows)
    values = [math.nan if pd.isna(v) else float(v) * axis.scale for v in rows[marks.capacity]]
    return [v if v <= limit else math.nan for v in values]


def _bars(ax: Any, cats: list[str], x: str, series: list[tuple[str, Any, str]],
          axis: Axis, stack: Sequence[str], marks: Marks, limit: float) -> None:
    width = 0.8 / max(1, len(series))
    for n, (_, rows, colour) in enumerate(series):
        pos = [cats.index(v) + (n - (len(series) - 1) / 2) * width for v in rows[x].astype(str)]
        bottom = [0.0] * len(pos)
        for k, column in enumerate(stack):
            ys = [float(v) * axis.scale for v in rows[column]]
            ax.bar(pos, ys, width=width * 0.95, bottom=bottom, color=colour,
                   alpha=1.0 if k == 0 else 0.45, hatch=None if k == 0 else "///",
                   edgecolor="white" if k == 0 else colour, linewidth=0.0 if k == 0 else 0.5)
            bottom = [b + y for b, y in zip(bottom, ys)]
        if marks.unfit is not None:  # over the whole bar: the point does not fit
            bad = [(p, b) for p, b, u in zip(pos, bottom, rows[marks.unfit]) if bool(u)]
            if bad:
                ax.bar([p for p, _ in bad], [b for _, b in bad], width=width * 0.95, fill=False,
                       hatch="xx", edgecolor=MARK_COLOUR, linewidth=0.0, gid=UNFIT_GID)
            nil = [p for p, b in bad if b == 0]
            if nil:  # a bar of height 0 shows no hatching: a cross on the axis instead
                ax.plot(nil, [0.0] * len(nil), linestyle="none", marker="x", markersize=7,
                        markeredgewidth=2.0, color=MARK_COLOUR, clip_on=False, gid=UNFIT_GID)
        caps = [(p, c) for p, c in zip(pos, _capacity_values(rows, marks, axis, limit))
                if not math.isnan(c)]
        if caps:  # level with each bar: the capacity its peak is held against
            ax.hlines([c for _, c in caps], [p - width / 2 for p, _ in caps],
                      [p + width / 2 for p, _ in caps], colors=MARK_COLOUR, linestyles="--",
                      linewidth=1.4, gid=CAPACITY_GID)


def _lines(ax: Any, x: str, series: list[tuple[str, Any, str]], axis: Axis,
           column: str, marks: Marks, limit: float) -> None:
    for _, rows, colour in series:
        rows = rows.sort_values(x)
        ys = [float(v) * axis.scale for v in rows[column]]
        ax.plot(rows[x], ys, marker="o", color=colour, markersize=4)
        if marks.unfit is not None:
            bad = [(xv, y) for xv, y, u in zip(rows[x], ys, rows[marks.unfit]) if bool(u)]
            if bad:
                ax.plot([xv for xv, _ in bad], [y for _, y in bad], linestyle="none",
                        marker="x", markersize=9, markeredgewidth=2.0, color=MARK_COLOUR,
                        gid=UNFIT_GID)
        caps = [(xv, c) for xv, c in zip(rows[x], _capacity_values(rows, marks, axis, limit))
                if not math.isnan(c)]
        if caps:  # in the series' colour: whose capacity it is
            ax.plot([xv for xv, _ in caps], [c for _, c in caps], linestyle="--",
                    color=colour, linewidth=1.2, gid=CAPACITY_GID)


def _series(panel: Any, hue: Optional[str], hues: list[Any]) -> list[tuple[str, Any, str]]:
    if hue is None:
        return [("", panel, COLOURS[0])]
    return [(str(v), panel[panel[hue].astype(str) == str(v)], COLOURS[k % len(COLOURS)])
            for k, v in enumerate(hues) if (panel[hue].astype(str) == str(v)).any()]


def _legend(fig: Any, layout: Layout, hues: list[Any], style: Style,
            stack_labels: Sequence[str], anchor: tuple[float, float],
            marked: Sequence[Any] = ()) -> None:
    """The legend beside the panels: the hue's colours, the stacked figures and the
    ``marked`` handles (what a plot says about memory)."""
    from matplotlib.patches import Patch

    handles = [Patch(color=COLOURS[k % len(COLOURS)], label=style.value(layout.hue, v))
               for k, v in enumerate(hues)] if layout.hue is not None and len(hues) > 1 else []
    if len(stack_labels) > 1:
        handles += [Patch(facecolor="#8c8c8c", label=stack_labels[0]),
                    Patch(facecolor="#8c8c8c", alpha=0.45, hatch="///", edgecolor="#8c8c8c",
                          label=stack_labels[1])]
    handles += list(marked)
    if handles:
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=anchor, fontsize="small",
                   title=style.name(layout.hue) if layout.hue and len(hues) > 1 else None,
                   title_fontsize="small", frameon=False)


def _marked(frame: Any, marks: Marks, axis: Axis, numeric: bool,
            limit: float) -> list[Any]:
    """The legend handles of what ``marks`` draws on ``frame``: the points that do not fit
    (when some do not) and the capacity (a line; those above ``limit`` named with their
    values)."""
    import re

    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    if marks.unfit is not None and frame[marks.unfit].any():
        handles.append(Line2D([], [], linestyle="none", marker="x", markersize=8,
                              markeredgewidth=2.0, color=MARK_COLOUR, label=marks.unfit_label)
                       if numeric else
                       Patch(facecolor="#d9d9d9", hatch="xxx", edgecolor=MARK_COLOUR,
                             linewidth=0.0, label=marks.unfit_label))
    if marks.capacity is not None:
        values = sorted({float(v) * axis.scale for v in frame[marks.capacity].dropna()})
        if any(v <= limit for v in values):
            handles.append(Line2D([], [], color=MARK_COLOUR, linestyle="--", linewidth=1.4,
                                  label=marks.capacity_label))
        above = [f"{v:.3g}" for v in values if v > limit]
        if above:
            unit = re.search(r"\(([^)]*)\)$", axis.label)
            handles.append(Line2D([], [], color=MARK_COLOUR, linestyle="--", linewidth=1.4,
                                  label=f"{marks.capacity_label} {', '.join(above)}"
                                        f"{' ' + unit.group(1) if unit else ''} "
                                        "(above the plot)"))
    return handles


#: inches per character of an 8-point tick label, and of a small legend entry
_TICK_CHAR, _LEGEND_CHAR = 0.068, 0.075


@dataclass
class _Geometry:
    """A figure's size and margins in inches (a fixed layout: a layout engine would draw
    every figure twice)."""

    ncols: int
    nrows: int
    panel_w: float
    rotate: bool
    bottom: float       # below each row of panels: tick labels and the x label
    top: float          # above each row: the panel titles
    right: float        # the legend
    panel_h: float = 2.6
    left: float = 0.85
    gap: float = 0.25   # between panels of a row

    @property
    def size(self) -> tuple[float, float]:
        """The figure's width and height (inches)."""
        return (self.left + self.ncols * self.panel_w + (self.ncols - 1) * self.gap
                + self.right, 0.45 + self.nrows * (self.top + self.panel_h + self.bottom))

    def adjust(self, fig: Any) -> None:
        """Place the panels."""
        w, h = self.size
        fig.subplots_adjust(left=self.left / w, right=1 - self.right / w,
                            bottom=self.bottom / h, top=1 - (0.45 + self.top) / h,
                            wspace=self.gap / self.panel_w,
                            hspace=(self.top + self.bottom) / self.panel_h)


def _geometry(n_panels: int, labels: list[str], n_hues: int, legend: list[str],
              facet_lines: int) -> _Geometry:
    ncols = 2 if n_panels == 4 else min(n_panels, MAX_COLUMNS)
    nrows = math.ceil(n_panels / ncols)
    panel_w = min(7.0, max(2.8, 0.38 * len(labels) * max(1, n_hues) ** 0.5 + 0.6))
    if ncols == 1:
        panel_w = max(panel_w, 5.0)
    rotate = sum(len(t) + 2 for t in labels) * _TICK_CHAR > panel_w
    longest = max((len(t) for t in labels), default=1)
    bottom = 0.55 + (0.5 * longest * _TICK_CHAR + 0.1 if rotate else 0.2)
    right = 0.3 + (max(len(t) for t in legend) * _LEGEND_CHAR + 0.45 if legend else 0.0)
    return _Geometry(ncols, nrows, panel_w, rotate, bottom, 0.2 * facet_lines, right)


@dataclass
class _Drawing:
    """What every panel of one figure shares."""

    layout: Layout
    cats: list[str]
    axis: Axis
    stack: list[str]
    numeric: bool
    style: Style
    rotate: bool
    marks: Marks
    limit: float        # capacities above it are named in the legend, not drawn


def _panel(ax: Any, values: tuple[Any, ...], series: list[tuple[str, Any, str]],
           d: _Drawing) -> None:
    x, axis = d.layout.x, d.axis
    if d.numeric:
        _lines(ax, x, series, axis, d.stack[0], d.marks, d.limit)
    else:
        _bars(ax, d.cats, x, series, axis, d.stack, d.marks, d.limit)
        ax.set_xticks(range(len(d.cats)), [d.style.value(x, c) for c in d.cats],
                      rotation=30 if d.rotate else 0, ha="right" if d.rotate else "center",
                      fontsize=8)
    if axis.ratio:
        ax.axhline(1.0, color="#333333", linestyle="--", linewidth=0.9, zorder=0)
    ax.grid(True, axis="y", alpha=0.3)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    if d.numeric:
        ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    if values:
        ax.set_title("\n".join(f"{d.style.name(c)} = {d.style.value(c, v)}"
                               for c, v in zip(d.layout.facets, values)), fontsize=9)
    ax.set_xlabel(d.style.name(x), fontsize=9)


def _one_per_bar(frame: Any, layout: Layout, marks: Marks) -> Any:
    """``frame`` with one row per bar (or line point): the rows that differ only in the
    parameters the layout leaves out show the same figure; such a bar is marked as not
    fitting only when none of its points fits (the figure is then no one's that fits)."""
    subset = [layout.x, *([layout.hue] if layout.hue else []), *layout.facets]
    if marks.unfit is not None:
        unfit = frame[marks.unfit].fillna(False).astype(bool)
        frame = frame.assign(**{marks.unfit: unfit.groupby(
            [frame[c] for c in subset], sort=False, dropna=False).transform("all")})
    return frame.drop_duplicates(subset=subset)


def _ylim(fig: Any, axes: Any, axis: Axis, caps: list[float]) -> None:
    """Room above the tallest bar (stacked bars outgrow the autoscale) and the highest
    capacity drawn."""
    tops = [t for ax in fig.axes for t in (p.get_y() + p.get_height() for p in ax.patches)]
    low = min(0.0, min(tops, default=0.0))
    high = max([*tops, *caps], default=1.0)
    if axis.ratio:
        high = max(high, 1.0)
    axes[0][0].set_ylim(low * 1.05, high * 1.06 if high > 0 else 1.0)


def draw(frame: Any, layout: Layout, column: str | Sequence[str], axis: Axis, path: Path,
         title: str, style: Style, stack_labels: Sequence[str] = (),
         marks: Optional[Marks] = None) -> None:
    """Draw ``column`` of ``frame`` (the sweep's successful points) as ``layout`` says into
    ``path`` (PNG); two columns with ``stack_labels`` are drawn stacked, the second hatched;
    ``marks`` says which points do not fit and which capacity to draw beside the figure."""
    import pandas as pd
    from matplotlib.figure import Figure

    marks = marks or Marks()
    stack = [column] if isinstance(column, str) else list(column)
    x = layout.x
    frame = _one_per_bar(frame, layout, marks)
    numeric = pd.api.types.is_numeric_dtype(frame[x]) and not stack_labels \
        and not pd.api.types.is_bool_dtype(frame[x])
    cats = list(dict.fromkeys(frame[x].astype(str)))
    hues = list(dict.fromkeys(frame[layout.hue])) if layout.hue else []
    panels = _groups(frame, layout.facets)
    largest = max((abs(float(v)) for v in frame[stack].sum(axis=1) if math.isfinite(v)),
                  default=0.0) * axis.scale
    d = _Drawing(layout, cats, axis, stack, numeric, style, False, marks,
                 ABOVE * largest if largest > 0 else math.inf)
    marked = _marked(frame, marks, axis, numeric, d.limit)
    legend = ([str(style.name(layout.hue))] + [style.value(layout.hue, v) for v in hues]  # type: ignore[arg-type]
              if len(hues) > 1 else []) + (list(stack_labels) if len(stack_labels) > 1 else []) \
        + [h.get_label() for h in marked]
    geo = _geometry(len(panels), [] if numeric else [style.value(x, c) for c in cats],
                    len(hues), legend, len(layout.facets))
    d.rotate = geo.rotate
    fig = Figure(figsize=geo.size)
    axes = fig.subplots(geo.nrows, geo.ncols, sharey=True, squeeze=False)
    geo.adjust(fig)
    for n, (values, panel) in enumerate(panels):
        ax = axes[n // geo.ncols][n % geo.ncols]
        _panel(ax, values, _series(panel, layout.hue, hues), d)
        if n % geo.ncols == 0:
            ax.set_ylabel(axis.label, fontsize=9)
    if not numeric:
        _ylim(fig, axes, axis, [c for c in _capacity_values(frame, marks, axis, d.limit)
                                if not math.isnan(c)])
    for n in range(len(panels), geo.nrows * geo.ncols):
        axes[n // geo.ncols][n % geo.ncols].set_visible(False)
    w, h = geo.size
    _legend(fig, layout, hues, style, stack_labels, (1 - (geo.right - 0.1) / w,
                                                     1 - (0.45 + geo.top) / h), marked)
    fig.suptitle(title, fontsize=11, y=1 - 0.12 / h, va="top")
    fig.savefig(path, dpi=100)
