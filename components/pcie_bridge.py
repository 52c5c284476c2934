"""The GPU's host link: a PCIe endpoint port (generation, lanes, max payload size and the
resulting TLP/DLLP efficiency, latency, full duplex), an NVLink connection to the CPU, or
NVLink-C2C (Grace Hopper's chip-to-chip link)."""
from __future__ import annotations

from typing import Any, Optional

from sst_cdma.engine.element import MIN_FRACTION, MIN_FRACTION_WHY, Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.engine.interfaces import InterfaceError
from sst_cdma.engine.records import Record, record
from sst_cdma.model.links import PCIE_GENERATIONS, PCIeLink, c2c_bandwidth, nvlink_bandwidth

from .interfaces import HostPath
from .messages import PathInfo


def link_params(default_gen: int = 3) -> tuple[Param, ...]:
    """The params every element with a PCIe/NVLink port declares."""
    return (
        Param("protocol", "str", "pcie", "pcie, nvlink or nvlink_c2c",
              choices=("pcie", "nvlink", "nvlink_c2c")),
        Param("generation", "int", default_gen, "PCIe generation (1-6)",
              choices=tuple(PCIE_GENERATIONS)),
        Param("lanes", "int", 16, "PCIe lanes", choices=(1, 2, 4, 8, 16, 32)),
        Param("max_payload", "bytes", "0B", "PCIe max payload size (MPS) of a TLP (0: what "
              "the platforms of the generation negotiate, 128 B to gen3, 256 B from gen4; "
              "docs/model.md)", choices=(0, 128, 256, 512, 1024, 2048, 4096)),
        Param("tlp_overhead", "bytes", "26B", "bytes of framing, sequence, header and CRC per TLP",
              minimum=0),
        Param("dllp_overhead", "float", 0.05, "share of link time taken by DLLPs (ACK, flow "
              "control)", minimum=0, maximum=0.5),
        Param("nvlink_links", "int", 3, "NVLink bricks to the CPU (protocol nvlink)", minimum=1),
        Param("nvlink_rate", "bandwidth", "25GB/s", "per-brick, per-direction NVLink rate",
              minimum=0, exclusive_minimum=True),
        Param("nvlink_efficiency", "float", 0.9, "NVLink payload efficiency", minimum=MIN_FRACTION, maximum=1,
              why_minimum=MIN_FRACTION_WHY),
        Param("c2c_rate", "bandwidth", "450GB/s", "per-direction NVLink-C2C rate (protocol "
              "nvlink_c2c; GH200: 450GB/s)", minimum=0, exclusive_minimum=True),
        Param("c2c_efficiency", "float", 0.9, "NVLink-C2C payload efficiency (an assumption, "
              "docs/model.md)", minimum=MIN_FRACTION, maximum=1,
              why_minimum=MIN_FRACTION_WHY),
        Param("latency", "time", "1us", "DMA start-up latency across this link", minimum=0),
    )


def link_bandwidth(p: dict[str, Any]) -> float:
    """Per-direction payload bandwidth from the declared link params."""
    if p["protocol"] == "nvlink":
        return nvlink_bandwidth(p["nvlink_links"], p["nvlink_rate"], p["nvlink_efficiency"])
    if p["protocol"] == "nvlink_c2c":
        return c2c_bandwidth(p["c2c_rate"], p["c2c_efficiency"])
    return PCIeLink(p["generation"], p["lanes"], p["max_payload"], p["tlp_overhead"],
                    p["dllp_overhead"]).effective


@record
class LinkResult(Record):
    """What a full-duplex link (a GPU's host link, a switch's upstream port) published at the
    end of the run: its kind and protocol, its payload bandwidth per direction and the bytes it
    carried each way. PCIe links have a generation and lanes; NVLink ones bricks and a rate;
    NVLink-C2C its per-direction rate."""

    kind: str
    protocol: str
    bandwidth_Bps: float
    d2h_bytes: float
    h2d_bytes: float
    generation: Optional[int] = None
    lanes: Optional[int] = None
    nvlink_links: Optional[int] = None
    nvlink_rate_Bps: Optional[float] = None
    c2c_rate_Bps: Optional[float] = None

    def utilization(self, direction: str, elapsed_ps: int) -> float:
        """Average fraction of the bandwidth ``direction`` (``d2h`` or ``h2d``) carried over
        ``elapsed_ps``."""
        carried = self.d2h_bytes if direction == "d2h" else self.h2d_bytes
        return carried / (self.bandwidth_Bps * elapsed_ps / 1e12) if elapsed_ps else 0.0

    def describe(self) -> str:
        """The link as users name it: ``pcie3x16``, ``nvlink3x25GB/s``, ``nvlink_c2c450GB/s``;
        an aggregate of several links (a root complex) by its kind."""
        if self.c2c_rate_Bps is not None:
            return f"nvlink_c2c{self.c2c_rate_Bps / 1e9:g}GB/s"
        if self.generation is None and self.nvlink_links is None:
            return self.kind
        if self.protocol == "pcie":
            return f"pcie{self.generation}x{self.lanes}"
        return f"nvlink{self.nvlink_links}x{(self.nvlink_rate_Bps or 0) / 1e9:g}GB/s"


class DuplexLink(Component):
    """What the bridge and the switch share: a full-duplex link with one bandwidth resource per
    direction and byte counts per direction. It provides ``HostPath`` on its GPU-side ports:
    the path its peer on ``HOST_PORT`` describes, with this link added."""

    ABSTRACT = True
    PARAMS = link_params()
    RESOURCE_PREFIX = ""
    HOST_PORT = "host"  # the port towards the host memory

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.bandwidth = link_bandwidth(self.params)
        flows = self.service(FlowNetwork)
        self.d2h = flows.resource(f"{name}{self.RESOURCE_PREFIX}.d2h", self.bandwidth)
        self.h2d = flows.resource(f"{name}{self.RESOURCE_PREFIX}.h2d", self.bandwidth)
        self.stat_d2h = self.register_statistic(self.STATISTICS[0].name)
        self.stat_h2d = self.register_statistic(self.STATISTICS[1].name)
        self._resolving = False  # inside host_path(): a second entry means the links loop

    def host_path(self) -> PathInfo:
        """The path from this link to the host store: its host-side peer's, with this link."""
        if self._resolving:
            raise InterfaceError(f"{self.name} ({self.type_name()}): the links towards the host "
                                 f"loop back through port {self.HOST_PORT!r}")
        self._resolving = True
        try:
            return self.extended(self.peer_provider(self.HOST_PORT, HostPath).host_path())
        finally:
            self._resolving = False

    def extended(self, info: PathInfo) -> PathInfo:
        """``info`` (coming from the host side) with this link added."""
        return PathInfo([self.d2h.name, *info.d2h], [self.h2d.name, *info.h2d],
                        info.latency_ps + self.params["latency"], info.host,
                        [self.name, *info.link_names])

    #: what this link is in a system, as its result record says
    KIND = "link"

    def finish(self) -> None:
        """Record the bytes carried each way and publish the link's result record."""
        self.stat_d2h.add_data(int(round(self.d2h.busy_units)))
        self.stat_h2d.add_data(int(round(self.h2d.busy_units)))
        p = self.params
        pcie = p["protocol"] == "pcie"
        nvlink = p["protocol"] == "nvlink"
        self.publish(LinkResult(
            kind=self.KIND, protocol=p["protocol"], bandwidth_Bps=self.bandwidth,
            d2h_bytes=self.d2h.busy_units, h2d_bytes=self.h2d.busy_units,
            generation=p["generation"] if pcie else None, lanes=p["lanes"] if pcie else None,
            nvlink_links=p["nvlink_links"] if nvlink else None,
            nvlink_rate_Bps=p["nvlink_rate"] if nvlink else None,
            c2c_rate_Bps=p["c2c_rate"] if p["protocol"] == "nvlink_c2c" else None))


class PCIeBridge(DuplexLink):
    """A GPU's host link, full duplex: one bandwidth resource per direction."""

    KIND = "host link"

    PORTS = (Port("gpu", "towards the GPU's DMA engine", required=True, provides=(HostPath,)),
             Port("host", "towards the host memory or a PCIe switch", required=True))
    STATISTICS = (
        StatisticSpec("d2h_bytes", "bytes carried GPU to host", "B", "f64", 1),
        StatisticSpec("h2d_bytes", "bytes carried host to GPU", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.down = self.configure_link("gpu", self.refuse_event)
        self.up = self.configure_link("host", self.refuse_event)
