"""``cdma.SyntheticWorkload``: a synthetic chain of layers, each one kernel of a fixed time whose
input is offloaded while it runs and prefetched one layer ahead in the backward pass: a
workload with no network definition, for probing the copy path (docs/topologies.md, "Adding a
workload source")."""
from __future__ import annotations

from typing import Optional

from sst_cdma.engine.element import Param
from workloads.stream import Stream, parse_stream

from .workload_source import WorkloadSource


class SyntheticWorkload(WorkloadSource):
    """A chain of equal layers: each kernel's input offloaded, then prefetched back."""

    PARAMS = (
        Param("layers", "int", 4, "layers in the chain", minimum=2),
        Param("activation", "bytes", "64MiB", "bytes of each layer's output", minimum=1),
        Param("kernel_time", "time", "1ms", "time of each forward and backward kernel",
              minimum=0),
    )

    def kernel_times_source(self) -> str:
        """Every kernel takes the ``kernel_time`` param."""
        return f"synthetic: every kernel {self.params['kernel_time'] * 1e-9:g} ms"

    def stream(self, memory_capacity: Optional[int]) -> Stream:
        """The chain's stream (the same for any memory)."""
        n, size, t = self.params["layers"], self.params["activation"], self.params["kernel_time"]
        lines = ["stream version=1 network=synthetic batch=1 dtype=float32 policy=all"]
        lines += [f"tensor a{i} bytes={size} kind=activation layer=L{i}" for i in range(n + 1)]
        lines += ["phase forward", "alloc a0"]
        for i in range(1, n + 1):
            lines += [f"alloc a{i}", f"offload a{i - 1} layer=L{i}",
                      f"compute L{i} pass=fwd flops=0 dram=0 time={t}ps reads=a{i - 1} "
                      f"writes=a{i}", f"sync L{i}", f"free a{i - 1}"]
        lines += ["phase backward", f"alloc a{n - 1}", f"prefetch a{n - 1} layer=L{n}"]
        for i in range(n, 0, -1):
            if i >= 2:
                lines += [f"alloc a{i - 2}", f"prefetch a{i - 2} layer=L{i}"]
            lines += [f"wait a{i - 1}", f"compute L{i} pass=bwd flops=0 dram=0 time={t}ps "
                      f"reads=a{i - 1}", f"sync L{i}", f"free a{i - 1}"]
            if i == n:
                lines.append(f"free a{n}")
        return parse_stream("\n".join(lines + ["end"]) + "\n", self.name)
