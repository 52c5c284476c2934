"""Host (CPU) memory: the pinned pool offloaded feature maps land in, with its DRAM bandwidth.
In functional mode it stores the compressed bytes it receives and returns them on prefetch."""
from __future__ import annotations

from typing import Any

from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.model.hosts import DEFAULT_PLATFORM

from .interfaces import HostPath, HostStore, HostTier
from .memory_ledger import MemoryLedger
from .messages import PathInfo


class HostMemory(Component):
    """CPU DRAM holding the pinned pool that offloaded feature maps are copied into.
    Provides ``HostStore`` and ``HostPath`` (where every path to the host ends)."""

    PARAMS = (
        Param("bandwidth", "bandwidth", DEFAULT_PLATFORM.dram_text, "DRAM bandwidth, which "
              "both directions and the host CPU's step share: one socket's of the host "
              f"platform ({DEFAULT_PLATFORM.name}'s where none is named; docs/host_cpu.md)",
              minimum=0, exclusive_minimum=True),
        Param("pinned_capacity", "bytes", "256GiB", "size of the pinned pool", minimum=0,
              exclusive_minimum=True),
    )
    PORTS = (Port("pcie%d", "links to PCIe bridges or switches",
                  provides=(HostStore, HostPath)),
             Port("cpu", "the host CPU (cdma.HostCPU) whose optimizer step reads and writes "
                  "model states held in the pinned pool", provides=(HostTier,)))
    STATISTICS = (
        StatisticSpec("stored_bytes", "bytes held in the pinned pool at the end", "B", "f64", 1),
        StatisticSpec("peak_stored_bytes", "peak bytes held in the pinned pool", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.resource = self.service(FlowNetwork).resource(f"{name}.dram",
                                                           self.params["bandwidth"])
        for port in self.connected_ports():
            self.configure_link(port, self.refuse_event)
        self.stored: dict[str, int] = {}
        self.payloads: dict[str, bytes] = {}
        self.in_pool = 0
        self.peak = 0
        #: the pinned pool over time: model states allocated in it (ZeRO-Offload) and the
        #: offloads stored in it
        self.ledger = MemoryLedger("host", self.params["pinned_capacity"])
        self.stat_stored = self.register_statistic("stored_bytes")
        self.stat_peak = self.register_statistic("peak_stored_bytes")

    @property
    def capacity(self) -> int:
        """Bytes of the pinned pool."""
        return self.params["pinned_capacity"]

    def host_path(self) -> PathInfo:
        """Where every path to the host ends: this memory's DRAM, both ways, and this store."""
        return PathInfo([self.resource.name], [self.resource.name], 0, self)

    def store(self, key: str, nbytes: int, payload: bytes | None = None) -> None:
        """Keep ``nbytes`` (and, in functional mode, the bytes themselves) under ``key``."""
        if key in self.stored:
            self.in_pool -= self.stored[key]
            self.ledger.free(self.sim.now, key)
        self.ledger.allocate(self.sim.now, key, nbytes, "offload")
        self.stored[key] = nbytes
        if payload is not None:
            self.payloads[key] = payload
        self.in_pool += nbytes
        self.peak = max(self.peak, self.in_pool)
        if self.in_pool > self.params["pinned_capacity"]:
            raise ValueError(f"{self.name}: pinned pool exhausted storing {key!r} "
                             f"({self.in_pool - self.params['pinned_capacity']} bytes short)")

    def allocate(self, tensor: str, nbytes: int, layer: str) -> None:
        """Allocate ``nbytes`` of the pinned pool for model state ``tensor`` now; past the
        pool's capacity the first out-of-memory point is kept (the run goes on, as the GPU
        memory's)."""
        self.ledger.allocate(self.sim.now, tensor, nbytes, layer)

    def tier_usage(self, end_ps: int) -> dict[str, Any]:
        """Peak, average over [0, ``end_ps``], capacity and out-of-memory point of the pinned
        pool: the model states allocated in it and the offloads stored in it."""
        return self.ledger.usage(end_ps)

    def load(self, key: str) -> bytes | None:
        """The stored payload of ``key`` (None when only sizes are modelled)."""
        if key not in self.stored:
            raise KeyError(f"{self.name}: nothing stored under {key!r}")
        return self.payloads.get(key)

    def release(self, key: str) -> None:
        """Drop ``key`` from the pool."""
        self.in_pool -= self.stored.pop(key, 0)
        self.payloads.pop(key, None)
        if key in self.ledger.live:
            self.ledger.free(self.sim.now, key)

    def finish(self) -> None:
        """Record pool use."""
        self.stat_stored.add_data(self.in_pool)
        self.stat_peak.add_data(self.peak)
