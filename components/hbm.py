"""GPU DRAM (HBM2/GDDR): bandwidth shared by kernels and DMA, and capacity with allocation
tracking so peak memory and out-of-memory are reported."""
from __future__ import annotations

from typing import Any, Optional

from sst_cdma.element import Component, Param, Port, StatisticSpec
from sst_cdma.flows import FlowNetwork

from .messages import MemoryHandle


class HBM(Component):
    """GPU DRAM: shared bandwidth (a flow resource) and capacity with allocation tracking."""

    PARAMS = (
        Param("bandwidth", "bandwidth", "732GB/s", "peak DRAM bandwidth", minimum=0,
              exclusive_minimum=True),
        Param("efficiency", "float", 0.85, "fraction of peak bandwidth kernels and DMA can reach",
              minimum=0, exclusive_minimum=True, maximum=1),
        Param("capacity", "bytes", "16GiB", "DRAM capacity", minimum=0, exclusive_minimum=True),
        Param("unlimited", "bool", "false", "never run out of memory (the oracle's hypothetical "
              "GPU); peak use is still tracked against capacity"),
    )
    PORTS = (Port("gpu", "the GPU whose kernels use this memory", required=True),
             Port("dma", "the DMA/cDMA engine reading and writing this memory"))
    STATISTICS = (
        StatisticSpec("peak_bytes", "peak allocated bytes", "B", "u64", 1),
        StatisticSpec("allocations", "size of each allocation", "B", "u64", 2),
        StatisticSpec("bytes_moved", "bytes read or written by kernels and DMA", "B", "u64", 1),
    )

    def __init__(self, engine: Any, name: str, params: Any) -> None:
        super().__init__(engine, name, params)
        p = self.params
        self.flows = FlowNetwork.of(self.sim)
        self.resource = self.flows.resource(f"{name}.bandwidth", p["bandwidth"] * p["efficiency"])
        self.ports = [link for port in ("gpu", "dma")
                      if (link := self.configure_link(port, self.refuse_event)) is not None]
        self.in_use = 0
        self.peak = 0
        self.peak_layer = ""
        self.live: dict[str, int] = {}
        self.oom: Optional[dict[str, Any]] = None
        self.stat_peak = self.register_statistic("peak_bytes")
        self.stat_alloc = self.register_statistic("allocations")
        self.stat_moved = self.register_statistic("bytes_moved")

    def init(self, phase: int) -> None:
        """Tell the GPU and the engine who we are and which resource carries our bandwidth."""
        if phase == 0:
            for link in self.ports:
                link.send_untimed(MemoryHandle(self, self.resource.name))

    @property
    def capacity(self) -> int:
        """Capacity in bytes."""
        return self.params["capacity"]

    def allocate(self, tensor: str, nbytes: int, layer: str) -> None:
        """Allocate ``nbytes`` for ``tensor``; past capacity, record the first out-of-memory
        point (the layer and the bytes short) unless the memory is unlimited."""
        if tensor in self.live:
            raise ValueError(f"{self.name}: tensor {tensor!r} allocated twice")
        self.live[tensor] = nbytes
        self.in_use += nbytes
        self.stat_alloc.add_data(nbytes)
        if self.in_use > self.peak:
            self.peak = self.in_use
            self.peak_layer = layer
        if self.in_use > self.capacity and self.oom is None:
            self.oom = {"layer": layer, "tensor": tensor, "bytes_short": self.in_use - self.capacity,
                        "time_ps": self.sim.now}

    def free(self, tensor: str) -> None:
        """Release ``tensor``'s memory."""
        self.in_use -= self.live.pop(tensor)

    def finish(self) -> None:
        """Record peak use and the bytes moved through the memory."""
        self.stat_peak.add_data(self.peak)
        self.stat_moved.add_data(int(round(self.resource.busy_units)))
