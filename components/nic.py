"""``cdma.NIC``: a GPU's network card behind the PCIe switch it shares with that GPU
(docs/clusters.md, "The PCIe switch a GPU shares with its NIC").

On a DGX each GPU has a ConnectX card of its own under the same PCIe switch, and NCCL moves the
inter-node bytes of its collectives and sends by GPUDirect RDMA: the card reads and writes the
GPU's memory across the GPU's link to that switch, the same link the GPU's DMA engine offloads
over. The card is two flow resources at its payload rate (``tx``, ``rx``); what it carries
also loads the GPU's link (``gpu_link``: the GPU's host-link element, whose ``.d2h`` and
``.h2d`` resources a send and a receive load), so its traffic and the offload copies share
that link max-min fairly (sst_cdma.engine.flows). The cluster fabric (``cdma.ClusterFabric``,
port ``nicN``) and the pipeline ports (``cdma.PipelinePorts``, port ``nic``) put their
inter-node bytes on it."""
from __future__ import annotations

from typing import Any, Collection

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import Flow, FlowNetwork
from sst_cdma.engine.records import Record, record

from .interfaces import NetworkCard

__all__ = ["NIC", "NICResult"]


@record
class NICResult(Record):
    """What a network card carried: its payload rate, the GPU link it shares (``gpu_link``;
    '' for none), the bytes it sent and received, the flows it carried, and ``pcie_lost_ps``:
    the time those flows lost at the PCIe links they crossed (to the offload copies sharing
    them), the sum over its flows of each one's time beyond its isolated duration charged to a
    PCIe link."""

    name: str
    gpu_link: str
    bandwidth_Bps: float
    sent_bytes: float
    received_bytes: float
    flows: int
    pcie_lost_ps: float


class NIC(Component):
    """A GPU's network card behind the PCIe switch it shares with the GPU: its inter-node
    traffic loads the card and the GPU's link to that switch (GPUDirect RDMA)."""

    PARAMS = (
        Param("bandwidth", "bandwidth", "47GB/s", "payload bytes per second each way (the "
              "default: NDR's 50 GB/s times the 0.94 NCCL gets of it, docs/clusters.md)",
              minimum=0, exclusive_minimum=True),
        Param("gpu_link", "str", "", "the GPU's host-link element (a cdma.PCIeBridge) between "
              "the GPU and the PCIe switch this card shares: its .d2h and .h2d flow resources "
              "carry the card's sends and receives too ('': none, the card alone)"),
    )
    PORTS = (Port("fabric", "the cluster fabric's nicN port (rank N's collectives)",
                  provides=(NetworkCard,)),
             Port("p2p", "the GPU's pipeline ports (its sends across nodes)",
                  provides=(NetworkCard,)))
    STATISTICS = (
        StatisticSpec("pcie_lost_ps", "time each flow lost at the PCIe links it crossed",
                      "ps", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.flows = self.service(FlowNetwork)
        self.tx = self.flows.resource(f"{name}.tx", self.params["bandwidth"])
        self.rx = self.flows.resource(f"{name}.rx", self.params["bandwidth"])
        for port in ("fabric", "p2p"):
            self.configure_link(port, self.refuse_event)
        self.carried = 0
        self.lost_ps = 0.0
        self.stat_lost = self.register_statistic("pcie_lost_ps")

    def _link(self, direction: str) -> dict[str, float]:
        link = self.params["gpu_link"]
        if not link:
            return {}
        name = f"{link}.{direction}"
        if name not in self.flows.resources:
            raise ConfigError(f"{self.name} ({self.type_name()}): gpu_link={link!r} has no "
                              f"flow resource {name!r}: name the GPU's cdma.PCIeBridge")
        return {name: 1.0}

    def setup(self) -> None:
        """Check ``gpu_link`` names a link with both directions' resources."""
        self.pcie_resources()

    def send_weights(self) -> dict[str, float]:
        """The card's transmit side and the GPU's link, GPU to switch."""
        return {self.tx.name: 1.0, **self._link("d2h")}

    def recv_weights(self) -> dict[str, float]:
        """The card's receive side and the GPU's link, switch to GPU."""
        return {self.rx.name: 1.0, **self._link("h2d")}

    def pcie_resources(self) -> tuple[str, ...]:
        """The GPU link's two resources (none without ``gpu_link``)."""
        return (*self._link("d2h"), *self._link("h2d"))

    def charge(self, flow: Flow, pcie: Collection[str]) -> None:
        """Count a finished flow and the time it lost at the PCIe resources ``pcie``."""
        lost = sum(flow.lost_ps(name) for name in pcie)
        self.carried += 1
        self.lost_ps += lost
        self.stat_lost.add_data(lost)

    def finish(self) -> None:
        """Publish what the card carried."""
        self.publish(NICResult(self.name, self.params["gpu_link"], self.params["bandwidth"],
                               self.tx.busy_units, self.rx.busy_units, self.carried,
                               self.lost_ps))
