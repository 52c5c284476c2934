"""Kernel times of one network's layers from the fitted kernel model
(:mod:`sst_cdma.model.kernel_model`): every layer and pass priced once, before the simulation.

The stream runs one forward and one backward kernel per layer; a convolution's backward
kernel is its backward-data plus its backward-filter kernel (backward-data only where its input
needs a gradient), and a fully connected layer's are GEMMs (forward ``N x F_out x F_in``;
backward the data-gradient and weight-gradient GEMMs), and so is a transformer's per-token
``linear`` with ``N`` = batch x sequence length. Naive attention's scores (Q K^T) and context
(P V) are batched GEMMs, one per sample and head (backward: the two operands' gradients), and
fused attention is one FlashAttention kernel per pass
(:func:`~sst_cdma.model.kernel_model.price_attention`: ``flash2``, ``flash3``, or ``fused``, the
best the GPU runs), causal. Convolutions, GEMMs and attention run in the network's dtype:
float16 and bfloat16 on tensor cores where the GPU has them, float32 convolutions (``tf32``
conv or all) and GEMMs (all) as TF32 where it has TF32. Every other kind (the attention softmax and the element-wise transformer kinds
included), and the optimizer's update kernels, are left to the GPU: they move their DRAM bytes at the HBM's achievable
bandwidth (the same resource the DMA engine shares, so an overridden HBM counts) plus the
fitted launch (``time_ps`` None here). Each priced kernel carries the algorithm picked
(``fwd``, ``bwd_data+bwd_filter``) and the cuDNN workspace it needs.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Optional

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.fitted import KernelModel
from sst_cdma.engine.progress import tick, timed
from sst_cdma.model.kernel_model import (ConvProblem, KernelPrice, ModelError,
                                         price_attention, price_convs, price_gemm)
from sst_cdma.model.stacks import DEFAULT_STACK, BlockShape, StackKernel, block_kernels, \
    kernel_seconds

from .dtypes import itemsize
from .errors import WorkloadError
from .network import Layer, LayerInfo, Network
from .shapes import head_dim
from .plan import Plan
from .transformer import split_name
from .vdnn import inferred

__all__ = ["PricedKernel", "price_network", "stack_kernels", "limits_from_free_memory"]


@frozen_record
class PricedKernel(FrozenRecord):
    """One stream kernel: its time in picoseconds (None: memory-bound, priced by the GPU at its
    HBM's bandwidth), the algorithm(s) picked and the workspace in bytes it holds while it
    runs."""

    time_ps: Optional[int]
    algorithm: str
    workspace: int


def _ps(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1e12))


def _conv_problem(layer_params: dict, info: LayerInfo) -> ConvProblem:
    (n, c, h, w), (_, k, _, _) = info.input_shapes[0], info.shape
    kh, kw = layer_params["kernel_size"]
    (sh, sw), (ph, pw) = layer_params["stride"], layer_params["pad"]
    dh, dw = layer_params["dilation"]
    return ConvProblem(n, c, h, w, k, kh, kw, ph, pw, sh, sw, dh, dw, layer_params["group"])


def _gemm_kernels(info: LayerInfo, batch: int, model: KernelModel, dtype: str,
                  tf32: bool) -> tuple[list[KernelPrice], list[KernelPrice]]:
    """A fully connected or per-token linear layer's GEMMs: forward, and backward's
    data-gradient (where its input needs one) and weight-gradient GEMMs."""
    if info.kind == "fc":
        n, f_in, f_out = batch, math.prod(info.input_shapes[0][1:]), info.shape[1]
    else:  # a GEMM over every token: M = batch x sequence length (the gathered sequence of a
        # sequence-parallel GEMM, the input's or the output's: the larger)
        n = max(math.prod(info.shape[:-1]), math.prod(info.input_shapes[0][:-1]))
        f_in, f_out = info.input_shapes[0][-1], info.shape[-1]
    def gemm(m: int, cols: int, k: int) -> KernelPrice:
        return price_gemm(m, cols, k, model.hardware, model.params, dtype=dtype,
                          tc=model.tensor, tf32=tf32)

    fwd = [gemm(n, f_out, f_in)]
    bwd = [gemm(n, f_in, f_out)] if info.grad_inputs else []
    bwd.append(gemm(f_out, f_in, n))
    return fwd, bwd


def _attention_kernels(info: LayerInfo, layer: Layer, model: KernelModel, dtype: str,
                       tf32: bool) -> tuple[list[KernelPrice], list[KernelPrice]]:
    """An attention layer's kernels. Fused: one kernel per pass (the layer's ``kernel``
    param, ``fused`` where it has none, resolved for the GPU). Naive scores S = Q K^T and
    context O = P V: a batched GEMM over samples x heads; backward dQ = dS K and dK = dS^T Q
    (scores), dP = dO V^T and dV = P^T dO (context), each where its input needs a gradient."""
    params = dict(layer.params)
    n, s, width = info.input_shapes[-1]  # the fused QKV (the context's second input)
    heads, d = params["heads"], head_dim(params, width)
    hw, kp, tc = model.hardware, model.params, model.tensor
    if info.kind == "flash_attention":
        kernel = model.attention_kernel(params.get("kernel", "fused"))
        fwd, bwd = ([price_attention(n, heads, s, s, d, p, hw, kp, dtype=dtype, tc=tc,
                                     kernel=kernel)] for p in ("fwd", "bwd"))
        return fwd, bwd

    def gemm(m: int, cols: int, k: int) -> KernelPrice:
        return price_gemm(m, cols, k, hw, kp, batch=n * heads, dtype=dtype, tc=tc, tf32=tf32)

    grads = set(info.grad_inputs)
    if info.kind == "attn_scores":
        return [gemm(s, s, d)], [gemm(s, d, s) for _ in range(2) if grads]
    probs, qkv = layer.input_tensors
    bwd = ([gemm(s, s, d)] if probs in grads else []) + ([gemm(s, d, s)] if qkv in grads else [])
    return [gemm(s, d, s)], bwd


#: Transformer kinds priced as GEMMs or fused attention.
_ATTENTION_KINDS = ("attn_scores", "attn_context", "flash_attention")


def _tighter(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return b if a is None else a if b is None else min(a, b)


def _combine(parts: list[KernelPrice]) -> PricedKernel:
    return PricedKernel(_ps(sum(p.seconds for p in parts)),
                        "+".join(p.algorithm for p in parts if p.algorithm),
                        max((p.workspace_bytes for p in parts), default=0))


@timed("pricing_s")
def price_network(network: Network, batch: int, dtype: str, model: KernelModel,
                  workspace_limit: Optional[int] = None,
                  limits: Optional[Mapping[str, Mapping[str, int]]] = None
                  ) -> dict[str, dict[str, PricedKernel]]:
    """``{layer: {"fwd": PricedKernel, "bwd": PricedKernel}}`` for every layer but the data
    layer. ``workspace_limit`` caps each convolution kernel's workspace (frameworks' limit):
    the fastest algorithm that fits is picked; ``limits`` ({layer: {"fwd"|"bwd": bytes}})
    lower it for single kernels (the memory free beside them). A shape the model cannot price
    is a :class:`WorkloadError` naming the layer. The convolutions of each pass are priced in
    one vectorized call. TF32 as the model's ``tf32`` says (none, conv or all; '':
    PyTorch's default for the GPU)."""
    hw, kp = model.hardware, model.params
    size = itemsize(dtype)
    layers = {layer.name: layer for layer in network.layers}
    infos = [i for i in inferred(network, batch, dtype)[0] if i.kind != "data"]
    convs = [i for i in infos if i.kind == "conv"]
    try:
        mode = model.tf32_mode(model.tf32)
        problems = [_conv_problem(dict(layers[i.name].params), i) for i in convs]
        names = [i.name for i in convs]
        conv = {}
        for done, p in enumerate(("fwd", "bwd_data", "bwd_filter"), start=1):
            kernel = "fwd" if p == "fwd" else "bwd"
            each = [_tighter(workspace_limit, (limits or {}).get(name, {}).get(kernel))
                    for name in names]
            conv[p] = dict(zip(names, price_convs(problems, p, hw, kp, size, each, names,
                                                  dtype=dtype, tc=model.tensor,
                                                  tf32=mode != "none")))
            if convs:
                tick("pricing kernels: convolution pass", done, 3)
    except ModelError as exc:
        raise WorkloadError(str(exc), file=network.file) from None
    try:
        return _price_layers(infos, layers, conv, batch, model, dtype, mode)
    except ModelError as exc:
        raise WorkloadError(str(exc), file=network.file) from None


def _price_layers(infos: list[LayerInfo], layers: Mapping[str, Layer],
                  conv: Mapping[str, Mapping[str, KernelPrice]], batch: int,
                  model: KernelModel, dtype: str, tf32: str
                  ) -> dict[str, dict[str, PricedKernel]]:
    """:func:`price_network`'s result from the convolutions priced (``conv`` per pass and
    layer): each layer's kernels combined, GEMMs and attention priced here."""
    mode = tf32
    extra = stack_kernels(infos, model, dtype, layers)
    out: dict[str, dict[str, PricedKernel]] = {}
    for done, info in enumerate(infos):
        tick("pricing kernels: layer", done, len(infos))  # ``done``: the layers before it
        mine = extra.get(info.name)
        if info.kind == "conv":
            fwd = [conv["fwd"][info.name]]
            bwd = [conv["bwd_data"][info.name]] if info.grad_inputs else []
            bwd.append(conv["bwd_filter"][info.name])
        elif info.kind in ("fc", "linear"):
            fwd, bwd = _gemm_kernels(info, batch, model, dtype, mode == "all")
        elif info.kind in _ATTENTION_KINDS:
            fwd, bwd = _attention_kernels(info, layers[info.name], model, dtype, mode == "all")
        elif mine:  # a memory-bound layer the stack runs as these kernels
            fwd, bwd = mine["fwd"], mine["bwd"]
        else:
            out[info.name] = {p: PricedKernel(None, "", 0) for p in ("fwd", "bwd")}
            continue
        if mine and info.kind in ("fc", "linear"):  # a GEMM's own bias kernels (eager)
            fwd, bwd = fwd + mine["fwd"], bwd + mine["bwd"]
        out[info.name] = {"fwd": _combine(fwd), "bwd": _combine(bwd)}
    return out


def _block_shape(block: Mapping[str, LayerInfo], layers: Mapping[str, Layer], size: int
                 ) -> Optional[BlockShape]:
    """The sizes of one transformer block (its layers by the name after ``blk{i}/``); None
    for a block without the QKV, FFN and activation layers of :mod:`workloads.transformer`."""
    if not all(k in block for k in ("qkv", "fc1", "act", "ln2")):
        return None
    qkv, fc1, act = block["qkv"], block["fc1"], block["act"]
    return BlockShape(
        tokens=math.prod(qkv.shape[:-1]), hidden=qkv.input_shapes[0][-1], fc1=fc1.shape[-1],
        act_out=act.shape[-1], qkv=qkv.shape[-1], itemsize=size,
        bias=bool(dict(layers[qkv.name].params).get("bias", False)),
        # dropout on the residual branches where the block has a layer norm (GPT-2's and
        # OPT's configurations), none with RMSNorm (Llama's)
        dropout=block["ln2"].kind == "layernorm")


def stack_kernels(infos: list[LayerInfo], model: KernelModel, dtype: str,
                  layers: Mapping[str, Layer]
                  ) -> dict[str, dict[str, list[KernelPrice]]]:
    """``{layer: {"fwd"|"bwd": [KernelPrice]}}``: the memory-bound kernels the model's stack
    (:mod:`sst_cdma.model.stacks`) launches beside each layer of a transformer's blocks, and
    the final norm's, priced at the GPU's achievable DRAM bandwidth; {} for the default
    stack or a network without blocks."""
    stack = getattr(model, "stack", DEFAULT_STACK)
    if stack == DEFAULT_STACK:
        return {}
    by_block: dict[int, dict[str, LayerInfo]] = {}
    for info in infos:
        index, part = split_name(info.name)
        if index is not None:
            by_block.setdefault(index, {})[part] = info
    kernels: list[tuple[str, StackKernel]] = []
    shape: Optional[BlockShape] = None
    for index, block in sorted(by_block.items()):
        shape = _block_shape(block, layers, itemsize(dtype))
        if shape is not None:
            kernels += [(f"blk{index}/{k.layer}", k) for k in block_kernels(stack, shape)]
    names = {i.name for i in infos}
    if shape is not None and "ln_f" in names:
        kernels += [("ln_f", replace(k, layer="ln_f")) for k in block_kernels(stack, shape)
                    if k.layer == "ln1" and k.name.startswith("layer_norm")]
    out: dict[str, dict[str, list[KernelPrice]]] = {}
    bw, launch = model.hardware.dram_bandwidth, model.params.launch_s
    for name, k in kernels:
        if name in names:
            price = KernelPrice(kernel_seconds(k, bw, launch), k.name, 0)
            out.setdefault(name, {"fwd": [], "bwd": []})[k.pass_].append(price)
    return out


def limits_from_free_memory(plan: Plan, capacity: int) -> dict[str, dict[str, int]]:
    """Per layer and pass, the workspace a convolution kernel can have without overflowing
    ``capacity`` bytes of GPU memory beside what the iteration holds when it runs (replaying
    ``plan``'s allocations in issue order): ``{layer: {"fwd"|"bwd": bytes}}`` for the kernels
    whose planned workspace does not fit, as a framework picks its algorithms within the
    memory it has free. Kernels that fit are left out."""
    sizes = {t.name: t.bytes for t in plan.tensors}
    scratch = {t.name for t in plan.tensors if t.kind == "workspace"}
    in_use = 0
    out: dict[str, dict[str, int]] = {}
    for op in plan.ops():
        if op.op == "alloc":
            in_use += sizes[op.name]
        elif op.op == "free":
            in_use -= sizes[op.name]
        elif op.op == "compute":
            own = sum(sizes[t] for t in op.writes if t in scratch)
            beside = in_use - own
            if own and beside + own > capacity:
                # a recompute kernel is the forward kernel: it limits the forward algorithm
                assert op.pass_ is not None, f"compute {op.name} of a rendered plan has no pass"
                pass_ = "fwd" if op.pass_ == "recompute" else op.pass_
                mine = out.setdefault(op.name, {})
                mine[pass_] = min(mine.get(pass_, capacity), max(0, capacity - beside))
    return out
