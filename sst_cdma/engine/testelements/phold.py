"""PHOLD: the classic parallel-simulation benchmark. Nodes on a torus each hold events; every
event received is forwarded to a random neighbour after the link latency plus a random extra
delay, until the node's time limit."""
from __future__ import annotations

import random
from typing import Any

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec

DIRECTIONS = ("north", "south", "east", "west")


class PHOLD(Component):
    """PHOLD node on a 2-D torus: forwards every event to a random neighbour."""

    PARAMS = (
        Param("initial_events", "int", 4, "events this node starts with", minimum=0),
        Param("max_delay", "time", "9ns", "extra delay is uniform in [0, max_delay] "
              "(whole nanoseconds)", minimum=0),
        Param("time_limit", "time", "1us", "stop forwarding events after this simulated time",
              minimum=0),
        Param("seed", "int", 1, "random seed of this node"),
    )
    PORTS = tuple(Port(d, f"link to the {d} neighbour") for d in DIRECTIONS)
    STATISTICS = (StatisticSpec("events_received", "events this node received", "events", "u64",
                                1),
                  StatisticSpec("extra_delay", "extra delay drawn per forwarded event", "ps",
                                "u64", 2),)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.random = random.Random(self.params["seed"]).random
        self.links = [link for d in DIRECTIONS
                      if (link := self.configure_link(d, self.handle)) is not None]
        self.limit = self.params["time_limit"]
        self.delay_choices = self.params["max_delay"] // 1000 + 1
        self.received = 0
        self.stat_received = self.register_statistic("events_received")
        self.stat_delay = self.register_statistic("extra_delay")
        self.register_as_primary()

    def setup(self) -> None:
        """Send the initial events."""
        for _ in range(self.params["initial_events"]):
            self._forward(None)

    def _forward(self, event: Any) -> None:
        links = self.links
        if not links:
            return
        rand = self.random
        link = links[int(rand() * len(links))]
        extra = int(rand() * self.delay_choices) * 1000
        if self.stat_delay.enabled:
            self.stat_delay.add_data(extra)
        link.send(event, extra)

    def handle(self, event: Any) -> None:
        """An event arrived: count it and forward it unless past the time limit (the body of
        ``_forward`` inlined: this is the benchmark's hot path)."""
        self.received += 1
        if self.sim.now < self.limit and self.links:
            rand = self.random
            links = self.links
            link = links[int(rand() * len(links))]
            extra = int(rand() * self.delay_choices) * 1000
            if self.stat_delay.enabled:
                self.stat_delay.add_data(extra)
            link.send(event, extra)

    def finish(self) -> None:
        """Record the count and allow the run to end."""
        self.stat_received.add_data(self.received)
        self.primary_ok_to_end()
