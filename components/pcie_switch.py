"""A PCIe switch: several downstream GPUs share one upstream port to the host (DGX-1 puts two
P100s and a NIC behind each switch)."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import Port, StatisticSpec

from .interfaces import HostPath
from .pcie_bridge import DuplexLink


class PCIeSwitch(DuplexLink):
    """A PCIe switch whose upstream port's bandwidth all downstream ports share."""

    RESOURCE_PREFIX = ".up"
    KIND = "switch"
    HOST_PORT = "up"
    PORTS = (Port("up", "upstream port towards the host", required=True),
             Port("down%d", "downstream ports towards GPUs' PCIe bridges", provides=(HostPath,)))
    STATISTICS = (
        StatisticSpec("up_d2h_bytes", "bytes carried upstream (to host)", "B", "f64", 1),
        StatisticSpec("up_h2d_bytes", "bytes carried downstream (from host)", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.up = self.configure_link("up", self.refuse_event)
        self.downs = [self.configure_link(p, self.refuse_event) for p in self.connected_ports()
                      if p.startswith("down")]
