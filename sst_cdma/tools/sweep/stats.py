"""Statistic selectors: ``[COMPONENT_GLOB:]STATISTIC.FIELD`` picks one figure out of a run's
statistics table, aggregated over the matching components (the last dump of each):
``events_received.Sum`` is the sum over all components, ``node_0_*:events_received.Max`` the
maximum over the components whose names match ``node_0_*``. Fields are the statistics table's
columns without their type suffix (Sum, SumSQ, Count, Min, Max, Bin0, ...); Min aggregates with
min, Max with max, every other field with a sum.

A selector must be able to match: :func:`parse_selector` refuses a statistic that no element of
any element library declares (``sst-info`` lists them) and a field that no statistic type has,
before anything runs. Whether it matches in a given run (the statistic enabled there, a component
matching the glob, a field of the statistic's type) is known only once the run is over: then
:func:`select` returns None, and the caller decides (a sweep: a statistic may be absent from some
points, not from all; a regression case: it must match in its run)."""
from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional


class SelectorError(ValueError):
    """A statistic selector is malformed, or names a statistic or field that cannot exist."""


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


def field_family(name: str) -> str:
    """A field as a selector names it: a histogram bin ``Bin3:15000-19999`` is ``Bin3``."""
    return name.split(":", 1)[0]


def _family_pattern(name: str) -> str:
    """A field name with its index replaced: ``Bin3`` -> ``Bin<N>`` (other names unchanged)."""
    return re.sub(r"^([A-Za-z]+)\d+$", r"\1<N>", field_family(name))


@lru_cache(maxsize=1)
def type_fields() -> dict[str, tuple[str, ...]]:
    """Statistic kind (the table's StatisticType: Accumulator, Histogram) -> the fields it
    outputs, a numbered family written ``Bin<N>``."""
    from sst_cdma.engine.statistics.types import STATISTIC_TYPES

    out: dict[str, tuple[str, ...]] = {}
    for cls in STATISTIC_TYPES.values():
        try:
            fields = cls("component", "statistic").fields()  # type: ignore[abstract]
        except Exception:  # a type that cannot be built with its defaults: nothing to learn
            continue
        if fields:
            out[cls.kind] = tuple(dict.fromkeys(_family_pattern(f[0]) for f in fields))
    return out


def kind_has_field(kind: str, field: str) -> Optional[bool]:
    """Whether statistics of ``kind`` output ``field`` (None when the kind is unknown)."""
    fields = type_fields().get(kind)
    return None if fields is None else _family_pattern(field) in fields


@lru_cache(maxsize=1)
def declared_statistics() -> Optional[frozenset[str]]:
    """The names of the statistics some element of some element library declares (what
    ``sst-info`` lists); None when a library cannot be loaded (then nothing can be ruled
    out)."""
    from sst_cdma.engine.library import library_modules, load_library

    names: set[str] = set()
    try:
        for library in library_modules():
            for cls in load_library(library).values():
                names.update(decl.name for decl in cls.STATISTICS)
    except Exception:
        return None
    return frozenset(names)


def check_selector(selector: Selector, text: str) -> None:
    """SelectorError when ``selector`` can match in no run: its statistic is declared by no
    element of any library, or its field is output by no statistic type."""
    declared = declared_statistics()
    if declared is not None and selector.statistic not in declared:
        close = difflib.get_close_matches(selector.statistic, sorted(declared), n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else \
            "sst-info lists each element's statistics"
        raise SelectorError(f"statistic selector {text!r}: no element declares a statistic "
                            f"{selector.statistic!r} ({hint})")
    kinds = type_fields()
    if kinds and not any(kind_has_field(kind, selector.field) for kind in kinds):
        listed = "; ".join(f"{kind}: {', '.join(fields)}" for kind, fields in kinds.items())
        raise SelectorError(f"statistic selector {text!r}: no statistic has a field "
                            f"{selector.field!r} ({listed})")


def parse_selector(text: str, check: bool = True) -> Selector:
    """Parse ``[COMPONENT_GLOB:]STATISTIC.FIELD``; SelectorError when malformed or, with
    ``check``, when it can match nothing in any run (:func:`check_selector`)."""
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
    selector = Selector(component, statistic, field)
    if check:
        check_selector(selector, text)
    return selector


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        return int(value)
    return value


def select(statistics: Any, selector: Selector) -> Optional[Any]:
    """The selected figure from a statistics DataFrame (the runner's columns), or None when no
    statistic matches: none of that name on a component matching the glob, or none whose type
    has the field (the table holds 0 in the columns of fields a statistic does not have)."""
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
               field_family(c.rsplit(".", 1)[0]) == selector.field]
    if not columns:
        return None
    if "StatisticType" in rows.columns:
        rows = rows[rows["StatisticType"].astype(str).map(
            lambda kind: kind_has_field(kind, selector.field) is not False)]
        if rows.empty:
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


__all__ = ["Selector", "SelectorError", "parse_selector", "check_selector", "select",
           "declared_statistics", "type_fields", "kind_has_field", "field_family"]
