"""Statistic types: what a component records, and the fields each type reports on output."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, Union

import numpy as np

FIELD_TYPES = ("u32", "u64", "i32", "i64", "f32", "f64")

Number = Union[int, float]


class StatisticError(ValueError):
    """A statistic was enabled or configured in a way SST would reject."""


def _cast(value: Number, dtype: str) -> Number:
    return float(value) if dtype[0] == "f" else int(value)


class Statistic(ABC):
    """Base of every statistic: identity (component, name, sub-id), data type and the output
    fields. ``fields()`` returns ``[(field_name, field_type, value), ...]`` in output order."""

    kind = "Statistic"
    enabled = True

    def __init__(self, component: str, name: str, subid: str = "", dtype: str = "u64",
                 params: Mapping[str, Any] | None = None) -> None:
        if dtype not in FIELD_TYPES:
            raise StatisticError(f"statistic {component}.{name}: unknown data type {dtype!r} "
                                 f"(one of {', '.join(FIELD_TYPES)})")
        self.component = component
        self.name = name
        self.subid = subid
        self.dtype = dtype
        self.params = dict(params or {})
        self.reset()

    @property
    def full_name(self) -> str:
        """``component.stat[.subid]`` as SST prints it."""
        base = f"{self.component}.{self.name}"
        return f"{base}.{self.subid}" if self.subid else base

    def reset(self) -> None:
        """Clear collected data (used at start and by ``resetOnOutput``)."""

    @abstractmethod
    def add_data(self, value: Number, count: int = 1) -> None:
        """Record ``value`` ``count`` times."""

    @abstractmethod
    def fields(self) -> list[tuple[str, str, Number]]:
        """The output fields, in SST's order."""


class NullStatistic(Statistic):
    """What a component gets for a statistic that is not enabled: it records nothing."""

    kind = "NullStatistic"
    enabled = False

    def add_data(self, value: Number, count: int = 1) -> None:
        """Discard the value."""

    def fields(self) -> list[tuple[str, str, Number]]:
        """A null statistic has no fields."""
        return []


class AccumulatorStatistic(Statistic):
    """SST's Accumulator: Sum, SumSQ, Count, Min, Max."""

    kind = "Accumulator"

    def reset(self) -> None:
        """Clear sums, count and extremes."""
        self.sum: Number = 0
        self.sum_sq: Number = 0
        self.count = 0
        self.min: Number | None = None
        self.max: Number | None = None

    def add_data(self, value: Number, count: int = 1) -> None:
        """Record ``value`` ``count`` times."""
        v = _cast(value, self.dtype)
        if self.dtype == "f32":  # SST sums in the statistic's type: a C float rounds each step
            f, n = np.float32(v), np.float32(count)
            self.sum = float(np.float32(self.sum) + f * n)
            self.sum_sq = float(np.float32(self.sum_sq) + f * f * n)
        else:
            self.sum += v * count
            self.sum_sq += v * v * count
        self.count += count
        if self.min is None or v < self.min:
            self.min = v
        if self.max is None or v > self.max:
            self.max = v

    def fields(self) -> list[tuple[str, str, Number]]:
        """Sum, SumSQ, Count (u64), Min, Max."""
        t = self.dtype
        zero = _cast(0, t)
        return [("Sum", t, self.sum), ("SumSQ", t, self.sum_sq), ("Count", "u64", self.count),
                ("Min", t, zero if self.min is None else self.min),
                ("Max", t, zero if self.max is None else self.max)]


def _param_number(params: Mapping[str, Any], key: str, default: Number, where: str) -> Number:
    raw = params.get(key, default)
    try:
        return float(raw) if isinstance(default, float) else int(str(raw), 0)
    except ValueError:
        raise StatisticError(f"{where}: statistic parameter {key}={raw!r} is not a number") from None


class HistogramStatistic(Statistic):
    """SST's Histogram: ``numbins`` bins of ``binwidth`` from ``minvalue``; values outside are
    counted as out of bounds (and left out of Sum/SumSQ, as SST-core does)."""

    kind = "Histogram"

    def __init__(self, component: str, name: str, subid: str = "", dtype: str = "u64",
                 params: Mapping[str, Any] | None = None) -> None:
        p = dict(params or {})
        where = f"{component}.{name}"
        self.min_value = _param_number(p, "minvalue", 0, where)
        self.bin_width = _param_number(p, "binwidth", 5000, where)
        self.num_bins = _param_number(p, "numbins", 100, where)
        if self.bin_width <= 0 or self.num_bins <= 0:
            raise StatisticError(f"{where}: histogram needs binwidth > 0 and numbins > 0")
        oob = str(p.get("IncludeOutOfBounds", p.get("includeoutofbounds", "1"))).lower()
        self.include_oob = oob in ("1", "true", "yes", "on")
        super().__init__(component, name, subid, dtype, p)

    @property
    def max_value(self) -> int:
        """Upper edge (inclusive) of the last bin."""
        return self.min_value + self.num_bins * self.bin_width - 1  # type: ignore[return-value]

    def reset(self) -> None:
        """Clear all bins and counters."""
        self.bins = [0] * self.num_bins  # type: ignore[operator]
        self.sum: Number = 0
        self.sum_sq: Number = 0
        self.collected = 0
        self.binned = 0
        self.oob_min = 0
        self.oob_max = 0

    def add_data(self, value: Number, count: int = 1) -> None:
        """Bin ``value`` ``count`` times."""
        v = _cast(value, self.dtype)
        self.collected += count
        if v < self.min_value:
            self.oob_min += count
            return
        if v > self.max_value:
            self.oob_max += count
            return
        self.binned += count
        self.sum += v * count
        self.sum_sq += v * v * count
        self.bins[int((v - self.min_value) // self.bin_width)] += count

    def fields(self) -> list[tuple[str, str, Number]]:
        """SST's histogram field list, including one field per bin."""
        t = self.dtype
        out: list[tuple[str, str, Number]] = [
            ("BinsMinValue", t, _cast(self.min_value, t)),
            ("BinsMaxValue", t, _cast(self.max_value, t)),
            ("BinWidth", "u32", self.bin_width), ("TotalNumBins", "u32", self.num_bins),
            ("Sum", t, self.sum), ("SumSQ", t, self.sum_sq),
            ("NumActiveBins", "u32", sum(1 for b in self.bins if b)),
            ("NumItemsCollected", "u64", self.collected), ("NumItemsBinned", "u64", self.binned),
        ]
        if self.include_oob:
            out += [("NumOutOfBounds-MinValue", "u64", self.oob_min),
                    ("NumOutOfBounds-MaxValue", "u64", self.oob_max)]
        for i, n in enumerate(self.bins):
            lo = self.min_value + i * self.bin_width
            out.append((f"Bin{i}:{lo}-{lo + self.bin_width - 1}", "u64", n))
        return out


STATISTIC_TYPES = {
    "sst.AccumulatorStatistic": AccumulatorStatistic,
    "sst.HistogramStatistic": HistogramStatistic,
    "sst.NullStatistic": NullStatistic,
}


def make_statistic(type_name: str, component: str, name: str, subid: str, dtype: str,
                   params: Mapping[str, Any]) -> Statistic:
    """Build the statistic SST would for ``{"type": type_name, ...}``."""
    cls = STATISTIC_TYPES.get(type_name) or STATISTIC_TYPES.get(f"sst.{type_name}")
    if cls is None:
        raise StatisticError(f"statistic {component}.{name}: unknown statistic type {type_name!r} "
                             f"(one of {', '.join(STATISTIC_TYPES)})")
    return cls(component, name, subid, dtype, params)  # type: ignore[abstract]
