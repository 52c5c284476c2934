"""Events the cdma elements exchange over their links."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class TransferRequest:
    """GPU -> cDMA engine: move a tensor. ``direction`` is ``offload`` (GPU to host) or
    ``prefetch`` (host to GPU)."""

    direction: str
    tensor: str
    raw_bytes: int
    layer: str
    sparse: bool = False
    issued_ps: int = 0


@dataclass
class TransferDone:
    """cDMA engine -> GPU: the transfer finished; ``wire_bytes`` crossed the host link."""

    request: TransferRequest
    wire_bytes: int
    started_ps: int
    finished_ps: int


@dataclass
class PathInfo:
    """Untimed (init-phase) message travelling from the host towards the GPU: the resources a
    transfer crosses in each direction, the latency it accumulates and the host memory."""

    d2h: list = field(default_factory=list)
    h2d: list = field(default_factory=list)
    latency_ps: int = 0
    host: Optional[Any] = None
    link_names: list = field(default_factory=list)


@dataclass
class MemoryHandle:
    """Untimed message from HBM to its GPU and engine: the memory component itself and the
    name of its bandwidth resource."""

    hbm: Any
    resource: str
