"""Events the cdma elements exchange over their links."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TransferRequest:
    """GPU -> cDMA engine: move a tensor. ``direction`` is ``offload`` (GPU to host) or
    ``prefetch`` (host to GPU)."""

    direction: str
    tensor: str
    raw_bytes: int
    layer: str
    sparse: bool = False


@dataclass
class TransferDone:
    """cDMA engine -> GPU: the transfer finished; ``wire_bytes`` crossed the host link."""

    request: TransferRequest
    wire_bytes: int
    started_ps: int
    finished_ps: int


@dataclass
class GradientReady:
    """GPU -> NVSwitch fabric: the weight gradient of ``layer`` is computed (data parallel)."""

    layer: str


@dataclass
class AllReduceDone:
    """NVSwitch fabric -> GPU: every gradient bucket is reduced; the iteration may end."""
