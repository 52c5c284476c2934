"""The data-parallel gradient reduction of ZeRO 0-1 overlapped with the backward pass
(docs/parallel.md, "ZeRO-3 and the overlap"; ZeRO 2 reduce-scatters in every backward pass
instead, :mod:`~workloads.parallel.zero2_grads`).

Megatron-LM's pipeline schedules turn gradient synchronisation on for the last micro-batch
only (``enable_grad_sync()`` before its backward step in
``forward_backward_pipelining_without_interleaving``,
``megatron/core/pipeline_parallel/schedules.py``; the other micro-batches accumulate under
``no_sync``), and DeepSpeed's ZeRO-1/2 reduces a bucket of gradients as soon as the backward
pass has filled it (``reduce_independent_p_g_buckets_and_remove_grads`` in
``deepspeed/runtime/zero/stage_1_and_2.py``, on a stream of its own with ``overlap_comm``).
So here: in each model chunk's last backward pass of the step, each layer's weight gradient
is reduced over the dp group (an all-reduce at ZeRO 0, a reduce-scatter at 1) by an
asynchronous collective issued right after that layer's backward kernel (after its ``sync``),
one bucket per layer's gradient (the render keeps one gradient tensor per layer); the
optimizer step waits for each (``collective_wait``) before its first kernel."""
from __future__ import annotations

from typing import Iterable, Sequence

from ..stream_schema import StreamOp
from ..vdnn import wgrad_name
from .fsdp_stage import Passes
from .pipeline import BACKWARD, Order
from .zero import DP_GROUP

__all__ = ["stepped_gradients", "last_backward_passes", "overlap_reductions"]


def stepped_gradients(update: Iterable[StreamOp]) -> list[str]:
    """The weight gradients the optimizer step's kernels read, in their order."""
    return [wgrad_name(op.name) for op in update
            if op.op == "compute" and wgrad_name(op.name) in op.reads]


def last_backward_passes(order: Order) -> list[tuple[int, int]]:
    """Each chunk's last backward pass in ``order``: (micro-batch, chunk)."""
    last = {work.chunk: (work.micro_batch, work.chunk) for work in order
            if work.phase == BACKWARD}
    return [last[c] for c in sorted(last)]


def _reduced(ops: Sequence[StreamOp], grads: set[str], kind: str
             ) -> tuple[list[StreamOp], list[str]]:
    """``ops`` (a backward span) with an asynchronous ``kind`` of each gradient in ``grads``
    after its layer's last backward kernel (after that kernel's ``sync``), and the gradients
    so reduced in order."""
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        if op.op == "compute" and wgrad_name(op.name) in grads:
            last[op.name] = i
    after: dict[int, str] = {}
    for layer, i in last.items():
        end = next((k for k in range(i + 1, len(ops))
                    if ops[k].op == "sync" and ops[k].name == layer), i)
        after[end] = wgrad_name(layer)
    out: list[StreamOp] = []
    done: list[str] = []
    for i, op in enumerate(ops):
        out.append(op)
        if i in after:
            out.append(StreamOp(kind, after[i], op.phase, group=DP_GROUP, async_=True))
            done.append(after[i])
    return out, done


def overlap_reductions(passes: Passes, last: Sequence[tuple[int, int]], grads: Sequence[str],
                       kind: str) -> tuple[Passes, list[str]]:
    """``passes`` with each of ``grads`` reduced (``kind``: ``all_reduce`` or
    ``reduce_scatter``) asynchronously in the ``last`` backward pass of its chunk, and the
    gradients so reduced (the others, with no backward kernel there, are left to the step)."""
    out = dict(passes)
    wanted = set(grads)
    done: list[str] = []
    for key in last:
        forward, backward = out[key]
        backward, reduced = _reduced(backward, wanted, kind)
        out[key] = (forward, backward)
        done += reduced
    return out, done
