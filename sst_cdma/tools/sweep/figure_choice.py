"""Which of a sweep's numeric columns ``sst-cdma report`` draws: the figures that vary, less
the run's bookkeeping (event counts, the simulated time that the iteration time already
gives), the reference runs and the plan's counts (the speed-up charts and the plan drawing
show them), the details of an out-of-memory event (when and by how much memory first ran
short: the report lists the points that do not fit instead), a summary's echo of a swept
parameter (its ``batch`` beside ``opt.batch``), and any figure that only repeats another
(equal, proportional or inverse, such as a slowdown beside the speed-up already drawn). A family of figures (``name.member``) that
depends on the x parameter alone is drawn as one plot, a line or bar group per member."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

from sst_cdma.tools.sweep.facets import depends_on
from sst_cdma.tools.sweep.table import RUN_COLUMNS

__all__ = ["Choice", "choose_figures", "BOOKKEEPING_PREFIXES"]

#: columns under these prefixes are not drawn on their own: the reference runs (the
#: speed-up charts divide by them) and the plan's tallies (the plan drawing shows the plan)
BOOKKEEPING_PREFIXES = ("baselines.", "plan.")
#: column endings of figures that describe the simulated system (a capacity, a link's
#: bandwidth) rather than measure the run
SYSTEM_SUFFIXES = ("_capacity_bytes", "_bandwidth_Bps")
#: relative tolerance of "the same figure, scaled"
_SAME = 1e-6
#: columns of an out-of-memory event (its time, tensor, layer, bytes short), the point's own
#: or a memory tier's
OUT_OF_MEMORY = re.compile(r"(^|\.)out_of_memory\.")


@dataclass
class Choice:
    """The plots to draw (each the columns of one figure: one, or a family's members) and
    what was left out, each entry a markdown phrase."""

    plots: list[list[str]] = field(default_factory=list)
    constant: list[str] = field(default_factory=list)
    left_out: dict[str, list[str]] = field(default_factory=dict)

    def leave_out(self, column: str, why: str) -> None:
        """Record ``column`` as not drawn, for the reason ``why``."""
        self.left_out.setdefault(why, []).append(column)


def _values(series: Any) -> list[float]:
    return [float(v) for v in series]


def _constant_factor(values: list[float]) -> bool:
    first = values[0]
    return all(math.isfinite(v) and abs(v / first - 1.0) <= _SAME for v in values)


def repeats(a: Any, b: Any) -> str:
    """``"equal to"``, ``"proportional to"`` or ``"the inverse of"`` when series ``a`` only
    repeats ``b`` (both finite and non-zero), else ``""``."""
    xs, ys = _values(a), _values(b)
    if len(xs) != len(ys) or len(xs) < 2 or not all(math.isfinite(v) for v in xs + ys):
        return ""
    if all(abs(x - y) <= _SAME * max(abs(x), abs(y)) for x, y in zip(xs, ys)):
        return "equal to"          # zeros included: a stall that is nil where nothing moves
    if not all(xs + ys):
        return ""
    if _constant_factor([x / y for x, y in zip(xs, ys)]):
        return "equal to" if abs(xs[0] / ys[0] - 1.0) <= _SAME else "proportional to"
    if _constant_factor([x * y for x, y in zip(xs, ys)]):
        return "the inverse of"
    return ""


def _bookkeeping(column: str) -> bool:
    return column in RUN_COLUMNS or column.startswith(BOOKKEEPING_PREFIXES)


def _family(column: str) -> str:
    return column.rsplit(".", 1)[0] if "." in column else ""


def _families(kept: list[str], ok: Any, swept: Sequence[str]) -> list[list[str]]:
    """``kept`` in order, the members of each family that depends on the first swept
    parameter alone (and has at least two members) gathered into one plot."""
    alone: dict[str, list[str]] = {}
    for column in kept:
        name = _family(column)
        if name and not any(depends_on(ok, column, p, swept) for p in swept[1:]):
            alone.setdefault(name, []).append(column)
    plots, done = [], set()
    for column in kept:
        name = _family(column)
        if column in done:
            continue
        members = alone.get(name, [])
        if len(members) > 1 and column in members:
            plots.append(members)
            done.update(members)
        else:
            plots.append([column])
    return plots


def _not_a_figure(column: str, ok: Any, swept: Sequence[str]) -> str:
    """Why ``column`` is no figure to draw (bookkeeping, the system, an out-of-memory event,
    the echo of a swept parameter), or ``""``."""
    if _bookkeeping(column):
        return "bookkeeping (the run's counts, the reference runs, the plan's tallies)"
    if column.endswith(SYSTEM_SUFFIXES):
        return "the simulated system rather than a measurement"
    if OUT_OF_MEMORY.search(column):
        return ("the out-of-memory event (where and by how much memory first ran short: see "
                "the points that do not fit)")
    import pandas as pd

    echo = next((p for p in swept if p in ok.columns and p != column
                 and pd.api.types.is_numeric_dtype(ok[p])
                 and not pd.api.types.is_bool_dtype(ok[p])
                 and repeats(ok[column], ok[p]) == "equal to"), None)
    return f"the swept parameter `{echo}` itself" if echo else ""


def choose_figures(ok: Any, columns: Sequence[str], swept: Sequence[str],
                   drawn: Mapping[str, Any], always: Collection[str] = ()) -> Choice:
    """The plots of ``columns`` (numeric figures of the successful points ``ok``, ``swept``
    the x parameter first), given the series already ``drawn`` elsewhere in the report (name
    -> values, aligned with ``ok``). The ``always`` columns are drawn even when constant and
    considered first, so that a figure repeating one of them is the one left out."""
    choice = Choice()
    kept: list[str] = []
    order = [c for c in columns if c in always] + [c for c in columns if c not in always]
    for column in order:
        values = ok[column]
        if values.isna().any():
            values = values.dropna()
            if values.empty:
                continue
        if column not in always and values.map(lambda v: round(float(v), 12)).nunique() <= 1:
            choice.constant.append(f"`{column}` = {float(values.iloc[0]):.6g}")
            continue
        if column in swept:
            continue
        if why := _not_a_figure(column, ok, swept):
            choice.leave_out(column, why)
            continue
        others = {**drawn, **{f"`{c}`": ok[c] for c in kept}}
        same = next(((how, name) for name, series in others.items()
                     if (how := repeats(ok[column], series))), None)
        if same is not None and column not in always:
            choice.leave_out(column, f"{same[0]} {same[1]}")
            continue
        kept.append(column)
    kept.sort(key=list(columns).index)
    choice.plots = _families(kept, ok, list(swept))
    return choice
