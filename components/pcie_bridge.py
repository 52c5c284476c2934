"""The GPU's host link: a PCIe endpoint port (generation, lanes, max payload size and the
resulting TLP/DLLP efficiency, latency, full duplex) or an NVLink connection to the CPU."""
from __future__ import annotations

from typing import Any

from sst_cdma.element import Component, Param, Port, StatisticSpec
from sst_cdma.flows import FlowNetwork
from sst_cdma.model.links import PCIE_GENERATIONS, PCIeLink, nvlink_bandwidth

from .messages import PathInfo


def link_params(default_gen: int = 3) -> tuple[Param, ...]:
    """The params every element with a PCIe/NVLink port declares."""
    return (
        Param("protocol", "str", "pcie", "pcie or nvlink", choices=("pcie", "nvlink")),
        Param("generation", "int", default_gen, "PCIe generation (1-6)",
              choices=tuple(PCIE_GENERATIONS)),
        Param("lanes", "int", 16, "PCIe lanes", choices=(1, 2, 4, 8, 16, 32)),
        Param("max_payload", "bytes", "128B", "PCIe max payload size (MPS) of a TLP",
              choices=(128, 256, 512, 1024, 2048, 4096)),
        Param("tlp_overhead", "bytes", "26B", "bytes of framing, sequence, header and CRC per TLP",
              minimum=0),
        Param("dllp_overhead", "float", 0.05, "share of link time taken by DLLPs (ACK, flow "
              "control)", minimum=0, maximum=0.5),
        Param("nvlink_links", "int", 3, "NVLink bricks to the CPU (protocol nvlink)", minimum=1),
        Param("nvlink_rate", "bandwidth", "25GB/s", "per-brick, per-direction NVLink rate",
              minimum=0, exclusive_minimum=True),
        Param("nvlink_efficiency", "float", 0.9, "NVLink payload efficiency", minimum=0,
              exclusive_minimum=True, maximum=1),
        Param("latency", "time", "1us", "DMA start-up latency across this link", minimum=0),
    )


def link_bandwidth(p: dict[str, Any]) -> float:
    """Per-direction payload bandwidth from the declared link params."""
    if p["protocol"] == "nvlink":
        return nvlink_bandwidth(p["nvlink_links"], p["nvlink_rate"], p["nvlink_efficiency"])
    return PCIeLink(p["generation"], p["lanes"], p["max_payload"], p["tlp_overhead"],
                    p["dllp_overhead"]).effective


class DuplexLink(Component):
    """What the bridge and the switch share: a full-duplex link with one bandwidth resource per
    direction, the path description it extends during init, and byte counts per direction."""

    ABSTRACT = True
    PARAMS = link_params()
    RESOURCE_PREFIX = ""

    def __init__(self, engine: Any, name: str, params: Any) -> None:
        super().__init__(engine, name, params)
        self.bandwidth = link_bandwidth(self.params)
        flows = FlowNetwork.of(self.sim)
        self.d2h = flows.resource(f"{name}{self.RESOURCE_PREFIX}.d2h", self.bandwidth)
        self.h2d = flows.resource(f"{name}{self.RESOURCE_PREFIX}.h2d", self.bandwidth)
        self.stat_d2h = self.register_statistic(self.STATISTICS[0].name)
        self.stat_h2d = self.register_statistic(self.STATISTICS[1].name)

    def extended(self, info: PathInfo) -> PathInfo:
        """``info`` (coming from the host side) with this link added."""
        return PathInfo([self.d2h.name, *info.d2h], [self.h2d.name, *info.h2d],
                        info.latency_ps + self.params["latency"], info.host,
                        [self.name, *info.link_names])

    def finish(self) -> None:
        """Record the bytes carried each way."""
        self.stat_d2h.add_data(int(round(self.d2h.busy_units)))
        self.stat_h2d.add_data(int(round(self.h2d.busy_units)))


class PCIeBridge(DuplexLink):
    """A GPU's host link, full duplex: one bandwidth resource per direction."""

    PORTS = (Port("gpu", "towards the GPU's DMA engine", required=True),
             Port("host", "towards the host memory or a PCIe switch", required=True))
    STATISTICS = (
        StatisticSpec("d2h_bytes", "bytes carried GPU to host", "B", "f64", 1),
        StatisticSpec("h2d_bytes", "bytes carried host to GPU", "B", "f64", 1),
    )

    def __init__(self, engine: Any, name: str, params: Any) -> None:
        super().__init__(engine, name, params)
        self.down = self.configure_link("gpu", self.refuse_event)
        self.up = self.configure_link("host", self.refuse_event)

    def init(self, phase: int) -> None:
        """Extend the host's path description with this link and pass it towards the GPU."""
        while (info := self.up.recv_untimed()) is not None:
            self.down.send_untimed(self.extended(info))
