"""A data-center NVMe SSD on a PCIe link of its own, behind a PCIe switch or the root complex
as servers wire their drives: capacity, sequential read and write bandwidth, command latency,
the queue depth the host keeps outstanding, and the link (gen4 x4 or gen5 x4). DMA engines
stripe their ``nvme``-tier transfers across the drives on their ``nvme%d`` ports; the drive
tells them where it sits (``StorageDrive``). Presets and the queue-depth model:
docs/storage.md."""
from __future__ import annotations

from typing import Any, Optional

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.engine.kernel import SimulationError
from sst_cdma.engine.param_words import param_word
from sst_cdma.engine.records import Record, record
from sst_cdma.model.links import PCIE_GENERATIONS, PCIeLink
from sst_cdma.model.ssds import DEFAULT_SSD, SSDS, queue_limited_bandwidth

from .interfaces import HostPath, StorageDrive
from .messages import DrivePath, PathInfo
from .pcie_bridge import link_params

#: the most commands outstanding to a drive: an NVMe I/O queue's most entries
MAX_QUEUE_DEPTH = 65536
#: the link params a drive's PCIe link shares with a GPU's (the others are NVLink's)
_LINK_PARAMS = {p.name: p for p in link_params()}


@record
class NVMeResult(Record):
    """What a drive published at the end of the run: its model, capacity, bandwidths (the
    datasheet's and what the queue depth lets through), its link, the bytes it read and wrote
    and the most it held."""

    preset: str
    model: str
    capacity_bytes: int
    read_bandwidth_Bps: float
    write_bandwidth_Bps: float
    read_rate_Bps: float
    write_rate_Bps: float
    queue_depth: int
    link: str
    link_bandwidth_Bps: float
    bytes_read: float
    bytes_written: float
    stored_bytes: int
    peak_stored_bytes: int


def nvme_fields(drives: list[NVMeResult], path: str) -> dict[str, Any]:
    """``summary.json``'s ``nvme``: the drives a system's engines stripe across (their model,
    link and rates: the first drive's, as topologies build them alike), how the engines reach
    them, and what they read, wrote and held together."""
    first = drives[0]
    return {"drives": len(drives), "model": first.model, "preset": first.preset, "path": path,
            "link": first.link, "queue_depth": first.queue_depth,
            "read_rate_Bps": first.read_rate_Bps, "write_rate_Bps": first.write_rate_Bps,
            "capacity_bytes": sum(d.capacity_bytes for d in drives),
            "bytes_written": sum(d.bytes_written for d in drives),
            "bytes_read": sum(d.bytes_read for d in drives),
            "peak_stored_bytes": sum(d.peak_stored_bytes for d in drives)}


class NVMe(Component):
    """A data-center NVMe SSD on its own PCIe link; provides ``StorageDrive`` to DMA engines."""

    PARAMS = (
        Param("preset", "str", DEFAULT_SSD, "the datasheet whose figures the params left at 0 "
              "take (docs/storage.md)", choices=tuple(sorted(SSDS))),
        Param("capacity", "bytes", "0B", "usable capacity (0: the preset's)", minimum=0),
        Param("read_bandwidth", "bandwidth", "0B/s", "sequential read bandwidth (0: the "
              "preset's)", minimum=0),
        Param("write_bandwidth", "bandwidth", "0B/s", "sequential write bandwidth (0: the "
              "preset's)", minimum=0),
        Param("read_latency", "time", "0ps", "fixed service time of a read command, the "
              "datasheet's typical 4 KiB read latency (0: the preset's)", minimum=0),
        Param("write_latency", "time", "0ps", "fixed service time of a write command (0: the "
              "preset's)", minimum=0),
        Param("queue_depth", "int", 8, "commands the host keeps outstanding to the drive "
              "(DeepSpeed's aio default): with few, the latency caps throughput", minimum=1,
              maximum=MAX_QUEUE_DEPTH, why_maximum="an NVMe I/O queue holds at most 65,536 "
              "commands: the NVMe base specification's CAP.MQES is a 16-bit count from 1"),
        Param("io_size", "bytes", "1MiB", "bytes per command (DeepSpeed's aio block_size "
              "default)", minimum=512),
        Param("generation", "int", 0, "PCIe generation of the drive's link (0: the preset's)",
              choices=(0, *PCIE_GENERATIONS)),
        Param("lanes", "int", 0, "PCIe lanes of the drive's link (0: the preset's)",
              choices=(0, 1, 2, 4, 8, 16)),
        _LINK_PARAMS["max_payload"], _LINK_PARAMS["tlp_overhead"], _LINK_PARAMS["dllp_overhead"],
        Param("link_latency", "time", "0ns", "start-up latency a transfer adds crossing the "
              "drive's link (the command latency is apart)", minimum=0),
    )
    PORTS = (
        Port("host", "the drive's PCIe link upstream: a PCIe switch's or root complex's "
             "downstream port, or the host memory's", required=True),
        Port("dma%d", "the DMA engines that read and write the drive", provides=(StorageDrive,)),
    )
    STATISTICS = (
        StatisticSpec("bytes_read", "bytes read from the drive", "B", "f64", 1),
        StatisticSpec("bytes_written", "bytes written to the drive", "B", "f64", 1),
        StatisticSpec("stored_bytes", "bytes held on the drive at the end", "B", "f64", 1),
        StatisticSpec("peak_stored_bytes", "peak bytes held on the drive", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        spec = SSDS[p["preset"]]
        figures = spec.figures()
        self.spec = spec
        for key, value in figures.items():
            if not p[key]:
                p[key] = value
        p["generation"] = p["generation"] or spec.generation
        p["lanes"] = p["lanes"] or spec.lanes
        self.link = PCIeLink(p["generation"], p["lanes"], p["max_payload"], p["tlp_overhead"],
                             p["dllp_overhead"])
        self.read_rate = queue_limited_bandwidth(p["read_bandwidth"], p["queue_depth"],
                                                 p["io_size"], p["read_latency"])
        self.write_rate = queue_limited_bandwidth(p["write_bandwidth"], p["queue_depth"],
                                                  p["io_size"], p["write_latency"])
        flows = self.service(FlowNetwork)
        self.read = flows.resource(f"{name}.read", self.read_rate)
        self.write = flows.resource(f"{name}.write", self.write_rate)
        self.d2h = flows.resource(f"{name}.link.d2h", self.link.effective)
        self.h2d = flows.resource(f"{name}.link.h2d", self.link.effective)
        for port in self.connected_ports():
            self.configure_link(port, self.refuse_event)
        self.stored: dict[str, int] = {}
        self.payloads: dict[str, bytes] = {}
        self.in_use = 0
        self.peak = 0
        self.stat_read = self.register_statistic("bytes_read")
        self.stat_written = self.register_statistic("bytes_written")
        self.stat_stored = self.register_statistic("stored_bytes")
        self.stat_peak = self.register_statistic("peak_stored_bytes")

    def drive_path(self) -> DrivePath:
        """The drive as a DMA engine reaches it: its resources and latencies, and the path
        from its link to the host store (what its host-side peer describes, with the link)."""
        beyond = self.peer_provider("host", HostPath).host_path()
        latency = self.params["link_latency"]
        to_host = PathInfo([self.d2h.name, *beyond.d2h], [self.h2d.name, *beyond.h2d],
                           beyond.latency_ps + latency, beyond.host,
                           [self.name, *beyond.link_names])
        return DrivePath(self.name, self.read.name, self.write.name, self.params["read_latency"],
                         self.params["write_latency"], latency, to_host)

    def setup(self) -> None:
        """Check, before the first event, that the drive's link leads to a host."""
        self.drive_path()

    # -- the store -----------------------------------------------------------------------------
    def store(self, key: str, nbytes: int, payload: Optional[bytes] = None) -> None:
        """Keep ``nbytes`` under ``key``; past the capacity the run stops with the shortfall."""
        capacity = self.params["capacity"]
        in_use = self.in_use - self.stored.get(key, 0) + nbytes
        if in_use > capacity:
            raise SimulationError(
                f"{self.name} ({self.type_name()}): NVMe capacity exhausted storing {key!r}: "
                f"{in_use} bytes of {capacity} ({in_use - capacity} bytes short; raise "
                f"{param_word(self.type_name(), 'capacity')} or stripe over more drives)")
        self.in_use = in_use
        self.stored[key] = nbytes
        if payload is not None:
            self.payloads[key] = payload
        self.peak = max(self.peak, self.in_use)

    def load(self, key: str) -> Optional[bytes]:
        """The stored payload of ``key`` (None when only sizes are modelled)."""
        if key not in self.stored:
            raise SimulationError(f"{self.name}: nothing stored under {key!r}")
        return self.payloads.get(key)

    def release(self, key: str) -> None:
        """Drop ``key`` from the drive."""
        self.in_use -= self.stored.pop(key, 0)
        self.payloads.pop(key, None)

    def finish(self) -> None:
        """Record the bytes read and written and the space used; publish the result record."""
        p = self.params
        read, written = self.read.busy_units, self.write.busy_units
        self.stat_read.add_data(read)
        self.stat_written.add_data(written)
        self.stat_stored.add_data(self.in_use)
        self.stat_peak.add_data(self.peak)
        self.publish(NVMeResult(
            preset=p["preset"], model=self.spec.name, capacity_bytes=p["capacity"],
            read_bandwidth_Bps=p["read_bandwidth"], write_bandwidth_Bps=p["write_bandwidth"],
            read_rate_Bps=self.read_rate, write_rate_Bps=self.write_rate,
            queue_depth=p["queue_depth"], link=f"pcie{p['generation']}x{p['lanes']}",
            link_bandwidth_Bps=self.link.effective, bytes_read=read, bytes_written=written,
            stored_bytes=self.in_use, peak_stored_bytes=self.peak))
