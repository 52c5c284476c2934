"""ZeRO-3 (FSDP's full sharding) in a pipeline stage's passes: each FSDP unit's weights
all-gathered over the stage's dp group ahead of use and freed after it, its gradients
reduce-scattered beside the backward pass (docs/parallel.md, "ZeRO-3 and the overlap").

The units are :func:`~workloads.parallel.zero.fsdp_units`' (a transformer block, or a weighted
layer outside the blocks) of one model chunk, and each pass (a micro-batch's forward or
backward span of the chunk) runs them in the order of
:func:`~workloads.parallel.zero.fsdp_schedule`, with asynchronous collectives (``async=1``,
waited for by ``collective_wait``):

* unit k's weights are gathered into a buffer of its own (``UNIT:fsdp_w``, the unit's whole
  weights) issued one unit ahead, before the first kernel of unit k - 1 (the first unit's
  before its own), as FSDP prefetches with its defaults (``BackwardPrefetch.BACKWARD_PRE`` in
  the backward pass); the stream waits for them before the unit's first kernel and frees the
  buffer after its last (after that kernel's ``sync``);
* in the backward pass each unit's gradients land in a buffer of their own (``UNIT:fsdp_dw``),
  allocated before its first backward kernel and reduce-scattered after its last; the stream
  waits for unit k's reduce-scatter after issuing unit k + 1's, and frees its buffer then
  (the last at the end of the pass, as FSDP's ``_post_backward_final_callback``,
  ``torch/distributed/fsdp/_runtime_utils.py``, makes the compute stream wait for the
  post-backward stream's reduce-scatters at the end of the backward pass).

The stage's persistent weights, gradients and optimizer states are the 1/dp shards
(:func:`~workloads.parallel.transformer_stages.with_dp_collectives`); what is gathered lives
only while its unit runs. A pass gathers every unit twice and reduce-scatters it once: 3Ψ a
micro-batch for the stage's Ψ parameters (Rajbhandari et al., SC 2020, section 7)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..dtypes import itemsize
from ..stream_schema import COLLECTIVE_WAIT, StreamOp, StreamTensor
from ..vdnn import weight_name
from .zero import DP_GROUP, FsdpUnit, fsdp_units

__all__ = ["Passes", "gathered_name", "unit_grad_name", "is_unit_grad", "stage_units", "unit_buffers",
           "fsdp_pass", "zero3_passes"]

#: (micro-batch, chunk) -> its forward span's ops and its backward span's
Passes = dict[tuple[int, int], tuple[list[StreamOp], list[StreamOp]]]


def gathered_name(unit: str) -> str:
    """The buffer unit ``unit``'s weights are all-gathered into."""
    return f"{unit}:fsdp_w"


def unit_grad_name(unit: str) -> str:
    """The buffer unit ``unit``'s gradients land in before their reduce-scatter."""
    return f"{unit}:fsdp_dw"


def is_unit_grad(tensor: str) -> bool:
    """True when ``tensor`` is an FSDP unit's gradient buffer (:func:`unit_grad_name`)."""
    return tensor.endswith(":fsdp_dw")


@dataclass(frozen=True)
class _Layer:
    """A stage's layer as the FSDP units need it (zero.py's ``WeightedLayer``)."""

    name: str
    params: int
    weight_bytes: int


def stage_units(layers: Sequence[str], tensors: Mapping[str, StreamTensor],
                dtype: str) -> tuple[FsdpUnit, ...]:
    """The FSDP units of a chunk's ``layers`` (forward order), each layer's weights the
    declaration ``tensors`` holds of it (unsharded)."""
    infos = []
    for name in layers:
        weights = tensors.get(weight_name(name))
        size = weights.bytes if weights is not None else 0
        infos.append(_Layer(name, size // itemsize(dtype), size))
    return fsdp_units(infos)


def unit_buffers(units: Sequence[FsdpUnit]) -> list[StreamTensor]:
    """The declarations of every unit's gathered weights and gradient buffer."""
    out = []
    for u in units:
        out += [StreamTensor(gathered_name(u.name), u.weight_bytes, "weight", u.layers[0]),
                StreamTensor(unit_grad_name(u.name), u.weight_bytes, "gradient", u.layers[0])]
    return out


def _spans(ops: Sequence[StreamOp], units: Sequence[FsdpUnit]
           ) -> tuple[list[str], dict[str, int], dict[str, int]]:
    """The units with kernels in ``ops``, in the order they run, each one's first kernel and
    the op ending its last (that kernel's ``sync``, or the kernel)."""
    unit_of = {layer: u.name for u in units for layer in u.layers}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        if op.op == "compute" and op.name in unit_of:
            first.setdefault(unit_of[op.name], i)
            last[unit_of[op.name]] = i
    end = {}
    for u, i in last.items():
        end[u] = next((k for k in range(i + 1, len(ops))
                       if ops[k].op == "sync" and ops[k].name == ops[i].name), i)
    return sorted(first, key=first.__getitem__), first, end


def _collective(kind: str, tensor: str, phase: str) -> StreamOp:
    """An asynchronous collective over the dp group."""
    return StreamOp(kind, tensor, phase, group=DP_GROUP, async_=True)


def fsdp_pass(ops: Sequence[StreamOp], units: Sequence[FsdpUnit], phase: str
              ) -> list[StreamOp]:
    """One pass (``phase`` ``forward`` or ``backward``) of a chunk with ZeRO-3's ops: the
    gathers one unit ahead, the waits before each unit's first kernel, the frees after its
    last, and in the backward pass the gradient buffers and their reduce-scatters (see the
    module's docstring)."""
    order, first, end = _spans(ops, units)
    before: dict[int, list[StreamOp]] = {}
    after: dict[int, list[StreamOp]] = {}
    for k, u in enumerate(order):
        w = gathered_name(u)
        before.setdefault(first[order[k - 1]] if k else first[u], []).extend(
            [StreamOp("alloc", w, phase), _collective("all_gather", w, phase)])
    for k, u in enumerate(order):
        w, g = gathered_name(u), unit_grad_name(u)
        before.setdefault(first[u], []).append(StreamOp(COLLECTIVE_WAIT, w, phase))
        after.setdefault(end[u], []).append(StreamOp("free", w, phase))
        if phase == "backward":
            before[first[u]].append(StreamOp("alloc", g, phase))
            after[end[u]].append(_collective("reduce_scatter", g, phase))
            if k:
                after[end[u]] += _waited_free(unit_grad_name(order[k - 1]), phase)
    out: list[StreamOp] = []
    for i, op in enumerate(ops):
        out += before.get(i, [])
        out.append(op)
        out += after.get(i, [])
    if phase == "backward" and order:
        out += _waited_free(unit_grad_name(order[-1]), phase)
    return out


def _waited_free(tensor: str, phase: str) -> list[StreamOp]:
    """Wait for ``tensor``'s asynchronous collective, then free it."""
    return [StreamOp(COLLECTIVE_WAIT, tensor, phase), StreamOp("free", tensor, phase)]


def zero3_passes(passes: Passes, layers: Mapping[int, Sequence[str]],
                 tensors: Mapping[str, StreamTensor], dtype: str
                 ) -> tuple[Passes, list[StreamTensor]]:
    """Every (micro-batch, chunk) pass of a stage with ZeRO-3's ops (:func:`fsdp_pass`, the
    units of each chunk's ``layers`` sized by the unsharded declarations ``tensors``), and
    the declarations of the units' buffers."""
    units = {c: stage_units(names, tensors, dtype) for c, names in layers.items()}
    out = {key: (fsdp_pass(fwd, units[key[1]], "forward"),
                 fsdp_pass(bwd, units[key[1]], "backward"))
           for key, (fwd, bwd) in passes.items()}
    return out, [t for c in sorted(units) for t in unit_buffers(units[c])]
