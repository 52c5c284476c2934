"""Parameter counts, FLOPs and DRAM traffic estimates of one layer's kernels.

Conventions (also in docs/workloads.md):

* A multiply-add counts as **2 FLOPs**. Convolution and FC FLOPs count the weight product only
  (bias adds are not counted), so ``flops / 2`` is the usual "MAC" figure (VGG-16: 15.5 GMAC
  per image).
* Backward of conv/FC = weight gradient (same FLOPs as forward) + data gradient (same again)
  unless the input needs no gradient (the network input), so ~2x forward.
* Other kinds use per-element estimates: pool = one op per window element; LRN =
  ``local_size + 5`` per element (square, window sum, scale, power, divide); ReLU and dropout =
  1; batchnorm = 8 forward / 12 backward; softmax and loss = 5 forward, softmax 4 / loss 1
  backward; add = inputs - 1 per element forward, 0 backward; concat = 0 (pure copies).
  Backward FLOPs of a kind whose input needs no gradient are zero except for weight gradients.
* DRAM traffic of a kernel = bytes read + bytes written, counting every operand once:
  forward reads inputs and weights and writes the output; backward reads dY, the tensors in
  the kind's backward needs (X and/or Y) and the weights (for the data gradient), and writes dX
  per input that needs it and dW.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

__all__ = ["param_count", "forward_flops", "backward_flops", "macs_per_sample"]

Shape = tuple[int, ...]


def macs_per_sample(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape) -> int:
    """Multiply-adds of the weight product for one sample (conv and fc; 0 otherwise)."""
    if kind == "conv":
        kh, kw = params["kernel_size"]
        return math.prod(out) * (inputs[0][0] // params["group"]) * kh * kw
    if kind == "fc":
        return math.prod(inputs[0]) * params["num_output"]
    return 0


def param_count(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape) -> int:
    """Number of learnable parameters (weights and biases; batchnorm: gamma and beta)."""
    if kind == "conv":
        kh, kw = params["kernel_size"]
        cout = params["num_output"]
        return cout * (inputs[0][0] // params["group"]) * kh * kw + (cout if params["bias"] else 0)
    if kind == "fc":
        f = params["num_output"]
        return math.prod(inputs[0]) * f + (f if params["bias"] else 0)
    if kind == "batchnorm":
        return 2 * out[0] if params["affine"] else 0
    return 0


def _elementwise_fwd(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape) -> int:
    n = math.prod(out)
    if kind == "pool":
        if params["global"]:
            window = inputs[0][1] * inputs[0][2]
        else:
            window = params["kernel_size"][0] * params["kernel_size"][1]
        return n * window
    if kind == "lrn":
        return n * (params["local_size"] + 5)
    if kind in ("relu", "dropout"):
        return n
    if kind == "batchnorm":
        return 8 * n
    if kind in ("softmax", "loss"):
        return 5 * n
    if kind == "add":
        return n * (len(inputs) - 1)
    return 0


def forward_flops(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape,
                  batch: int) -> int:
    """Forward FLOPs of the layer for a batch of ``batch`` samples."""
    if kind in ("conv", "fc"):
        return 2 * batch * macs_per_sample(kind, params, inputs, out)
    return batch * _elementwise_fwd(kind, params, inputs, out)


def backward_flops(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape,
                   batch: int, grad_inputs: Sequence[bool]) -> int:
    """Backward FLOPs: weight gradient plus data gradient for the inputs that need one."""
    need_dx = any(grad_inputs)
    if kind in ("conv", "fc"):
        per = 2 * batch * macs_per_sample(kind, params, inputs, out)
        return per + (per if need_dx else 0)
    n = batch * math.prod(out)
    if kind == "batchnorm":
        return 12 * n if need_dx else 4 * n
    if not need_dx:
        return 0
    if kind in ("pool", "relu", "dropout"):
        return forward_flops(kind, params, inputs, out, batch)
    if kind == "lrn":
        return 2 * forward_flops(kind, params, inputs, out, batch)
    if kind == "softmax":
        return 4 * n
    if kind == "loss":
        return n
    return 0  # add, concat, data
