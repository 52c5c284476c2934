"""ZeRO-Offload under data parallelism on a pipeline stage: each rank's partition of its
stage's optimizer states in host memory, stepped by its host CPU (docs/parallel.md,
"ZeRO-Offload under data parallelism").

DeepSpeed's stage 1-2 optimizer with ``offload_optimizer`` (``deepspeed/runtime/zero/
stage_1_and_2.py``) keeps each data-parallel rank's partition of the fp32 states on the host:
the rank reduce-scatters the 16-bit gradients, copies its partition of them to the host, runs
``DeepSpeedCPUAdam`` over that partition in ``step()``, copies its updated 16-bit partition
back to the GPU, and all-gathers the partitions into the whole weights. Rajbhandari et al.'s
ZeRO (SC 2020) gives the partition: 1/N_d of the states at stages 1 and 2; DeepSpeed's ZeRO
page (deepspeed.readthedocs.io/en/stable/zero3.html) says each process "updates only its
partition".

:func:`stage_state_plan` cuts a stage's weighted layers into the gradient buckets the driver
copies (backward order, as :func:`~workloads.model_states.state_buckets` cuts a single GPU's:
a bucket closes at DeepSpeed's ``reduce_bucket_size`` of whole gradients), each carrying the
rank's 1/dp partition of its parameters (``ceil(params / dp)``: DeepSpeed pads the flat
buffer to a multiple of ``nccl_start_alignment_factor x dp`` elements in
``flatten_dense_tensors_aligned`` and gives each rank an equal part; the alignment's few
elements are left out here) at ZeRO 1 and 2, the whole at dp 1. :func:`offload_collectives` gives
the stage's collectives around the host's step: each weight gradient reduce-scattered over the
dp group before its partition is copied, each weight all-gathered once the host has stepped
and the partitions are back.
"""
from __future__ import annotations

from typing import Sequence

from ..dtypes import itemsize
from ..errors import WorkloadError
from ..model_states import (DEEPSPEED_BUCKET_ELEMENTS, ModelStatePlan, Placement, StateBucket,
                            bucket_name)
from ..stream_schema import COLLECTIVE_WAIT, StreamOp
from ..vdnn import OPTIMIZERS, weight_name, wgrad_name
from .fsdp_stage import is_unit_grad
from .zero import DP_GROUP
from .zero2_grads import is_zero2_grad, zero2_grad_name

__all__ = ["OFFLOAD_ZERO", "partition", "stage_state_plan", "offload_collectives",
           "final_gradient_ops"]

#: the ZeRO stages whose optimizer states may leave for the host with dp above 1: each rank
#: keeps its partition there (DeepSpeed's ``offload_optimizer`` at stages 1, 2 and 3)
OFFLOAD_ZERO = (1, 2, 3)


def partition(params: int, dp: int, zero: int) -> int:
    """Parameters of one rank's partition of ``params``: ``ceil(params / dp)`` at ZeRO 1, 2
    or 3 with ``dp`` above 1 (the flat buffer, or at ZeRO 3 the parameter, cut in ``dp``
    equal parts), else all of them."""
    return -(-params // dp) if zero in OFFLOAD_ZERO and dp > 1 else params


def _bucket(index: int, layers: Sequence[tuple[str, int]], dtype: str, optimizer: str,
            dp: int, zero: int) -> StateBucket:
    """Bucket ``index`` of ``layers`` ((layer, parameters) pairs), the rank's partition: at
    ZeRO 1-2 of the bucket's flat buffer, at ZeRO 3 each layer's own (the shards the GPU
    holds)."""
    step = OPTIMIZERS[optimizer]
    assert step is not None, "the host CPU steps Adam: checked by the placement"
    if zero == 3:
        shard = sum(partition(params, dp, zero) for _, params in layers)
    else:
        shard = partition(sum(params for _, params in layers), dp, zero)
    size = shard * itemsize(dtype)
    names = tuple(layer for layer, _ in layers)
    return StateBucket(bucket_name(index), names, tuple(wgrad_name(n) for n in names), shard,
                       size, size, step.state_bytes(shard, dtype), step.dram_bytes(shard, dtype))


def stage_state_plan(weighted: Sequence[tuple[str, int]], dtype: str, optimizer: str,
                     placement: Placement, dp: int, zero: int) -> ModelStatePlan:
    """The model states a stage's rank moves to its host CPU: ``weighted`` ((layer,
    parameters) of the stage's weighted layers, forward order) cut in backward order into
    buckets of at least ``placement.bucket_bytes`` of whole gradients (DeepSpeed's default
    :data:`~workloads.model_states.DEEPSPEED_BUCKET_ELEMENTS` elements when 0), each holding
    the rank's partition (:func:`partition`). A :class:`WorkloadError` for no weighted layer or
    a placement that is not ZeRO-Offload."""
    placement.check(optimizer)
    if not placement.offloaded:
        raise WorkloadError("stage_state_plan: the optimizer states are on the GPU; nothing "
                            "moves to the host")
    if not weighted:
        raise WorkloadError("stage_state_plan: the stage has no weighted layer to step")
    size = itemsize(dtype)
    cap = placement.bucket_bytes or DEEPSPEED_BUCKET_ELEMENTS * size
    buckets: list[StateBucket] = []
    group: list[tuple[str, int]] = []
    for layer, params in reversed(list(weighted)):
        group.append((layer, params))
        if sum(p for _, p in group) * size >= cap:
            buckets.append(_bucket(len(buckets), group, dtype, optimizer, dp, zero))
            group = []
    if group:
        buckets.append(_bucket(len(buckets), group, dtype, optimizer, dp, zero))
    return ModelStatePlan(placement, tuple(buckets))


def offload_collectives(weighted: Sequence[tuple[str, int]], dp: int, zero: int
                        ) -> tuple[list[StreamOp], list[StreamOp]]:
    """The stage's data-parallel collectives around the host's step, for its ``weighted``
    layers (forward order): each weight gradient reduce-scattered in place over the dp group
    (backward order, after the last backward pass: its partition then leaves for the host),
    and each weight all-gathered in place (forward order, once every partition is stepped
    and back on the GPU); both empty with ``dp`` 1, and at ZeRO 3, whose passes
    reduce-scatter the gradients and gather the weights where they are used
    (:mod:`~workloads.parallel.fsdp_stage`: DeepSpeed's stage 3 copies each rank's stepped
    16-bit partition back, ``_reassign_or_swap_out_partitioned_parameters``, and gathers
    nothing after its ``step()``). The bytes are each whole buffer's (nccl-tests'
    convention, as :func:`~workloads.parallel.transformer_stages.with_dp_collectives`
    counts them)."""
    if dp == 1 or zero == 3:
        return [], []
    if zero not in OFFLOAD_ZERO:
        raise WorkloadError(f"zero {zero} with dp {dp}: ZeRO-Offload keeps each rank's "
                            "partition of the optimizer states on its host: zero 1, 2 or 3")
    scatters = [StreamOp("reduce_scatter", wgrad_name(layer), "update", group=DP_GROUP)
                for layer, _ in reversed(list(weighted))]
    gathers = [StreamOp("all_gather", weight_name(layer), "update", group=DP_GROUP)
               for layer, _ in weighted]
    return scatters, gathers


def final_gradient_ops(ops: Sequence[StreamOp], plan: ModelStatePlan) -> dict[int, tuple[str, ...]]:
    """Where each of ``plan``'s weight gradients is final in ``ops`` (a stage's ops in its
    schedule's order): index -> the gradients whose partition may leave for the host once
    that op has ended. With its reduce-scatter in ``ops`` (ZeRO 1-2, dp above 1) a gradient
    is final after it; at ZeRO 3 after the wait for the reduce-scatter of the FSDP unit's
    gradient buffer that follows its last kernel (:func:`_unit_scatter_waits`: the last
    micro-batch's reduction into the rank's shard, DeepSpeed's gradient-accumulation boundary
    in ``partition_grads``), at ZeRO 2 likewise after the wait for its layer's buffer's
    reduce-scatter in the last backward pass (the shard the GPU accumulated over the
    micro-batches then leaves whole, once); else after the last kernel writing it (the last
    micro-batch's backward), and one no kernel writes (a tied head's copy, whose gradient the head's kernel
    accumulates elsewhere) after the stage's last backward kernel."""
    wanted = [w for b in plan.buckets for w in b.wgrads]
    zero2 = _zero2_last_waits(ops)
    layer_of = {w: layer for b in plan.buckets for layer, w in zip(b.layers, b.wgrads)}
    scattered = {op.name: i for i, op in enumerate(ops)
                 if op.op == "reduce_scatter" and op.name in wanted}
    last: dict[str, int] = {}
    backward_end = -1
    for i, op in enumerate(ops):
        if op.op != "compute":
            continue
        if op.phase == "backward":
            backward_end = i
        for t in op.writes:
            if t in wanted:
                last[t] = i
    unit_waits = _unit_scatter_waits(ops)
    out: dict[int, list[str]] = {}
    for w in wanted:
        at = scattered.get(w, zero2.get(layer_of[w], last.get(w, backward_end)))
        if at < 0:
            raise WorkloadError(f"gradient {w}: the stage runs no backward kernel to make it")
        if w not in scattered and layer_of[w] not in zero2:
            at = next((wait for scatter, wait in unit_waits if scatter > at), at)
        out.setdefault(at, []).append(w)
    return {i: tuple(ws) for i, ws in out.items()}


def _zero2_last_waits(ops: Sequence[StreamOp]) -> dict[str, int]:
    """Layer -> the index of the last ``collective_wait`` in ``ops`` for its ZeRO-2 gradient
    buffer's reduce-scatter (:mod:`~workloads.parallel.zero2_grads`: the last micro-batch's)."""
    return {op.name[:-len(zero2_grad_name(""))]: i for i, op in enumerate(ops)
            if op.op == COLLECTIVE_WAIT and is_zero2_grad(op.name)}


def _unit_scatter_waits(ops: Sequence[StreamOp]) -> list[tuple[int, int]]:
    """Each asynchronous reduce-scatter of an FSDP unit's gradient buffer in ``ops`` (ZeRO
    3) with the ``collective_wait`` that ends it: (its index, the wait's index), in order."""
    out = []
    for i, op in enumerate(ops):
        if op.op == "reduce_scatter" and op.async_ and is_unit_grad(op.name):
            wait = next(k for k in range(i + 1, len(ops))
                        if ops[k].op == COLLECTIVE_WAIT and ops[k].name == op.name)
            out.append((i, wait))
    return out
