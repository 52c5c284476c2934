"""A training step's schedule: the order in which the GPU runs the spans of its stream.

The stream holds one micro-batch's ops once; the schedule says what runs when: the prologue
once, then each micro-batch's forward and backward passes, then the update and the epilogue
once. Each step names its micro-batch, its phase and its model chunk, so that a pipeline
schedule (1F1B, interleaved virtual stages) is another order of the same steps, emitted by
the workload, never a replay the GPU works out itself."""
from __future__ import annotations

from typing import Optional

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["Step", "single_pass", "micro_batch_steps"]


@frozen_record
class Step(FrozenRecord):
    """Ops ``[start, end)`` of the stream, run in ``phase`` (``prologue``, ``forward``,
    ``backward``, ``update``) of micro-batch ``micro_batch`` (None: once per optimizer step)
    on model chunk ``chunk`` (0: the only one until virtual pipeline stages)."""

    start: int
    end: int
    phase: str
    micro_batch: Optional[int] = None
    chunk: int = 0


def single_pass(n_ops: int) -> list[Step]:
    """The schedule of a stream run once as it stands (a parsed stream, one micro-batch)."""
    return [Step(0, n_ops, "iteration")]


def micro_batch_steps(n_ops: int, start: int, forward_end: int, end: int, count: int
                      ) -> list[Step]:
    """Gradient accumulation: the prologue ``[0, start)`` once; ``count`` micro-batches, each
    its forward ``[start, forward_end)`` then its backward ``[forward_end, end)`` passes; the
    update and the epilogue ``[end, n_ops)`` once."""
    steps = [Step(0, start, "prologue")]
    for k in range(count):
        steps += [Step(start, forward_end, "forward", k), Step(forward_end, end, "backward", k)]
    steps.append(Step(end, n_ops, "update"))
    return steps
