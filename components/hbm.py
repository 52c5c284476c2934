"""GPU DRAM (HBM2/GDDR): bandwidth shared by kernels and DMA, and capacity with allocation
tracking so peak and time-weighted average memory and out-of-memory are reported."""
from __future__ import annotations

from typing import Any, Optional

from sst_cdma.engine.element import MIN_FRACTION, MIN_FRACTION_WHY, Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import FlowNetwork

from .interfaces import MemoryPool


class HBM(Component):
    """GPU DRAM: shared bandwidth (a flow resource) and capacity with allocation tracking.
    Provides ``MemoryPool`` to the GPU and the DMA engine."""

    PARAMS = (
        Param("bandwidth", "bandwidth", "732GB/s", "peak DRAM bandwidth", minimum=0,
              exclusive_minimum=True),
        Param("efficiency", "float", 0.85, "fraction of peak bandwidth kernels and DMA can reach",
              minimum=MIN_FRACTION, maximum=1,
              why_minimum=MIN_FRACTION_WHY),
        Param("capacity", "bytes", "16GiB", "DRAM capacity", minimum=0, exclusive_minimum=True),
        Param("unlimited", "bool", "false", "never run out of memory (the oracle's hypothetical "
              "GPU); peak use is still tracked against capacity"),
    )
    PORTS = (Port("gpu", "the GPU whose kernels use this memory", required=True,
                  provides=(MemoryPool,)),
             Port("dma", "the DMA/cDMA engine reading and writing this memory",
                  provides=(MemoryPool,)))
    STATISTICS = (
        StatisticSpec("peak_bytes", "peak allocated bytes", "B", "f64", 1),
        StatisticSpec("allocations", "size of each allocation", "B", "f64", 2),
        StatisticSpec("bytes_moved", "bytes read or written by kernels and DMA", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        self.flows = self.service(FlowNetwork)
        self.resource = self.flows.resource(f"{name}.bandwidth", p["bandwidth"] * p["efficiency"])
        for port in ("gpu", "dma"):
            self.configure_link(port, self.refuse_event)
        self.in_use = 0
        self.peak = 0
        self.live: dict[str, int] = {}
        #: (time_ps, bytes in use) after every allocation and release, in time order
        self.history: list[tuple[int, int]] = []
        self.oom: Optional[dict[str, Any]] = None
        self.stat_peak = self.register_statistic("peak_bytes")
        self.stat_alloc = self.register_statistic("allocations")
        self.stat_moved = self.register_statistic("bytes_moved")

    @property
    def capacity(self) -> int:
        """Capacity in bytes."""
        return self.params["capacity"]

    @property
    def unlimited(self) -> bool:
        """True for the oracle's memory that never runs out."""
        return self.params["unlimited"]

    @property
    def bandwidth_resource(self) -> str:
        """The flow resource carrying the achievable bandwidth (``bandwidth x efficiency``)."""
        return self.resource.name

    def allocate(self, tensor: str, nbytes: int, layer: str) -> None:
        """Allocate ``nbytes`` for ``tensor``; past capacity, record the first out-of-memory
        point (the layer and the bytes short) unless the memory is unlimited."""
        if tensor in self.live:
            raise ValueError(f"{self.name}: tensor {tensor!r} allocated twice")
        self.live[tensor] = nbytes
        self.in_use += nbytes
        self.history.append((self.sim.now, self.in_use))
        self.stat_alloc.add_data(nbytes)
        if self.in_use > self.peak:
            self.peak = self.in_use
        if self.in_use > self.capacity and self.oom is None:
            self.oom = {"layer": layer, "tensor": tensor, "bytes_short": self.in_use - self.capacity,
                        "time_ps": self.sim.now}

    def free(self, tensor: str) -> None:
        """Release ``tensor``'s memory."""
        self.in_use -= self.live.pop(tensor)
        self.history.append((self.sim.now, self.in_use))

    def usage_curve(self) -> list[tuple[int, int]]:
        """Bytes in use over time: one (time_ps, bytes) per distinct time at which the allocation
        changed, holding the value after the last change at that time."""
        curve: list[tuple[int, int]] = []
        for t, used in self.history:
            if curve and curve[-1][0] == t:
                curve[-1] = (t, used)
            else:
                curve.append((t, used))
        return curve

    def usage_integral(self, end_ps: int) -> int:
        """Exact integral of the bytes in use over [0, ``end_ps``], in byte-picoseconds (memory
        is empty before the first allocation; changes after ``end_ps`` do not count)."""
        total = 0
        prev_t, prev_used = 0, 0
        for t, used in self.history:
            if t >= end_ps:
                break
            total += prev_used * (t - prev_t)
            prev_t, prev_used = t, used
        return total + prev_used * max(0, end_ps - prev_t)

    def average_usage(self, end_ps: int) -> int:
        """Time-weighted average of the bytes in use over [0, ``end_ps``], rounded to the nearest
        byte (halves up); for ``end_ps`` <= 0, the bytes in use at time 0."""
        if end_ps <= 0:
            at_zero = [used for t, used in self.history if t <= 0]
            return at_zero[-1] if at_zero else 0
        return (2 * self.usage_integral(end_ps) + end_ps) // (2 * end_ps)

    def finish(self) -> None:
        """Record peak use and the bytes moved through the memory."""
        self.stat_peak.add_data(self.peak)
        self.stat_moved.add_data(int(round(self.resource.busy_units)))
