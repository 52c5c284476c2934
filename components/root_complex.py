"""The CPU's PCIe root complex (host bridge): the PCIe bridges and switches of one CPU socket
hang off its downstream ports, and all their traffic to and from host memory shares its one
aggregate bandwidth per direction. docs/topologies.md builds it step by step."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.engine.interfaces import InterfaceError

from .interfaces import HostPath
from .messages import PathInfo
from .pcie_bridge import LinkResult


class RootComplex(Component):
    """A CPU's PCIe root complex: every downstream port shares one bandwidth per direction."""

    #: what this element is in a system, as its result record says
    KIND = "root complex"
    PARAMS = (
        Param("bandwidth", "bandwidth", "31.1GB/s", "aggregate payload bandwidth per direction "
              "that all downstream ports share (default: 40 lanes of PCIe gen3, a Xeon "
              "E5-2600 v4 socket's; docs/topologies.md)", minimum=0, exclusive_minimum=True),
        Param("latency", "time", "0ns", "start-up latency a DMA transfer adds crossing the root "
              "complex", minimum=0),
    )
    PORTS = (
        Port("host", "towards the host memory", required=True),
        Port("down%d", "downstream ports towards PCIe bridges or switches",
             provides=(HostPath,)),
    )
    STATISTICS = (
        StatisticSpec("d2h_bytes", "bytes carried towards host memory", "B", "u64", 1),
        StatisticSpec("h2d_bytes", "bytes carried from host memory", "B", "u64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        ports = self.connected_ports()
        if not any(port.startswith("down") for port in ports):
            raise ValueError(f"{name} ({self.type_name()}): no downstream port is connected: "
                             "wire a PCIe bridge or switch to down0")
        for port in ports:
            self.configure_link(port, self.refuse_event)
        flows = self.service(FlowNetwork)
        self.d2h = flows.resource(f"{name}.d2h", self.params["bandwidth"])
        self.h2d = flows.resource(f"{name}.h2d", self.params["bandwidth"])
        self.stat_d2h = self.register_statistic("d2h_bytes")
        self.stat_h2d = self.register_statistic("h2d_bytes")
        self._resolving = False  # inside host_path(): a second entry means the links loop

    def setup(self) -> None:
        """Check, before the first event, that the host side leads to a host store."""
        self.host_path()

    def host_path(self) -> PathInfo:
        """``HostPath`` on the downstream ports: the path the host-side peer describes, with
        this root complex's resources, latency and name added in front."""
        if self._resolving:
            raise InterfaceError(f"{self.name} ({self.type_name()}): the links towards the host "
                                 "loop back through port 'host'")
        self._resolving = True
        try:
            beyond = self.peer_provider("host", HostPath).host_path()
        finally:
            self._resolving = False
        return PathInfo([self.d2h.name, *beyond.d2h], [self.h2d.name, *beyond.h2d],
                        beyond.latency_ps + self.params["latency"], beyond.host,
                        [self.name, *beyond.link_names])

    def finish(self) -> None:
        """Record the bytes carried each way and publish the result record."""
        d2h, h2d = self.d2h.busy_units, self.h2d.busy_units
        self.stat_d2h.add_data(int(round(d2h)))
        self.stat_h2d.add_data(int(round(h2d)))
        self.publish(LinkResult(kind=self.KIND, protocol="pcie",
                                bandwidth_Bps=self.params["bandwidth"], d2h_bytes=d2h,
                                h2d_bytes=h2d))
