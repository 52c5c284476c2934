"""A pipeline stage of a real transformer: the stream one pipeline rank runs, cut from the
single-GPU render of the network (docs/parallel.md, "Stages of a transformer").

:func:`transformer_stage_stream` takes the :class:`~workloads.plan.Plan` the renderer made for
one GPU (one micro-batch: its forward and backward blocks per layer, its prologue of model
states, its optimizer step and its epilogue; kernel times priced as for one GPU) and a layout,
and gives stage ``stage`` its :class:`~workloads.parallel.stage_stream.StageStream`:

* each model chunk of the stage takes the layers of its virtual stage (the blocks of
  :func:`~workloads.parallel.ranks.stage_plans`' split; what comes before the first block, the
  embedding, on virtual stage 0, what comes after the last, the final norm, the LM head and the
  loss, on the last), their forward blocks and backward blocks as the render made them;
* the model states of the stage's layers (weights, weight gradients, optimizer states) are
  allocated once, in the prologue; the optimizer step of those layers runs once, after the
  last backward pass, and the epilogue frees them;
* each (micro-batch, chunk) pass copies its chunk's blocks with its own activations and
  activation gradients (``NAME.mB``: several micro-batches' activations are held at once);
* a chunk's inputs made on the virtual stage before (the residual stream entering its first
  block) are allocated and received (``recv ... peer=prev``) before its forward blocks, and
  their gradients sent back (``send``) after its backward blocks; its outputs are sent forward
  after its forward blocks and their gradients allocated and received before its backward
  blocks. The bytes of each message are the boundary tensor's (and its gradient's).

The schedule is the stage's order (GPipe, 1F1B or interleaved) over those spans
(:func:`~workloads.parallel.stage_stream.pipeline_steps`).

With a tensor-parallel shard (:func:`shard_plan` renders one rank's), each pass also runs the
shard's collectives over its tp group (:func:`with_tp_collectives`: the
:class:`~workloads.parallel.tensor.CommOp` list, each right after the kernel of the layer it
follows), and with sequence parallelism the stage all-reduces its layers' norm and bias
gradients before its optimizer step; every tp rank of the stage runs the same stream.

The policy's ops stay with the chunk of their layer, but for two things that cross a seam
between chunks in the single-GPU plan: a prefetch issued ahead on one chunk for a tensor
another chunk offloaded (vDNN's walk back to the nearest earlier layer with offloaded tensors)
moves to the start of the offloading chunk's backward pass (:func:`_relocate_prefetches`);
anything else that names another chunk's tensor (a recomputation re-running the boundary
tensor's producer, whose inputs are on the stage before) is refused, naming the op, the tensor
and the virtual stages. With a tied LM head (:func:`tied_head`) the head's stage holds a copy
of the word embeddings, as Megatron-LM keeps one on the last stage, and (with a fabric) the
first and the last stage all-reduce the word embeddings' gradient over their embedding group
before the step (:mod:`~workloads.parallel.tied_grads`). A forward kernel recomputed in the
backward pass runs its layer's tensor-parallel collectives again (:func:`with_tp_collectives`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Collection, Iterable, Mapping, Optional, Sequence

from sst_cdma.model.price_memo import PriceMemo

from ..dtypes import itemsize
from ..network import Network
from ..plan import Block, Plan
from ..render import stream_text
from ..stream import Stream, parse_stream
from ..stream_schema import COLLECTIVE_WAIT, StreamOp, StreamTensor
from ..transformer import split_name
from ..vdnn import grad_name, weight_name, wgrad_name
from .layout import LayoutError, ParallelLayout
from .pipeline import stage_order
from .ranks import ChunkLayers, stage_plans
from .stage_stream import PassSpans, SpanKey, StageStream, peers, pipeline_steps
from .tensor import TP_GROUP
from .fsdp_stage import Passes, zero3_passes
from .grad_overlap import last_backward_passes, overlap_reductions, stepped_gradients
from .zero import DP_GROUP, model_state_bytes
from .zero_offload import offload_collectives, stage_state_plan
from .zero2_grads import zero2_passes
from .tied_grads import (WORD_EMBEDDING_GRADS, with_embedding_all_reduce,
                         word_embedding_grad_bytes)

if TYPE_CHECKING:
    from sst_cdma.model.fitted import KernelModel

    from ..model_states import ModelStatePlan, Placement

    from .tensor import CommOp, TensorShard

__all__ = ["ChunkCut", "chunk_cuts", "transformer_blocks", "transformer_stage_stream",
           "micro_batch_name", "shard_plan", "TiedHead", "tied_head", "with_tp_collectives",
           "SEQUENCE_PARALLEL_GRADS", "with_dp_collectives"]

#: the buffer a stage all-reduces its norms' and row-parallel biases' gradients in, once a
#: step before the optimizer, with sequence parallelism
SEQUENCE_PARALLEL_GRADS = "tp:sequence_parallel_grads"

#: the shards :func:`shard_plan` rendered and their priced kernels, with the network their key
#: names by identity (a loaded network is shared and does not change)
_SHARDS = PriceMemo(8)

#: ops whose ``name`` is a layer, not a tensor
_LAYER_OPS = ("compute", "sync")


def micro_batch_name(tensor: str, micro_batch: int) -> str:
    """The name of ``tensor``'s copy for micro-batch ``micro_batch`` on a pipeline stage."""
    return f"{tensor}.m{micro_batch}"


def transformer_blocks(plan: Plan) -> int:
    """The number of transformer blocks (``blk{i}/...`` layers) of a rendered plan; a
    :class:`LayoutError` for a plan with none (not a transformer)."""
    blocks = {b for b, _ in (split_name(block.layer) for block in plan.forward)
              if b is not None}
    if not blocks:
        raise LayoutError(f"network {plan.network}: no transformer blocks (blk<i>/...) to "
                          "split over pipeline stages")
    return 1 + max(blocks)


@dataclass(frozen=True)
class ChunkCut:
    """What one model chunk takes from the single-GPU plan: its layers (by name, forward
    order), its forward and backward ops, the model-state ops (prologue allocations, the
    optimizer step, the epilogue's frees) of its layers, the activation frees it ends each
    pass with, the tensors it receives before its forward pass (``inputs``, from the virtual
    stage before) and those it sends after it (``outputs``, to the virtual stage after)."""

    chunk: ChunkLayers
    layers: tuple[str, ...]
    forward: tuple[StreamOp, ...]
    backward: tuple[StreamOp, ...]
    prologue: tuple[StreamOp, ...]
    update: tuple[StreamOp, ...]
    epilogue: tuple[StreamOp, ...]
    tail: tuple[StreamOp, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _virtual_stage_of(plan: Plan, layout: ParallelLayout) -> dict[str, int]:
    """Each layer of the plan -> its virtual stage: a block's by the split, what comes before
    the first block 0, what comes after the last block the last."""
    blocks = transformer_blocks(plan)
    sizes = layout.stage_sizes(blocks)
    if sum(sizes) != blocks:
        raise LayoutError(f"stage_split sums to {sum(sizes)}, but network {plan.network} has "
                          f"{blocks} transformer blocks")
    of_block = [k for k, size in enumerate(sizes) for _ in range(size)]
    out: dict[str, int] = {}
    seen_block = False
    for block in plan.forward:
        b, _ = split_name(block.layer)
        if b is not None:
            seen_block = True
            out[block.layer] = of_block[b]
        else:
            out[block.layer] = layout.virtual_stages - 1 if seen_block else 0
    return out


def _tensors_of(op: StreamOp) -> tuple[str, ...]:
    """The tensors an op names."""
    if op.op in _LAYER_OPS:
        return op.reads + op.writes
    return (op.name,)


def _layer_ops(blocks: Iterable[Block], layers: set[str]) -> tuple[StreamOp, ...]:
    """The ops of the blocks of ``layers``, in order."""
    return tuple(op for block in blocks if block.layer in layers for op in block.ops)


def _owner(plan: Plan, stage_of: dict[str, int]) -> dict[str, int]:
    """Each declared tensor -> the virtual stage of the layer that makes it."""
    return {t.name: stage_of[t.layer] for t in plan.tensors if t.layer in stage_of}


def _model_states(plan: Plan) -> set[str]:
    """The tensors that live for the whole step: weights, their gradients, optimizer
    states."""
    return {t.name for t in plan.tensors
            if t.kind in ("weight", "state") or (t.layer and t.name == wgrad_name(t.layer))}


def _reads_elsewhere(plan: Plan, stage_of: dict[str, int], k: int) -> set[str]:
    """The tensors the forward kernels of the other virtual stages than ``k`` read."""
    return {t for block in plan.forward if stage_of[block.layer] != k for op in block.ops
            if op.op == "compute" for t in op.reads}


def _cut(plan: Plan, chunk: ChunkLayers, stage_of: dict[str, int], owner: dict[str, int],
         states: set[str]) -> ChunkCut:
    """Virtual stage ``chunk.virtual_stage``'s cut of ``plan``."""
    k = chunk.virtual_stage
    layers = {name for name, at in stage_of.items() if at == k}
    forward = _layer_ops(plan.forward, layers)
    read = dict.fromkeys(t for op in forward if op.op == "compute" for t in op.reads)
    inputs = tuple(t for t in read if t not in states and owner.get(t, k) != k)
    elsewhere = _reads_elsewhere(plan, stage_of, k)
    outputs = tuple(t for t, at in owner.items()
                    if at == k and t not in states and t in elsewhere)
    ends = [op for op in plan.epilogue + plan.tail if owner.get(op.name) == k]
    return ChunkCut(chunk, tuple(b.layer for b in plan.forward if b.layer in layers), forward,
                    _layer_ops(plan.backward, layers),
                    tuple(op for op in plan.prologue if owner.get(op.name) == k),
                    _layer_ops(plan.update, layers),
                    tuple(op for op in ends if op.name in states),
                    tuple(op for op in ends if op.name not in states), inputs, outputs)


def chunk_cuts(plan: Plan, layout: ParallelLayout) -> tuple[ChunkCut, ...]:
    """Every virtual stage's cut of ``plan`` (virtual-stage order); a :class:`LayoutError`
    naming the tensor and the chunks for a plan that moves a tensor across a seam other than
    a boundary activation handed to the next virtual stage."""
    stage_of = _virtual_stage_of(plan, layout)
    owner = _owner(plan, stage_of)
    states = _model_states(plan)
    chunks = sorted((c for s in stage_plans(layout, transformer_blocks(plan)) for c in s.chunks),
                    key=lambda c: c.virtual_stage)
    cuts = _relocate_prefetches([_cut(plan, c, stage_of, owner, states) for c in chunks])
    for cut in cuts:
        _check_seams(cut, owner)
    return tuple(cuts)


def _relocate_prefetches(cuts: list[ChunkCut]) -> list[ChunkCut]:
    """The prefetches a chunk's backward issues ahead for a tensor another chunk offloaded
    (vDNN's walk to the nearest earlier layer with offloaded tensors crosses the seam), moved
    to the start of that chunk's backward: its GPU holds the tensor's copy on its host; each
    waited for before the first kernel reading it unless a sync drains it first."""
    offloader = {op.name: cut.chunk.virtual_stage for cut in cuts for op in cut.forward
                 if op.op == "offload"}
    moved: dict[int, list[StreamOp]] = {}
    kept: list[tuple[StreamOp, ...]] = []
    for cut in cuts:
        k = cut.chunk.virtual_stage
        away = {op.name for op in cut.backward if op.op == "prefetch"
                and offloader.get(op.name, k) != k}
        kept.append(tuple(op for op in cut.backward
                          if not (op.op in ("alloc", "prefetch") and op.name in away)))
        for op in cut.backward:
            if op.op in ("alloc", "prefetch") and op.name in away:
                moved.setdefault(offloader[op.name], []).append(op)
    out = []
    for cut, backward in zip(cuts, kept):
        ahead = moved.get(cut.chunk.virtual_stage, [])
        if ahead:
            backward = _waited(tuple(ahead), backward)
        out.append(replace(cut, backward=backward))
    return out


def _waited(ahead: tuple[StreamOp, ...], backward: tuple[StreamOp, ...]
            ) -> tuple[StreamOp, ...]:
    """``ahead`` (allocs and prefetches) before ``backward``, with a ``wait`` before the first
    kernel reading a prefetched tensor where no sync comes between."""
    pending = {op.name for op in ahead if op.op == "prefetch"}
    out = list(ahead)
    for op in backward:
        if op.op == "sync":
            pending.clear()
        elif op.op == "compute":
            for t in op.reads:
                if t in pending:
                    out.append(StreamOp("wait", t, op.phase))
                    pending.discard(t)
        out.append(op)
    return tuple(out)


def _check_seams(cut: ChunkCut, owner: dict[str, int]) -> None:
    """Every tensor a chunk's ops name is its own, or a boundary tensor (or its gradient)
    received from the virtual stage before or sent to the one after."""
    k = cut.chunk.virtual_stage
    for t in cut.inputs:
        if owner[t] != k - 1:
            raise LayoutError(f"virtual stage {k} reads tensor {t} of virtual stage "
                              f"{owner[t]}: only the virtual stage before hands a chunk its "
                              "input")
    seam = {name for t in cut.inputs + cut.outputs for name in (t, grad_name(t))}
    for op in cut.forward + cut.backward:
        for t in _tensors_of(op):
            at = owner.get(t, k)
            if at != k and t not in seam:
                raise LayoutError(f"{op.op} {op.name} on virtual stage {k} names tensor {t} "
                                  f"of virtual stage {at}: the plan moves it across the seam "
                                  "between pipeline stages (not supported)")


def _kernel_at(block: Block, layer: str, pass_: str) -> int:
    """The index in ``block.ops`` of the last ``pass_`` kernel of ``layer`` (-1: none)."""
    at = [i for i, op in enumerate(block.ops)
          if op.op == "compute" and op.name == layer and op.pass_ == pass_]
    return at[-1] if at else -1


class _CollectiveOps:
    """The stream ops of a shard's collectives, gathered per (phase, layer) they follow, and
    the buffers they declare (see :func:`with_tp_collectives`)."""

    def __init__(self, plan: Plan) -> None:
        self.tensors = {t.name: t for t in plan.tensors}
        self.states = _model_states(plan)
        self.blocks = {"forward": {b.layer: b for b in plan.forward},
                       "backward": {b.layer: b for b in plan.backward}}
        self.after: dict[tuple[str, str], list[StreamOp]] = {}
        self.buffers: list[StreamTensor] = []
        self.counts: dict[tuple[str, str], int] = {}

    def add(self, comm: "CommOp") -> None:
        """Turn ``comm`` (a forward or backward collective) into ops after its layer's
        kernel."""
        block = self.blocks[comm.phase].get(comm.after_layer)
        pass_ = "fwd" if comm.phase == "forward" else "bwd"
        at = -1 if block is None else _kernel_at(block, comm.after_layer, pass_)
        if block is None or at < 0:
            raise LayoutError(f"{comm.kind} over {comm.group} after layer {comm.after_layer} "
                              f"({comm.phase}): the plan has no {comm.phase} kernel of that "
                              "layer to follow")
        ops = self.after.setdefault((comm.phase, comm.after_layer), [])
        in_place = [t for t in block.ops[at].writes
                    if comm.kind == "all_reduce" and t not in self.states
                    and self.tensors[t].bytes == comm.bytes]
        if in_place:
            ops.append(StreamOp(comm.kind, in_place[0], comm.phase, group=comm.group))
            return
        n = self.counts.get((comm.after_layer, comm.kind), 0)
        self.counts[(comm.after_layer, comm.kind)] = n + 1
        name = f"{comm.after_layer}:tp_{comm.kind}{n}"
        kind = "activation" if comm.phase == "forward" else "gradient"
        self.buffers.append(StreamTensor(name, comm.bytes, kind, comm.after_layer))
        ops += [StreamOp("alloc", name, comm.phase),
                StreamOp(comm.kind, name, comm.phase, group=comm.group),
                StreamOp("free", name, comm.phase)]

    def block(self, block: Block, phase: str) -> Block:
        """``block`` with the collectives that follow its layer's kernel of ``phase``, and in
        the backward pass those that follow each forward kernel it recomputes."""
        ops = self.after.get((phase, block.layer))
        out = block.ops
        if ops:
            at = _kernel_at(block, block.layer, "fwd" if phase == "forward" else "bwd")
            out = out[:at + 1] + ops + out[at + 1:]
        if phase == "backward":
            out = self.recomputed(out)
        return block if out is block.ops else replace(block, ops=out)

    def recomputed(self, ops: list[StreamOp]) -> list[StreamOp]:
        """``ops`` (a backward block's) with, right after each recompute kernel, the forward
        collectives of its layer run again (in the backward phase, on the recomputed tensor
        or a buffer of their own as in the forward pass)."""
        if not any(op.pass_ == "recompute" and ("forward", op.name) in self.after for op in ops):
            return ops
        out: list[StreamOp] = []
        for op in ops:
            out.append(op)
            if op.op == "compute" and op.pass_ == "recompute":
                out += [replace(o, phase="backward") for o in self.after.get(("forward", op.name),
                                                                              ())]
        return out


def with_tp_collectives(plan: Plan, comm: Sequence["CommOp"]) -> Plan:
    """``plan`` (the render of one tensor-parallel rank's shard) with the forward and backward
    collectives of ``comm`` (the shard's
    :meth:`~workloads.parallel.tensor.TensorShard.comm_ops` for the plan's batch and dtype)
    as stream ops, each right after the kernel of the layer it follows in its pass (before
    the layer's sync), in ``comm``'s order. An all-reduce runs in place on the tensor that
    kernel writes when it has the op's bytes (the row-parallel layer's output in the forward
    pass, the column-parallel layer's input gradient in the backward pass, as Megatron
    reduces them); every other collective (an all-gather's output, a reduce-scatter's input,
    the cross entropy's per-token values) runs on a buffer of its own, declared
    ``LAYER:tp_KIND<n>`` with the op's bytes, allocated just before it and freed just after.
    The update phase's ops are left out: a pipeline stage all-reduces its own layers'
    (:func:`transformer_stage_stream`). A forward kernel the plan recomputes in the backward
    pass (``pass=recompute``) is followed by its layer's forward collectives again, in the
    backward phase, as Megatron-LM's recomputed forward reruns them. A :class:`LayoutError`
    names an op whose layer has no kernel in its pass."""
    made = _CollectiveOps(plan)
    for op in comm:
        if op.phase != "update":
            made.add(op)
    return replace(plan, tensors=plan.tensors + made.buffers,
                   forward=[made.block(b, "forward") for b in plan.forward],
                   backward=[made.block(b, "backward") for b in plan.backward])


def _sequence_parallel_grads(shard: "TensorShard", layers: Iterable[str], dtype: str
                             ) -> tuple[list[StreamTensor], list[StreamOp]]:
    """With sequence parallelism, the stage's all-reduce of its layers' norm and row-parallel
    bias gradients over its tp group before the optimizer step (Megatron's
    ``_allreduce_non_tensor_model_parallel_grads``): the buffer's declaration and its ops."""
    nbytes = shard.sequence_parallel_params(set(layers)) * itemsize(dtype)
    if not nbytes:
        return [], []
    name = SEQUENCE_PARALLEL_GRADS
    return ([StreamTensor(name, nbytes, "gradient")],
            [StreamOp("alloc", name, "update"),
             StreamOp("all_reduce", name, "update", group=TP_GROUP),
             StreamOp("free", name, "update")])


def _zero_states(tensors: dict[str, StreamTensor], update: Sequence[StreamOp], dp: int,
                 zero: int, dtype: str, optimizer: str, sharded: Collection[str] = ()
                 ) -> tuple[dict[str, StreamTensor], list[StreamOp]]:
    """Under ZeRO ``zero`` >= 1 over ``dp`` ranks: each layer's optimizer state resized to
    its 1/dp shard (:func:`~workloads.parallel.zero.model_state_bytes`, the layer's
    parameters from its weights' bytes), at ZeRO 3 its weights and gradients too, the
    gradients in ``sharded`` too (ZeRO 2's), and its step's kernel working on that shard
    only."""
    from ..vdnn import OPTIMIZERS, state_name, weight_name

    step = OPTIMIZERS.get(optimizer)
    if zero == 0 or (step is None and zero < 3):
        return tensors, list(update)
    out = dict(tensors)
    ops: list[StreamOp] = []
    for op in update:
        if op.op == "compute" and weight_name(op.name) in tensors:
            params = tensors[weight_name(op.name)].bytes // itemsize(dtype)
            shard = -(-params // dp)
            held = model_state_bytes(params, dp, zero, dtype, optimizer)
            resized = {state_name(op.name): held.optimizer}
            if zero == 3:
                resized[weight_name(op.name)] = held.weights
            if zero == 3 or wgrad_name(op.name) in sharded:
                resized[wgrad_name(op.name)] = held.gradients
            for name, size in resized.items():
                if name in out:
                    out[name] = replace(out[name], bytes=size)
            if step is not None:
                op = replace(op, flops=step.flops * shard, dram=step.dram_bytes(shard, dtype))
        ops.append(op)
    if zero == 3:
        _shard_unstepped(out, tensors, {op.name for op in ops if op.op == "compute"}, dp,
                         dtype, optimizer)
    return out, ops


def _shard_unstepped(out: dict[str, StreamTensor], tensors: Mapping[str, StreamTensor],
                     stepped: Collection[str], dp: int, dtype: str, optimizer: str) -> None:
    """At ZeRO 3: the weights and weight gradients of the layers no step kernel of the
    stage updates (their optimizer states on the host, ZeRO-Offload's) resized in ``out``
    to their 1/dp shards, as a stepped layer's are."""
    from ..vdnn import weight_name

    for t in tensors.values():
        layer = t.layer
        if t.kind != "weight" or not layer or t.name != weight_name(layer) or \
                layer in stepped or wgrad_name(layer) not in tensors:
            continue
        held = model_state_bytes(t.bytes // itemsize(dtype), dp, 3, dtype, optimizer)
        out[t.name] = replace(out[t.name], bytes=held.weights)
        out[wgrad_name(layer)] = replace(out[wgrad_name(layer)], bytes=held.gradients)


def with_dp_collectives(update: Sequence[StreamOp], tensors: dict[str, StreamTensor],
                        dp: int, zero: int, dtype: str, optimizer: str,
                        overlapped: Collection[str] = ()
                        ) -> tuple[dict[str, StreamTensor], list[StreamOp]]:
    """A stage's optimizer step (``update``: its layers' step kernels, in order) with ZeRO's
    data-parallel collectives over its dp group (:func:`~workloads.parallel.zero.step_collectives`
    on the stage's own parameters): at stage 0 each weight gradient the step reads is
    all-reduced in place before the first step kernel; at stages 1 and 2 each is
    reduce-scattered before it, and each weight the step writes all-gathered in place after
    the last (the whole buffer's bytes, nccl-tests' convention: the gradient, the weights),
    and each layer's optimizer state and step shrink to its 1/dp shard. A gradient in
    ``overlapped`` was reduced asynchronously beside the backward pass
    (:mod:`~workloads.parallel.grad_overlap`): the step waits for it (``collective_wait``)
    instead; at ZeRO 2 it was reduce-scattered and waited for in every backward pass
    (:mod:`~workloads.parallel.zero2_grads`): the step reduces nothing and the gradient is
    its 1/dp shard. Returns the declarations (resized) and the ops; ``dp`` 1 changes nothing. At ZeRO 3 each layer's
    weights and gradients are its 1/dp shards too, and the step runs no collective: the
    passes gather the weights and reduce-scatter the gradients
    (:mod:`~workloads.parallel.fsdp_stage`)."""
    from ..vdnn import weight_name

    if dp == 1:
        return tensors, list(update)
    if zero == 3:
        return _zero_states(tensors, update, dp, zero, dtype, optimizer)
    steps = [op for op in update if op.op == "compute"]
    grads = [wgrad_name(op.name) for op in steps if wgrad_name(op.name) in op.reads]
    weights = [weight_name(op.name) for op in steps if weight_name(op.name) in op.writes]
    in_passes = set(overlapped) if zero == 2 else set()
    tensors, ops = _zero_states(tensors, update, dp, zero, dtype, optimizer, in_passes)
    reduce = "all_reduce" if zero == 0 else "reduce_scatter"
    before = [StreamOp(COLLECTIVE_WAIT, g, "update") if g in overlapped
              else StreamOp(reduce, g, "update", group=DP_GROUP)
              for g in grads if g not in in_passes]
    after = [] if zero == 0 else [StreamOp("all_gather", w, "update", group=DP_GROUP)
                                  for w in weights]
    return tensors, before + ops + after


def _dp_passes(passes: Passes, layout: ParallelLayout, stage: int,
               by_chunk: dict[int, ChunkCut], update: Sequence[StreamOp],
               tensors: dict[str, StreamTensor], dtype: str, grads: Sequence[str] = ()
               ) -> tuple[Passes, list[StreamTensor], list[str]]:
    """The passes with the data-parallel collectives that run beside them (dp above 1): at
    ZeRO 3 the units' gathers and reduce-scatters (:func:`~workloads.parallel.fsdp_stage.
    zero3_passes`, with the declarations of their buffers), at ZeRO 2 every backward pass's
    gradient buffers and reduce-scatters (:func:`~workloads.parallel.zero2_grads.
    zero2_passes`, with their buffers' declarations), at ZeRO 0-1 the gradients' reductions
    in each chunk's last backward pass (:func:`~workloads.parallel.grad_overlap.
    overlap_reductions`); and the gradients so reduced. ``grads``: at ZeRO 2 the gradients
    to reduce when no step kernel reads them (ZeRO-Offload's, stepped on the host)."""
    if layout.dp == 1:
        return passes, [], []
    if layout.zero == 3:
        done, buffers = zero3_passes(passes, {c: cut.layers for c, cut in by_chunk.items()},
                                     tensors, dtype)
        return done, buffers, []
    if layout.zero == 2:
        return zero2_passes(passes, grads or stepped_gradients(update), tensors)
    kind = "all_reduce" if layout.zero == 0 else "reduce_scatter"
    done, overlapped = overlap_reductions(passes, last_backward_passes(stage_order(layout, stage)),
                                          stepped_gradients(update), kind)
    return done, [], overlapped


class _Renamer:
    """Gives micro-batch ``mb``'s copy of each tensor that is not a model state."""

    def __init__(self, states: set[str], mb: int) -> None:
        self.states, self.mb = states, mb

    def name(self, tensor: str) -> str:
        """The copy's name (a model state keeps its own: one for every micro-batch)."""
        return tensor if tensor in self.states else micro_batch_name(tensor, self.mb)

    def op(self, op: StreamOp) -> StreamOp:
        """``op`` on the micro-batch's copies."""
        if op.op in _LAYER_OPS:
            return replace(op, reads=tuple(map(self.name, op.reads)),
                           writes=tuple(map(self.name, op.writes)), line=0)
        return replace(op, name=self.name(op.name), line=0)


def _pass_ops(cut: ChunkCut, mb: int, states: set[str], declared: set[str],
              peer: tuple[int, int]) -> tuple[list[StreamOp], list[StreamOp]]:
    """One (micro-batch, chunk) pass: its forward span (inputs received, the chunk's forward
    blocks, outputs sent) and its backward span (the outputs' gradients received, the
    backward blocks, the activation frees, the inputs' gradients sent back)."""
    r = _Renamer(states, mb)
    prev, nxt = peer
    forward: list[StreamOp] = []
    for t in cut.inputs:
        forward += [StreamOp("alloc", r.name(t), "forward"),
                    StreamOp("recv", r.name(t), "forward", peer=prev)]
    forward += [r.op(op) for op in cut.forward]
    forward += [StreamOp("send", r.name(t), "forward", peer=nxt) for t in cut.outputs]
    backward: list[StreamOp] = []
    for t in cut.outputs:
        if grad_name(t) in declared:
            backward += [StreamOp("alloc", r.name(grad_name(t)), "backward"),
                         StreamOp("recv", r.name(grad_name(t)), "backward", peer=nxt)]
    backward += [r.op(op) for op in cut.backward + cut.tail]
    backward += [StreamOp("send", r.name(grad_name(t)), "backward", peer=prev)
                 for t in cut.inputs if grad_name(t) in declared]
    return forward, backward


def _declarations(plan: Plan, ops: Iterable[StreamOp], states: set[str],
                  micro_batches: int) -> list[StreamTensor]:
    """The declarations of the tensors ``ops`` name: the model states once, every other
    tensor once per micro-batch (its copies named as :func:`micro_batch_name` says)."""
    named = {t for op in ops for t in _tensors_of(op)}
    out = []
    for t in plan.tensors:
        if t.name in states:
            if t.name in named:
                out.append(replace(t, line=0))
            continue
        out += [replace(t, name=micro_batch_name(t.name, mb), line=0)
                for mb in range(micro_batches) if micro_batch_name(t.name, mb) in named]
    return out


@dataclass(frozen=True)
class TiedHead:
    """An LM head tied to the word embeddings (``params`` weights: vocabulary x hidden, of
    this rank's shard) under ``optimizer``: on a pipeline its stage holds a copy of its own,
    as Megatron-LM keeps one on the last stage (docs/parallel.md). With ``all_reduce`` the
    first and the last stage all-reduce the two copies' gradients over their embedding group
    before the step (:mod:`~workloads.parallel.tied_grads`; it needs a fabric)."""

    params: int
    optimizer: str = "none"
    all_reduce: bool = False


def tied_head(network: Network, optimizer: str = "none", all_reduce: bool = False
              ) -> Optional[TiedHead]:
    """The tied LM head of ``network`` (its ``lm_head`` layer's ``tied`` param), or None;
    ``all_reduce`` as :class:`TiedHead` says."""
    if "lm_head" not in {layer.name for layer in network.layers}:
        return None
    layer = network.layer("lm_head")
    if not layer.params.get("tied"):
        return None
    hidden = network.sample_shape(layer.input_tensors[0])[-1] if layer.input_tensors else 0
    return TiedHead(int(hidden) * int(layer.params["num_output"]), optimizer, all_reduce)


def _tied_copy(tied: TiedHead, dtype: str, last_phase: str
               ) -> tuple[list[StreamTensor], list[StreamOp], list[StreamOp], list[StreamOp]]:
    """The head's copy of the word embeddings on the last stage: its weights, gradient and
    optimizer state (declarations), their allocations, its optimizer step and their frees.
    The head's kernels already count reading the weights (the single-GPU render's)."""
    from ..vdnn import OPTIMIZERS, state_name, weight_name

    step = OPTIMIZERS[tied.optimizer]
    w, dw, st = weight_name("lm_head"), wgrad_name("lm_head"), state_name("lm_head")
    size = tied.params * itemsize(dtype)
    decls = [StreamTensor(w, size, "weight", "lm_head"),
             StreamTensor(dw, size, "gradient", "lm_head")]
    names = [w, dw]
    update: list[StreamOp] = []
    if step is not None:
        decls.append(StreamTensor(st, step.state_bytes(tied.params, dtype), "state", "lm_head"))
        names.append(st)
        update = [StreamOp("compute", "lm_head", "update", pass_="update",
                           flops=step.flops * tied.params,
                           dram=step.dram_bytes(tied.params, dtype), reads=(w, dw, st),
                           writes=(w, st)),
                  StreamOp("sync", "lm_head", "update")]
    return (decls, [StreamOp("alloc", t, "forward") for t in names], update,
            [StreamOp("free", t, last_phase) for t in names])


def transformer_stage_stream(plan: Plan, layout: ParallelLayout, stage: int,
                             source: str = "<pipeline stage>",
                             tied: Optional[TiedHead] = None,
                             shard: Optional["TensorShard"] = None,
                             optimizer: str = "none",
                             placement: Optional["Placement"] = None) -> StageStream:
    """Stage ``stage``'s stream and schedule under ``layout``, cut from ``plan``, the
    single-GPU render of a transformer for one micro-batch (see the module's docstring): the
    prologue of its model states, every (micro-batch, chunk)'s forward span, every backward
    span, the optimizer step of its layers and the epilogue, the steps running the spans in the
    stage's order. With ``tied`` (:func:`tied_head`) and more than one stage, the stage of the
    LM head holds a copy of the word embeddings with its gradient and optimizer state (and
    the end stages all-reduce its gradient with ``tied.all_reduce``: :func:`_tied_grads`). With
    ``shard`` (the tensor-parallel shard ``plan`` renders, tp above 1) each pass runs the
    shard's collectives over its tp group after the layers they follow
    (:func:`with_tp_collectives`), and with sequence parallelism the stage all-reduces its
    layers' norm and bias gradients before its optimizer step. With ``layout.dp`` above 1
    the step runs ZeRO ``layout.zero``'s collectives over the stage's dp group and holds the
    optimizer states' shard (:func:`with_dp_collectives`; ``optimizer``, the plan's, sizes
    them). With ``placement`` offloading the optimizer states (ZeRO-Offload; ``plan`` rendered
    with it, so it holds no state and runs no update kernel) the stage's rank steps its
    partition on the host CPU: the stream's ``model_states`` are its buckets
    (:func:`~workloads.parallel.zero_offload.stage_state_plan`), its update reduce-scatters
    the gradients and the weights are all-gathered once the host's step is back
    (:func:`~workloads.parallel.zero_offload.offload_collectives`), those gathers and the
    epilogue the ops that wait for the host (``after_states``)."""
    if not 0 <= stage < layout.pp:
        raise LayoutError(f"stage {stage} is not a pipeline rank of pp {layout.pp}")
    if shard is not None and shard.tp > 1:
        plan = with_tp_collectives(plan, shard.comm_ops(plan.batch, plan.dtype))
    cuts = chunk_cuts(plan, layout)
    mine = [cut for cut in cuts if cut.chunk.virtual_stage % layout.pp == stage]
    states = _model_states(plan)
    declared = {t.name for t in plan.tensors}
    keys: list[SpanKey] = [(mb, cut.chunk.chunk) for mb in range(layout.micro_batches)
                           for cut in mine]
    by_chunk = {cut.chunk.chunk: cut for cut in mine}
    passes = {key: _pass_ops(by_chunk[key[1]], key[0], states, declared, peers(layout, stage))
              for key in keys}
    prologue = [op for cut in mine for op in cut.prologue]
    update = [op for cut in mine for op in cut.update]
    epilogue = [op for cut in mine for op in cut.epilogue]
    extra: list[StreamTensor] = []
    if shard is not None and shard.tp > 1:
        extra, reduce = _sequence_parallel_grads(shard, (n for c in mine for n in c.layers),
                                                 plan.dtype)
        update = reduce + update
        states = states | {t.name for t in extra}
    if tied is not None and layout.pp > 1 and any(cut.chunk.head for cut in mine):
        last = plan.epilogue[-1].phase if plan.epilogue else "backward"
        copy, allocs, stepping, frees = _tied_copy(tied, plan.dtype, last)
        prologue, update, epilogue = prologue + allocs, update + stepping, epilogue + frees
        extra += copy
        states = states | {t.name for t in copy}
    known = {t.name: t for t in plan.tensors + extra}
    passes, buffers, overlapped = _dp_passes(
        passes, layout, stage, by_chunk, update, known, plan.dtype,
        _offloaded_grads(placement, known, [n for c in mine for n in c.layers], plan.dtype))
    extra += buffers
    states = states | {t.name for t in buffers}
    declared_here = {t.name: t for t in extra + _declarations(
        plan, prologue + update + epilogue, states, layout.micro_batches)}
    host_states, update, gathers, epilogue = _host_step(
        placement, declared_here, [n for c in mine for n in c.layers], layout, plan.dtype,
        optimizer, update, epilogue, overlapped)
    declared_here, update = with_dp_collectives(update, declared_here, layout.dp, layout.zero,
                                                plan.dtype, optimizer, overlapped)
    declared_here, update = _tied_grads(tied, mine, layout, declared_here, update, plan.dtype)
    extra += [declared_here[WORD_EMBEDDING_GRADS]] if WORD_EMBEDDING_GRADS in declared_here else []
    ops = prologue + [op for k in keys for op in passes[k][0]] + \
        [op for k in keys for op in passes[k][1]] + update + gathers + epilogue
    tensors = {t.name: declared_here.get(t.name, t)
               for t in extra + _declarations(plan, ops, states, layout.micro_batches)}
    stream = Stream(source, 1, plan.network, plan.batch, plan.dtype, plan.policy, tensors, ops)
    stream = parse_stream(stream_text(stream), source)
    spans, b_at = _pass_spans(passes, keys, len(prologue))
    order = stage_order(layout, stage)
    steps = pipeline_steps(order, spans, len(stream.ops), len(prologue), b_at)
    return StageStream(stream, tuple(steps), spans, order, host_states,
                       len(gathers) + len(epilogue))


def _tied_grads(tied: Optional[TiedHead], mine: Sequence[ChunkCut], layout: ParallelLayout,
                declared: dict[str, StreamTensor], update: list[StreamOp], dtype: str
                ) -> tuple[dict[str, StreamTensor], list[StreamOp]]:
    """On a pipeline's first and last stage with a tied head that ``all_reduce``s: the update
    with the word embeddings' gradient all-reduce over the embedding group
    (:mod:`~workloads.parallel.tied_grads`); elsewhere the update as it is."""
    if tied is None or not tied.all_reduce or layout.pp == 1:
        return declared, update
    if any(cut.chunk.head for cut in mine):
        gradient = wgrad_name("lm_head")
    else:
        firsts = [n for cut in mine if cut.chunk.embedding for n in cut.layers
                  if split_name(n)[0] is None and wgrad_name(n) in declared]
        if not firsts:
            return declared, update
        gradient = wgrad_name(firsts[0])
    sharded = layout.zero in (2, 3)  # ZeRO 2's passes reduce-scatter it, offloaded or not
    nbytes = word_embedding_grad_bytes(tied.params, dtype, layout.dp, sharded)
    return with_embedding_all_reduce(update, declared, gradient, nbytes)


def _pass_spans(passes: Passes, keys: Sequence[SpanKey], f_at: int
                ) -> tuple[dict[SpanKey, PassSpans], int]:
    """Where each (micro-batch, chunk)'s forward and backward ops sit in a stream whose
    forward spans start at op ``f_at`` in ``keys``' order and whose backward spans follow
    them; and the op after the last backward span."""
    spans: dict[SpanKey, PassSpans] = {}
    b_at = f_at + sum(len(passes[k][0]) for k in keys)
    for k in keys:
        spans[k] = PassSpans(f_at, f_at + len(passes[k][0]), b_at, b_at + len(passes[k][1]))
        f_at, b_at = f_at + len(passes[k][0]), b_at + len(passes[k][1])
    return spans, b_at


def _host_step(placement: Optional["Placement"], declared: dict[str, StreamTensor],
               layers: Sequence[str], layout: ParallelLayout, dtype: str, optimizer: str,
               update: list[StreamOp], epilogue: list[StreamOp],
               reduced: Collection[str] = ()
               ) -> tuple[Optional["ModelStatePlan"], list[StreamOp], list[StreamOp],
                          list[StreamOp]]:
    """With ``placement`` offloading the optimizer states: the rank's buckets (of the
    layers' whole parameters, ``declared`` unsharded), the update with the gradients'
    reduce-scatters, the weights' all-gathers and the epilogue (in the update phase after
    them; at ZeRO 3 neither collective: the passes run them); otherwise no buckets and the
    ops as they are. A gradient in ``reduced`` (ZeRO 2's, reduce-scattered in every backward
    pass: :mod:`~workloads.parallel.zero2_grads`) is not reduced again, and ``declared``
    holds its 1/dp shard (resized here)."""
    if placement is None or not placement.offloaded:
        return None, update, [], epilogue
    weighted = _weighted(declared, layers, dtype)
    states = stage_state_plan(weighted, dtype, optimizer, placement, layout.dp, layout.zero)
    scatters, gathers = offload_collectives(weighted, layout.dp, layout.zero)
    scatters = [op for op in scatters if op.name not in reduced]
    for layer, params in weighted:
        if wgrad_name(layer) in reduced:
            held = model_state_bytes(params, layout.dp, 2, dtype, optimizer).gradients
            declared[wgrad_name(layer)] = replace(declared[wgrad_name(layer)], bytes=held)
    if gathers:  # the frees after the gathers, in the update phase the stream ends with
        epilogue = [replace(op, phase="update") for op in epilogue]
    return states, update + scatters, gathers, epilogue


def _offloaded_grads(placement: Optional["Placement"], declared: dict[str, StreamTensor],
                     layers: Sequence[str], dtype: str) -> list[str]:
    """With ``placement`` offloading the optimizer states, the weight gradients of the
    stage's weighted layers (:func:`_weighted`), which the host steps; else none."""
    if placement is None or not placement.offloaded:
        return []
    return [wgrad_name(layer) for layer, _ in _weighted(declared, layers, dtype)]


def _weighted(declared: dict[str, StreamTensor], layers: Sequence[str], dtype: str
              ) -> list[tuple[str, int]]:
    """The stage's weighted layers, (layer, parameters) in ``layers``' order: those whose
    weights and weight gradients ``declared`` holds (the tied head's copy included)."""
    at = {name: k for k, name in enumerate(layers)}
    found = [(t.layer, t.bytes // itemsize(dtype)) for t in declared.values()
             if t.kind == "weight" and t.layer and t.name == weight_name(t.layer)
             and wgrad_name(t.layer) in declared]
    return sorted(found, key=lambda lp: at.get(lp[0], len(at)))


def shard_plan(network: Network, tp: int, batch: int, dtype: str, policy: str,
               optimizer: str, kernel_model: Optional["KernelModel"] = None,
               workspace_limit: Optional[int] = None, sequence_parallel: bool = False,
               placement: Optional["Placement"] = None,
               choices: Optional[Mapping[str, str]] = None) -> Plan:
    """The single-GPU plan of tensor-parallel rank's shard of ``network`` over ``tp`` ranks
    (:func:`~workloads.parallel.tensor.shard_transformer`, with ``sequence_parallel`` or
    not), its kernels priced by ``kernel_model`` (None: the GPU's roofline): the compute of
    one rank; :func:`transformer_stage_stream` adds the collectives. ``placement`` places
    the model states (:func:`~workloads.vdnn.plan_iteration`'s); ``choices`` are the
    per-tensor choices of policy ``auto`` (a stage's planner's)."""
    from ..kernel_pricing import price_network
    from ..vdnn import plan_iteration
    from .tensor import shard_transformer

    key = (id(network), tp, sequence_parallel, batch, dtype, kernel_model, workspace_limit)
    entry = _SHARDS.get(key)
    if entry is None:  # the stages (and a stage's planner) render the same shard, priced once
        shard = shard_transformer(network, tp, sequence_parallel).network
        kernels = None if kernel_model is None else price_network(shard, batch, dtype,
                                                                  kernel_model, workspace_limit)
        entry = (network, shard, kernels)
        _SHARDS.put(key, entry)
    _, shard, kernels = entry
    return plan_iteration(shard, batch, dtype, policy, None, optimizer, 0, kernels,
                          placement=placement, choices=choices)
