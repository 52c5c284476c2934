"""Allocation tracking of a memory tier that is not the GPU's: bytes in use over time, the peak,
the time-weighted average and the first out-of-memory point, as ``cdma.HBM`` reports the GPU
memory's (the same rules: memory is empty before the first allocation; the first allocation
that passes capacity is recorded with the bytes short, and the run goes on)."""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["MemoryLedger"]


class MemoryLedger:
    """Allocations of one tier against ``capacity`` bytes (``tier``: its name in reports)."""

    def __init__(self, tier: str, capacity: int) -> None:
        self.tier = tier
        self.capacity = capacity
        self.in_use = 0
        self.peak = 0
        self.live: dict[str, int] = {}
        #: (time_ps, bytes in use) after every change, in time order
        self.history: list[tuple[int, int]] = []
        self.oom: Optional[dict[str, Any]] = None

    def allocate(self, now_ps: int, tensor: str, nbytes: int, layer: str) -> None:
        """``nbytes`` for ``tensor`` at ``now_ps``; past capacity, the first out-of-memory point
        (tier, layer, tensor, bytes short, time) is kept."""
        if tensor in self.live:
            raise ValueError(f"{self.tier}: {tensor!r} allocated twice")
        self.live[tensor] = nbytes
        self.in_use += nbytes
        self.history.append((now_ps, self.in_use))
        self.peak = max(self.peak, self.in_use)
        if self.in_use > self.capacity and self.oom is None:
            self.oom = {"tier": self.tier, "layer": layer, "tensor": tensor,
                        "bytes_short": self.in_use - self.capacity, "time_ps": now_ps}

    def free(self, now_ps: int, tensor: str) -> None:
        """Release ``tensor`` at ``now_ps``."""
        self.in_use -= self.live.pop(tensor)
        self.history.append((now_ps, self.in_use))

    def average(self, end_ps: int) -> int:
        """Time-weighted average of the bytes in use over [0, ``end_ps``], rounded to the
        nearest byte (halves up); for ``end_ps`` <= 0, the bytes in use at time 0."""
        if end_ps <= 0:
            at_zero = [used for t, used in self.history if t <= 0]
            return at_zero[-1] if at_zero else 0
        total = 0
        prev_t, prev_used = 0, 0
        for t, used in self.history:
            if t >= end_ps:
                break
            total += prev_used * (t - prev_t)
            prev_t, prev_used = t, used
        total += prev_used * max(0, end_ps - prev_t)
        return (2 * total + end_ps) // (2 * end_ps)

    def usage(self, end_ps: int) -> dict[str, Any]:
        """The tier's figures for a report: peak, average over [0, ``end_ps``], capacity,
        whether the peak fits and the out-of-memory point (None: none)."""
        return {"peak_bytes": self.peak, "average_bytes": self.average(end_ps),
                "capacity_bytes": self.capacity, "fits": self.peak <= self.capacity,
                "out_of_memory": self.oom}
