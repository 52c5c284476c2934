"""One training iteration's schedule as objects: :class:`Plan`, the stream's tensors and ops
grouped per phase and layer (the grouping and comments its text shows), and the flat
:class:`~workloads.stream_schema.Stream` it makes (:meth:`Plan.stream`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .stream_schema import STREAM_VERSION, Stream, StreamOp, StreamTensor

__all__ = ["Block", "Plan"]


@dataclass
class Block:
    """The ops issued for one layer in one phase, with a comment line."""

    layer: str
    kind: str
    comment: str
    ops: list[StreamOp] = field(default_factory=list)


@dataclass
class Plan:
    """One training iteration: the stream's tensors, and its ops as the prologue (allocations
    for the whole iteration), per-layer blocks of each phase and the epilogue."""

    network: str
    batch: int
    dtype: str
    policy: str
    tensors: list[StreamTensor]
    prologue: list[StreamOp]
    forward: list[Block]
    backward: list[Block]
    epilogue: list[StreamOp]
    offloaded: tuple[str, ...] = ()
    update: list[Block] = field(default_factory=list)
    allocation: str = "liveness"
    #: per-tensor policies: every activation tensor -> keep, offload, compress or recompute
    #: (empty under the vDNN policies)
    choices: dict[str, str] = field(default_factory=dict)
    #: recomputed tensors (their producer's forward kernels re-run in the backward pass)
    recomputed: tuple[str, ...] = ()

    def ops(self) -> list[StreamOp]:
        """Every op in issue order."""
        ops = list(self.prologue)
        for blocks in (self.forward, self.backward, self.update):
            for block in blocks:
                ops.extend(block.ops)
        ops.extend(self.epilogue)
        return ops

    def stream(self, source: str = "<stream>") -> Stream:
        """The plan as a stream named ``source``; it keeps the plan (its text's layout)."""
        return Stream(source, STREAM_VERSION, self.network, self.batch, self.dtype, self.policy,
                      {t.name: t for t in self.tensors}, self.ops(), self)
