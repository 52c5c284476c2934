"""``cdma.StreamWorkload``: a GPU's workload read from a workload stream file (docs/workloads.md),
which declares its own shapes, policy, allocations and optimizer step."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Param
from workloads import WorkloadError
from workloads.stream import Stream, StreamError, read_stream

from .workload_source import WorkloadSource

__all__ = ["StreamWorkload"]


class StreamWorkload(WorkloadSource):
    """A workload stream file: the ops the GPU executes, as written."""

    PARAMS = (Param("file", "str", None, "the workload stream file"),)

    def kernel_times_source(self) -> str:
        """The stream's own ``time=`` keys; the roofline (plus the fitted model's launch with
        cdma.FittedKernels) for the rest."""
        rest = "roofline" if self.kernels.model is None else \
            "roofline plus the fitted model's launch"
        return f"workload stream {self.params['file']} (its time= keys, else {rest})"

    def stream(self, memory_capacity: Optional[int]) -> Stream:
        """The parsed stream file (the memory capacity does not change it)."""
        path = Path(self.params["file"])
        if self.kernels.layer_times:
            raise ConfigError(f"{self.name}: measured layer times ({self.kernels.type_name()}) "
                              "apply to a rendered network; a workload stream carries its own "
                              "time= keys: fill 'kernels' with cdma.RooflineKernels")
        try:
            return read_stream(path)
        except (StreamError, WorkloadError, ValueError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
