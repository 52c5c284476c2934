"""A ping-pong pair for tests of links, latencies, required ports and subcomponents."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import (Component, Param, Port, StatisticSpec, SubComponent, SubComponentSlot)


class Echo(Component):
    """Sends ``pings`` messages on its required port and answers every message it receives
    until ``pings`` round trips are done; records arrival times."""

    PARAMS = (
        Param("pings", "int", 0, "messages this side starts (0: only answer)", minimum=0),
        Param("rounds", "int", 3, "answers before this side stops replying", minimum=0),
    )
    PORTS = (Port("port", "the peer", required=True),)
    SLOTS = (SubComponentSlot("counter", "counts messages (testElement.Counter)"),)
    STATISTICS = (StatisticSpec("arrival_ps", "arrival time of each message", "ps", "u64", 1),)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.link = self.connected_link("port", self.receive)
        self.arrivals: list[int] = []
        self.stat = self.register_statistic("arrival_ps")
        self.counter = self.subcomponent("counter")
        self.register_as_primary()

    def setup(self) -> None:
        """Start the pings, or wait."""
        for i in range(self.params["pings"]):
            self.link.send(("ping", i))
        if self.params["pings"] == 0 and self.params["rounds"] == 0:
            self.primary_ok_to_end()

    def receive(self, event: Any) -> None:
        """Record the arrival; answer until ``rounds`` answers were sent."""
        self.arrivals.append(self.sim.now)
        self.stat.add_data(self.sim.now)
        if self.counter is not None:
            self.counter.count(event)  # type: ignore[attr-defined]
        if len(self.arrivals) <= self.params["rounds"]:
            self.link.send(event)
        else:
            self.primary_ok_to_end()
        self.simulation.reports.setdefault(self.name, []).append((self.sim.now, event))


class Counter(SubComponent):
    """Counts the messages its parent passes to it."""

    PARAMS = (Param("weight", "int", 1, "added per message"),)
    STATISTICS = (StatisticSpec("messages", "messages counted", "messages", "u64", 1),)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.total = 0
        self.stat = self.register_statistic("messages")

    def count(self, event: Any) -> None:
        """Count one message."""
        self.total += self.params["weight"]
        self.stat.add_data(self.params["weight"])
