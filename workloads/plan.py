"""One training iteration's schedule as objects: :class:`Plan`, the stream's tensors and ops
grouped per phase and layer (the grouping and comments its text shows), and the flat
:class:`~workloads.stream_schema.Stream` it makes (:meth:`Plan.stream`)."""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Optional

from .schedule import Step, micro_batch_steps, single_pass
from .stream_schema import STREAM_VERSION, Stream, StreamOp, StreamTensor

from sst_cdma.engine.records import Record, record

if TYPE_CHECKING:
    from .model_states import ModelStatePlan

__all__ = ["Block", "Plan"]


@record
class Block(Record):
    """The ops issued for one layer in one phase, with a comment line."""

    layer: str
    kind: str
    comment: str
    ops: list[StreamOp] = field(default_factory=list)


@record
class Plan(Record):
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
    #: micro-batches per optimizer step (``grad_accum``): the GPU runs the ops of
    #: :meth:`micro_batch_span` this many times, then the update and the epilogue once
    micro_batches: int = 1
    #: the frees each micro-batch's backward pass ends with (several micro-batches)
    tail: list[StreamOp] = field(default_factory=list)
    #: the model states the host CPU steps (None: every state on the GPU, as the plan's ops
    #: say)
    model_states: Optional[ModelStatePlan] = None

    def ops(self) -> list[StreamOp]:
        """Every op in issue order (one micro-batch)."""
        ops = list(self.prologue)
        for blocks in (self.forward, self.backward):
            for block in blocks:
                ops.extend(block.ops)
        ops.extend(self.tail)
        for block in self.update:
            ops.extend(block.ops)
        ops.extend(self.epilogue)
        return ops

    def schedule(self) -> list[Step]:
        """The order the GPU runs :meth:`ops` in: one pass, or with several micro-batches
        the prologue, each micro-batch's forward and backward passes, the update and the
        epilogue."""
        n_ops = len(self.ops())
        if self.micro_batches == 1:
            return single_pass(n_ops)
        start, end = self.micro_batch_span()
        forward_end = start + sum(len(b.ops) for b in self.forward)
        return micro_batch_steps(n_ops, start, forward_end, end, self.micro_batches)

    def micro_batch_span(self) -> tuple[int, int]:
        """The indices [start, end) in :meth:`ops` of one micro-batch's ops: its forward and
        backward passes and their tail."""
        start = len(self.prologue)
        count = sum(len(b.ops) for blocks in (self.forward, self.backward) for b in blocks)
        return start, start + count + len(self.tail)

    def stream(self, source: str = "<stream>") -> Stream:
        """The plan as a stream named ``source``; it keeps the plan (its text's layout)."""
        return Stream(source, STREAM_VERSION, self.network, self.batch, self.dtype, self.policy,
                      {t.name: t for t in self.tensors}, self.ops(), self)
