"""Elements for tests of subcomponent slots: a component with a required slot, a slot with a
default and a slot of several, all accepting the ``Tally`` interface."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec, SubComponent, SubComponentSlot


class Tally(SubComponent):
    """The interface of the Meter's slots: counts what its parent tells it."""

    ABSTRACT = True
    STATISTICS = (StatisticSpec("counted", "what was counted", "units", "u64", 1),)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.total = 0
        self.stat = self.register_statistic("counted")

    def count(self, n: int) -> None:
        """Count ``n``."""
        self.total += n
        self.stat.add_data(n)


class UpTally(Tally):
    """Counts up."""


class DownTally(Tally):
    """Counts down."""

    def count(self, n: int) -> None:
        """Count ``-n`` (its statistic records ``n``)."""
        super().count(n)
        self.total -= 2 * n


class TapTally(Tally):
    """Counts up, and counts each event arriving on its own port ``tap`` (a link to a
    subcomponent's port, as merlin and memHierarchy wire them), which it cannot do without."""

    PORTS = (Port("tap", "each event arriving here counts one", required=True),)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.configure_link("tap", lambda event: self.count(1))


class Meter(Component):
    """Counts ``ticks`` into the tallies in its slots at setup."""

    PARAMS = (Param("ticks", "int", 1, "what setup counts"),)
    SLOTS = (SubComponentSlot("tally", "the tally setup counts into", accepts=Tally,
                              required=True),
             SubComponentSlot("backup", "a second tally", accepts=Tally,
                              default="testElement.UpTally"),
             SubComponentSlot("extras", "more tallies", accepts=Tally, multiple=True))

    def setup(self) -> None:
        """Count into every tally."""
        for subs in self.subcomponents.values():
            for sub in subs:
                sub.count(self.params["ticks"])  # type: ignore[attr-defined]
        self.simulation.reports[self.name] = {
            slot: [sub.total for sub in subs] for slot, subs in sorted(self.subcomponents.items())}  # type: ignore[attr-defined]
