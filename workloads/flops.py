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
* Transformer kinds: ``linear`` is a GEMM per token (``2 S Din Dout`` per sample, backward 2x
  like fc); attention matmuls count the full S x S product (naive attention computes the masked
  half too): scores and context ``2 heads S S d`` each, backward 2x; the fused attention counts
  the causal half of both matmuls (``2 heads S S d``) plus 5 per score for the online softmax,
  backward 2.5x (it recomputes the scores). Per element: LayerNorm 8 / 12, RMSNorm 4 / 8,
  GELU 8 / 10, SwiGLU 5 / 8 per output element, rotary 3 per rotated Q/K element (both passes),
  attention softmax 5 / 4, cross-entropy 5 / 1, embedding 1 per output element when it adds
  positions, backward 1 (scatter-add).
* DRAM traffic of a kernel = bytes read + bytes written, counting every operand once:
  forward reads inputs and weights and writes the output; backward reads dY, the tensors in
  the kind's backward needs (X and/or Y) and the weights (for the data gradient), and writes dX
  per input that needs it and dW.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

__all__ = ["param_count", "weight_count", "forward_flops", "backward_flops", "macs_per_sample"]

Shape = tuple[int, ...]


def macs_per_sample(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape) -> int:
    """Multiply-adds of the weight product for one sample (conv and fc; 0 otherwise)."""
    if kind == "conv":
        kh, kw = params["kernel_size"]
        return math.prod(out) * (inputs[0][0] // params["group"]) * kh * kw
    if kind == "fc":
        return math.prod(inputs[0]) * params["num_output"]
    if kind == "linear":  # over the gathered tokens with sequence parallelism
        return math.prod(inputs[0]) * params["sequence_gather"] * params["num_output"]
    return 0


def _attention_macs(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape],
                    out: Shape) -> int:
    """Multiply-adds of one attention matmul (Q K^T or P V) for one sample: heads S S d."""
    if kind == "attn_scores":
        heads, s, _ = out
        return heads * s * s * (inputs[0][1] // (heads + 2 * params["kv_heads"]))
    s, width = out
    return s * s * width  # attn_context / flash_attention: heads d = width


def weight_count(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape],
                 out: Shape) -> int:
    """Weights a layer's kernels read (its parameters, or the shared table of a tied LM
    head)."""
    if kind == "linear" and params["tied"]:
        return inputs[0][-1] * params["num_output"]
    return param_count(kind, params, inputs, out)


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
    if kind == "linear":
        if params["tied"]:
            return 0
        f = params["num_output"]
        return inputs[0][-1] * f + (f if params["bias"] else 0)
    if kind == "embedding":
        return (params["vocab"] * params["hidden"]
                + params["positions"] * (params["position_dim"] or params["hidden"]))
    if kind == "layernorm":
        return out[-1] * (2 if params["bias"] else 1)
    if kind == "rmsnorm":
        return out[-1]
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
    if kind in _PER_ELEMENT:
        return n * _PER_ELEMENT[kind][0]
    if kind == "rope":
        return 3 * n * (params["heads"] + params["kv_heads"]) // (
            params["heads"] + 2 * params["kv_heads"])
    if kind == "embedding":  # the positions are added before the sequence is scattered
        return n * params["sequence_scatter"] if params["positions"] else 0
    if kind == "flash_attention":
        return 5 * params["heads"] * out[0] * out[0] // 2
    return 0


#: (forward, backward) FLOPs per output element of the transformer element-wise kinds.
_PER_ELEMENT = {"layernorm": (8, 12), "rmsnorm": (4, 8), "gelu": (8, 10), "swiglu": (5, 8),
                "attn_softmax": (5, 4), "cross_entropy": (5, 1)}


def forward_flops(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape,
                  batch: int) -> int:
    """Forward FLOPs of the layer for a batch of ``batch`` samples."""
    if kind in ("conv", "fc", "linear"):
        return 2 * batch * macs_per_sample(kind, params, inputs, out)
    if kind in ("attn_scores", "attn_context"):
        return 2 * batch * _attention_macs(kind, params, inputs, out)
    if kind == "flash_attention":  # both matmuls, causal half, plus the online softmax
        return batch * (2 * _attention_macs(kind, params, inputs, out)
                        + _elementwise_fwd(kind, params, inputs, out))
    return batch * _elementwise_fwd(kind, params, inputs, out)


def backward_flops(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape], out: Shape,
                   batch: int, grad_inputs: Sequence[bool]) -> int:
    """Backward FLOPs: weight gradient plus data gradient for the inputs that need one."""
    need_dx = any(grad_inputs)
    if kind in ("conv", "fc", "linear"):
        per = 2 * batch * macs_per_sample(kind, params, inputs, out)
        return per + (per if need_dx else 0)
    n = batch * math.prod(out)
    if kind == "batchnorm":
        return 12 * n if need_dx else 4 * n
    if kind == "embedding":  # scatter-add into the tables (the ids need no gradient), over
        return n * params["sequence_scatter"]  # the gathered sequence's gradient
    if kind in ("layernorm", "rmsnorm"):
        return _PER_ELEMENT[kind][1] * n if need_dx else 4 * n
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
    if kind in _PER_ELEMENT:
        return _PER_ELEMENT[kind][1] * n
    if kind == "rope":
        return forward_flops(kind, params, inputs, out, batch)
    if kind in ("attn_scores", "attn_context"):
        return 2 * forward_flops(kind, params, inputs, out, batch)
    if kind == "flash_attention":
        return 5 * forward_flops(kind, params, inputs, out, batch) // 2
    return 0  # add, concat, data
