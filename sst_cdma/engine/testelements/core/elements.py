"""The ``coreTestElement`` stand-ins (see the package docstring)."""
from __future__ import annotations

from typing import Any, Optional

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.testelements.core.rng import sst_rng

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
        print("Component Finished.", file=self.simulation.console)


def _known_rng(kind: str) -> None:
    if kind.lower() not in ("mersenne", "marsaglia"):
        raise ValueError("expected Mersenne or Marsaglia")


#: SST's own param list and docs for its StatisticsComponents (sst-info coreTestElement)
SST_STAT_PARAMS = (
    Param("seed_w", "int", 7, "The seed to use for the random number generator", minimum=0),
    Param("seed_z", "int", 5, "The seed to use for the random number generator", minimum=0),
    Param("seed", "int", 11, "The seed to use for the random number generator.", minimum=0),
    Param("rng", "str", "Mersenne", "The random number generator to use (Marsaglia or "
          "Mersenne), default is Mersenne", check=_known_rng),
    Param("count", "int", 1000, "The number of random numbers to generate, default is 1000",
          minimum=0),
)


class _StatisticsComponent(Component):
    """SST's StatisticsComponents: a 1 GHz clock; each tick draws one value per statistic from
    SST's generator (:mod:`.rng`) and adds it; after ``count`` ticks the component lets the
    simulation end. Statistics are registered with SST's sub-ids (``stat1_*`` -> ``1``)."""

    ABSTRACT = True
    PARAMS = SST_STAT_PARAMS

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        self.rng = sst_rng(p["rng"], p["seed"], p["seed_w"], p["seed_z"])
        self.stats = [self.register_statistic(s.name, self.sub_id(s.name))
                      for s in self.STATISTICS if s.name != "stat5_dyn"]
        self.count = 0
        self.register_as_primary()
        self.primary_do_not_end()
        self.register_clock("1GHz", self.tick)

    @staticmethod
    def sub_id(stat: str) -> str:
        """SST's sub-id of a statistic: the number in its name (``stat2_U64`` -> ``2``)."""
        return stat[4:stat.index("_")]

    def draw(self) -> list[float]:
        """This tick's values, one per statistic in declaration order."""
        raise NotImplementedError

    def tick(self, cycle: int) -> bool:
        """Add this tick's values; end after ``count`` ticks."""
        for stat, value in zip(self.stats, self.draw()):
            stat.add_data(value)
        self.count += 1
        if self.count >= self.params["count"]:
            self.primary_ok_to_end()
            return True
        return False


class StatisticsComponentInt(_StatisticsComponent):
    """Statistics test component with ints"""

    element_name = "StatisticsComponent.int"
    PARAMS = (*SST_STAT_PARAMS,  # type: ignore[assignment]
              Param("dynamic_reg", "int", 0, "The cycle at which to dynamically register a "
                    "statistic. 0 indicates none", minimum=0))
    PORTS = (Port("left", "left port"), Port("right", "right port"))
    STATISTICS = (
        StatisticSpec("stat1_U32", "Test Statistic 1 - Collecting U32 Data", "units", "u32", 1),
        StatisticSpec("stat2_U64", "Test Statistic 2 - Collecting U64 Data", "units", "u64", 2),
        StatisticSpec("stat3_I32", "Test Statistic 3 - Collecting I32 Data", "units", "i32", 3),
        StatisticSpec("stat4_I64", "Test Statistic 4 - Collecting I64 Data", "units", "i64", 4),
        StatisticSpec("stat5_dyn", "Test Statistic 5 - Statistic registered during run loop",
                      "units", "u32", 1))

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.dynamic: Optional[Any] = None
        for port in ("left", "right"):  # SST's test component wires them and sends nothing
            self.configure_link(port, self.refuse_event)

    def draw(self) -> list[float]:
        """Values in [0, 1000) of each type (not SST's: see the package docstring)."""
        r = self.rng
        return [r.generateNextUInt32() % 1000, r.generateNextUInt64() % 1000,
                abs(r.generateNextInt32()) % 1000, abs(r.generateNextInt64()) % 1000]

    def tick(self, cycle: int) -> bool:
        """As the base, and ``stat5_dyn`` registered at tick ``dynamic_reg`` (then fed the
        U32 value each tick)."""
        values = self.draw()
        for stat, value in zip(self.stats, values):
            stat.add_data(value)
        self.count += 1
        if self.params["dynamic_reg"] and self.count == self.params["dynamic_reg"]:
            self.dynamic = self.register_statistic("stat5_dyn", "5")
        if self.dynamic is not None:
            self.dynamic.add_data(values[0])
        if self.count >= self.params["count"]:
            self.primary_ok_to_end()
            return True
        return False


class StatisticsComponentFloat(_StatisticsComponent):
    """Statistics test component with floats"""

    element_name = "StatisticsComponent.float"
    STATISTICS = (
        StatisticSpec("stat1_F32", "Test Statistic 1 - Collecting F32 Data", "units", "f32", 1),
        StatisticSpec("stat2_F64", "Test Statistic 2 - Collecting F64 Data", "units", "f64", 2))

    def draw(self) -> list[float]:
        """F32 then F64, each nextUniform() * 1000, as SST's (F32 held as a C float)."""
        import numpy as np

        f32 = float(np.float32(self.rng.nextUniform() * 1000))
        return [f32, self.rng.nextUniform() * 1000]
