"""Statistic selectors: ``[COMPONENT_GLOB:]STATISTIC.FIELD`` picks one figure out of a run's
statistics table, aggregated over the matching components (the last dump of each):
``events_received.Sum`` is the sum over all components, ``node_0_*:events_received.Max`` the
maximum over the components whose names match ``node_0_*``. Fields are the statistics table's
columns without their type suffix (Sum, SumSQ, Count, Min, Max, Bin0, ...); Min aggregates with
min, Max with max, every other field with a sum."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Optional

class SelectorError(ValueError):
    """A statistic selector is malformed."""


@dataclass(frozen=True)
class Selector:
    """A parsed selector: component glob, statistic name, field."""

    component: str
    statistic: str
    field: str

    @property
    def column(self) -> str:
        """The table column this selector fills: ``stat.<selector>``."""
        prefix = f"{self.component}:" if self.component != "*" else ""
        return f"stat.{prefix}{self.statistic}.{self.field}"


def parse_selector(text: str) -> Selector:
    """Parse ``[COMPONENT_GLOB:]STATISTIC.FIELD``; SelectorError when malformed."""
    text = text.strip()
    if text.startswith("stat."):
        text = text[len("stat."):]
    component, sep, rest = text.rpartition(":")
    if not sep:
        component, rest = "*", text
    statistic, dot, field = rest.rpartition(".")
    if not dot or not statistic or not field or not component:
        raise SelectorError(f"statistic selector {text!r} must read "
                            "[COMPONENT_GLOB:]STATISTIC.FIELD (e.g. events_received.Sum)")
    return Selector(component, statistic, field)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        return int(value)
    return value


def select(statistics: Any, selector: Selector) -> Optional[Any]:
    """The selected figure from a statistics DataFrame (the runner's columns), or None when no
    statistic matches."""
    if statistics is None or len(statistics) == 0:
        return None
    frame = statistics
    names = frame["ComponentName"].astype(str)
    mask = (frame["StatisticName"].astype(str) == selector.statistic) & \
        names.map(lambda n: fnmatch.fnmatchcase(n, selector.component))
    rows = frame[mask]
    if rows.empty:
        return None
    columns = [c for c in frame.columns if c == selector.field or
               c.rsplit(".", 1)[0] == selector.field]
    if not columns:
        return None
    keys = ["ComponentName", "StatisticName", "StatisticSubId"]
    if "SimTime" in rows.columns:
        last = rows.groupby(keys, sort=False)["SimTime"].transform("max")
        rows = rows[rows["SimTime"] == last]
    values = rows[columns[0]]
    if selector.field == "Min":
        return _plain(values.min())
    if selector.field == "Max":
        return _plain(values.max())
    return _plain(values.sum())


__all__ = ["Selector", "SelectorError", "parse_selector", "select"]
