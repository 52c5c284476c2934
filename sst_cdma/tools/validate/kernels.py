"""Part (a), kernel by kernel: the CNN's convolutions and the transformer's matrix multiplies
as single kernels, in the shape of the DeepBench measurements the kernel model is fitted to
(``sst_cdma/model/calibration_data/deepbench``): each convolution's forward, backward-data and
backward-filter time separately, each linear layer's forward GEMM (M = output features, N =
tokens, K = input features, DeepBench's convention).

A grouped convolution (AlexNet's conv2, conv4, conv5) has no row in that format, which has no
group column: it is left out, and counted as such.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from workloads.loader import load_network
from workloads.network import LayerInfo, Network

from sst_cdma.tools.validate.device import Probe

__all__ = ["ConvKernel", "GemmKernel", "time_convolutions", "time_gemms"]


@dataclass(frozen=True)
class ConvKernel:
    """One convolution's shape (DeepBench's columns) and its three passes' seconds
    (``bwd_data_s`` NaN where the layer's input needs no gradient: the first layer)."""

    layer: str
    dtype: str
    shape: dict[str, int]
    fwd_s: float
    bwd_data_s: float
    bwd_filter_s: float


@dataclass(frozen=True)
class GemmKernel:
    """One GEMM C[M, N] = A[M, K] B[K, N] and its seconds."""

    layer: str
    dtype: str
    m: int
    n: int
    k: int
    seconds: float


def _conv_shape(info: LayerInfo, params: dict) -> dict[str, int]:
    n, c, h, w = info.input_shapes[0]
    (r, s), (ph, pw), (sh, sw) = params["kernel_size"], params["pad"], params["stride"]
    return {"W": w, "H": h, "C": c, "N": n, "K": params["num_output"], "R": r, "S": s,
            "pad_h": ph, "pad_w": pw, "stride_h": sh, "stride_w": sw}


def _conv(probe: Probe, info: LayerInfo, params: dict, dtype: torch.dtype, repeat: int,
          warmup: int, first: bool) -> tuple[float, float, float]:
    """Forward, backward-data (NaN for ``first``) and backward-filter seconds."""
    shape = _conv_shape(info, params)
    x = torch.randn(info.input_shapes[0], device=probe.device, dtype=dtype,
                    requires_grad=not first)
    weight = torch.randn((shape["K"], shape["C"], shape["R"], shape["S"]), device=probe.device,
                         dtype=dtype, requires_grad=True)

    def forward() -> torch.Tensor:
        return F.conv2d(x, weight, stride=params["stride"], padding=params["pad"],
                        dilation=params["dilation"])

    y = forward()
    dy = torch.randn_like(y)
    fwd = probe.median_seconds(forward, repeat, warmup)
    data = math.nan if first else probe.median_seconds(
        lambda: torch.autograd.grad(y, x, dy, retain_graph=True), repeat, warmup)
    filt = probe.median_seconds(lambda: torch.autograd.grad(y, weight, dy, retain_graph=True),
                                repeat, warmup)
    return fwd, data, filt


def time_convolutions(probe: Probe, network: str, batch: int, dtype: str, repeat: int,
                      warmup: int, say: Callable[[str], None]) -> tuple[list[ConvKernel], int]:
    """Each ungrouped, undilated convolution of ``network`` at ``batch`` in ``dtype``; and how
    many convolutions were left out (grouped or dilated)."""
    net: Network = load_network(network)
    kind = getattr(torch, dtype)
    found, skipped = [], 0
    first_layer = next((layer.name for layer in net.layers if layer.kind == "conv"), None)
    for info in net.infer(batch, dtype):
        if info.kind != "conv":
            continue
        params = dict(net.layer(info.name).params)
        if params["group"] != 1 or tuple(params["dilation"]) != (1, 1):
            skipped += 1
            continue
        # the first layer's input is the data, whose gradient no one needs; cuDNN tries its
        # algorithms in the warm-up and keeps the fastest, as in part (a) (time-layers'
        # --cudnn-benchmark)
        with torch.backends.cudnn.flags(enabled=True, benchmark=probe.is_gpu):
            fwd, data, filt = _conv(probe, info, params, kind, repeat, warmup,
                                    info.name == first_layer)
        found.append(ConvKernel(info.name, dtype, _conv_shape(info, params), fwd, data, filt))
    say(f"{net.name} {dtype}: {len(found)} convolutions"
        + (f" ({skipped} grouped or dilated left out)" if skipped else ""))
    return found, skipped


def time_gemms(probe: Probe, network: str, batch: int, dtype: str, repeat: int, warmup: int,
               say: Callable[[str], None]) -> list[GemmKernel]:
    """The forward GEMM of each distinct linear layer shape of ``network`` at ``batch``."""
    net: Network = load_network(network)
    kind = getattr(torch, dtype)
    found: list[GemmKernel] = []
    seen: set[tuple[int, int, int]] = set()
    for info in net.infer(batch, dtype):
        if info.kind not in ("linear", "fc"):
            continue
        k = math.prod(info.input_shapes[0][1:]) if info.kind == "fc" else info.input_shapes[0][-1]
        m = info.shape[-1]
        n = math.prod(info.input_shapes[0]) // k
        if (m, n, k) in seen:
            continue
        seen.add((m, n, k))
        a = torch.randn((m, k), device=probe.device, dtype=kind)
        b = torch.randn((k, n), device=probe.device, dtype=kind)
        found.append(GemmKernel(info.name, dtype, m, n, k,
                                probe.median_seconds(lambda: torch.mm(a, b), repeat, warmup)))
    say(f"{net.name} {dtype}: {len(found)} GEMM shapes")
    return found
