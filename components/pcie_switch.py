"""A PCIe switch: several downstream GPUs share one upstream port to the host (DGX-1 puts two
P100s and a NIC behind each switch)."""
from __future__ import annotations

from typing import Any

from sst_cdma.element import Component, Port, StatisticSpec
from sst_cdma.flows import FlowNetwork

from .messages import PathInfo
from .pcie_bridge import link_bandwidth, link_params


class PCIeSwitch(Component):
    """A PCIe switch whose upstream port's bandwidth all downstream ports share."""

    PARAMS = link_params()
    PORTS = (Port("up", "upstream port towards the host", required=True),
             Port("down%d", "downstream ports towards GPUs' PCIe bridges"))
    STATISTICS = (
        StatisticSpec("up_d2h_bytes", "bytes carried upstream (to host)", "B", "u64", 1),
        StatisticSpec("up_h2d_bytes", "bytes carried downstream (from host)", "B", "u64", 1),
    )

    def __init__(self, engine: Any, name: str, params: Any) -> None:
        super().__init__(engine, name, params)
        self.bandwidth = link_bandwidth(self.params)
        flows = FlowNetwork.of(self.sim)
        self.d2h = flows.resource(f"{name}.up.d2h", self.bandwidth)
        self.h2d = flows.resource(f"{name}.up.h2d", self.bandwidth)
        self.up = self.configure_link("up", self._unexpected)
        self.downs = [self.configure_link(p, self._unexpected) for p in self.connected_ports()
                      if p.startswith("down")]
        self.stat_d2h = self.register_statistic("up_d2h_bytes")
        self.stat_h2d = self.register_statistic("up_h2d_bytes")

    def _unexpected(self, event: Any) -> None:
        raise TypeError(f"{self.name}: unexpected event {event!r}")

    def init(self, phase: int) -> None:
        """Pass the host's path description, extended by the upstream port, to every GPU."""
        while (info := self.up.recv_untimed()) is not None:
            for down in self.downs:
                down.send_untimed(PathInfo([self.d2h.name, *info.d2h], [self.h2d.name, *info.h2d],
                                           info.latency_ps + self.params["latency"], info.host,
                                           [self.name, *info.link_names]))

    def finish(self) -> None:
        """Record the bytes carried each way through the upstream port."""
        self.stat_d2h.add_data(int(round(self.d2h.busy_units)))
        self.stat_h2d.add_data(int(round(self.h2d.busy_units)))
