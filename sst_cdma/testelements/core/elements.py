"""The ``coreTestElement`` stand-ins (see the package docstring)."""
from __future__ import annotations

import random
import sys
from typing import Any

from ...element import Component, Param, Port, StatisticSpec

LINKS = ("Nlink", "Slink", "Elink", "Wlink")


class CoreTestComponent(Component):
    """SST's ``coreTestComponent``: ticks at ``clockFrequency``; every ``commFreq`` cycles it
    sends a ``commSize`` message on each connected link and counts what arrives. It never asks
    to end: a run ends at ``--stop-at``."""

    element_name = "coreTestComponent"
    PARAMS = (
        Param("workPerCycle", "int", 10, "work done each cycle (not simulated)", minimum=0),
        Param("commFreq", "int", 100, "cycles between messages", minimum=1),
        Param("commSize", "int", 16, "size of each message", minimum=0),
        Param("clockFrequency", "time", "1GHz", "clock frequency (or period)", minimum=1),
    )
    PORTS = tuple(Port(p, f"{p[0]} neighbour") for p in LINKS)
    STATISTICS = (StatisticSpec("N", "messages received on Nlink", "events", "u64", 1),
                  StatisticSpec("S", "messages received on Slink", "events", "u64", 1),
                  StatisticSpec("E", "messages received on Elink", "events", "u64", 1),
                  StatisticSpec("W", "messages received on Wlink", "events", "u64", 1))

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.links = []
        for port in LINKS:
            stat = self.register_statistic(port[0])
            link = self.configure_link(port, lambda event, stat=stat: stat.add_data(1))  # type: ignore[misc]
            if link is not None:
                self.links.append(link)
        self.every = self.params["commFreq"]
        self.register_clock(self.params["clockFrequency"], self.tick)

    def tick(self, cycle: int) -> bool:
        """Send on every link each ``commFreq`` cycles."""
        if cycle % self.every == 0:
            for link in self.links:
                link.send(self.params["commSize"])
        return False

    def finish(self) -> None:
        """Say so, as SST's does."""
        print("Component Finished.", file=self.simulation.console or sys.stdout)


class _StatisticsComponent(Component):
    """Records ``count`` seeded random values (0-999) into its statistics, one per ns."""

    ABSTRACT = True
    PARAMS = (
        Param("count", "int", 1000, "number of values to record", minimum=0),
        Param("seed", "int", 7, "seed of the value generator"),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.stats = [self.register_statistic(s.name) for s in self.STATISTICS]
        self.left = self.params["count"]
        self.random = random.Random(self.params["seed"]).random
        self.register_as_primary()
        self.register_clock("1GHz", self.tick)

    def tick(self, cycle: int) -> bool:
        """Record one value in every statistic; end after ``count`` ticks."""
        if self.left <= 0:
            self.primary_ok_to_end()
            return True
        value = self.random() * 1000
        for stat in self.stats:
            stat.add_data(value if stat.dtype[0] == "f" else int(value))
        self.left -= 1
        return False


class StatisticsComponentInt(_StatisticsComponent):
    """SST's ``StatisticsComponent.int``: integer statistics."""

    element_name = "StatisticsComponent.int"
    STATISTICS = (StatisticSpec("stat1_U32", "u32 values", "units", "u32", 1),
                  StatisticSpec("stat2_U64", "u64 values", "units", "u64", 2),
                  StatisticSpec("stat3_I32", "i32 values", "units", "i32", 3),
                  StatisticSpec("stat4_I64", "i64 values", "units", "i64", 4))


class StatisticsComponentFloat(_StatisticsComponent):
    """SST's ``StatisticsComponent.float``: floating-point statistics."""

    element_name = "StatisticsComponent.float"
    STATISTICS = (StatisticSpec("stat1_F32", "f32 values", "units", "f32", 1),
                  StatisticSpec("stat2_F64", "f64 values", "units", "f64", 2))
