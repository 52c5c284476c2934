"""ZeRO-2's sharded gradients in a pipeline stage's backward passes (docs/parallel.md, "Data
parallelism and ZeRO").

At ZeRO 2 (P_os+g) a rank keeps only its 1/dp partition of the reduced gradients. DeepSpeed's
``DeepSpeedZeroOptimizer`` (``deepspeed/runtime/zero/stage_1_and_2.py``) reduces a bucket of
gradients as soon as the backward pass fills it (``reduce_independent_p_g_buckets_and_remove_grads``)
and, with ``partition_gradients`` (stage 2), ``reduce_ipg_grads`` then drops the gradient of
every parameter outside the rank's partition (``clear_grad_attribute``: ``param.grad = None``)
and copies those inside it into ``grads_in_partition``, one buffer of the partition's size
(``copy_grads_in_partition``). The engine does so on every micro-batch's backward pass, not
only at the accumulation boundary (``allreduce_gradients`` in ``deepspeed/runtime/engine.py``:
"ZeRO stage >= 2 communicates during non gradient accumulation boundaries as well"); stage 1
reduces at the boundary only.

So here, at ZeRO 2, in every (micro-batch, chunk) backward pass each layer whose gradient the
optimizer steps gets a buffer of its whole gradient, ``LAYER:zero2_dw``, allocated before its
first backward kernel and reduce-scattered over the dp group asynchronously after its last (after
that kernel's ``sync``); the stream waits for a layer's reduce-scatter after issuing the next
layer's and frees its buffer then (the last one at the end of the pass), as
:mod:`~workloads.parallel.fsdp_stage` does for ZeRO 3's units. The persistent gradient the step
reads is the 1/dp shard (``model_state_bytes(params, dp, 2).gradients``), so a stage holds the
shards plus at most two layers' whole gradients. One bucket per layer's gradient, as
:mod:`~workloads.parallel.grad_overlap` keeps (a ``reduce_bucket_size`` of its own is not
modelled). Each micro-batch reduce-scatters Ψ of the stage's Ψ parameters and the step
all-gathers the updated weights once: (m + 1)Ψ a step of m micro-batches (2Ψ with one, the ZeRO
paper's count, Rajbhandari et al., SC 2020, section 7). With the optimizer states offloaded
(:mod:`~workloads.parallel.zero_offload`) the passes are the same, ``grads`` then the weighted
layers' gradients the host steps, and the shard leaves for the host after the last pass.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..stream_schema import COLLECTIVE_WAIT, StreamOp, StreamTensor
from ..vdnn import wgrad_name
from .fsdp_stage import Passes
from .zero import DP_GROUP

__all__ = ["is_zero2_grad", "zero2_grad_name", "zero2_pass", "zero2_passes"]


def zero2_grad_name(layer: str) -> str:
    """The buffer layer ``layer``'s whole gradient lands in before its reduce-scatter."""
    return f"{layer}:zero2_dw"


def is_zero2_grad(tensor: str) -> bool:
    """True when ``tensor`` is a layer's ZeRO-2 gradient buffer (:func:`zero2_grad_name`)."""
    return tensor.endswith(":zero2_dw")


def _ends(ops: Sequence[StreamOp], layers: set[str]) -> tuple[list[str], dict[str, int],
                                                             dict[str, int]]:
    """The layers of ``layers`` with backward kernels in ``ops`` in the order they run, each
    one's first such kernel and the op ending its last (that kernel's ``sync``, or the kernel)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        if op.op == "compute" and op.pass_ == "bwd" and op.name in layers:
            first.setdefault(op.name, i)
            last[op.name] = i
    end = {layer: next((k for k in range(i + 1, len(ops))
                        if ops[k].op == "sync" and ops[k].name == layer), i)
           for layer, i in last.items()}
    return sorted(first, key=first.__getitem__), first, end


def _waited_free(tensor: str) -> list[StreamOp]:
    """Wait for ``tensor``'s asynchronous reduce-scatter, then free it."""
    return [StreamOp(COLLECTIVE_WAIT, tensor, "backward"), StreamOp("free", tensor, "backward")]


def zero2_pass(ops: Sequence[StreamOp], layers: set[str]) -> list[StreamOp]:
    """A backward pass with each of ``layers``' gradient buffer allocated before its first
    kernel and reduce-scattered after its last, the previous layer's waited for and freed
    after that, the last one's at the end of the pass (see the module's docstring)."""
    order, first, end = _ends(ops, layers)
    before: dict[int, list[StreamOp]] = {}
    after: dict[int, list[StreamOp]] = {}
    for k, layer in enumerate(order):
        buffer = zero2_grad_name(layer)
        before.setdefault(first[layer], []).append(StreamOp("alloc", buffer, "backward"))
        after.setdefault(end[layer], []).append(
            StreamOp("reduce_scatter", buffer, "backward", group=DP_GROUP, async_=True))
        if k:
            after[end[layer]] += _waited_free(zero2_grad_name(order[k - 1]))
    out: list[StreamOp] = []
    for i, op in enumerate(ops):
        out += before.get(i, [])
        out.append(op)
        out += after.get(i, [])
    if order:
        out += _waited_free(zero2_grad_name(order[-1]))
    return out


def zero2_passes(passes: Passes, grads: Sequence[str], tensors: Mapping[str, StreamTensor]
                 ) -> tuple[Passes, list[StreamTensor], list[str]]:
    """Every (micro-batch, chunk) pass of a stage with ZeRO-2's gradient reduce-scatters
    (:func:`zero2_pass`) for the layers whose gradients ``grads`` (those the step reads) are;
    the declarations of their buffers (each of the whole gradient's bytes, ``tensors``'
    unsharded declaration); and the gradients so reduced (a layer with no backward kernel in
    any pass is left to the step)."""
    layer_of = {wgrad_name(t.layer): t.layer for t in tensors.values() if t.layer}
    layers = {layer_of[g] for g in grads if g in layer_of}
    out: Passes = {}
    ran: set[str] = set()
    for key, (forward, backward) in passes.items():
        out[key] = (forward, zero2_pass(backward, layers))
        ran |= {op.name for op in backward
                if op.op == "compute" and op.pass_ == "bwd" and op.name in layers}
    done = [g for g in grads if layer_of.get(g) in ran]
    buffers = [StreamTensor(zero2_grad_name(layer_of[g]), tensors[g].bytes, "gradient",
                            layer_of[g]) for g in done]
    return out, buffers, done
