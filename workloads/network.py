"""The network model: layers with real shapes, the tensors they produce, and per-layer costs.

A :class:`Network` is built by the loader from a YAML definition (after macro expansion) and
validated on construction: every input names an earlier layer, parameters fit their kind,
every shape is positive, in-place layers come before any other reader of their tensor.

Tensor naming: a tensor is named after the layer that produced it. In-place layers (``relu``,
``dropout``) create no tensor: they modify their input's tensor, and ``relu`` marks it sparse
(post-ReLU). So in ``conv1 -> relu1 -> pool1`` the pool reads tensor ``conv1`` (post-ReLU).
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import field
from typing import Any, Mapping, Sequence

from . import flops as _flops
from .dtypes import itemsize
from .errors import WorkloadError
from .kinds import KINDS
from .shapes import output_shape

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

__all__ = ["Layer", "LayerInfo", "TensorInfo", "Network", "NAME_RE"]

#: Allowed layer names: ``:``, ``#``, ``=`` and whitespace are reserved by the stream format.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+-]*$")

Shape = tuple[int, ...]


@frozen_record
class Layer(FrozenRecord):
    """One layer of a network, validated and with defaults filled in.

    ``inputs`` are the producing layers' names, ``input_tensors`` the tensors read,
    ``tensor`` the tensor written (its own name, or its input's tensor when in place).
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    input_tensors: tuple[str, ...]
    tensor: str
    params: Mapping[str, Any]
    macro: str | None = None
    #: What the layer is in a transformer block (``attention``, ``ffn``, ``norm``,
    #: ``residual``, ``embedding``, ``head``; see :mod:`~workloads.transformer`);
    #: '' for CNN layers.
    role: str = ""

    @property
    def in_place(self) -> bool:
        """True for layers that modify their input's buffer (relu, dropout)."""
        return KINDS[self.kind].in_place


@frozen_record
class LayerInfo(FrozenRecord):
    """Shape and cost of one layer for a given batch and dtype (see :meth:`Network.infer`).

    ``shape`` includes the batch: ``(N, C, H, W)`` or ``(N, F)``. FLOPs count a multiply-add as
    2. ``dram_*`` estimate the kernel's DRAM bytes (read + written). ``sparse`` is the final
    state of the output tensor (post-ReLU, or derived from post-ReLU data by zero-preserving
    layers). ``bwd_needs`` are the tensors the backward kernel reads besides gradients and
    weights; ``grad_inputs`` the input tensors that receive a gradient.
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    shape: Shape
    bytes: int
    in_place: bool
    sparse: bool
    params: int
    weight_bytes: int
    flops_fwd: int
    flops_bwd: int
    dram_fwd: int
    dram_bwd: int
    input_shapes: tuple[Shape, ...] = ()
    grad_inputs: tuple[str, ...] = ()
    bwd_needs: tuple[str, ...] = ()
    has_output_grad: bool = False

    @property
    def has_backward(self) -> bool:
        """Whether training runs a backward kernel for this layer: it has weights to update
        or inputs that need a gradient (not so for a pool on the network input)."""
        return self.kind != "data" and bool(self.params or self.grad_inputs)


@frozen_record
class TensorInfo(FrozenRecord):
    """A feature-map tensor: who writes it, who modifies it in place, who reads it.

    ``consumers`` are the non-in-place layers reading it, ``modifiers`` the in-place layers
    applied to it (all before any consumer). ``needs_grad``: a gradient flows into it (False for
    network inputs and for what layers without weights compute from them alone).
    ``stats_bytes`` of ``bytes`` are float32 statistics kept with it (a fused attention's row
    statistics), not part of ``shape``.
    """

    name: str
    producer: str
    shape: Shape
    bytes: int
    sparse: bool
    modifiers: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()
    needs_grad: bool = True
    stats_bytes: int = 0


@record
class _Tensor(Record):
    """A tensor while a network is read: the layer producing it, its shape, its consumers."""

    producer: str
    shape: Shape
    sparse: bool
    #: float32 elements per sample kept with the tensor (fused attention's row statistics)
    extra_fp32: int = 0
    modifiers: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)
    #: a gradient flows into it: a layer with weights, or fed by a tensor that needs one,
    #: produced or modified it
    needs_grad: bool = False


class Network:
    """A validated network definition.

    Construct through :func:`workloads.load_network`; :meth:`infer` gives per-layer
    shapes and costs for a batch size and dtype, :meth:`tensors` the feature-map tensors.
    """

    def __init__(self, name: str, layers: Sequence[Layer], *, file: str = "<network>",
                 description: str = "", source: str = "") -> None:
        self.name = name
        self.file = file
        self.description = description
        self.source = source
        self.layers: tuple[Layer, ...] = tuple(layers)
        self._index = {layer.name: i for i, layer in enumerate(self.layers)}
        self._sample_shapes: dict[str, Shape] = {}
        self._tensors: dict[str, _Tensor] = {}
        self._param_count: int | None = None
        self._analyze()

    # -- construction -------------------------------------------------------------------------
    def _err(self, layer: str | None, message: str) -> WorkloadError:
        return WorkloadError(message, file=self.file, layer=layer)

    def _analyze(self) -> None:
        if not self.layers:
            raise self._err(None, "network has no layers")
        for layer in self.layers:
            spec = KINDS[layer.kind]
            in_shapes = []
            for t in layer.input_tensors:
                tensor = self._tensors[t]
                in_shapes.append(tensor.shape)
                if layer.in_place:
                    if tensor.consumers:
                        raise self._err(
                            layer.name,
                            f"in-place {layer.kind} modifies tensor '{t}' after layer "
                            f"'{tensor.consumers[0]}' already read it",
                        )
                    tensor.modifiers.append(layer.name)
                elif layer.name not in tensor.consumers:
                    tensor.consumers.append(layer.name)
            try:
                shape = output_shape(layer.kind, layer.params, in_shapes)
            except ValueError as exc:
                raise self._err(layer.name, str(exc)) from None
            self._sample_shapes[layer.name] = shape
            # autograd's rule: an output needs a gradient when the layer has weights or one of
            # its inputs needs one (a pool on the network input passes nothing back)
            grad = layer.kind != "data" and (
                _flops.param_count(layer.kind, layer.params, in_shapes, shape) > 0
                or any(self._tensors[t].needs_grad for t in layer.input_tensors))
            if layer.in_place:
                tensor = self._tensors[layer.tensor]
                if layer.kind == "relu":
                    tensor.sparse = True
                tensor.needs_grad = tensor.needs_grad or grad
            else:
                sparse = spec.zero_preserving and bool(layer.input_tensors) and all(
                    self._tensors[t].sparse for t in layer.input_tensors
                )
                extra = layer.params["heads"] * shape[0] \
                    if layer.kind == "flash_attention" else 0
                self._tensors[layer.tensor] = _Tensor(layer.name, shape, sparse, extra,
                                                      needs_grad=grad)

    # -- queries ------------------------------------------------------------------------------
    def layer(self, name: str) -> Layer:
        """Return the layer called ``name`` (KeyError if absent)."""
        return self.layers[self._index[name]]

    def index(self, name: str) -> int:
        """Position of layer ``name`` in forward order."""
        return self._index[name]

    def sample_shape(self, name: str) -> Shape:
        """Per-sample output shape of layer ``name`` (no batch dimension)."""
        return self._sample_shapes[name]

    def param_count(self) -> int:
        """Total learnable parameters (counted once: the layers are a tuple, never changed;
        each rank of a pipeline asks)."""
        if self._param_count is None:
            self._param_count = sum(info.params for info in self.infer(1))
        return self._param_count

    def macs(self) -> int:
        """Forward multiply-adds of conv and FC layers for one sample."""
        return sum(
            _flops.macs_per_sample(
                layer.kind, layer.params,
                [self._tensors[t].shape for t in layer.input_tensors],
                self._sample_shapes[layer.name],
            )
            for layer in self.layers
        )

    def tensors(self, batch: int, dtype: str = "float32") -> dict[str, TensorInfo]:
        """Feature-map tensors in production order, with batch-sized shapes and bytes."""
        size = itemsize(dtype)
        batch = _check_batch(batch)
        out = {}
        for name, t in self._tensors.items():
            shape = (batch,) + t.shape
            out[name] = TensorInfo(
                name, t.producer, shape, math.prod(shape) * size + batch * t.extra_fp32 * 4,
                t.sparse,
                tuple(t.modifiers), tuple(t.consumers),
                needs_grad=t.needs_grad,
                stats_bytes=batch * t.extra_fp32 * 4,
            )
        return out

    def infer(self, batch: int, dtype: str = "float32") -> list[LayerInfo]:
        """Per-layer output shapes, bytes, FLOPs, weights and DRAM traffic, in forward order."""
        size = itemsize(dtype)
        batch = _check_batch(batch)
        tensors = self.tensors(batch, dtype)
        infos = []
        for layer in self.layers:
            spec = KINDS[layer.kind]
            in_shapes = [self._tensors[t].shape for t in layer.input_tensors]
            out = self._sample_shapes[layer.name]
            shape = (batch,) + out
            out_t = tensors[layer.tensor]
            nbytes = out_t.bytes if not layer.in_place else math.prod(shape) * size
            params = _flops.param_count(layer.kind, layer.params, in_shapes, out)
            wbytes = params * size
            rbytes = _flops.weight_count(layer.kind, layer.params, in_shapes, out) * size
            grad_flags = [tensors[t].needs_grad for t in layer.input_tensors]
            grad_inputs = tuple(t for t, g in zip(layer.input_tensors, grad_flags) if g)
            has_dy = out_t.needs_grad and bool(out_t.consumers)
            needs: list[str] = []
            if spec.bwd_needs_inputs:
                needs.extend(layer.input_tensors)
            if spec.bwd_needs_output and layer.tensor not in needs:
                needs.append(layer.tensor)
            f_fwd = _flops.forward_flops(layer.kind, layer.params, in_shapes, out, batch)
            f_bwd = _flops.backward_flops(layer.kind, layer.params, in_shapes, out, batch,
                                          grad_flags)
            in_bytes = sum(tensors[t].bytes for t in layer.input_tensors)
            if layer.kind == "data":
                d_fwd = d_bwd = 0
                needs = []
            elif not (params or grad_inputs):  # no backward kernel runs
                d_fwd, d_bwd, f_bwd = in_bytes + rbytes + nbytes, 0, 0
                needs = []
            else:
                d_fwd = in_bytes + rbytes + nbytes
                d_bwd = (
                    (nbytes if has_dy else 0)
                    + sum(tensors[t].bytes for t in needs)
                    + (rbytes if grad_inputs else 0)
                    + sum(tensors[t].bytes - tensors[t].stats_bytes for t in grad_inputs)
                    + rbytes
                )
            infos.append(LayerInfo(
                name=layer.name, kind=layer.kind, inputs=layer.input_tensors,
                output=layer.tensor, shape=shape, bytes=nbytes, in_place=layer.in_place,
                sparse=out_t.sparse, params=params, weight_bytes=wbytes,
                flops_fwd=f_fwd, flops_bwd=f_bwd, dram_fwd=d_fwd, dram_bwd=d_bwd,
                input_shapes=tuple((batch,) + s for s in in_shapes),
                grad_inputs=grad_inputs, bwd_needs=tuple(needs), has_output_grad=has_dy,
            ))
        return infos

    def summary(self, batch: int = 1, dtype: str = "float32") -> str:
        """A human-readable table of the layers (shape, params, GFLOPs)."""
        rows = [f"{self.name}: batch {batch}, {dtype}"]
        rows.append(f"{'layer':32} {'kind':10} {'output shape':22} {'params':>12} {'GFLOP fwd':>10}")
        for i in self.infer(batch, dtype):
            rows.append(
                f"{i.name:32} {i.kind:10} {'x'.join(map(str, i.shape)):22} {i.params:12d} "
                f"{i.flops_fwd / 1e9:10.3f}"
            )
        return "\n".join(rows)

    def __repr__(self) -> str:
        return f"Network({self.name!r}, {len(self.layers)} layers, file={self.file!r})"


def _check_batch(batch: int) -> int:
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise WorkloadError(f"batch must be a positive integer, got {batch!r}")
    return int(batch)
