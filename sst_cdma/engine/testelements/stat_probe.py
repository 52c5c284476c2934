"""A component that records a fixed series of values into each statistic type, for testing the
statistic outputs and enable rules."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import Component, Param, StatisticSpec


class StatProbe(Component):
    """Records ``count`` values from a seeded generator into its statistics, one per ns."""

    PARAMS = (
        Param("count", "int", 10, "number of values to record", minimum=0),
        Param("seed", "int", 1, "seed of the value generator"),
    )
    STATISTICS = (
        StatisticSpec("values_u32", "values as u32", "units", "u32", 1),
        StatisticSpec("values_u64", "values as u64", "units", "u64", 2),
        StatisticSpec("values_f64", "values as f64", "units", "f64", 3),
        StatisticSpec("values_i64", "values as i64", "units", "i64", 4),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.stats = [self.register_statistic(s.name) for s in self.STATISTICS]
        self.left = self.params["count"]
        self.state = self.params["seed"] & 0xFFFFFFFF or 1
        self.register_as_primary()
        self.register_clock("1GHz", self.tick)

    def _next(self) -> int:
        # xorshift32: a fixed, documented sequence so expected statistics can be computed
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x % 1000

    def tick(self, cycle: int) -> bool:
        """Record one value in every statistic; stop after ``count`` ticks."""
        if self.left <= 0:
            self.primary_ok_to_end()
            return True
        v = self._next()
        for stat in self.stats:
            stat.add_data(v if stat.dtype != "i64" else v - 500)
        self.left -= 1
        return False
