"""Kernel times of one network's layers from the fitted kernel model
(:mod:`sst_cdma.model.kernel_model`): every layer and pass priced once, before the simulation.

The stream runs one forward and one backward kernel per layer; a convolution's backward
kernel is its backward-data plus its backward-filter kernel (backward-data only where its input
needs a gradient), and a fully connected layer's are GEMMs (forward ``N x F_out x F_in``;
backward the data-gradient and weight-gradient GEMMs), and so is a transformer's per-token
``linear`` with ``N`` = batch x sequence length. Every other kind (attention matmuls and
element-wise transformer kinds included, for now), and the optimizer's
update kernels, are left to the GPU: they move their DRAM bytes at the HBM's achievable
bandwidth (the same resource the DMA engine shares, so an overridden HBM counts) plus the
fitted launch (``time_ps`` None here). Each priced kernel carries the algorithm picked
(``fwd``, ``bwd_data+bwd_filter``) and the cuDNN workspace it needs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

from sst_cdma.model.fitted import KernelModel
from sst_cdma.model.kernel_model import (ConvProblem, KernelPrice, ModelError, price_convs,
                                         price_gemm)

from .dtypes import itemsize
from .errors import WorkloadError
from .network import LayerInfo, Network
from .vdnn import Plan

__all__ = ["PricedKernel", "price_network", "limits_from_free_memory"]


@dataclass(frozen=True)
class PricedKernel:
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


def _tighter(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return b if a is None else a if b is None else min(a, b)


def _combine(parts: list[KernelPrice]) -> PricedKernel:
    return PricedKernel(_ps(sum(p.seconds for p in parts)),
                        "+".join(p.algorithm for p in parts if p.algorithm),
                        max((p.workspace_bytes for p in parts), default=0))


def price_network(network: Network, batch: int, dtype: str, model: KernelModel,
                  workspace_limit: Optional[int] = None,
                  limits: Optional[Mapping[str, Mapping[str, int]]] = None
                  ) -> dict[str, dict[str, PricedKernel]]:
    """``{layer: {"fwd": PricedKernel, "bwd": PricedKernel}}`` for every layer but the data
    layer. ``workspace_limit`` caps each convolution kernel's workspace (frameworks' limit):
    the fastest algorithm that fits is picked; ``limits`` ({layer: {"fwd"|"bwd": bytes}})
    lower it for single kernels (the memory free beside them). A shape the model cannot price
    is a :class:`WorkloadError` naming the layer. The convolutions of each pass are priced in
    one vectorized call."""
    hw, kp = model.hardware, model.params
    size = itemsize(dtype)
    layers = {layer.name: layer for layer in network.layers}
    infos = [i for i in network.infer(batch, dtype) if i.kind != "data"]
    convs = [i for i in infos if i.kind == "conv"]
    try:
        problems = [_conv_problem(dict(layers[i.name].params), i) for i in convs]
        names = [i.name for i in convs]
        conv = {}
        for p in ("fwd", "bwd_data", "bwd_filter"):
            kernel = "fwd" if p == "fwd" else "bwd"
            each = [_tighter(workspace_limit, (limits or {}).get(name, {}).get(kernel))
                    for name in names]
            conv[p] = dict(zip(names, price_convs(problems, p, hw, kp, size, each, names)))
    except ModelError as exc:
        raise WorkloadError(str(exc), file=network.file) from None
    out: dict[str, dict[str, PricedKernel]] = {}
    for info in infos:
        if info.kind == "conv":
            fwd = [conv["fwd"][info.name]]
            bwd = [conv["bwd_data"][info.name]] if info.grad_inputs else []
            bwd.append(conv["bwd_filter"][info.name])
        elif info.kind in ("fc", "linear"):
            if info.kind == "fc":
                n, f_in, f_out = batch, math.prod(info.input_shapes[0][1:]), info.shape[1]
            else:  # a GEMM over every token: M = batch x sequence length
                n, f_in, f_out = math.prod(info.shape[:-1]), info.input_shapes[0][-1], info.shape[-1]
            fwd = [price_gemm(n, f_out, f_in, hw, kp)]
            bwd = [price_gemm(n, f_in, f_out, hw, kp)] if info.grad_inputs else []
            bwd.append(price_gemm(f_out, f_in, n, hw, kp))
        else:
            out[info.name] = {p: PricedKernel(None, "", 0) for p in ("fwd", "bwd")}
            continue
        out[info.name] = {"fwd": _combine(fwd), "bwd": _combine(bwd)}
    return out


def limits_from_free_memory(plan: Plan, capacity: int) -> dict[str, dict[str, int]]:
    """Per layer and pass, the workspace a convolution kernel can have without overflowing
    ``capacity`` bytes of GPU memory beside what the iteration holds when it runs (replaying
    ``plan``'s allocations in issue order): ``{layer: {"fwd"|"bwd": bytes}}`` for the kernels
    whose planned workspace does not fit, as a framework picks its algorithms within the
    memory it has free. Kernels that fit are left out."""
    sizes = {t.name: t.bytes for t in plan.tensors}
    scratch = {t.name for t in plan.tensors if t.kind == "workspace"}
    ops = list(plan.prologue)
    for blocks in (plan.forward, plan.backward, plan.update):
        for block in blocks:
            ops.extend(block.ops)
    ops.extend(plan.epilogue)
    in_use = 0
    out: dict[str, dict[str, int]] = {}
    for op in ops:
        if op.op == "alloc":
            in_use += sizes[op.name]
        elif op.op == "free":
            in_use -= sizes[op.name]
        elif op.op == "compute":
            own = sum(sizes[t] for t in op.writes if t in scratch)
            beside = in_use - own
            if own and beside + own > capacity:
                out.setdefault(op.name, {})[op.pass_] = max(0, capacity - beside)
    return out
