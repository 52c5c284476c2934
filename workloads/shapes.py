"""Per-sample output shape of each layer kind (the batch dimension is added by the caller).

Shapes are tuples without N: ``(C, H, W)`` for feature maps, ``(F,)`` for flat features.
Size rules follow Caffe: convolution rounds down; pooling rounds up (``ceil_mode``) and drops a
last window that would start inside the padding (the same rule PyTorch applies).
:func:`output_shape` raises :class:`ValueError` with a plain message; the network adds the file
and the layer.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

__all__ = ["output_shape", "conv_out", "pool_out", "flat"]

Shape = tuple[int, ...]


def flat(shape: Shape) -> int:
    """Number of elements in one sample of ``shape``."""
    return math.prod(shape)


def conv_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Caffe/PyTorch convolution output size (floor)."""
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def pool_out(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool = True) -> int:
    """Caffe pooling output size: ceil (or floor) rounding, minus a window starting in padding."""
    span = size + 2 * pad - kernel
    if span < 0:
        return 0
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and pad > 0 and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _need_4d(kind: str, shape: Shape) -> Shape:
    if len(shape) != 3:
        raise ValueError(f"{kind} needs a (N, C, H, W) input, got (N, {', '.join(map(str, shape))})")
    return shape


def _positive(kind: str, shape: Shape) -> Shape:
    if any(d <= 0 for d in shape):
        raise ValueError(
            f"{kind} output shape (N, {', '.join(map(str, shape))}) is non-positive "
            "(kernel larger than the padded input?)"
        )
    return shape


def output_shape(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape]) -> Shape:
    """Return the per-sample output shape of a ``kind`` layer with normalized ``params``."""
    if kind == "data":
        return tuple(params["shape"])
    if kind in ("relu", "dropout", "lrn", "batchnorm"):
        if kind == "lrn":
            _need_4d(kind, inputs[0])
        return tuple(inputs[0])
    if kind == "conv":
        c, h, w = _need_4d(kind, inputs[0])
        g = params["group"]
        if c % g or params["num_output"] % g:
            raise ValueError(
                f"conv group {g} must divide input channels {c} and num_output "
                f"{params['num_output']}"
            )
        (kh, kw), (sh, sw) = params["kernel_size"], params["stride"]
        (ph, pw), (dh, dw) = params["pad"], params["dilation"]
        return _positive(kind, (params["num_output"], conv_out(h, kh, sh, ph, dh),
                                conv_out(w, kw, sw, pw, dw)))
    if kind == "pool":
        c, h, w = _need_4d(kind, inputs[0])
        if params["global"]:
            return (c, 1, 1)
        (kh, kw), (sh, sw), (ph, pw) = params["kernel_size"], params["stride"], params["pad"]
        cm = params["ceil_mode"]
        return _positive(kind, (c, pool_out(h, kh, sh, ph, cm), pool_out(w, kw, sw, pw, cm)))
    if kind == "fc":
        return (params["num_output"],)
    if kind in ("softmax", "loss"):
        return (flat(inputs[0]),)
    if kind == "concat":
        shapes = [_need_4d(kind, s) for s in inputs]
        hw = {s[1:] for s in shapes}
        if len(hw) != 1:
            raise ValueError(
                "concat inputs differ in H x W: "
                + ", ".join("x".join(map(str, s)) for s in shapes)
            )
        return (sum(s[0] for s in shapes),) + shapes[0][1:]
    if kind == "add":
        if len({tuple(s) for s in inputs}) != 1:
            raise ValueError(
                "add inputs differ in shape: " + ", ".join("x".join(map(str, s)) for s in inputs)
            )
        return tuple(inputs[0])
    if kind in _TOKEN_KINDS:
        return _token_shape(kind, params, inputs)
    raise ValueError(f"no shape rule for kind '{kind}'")


#: Transformer kinds: per-sample shapes (S, D) per token, (heads, S, S) for attention scores.
_TOKEN_KINDS = ("embedding", "linear", "layernorm", "rmsnorm", "gelu", "swiglu", "rope",
                "attn_scores", "attn_softmax", "attn_context", "flash_attention",
                "cross_entropy")


def _need_tokens(kind: str, shape: Shape) -> Shape:
    if len(shape) != 2:
        raise ValueError(f"{kind} needs a (N, S, D) input, got (N, {', '.join(map(str, shape))})")
    return shape


def _scattered(tokens: int, params: Mapping[str, Any]) -> int:
    """The tokens a rank keeps of ``tokens`` split over ``sequence_scatter`` ranks."""
    ranks = params["sequence_scatter"]
    if tokens % ranks:
        raise ValueError(f"sequence_scatter {ranks} does not divide the {tokens} tokens")
    return tokens // ranks


def head_dim(params: Mapping[str, Any], qkv_width: int) -> int:
    """Per-head width d of a fused QKV tensor of ``qkv_width`` = (heads + 2 kv_heads) d."""
    parts = params["heads"] + 2 * params["kv_heads"]
    if qkv_width % parts:
        raise ValueError(f"fused QKV width {qkv_width} is not (heads + 2 kv_heads) = {parts} "
                         "times a head width")
    return qkv_width // parts


def _token_shape(kind: str, params: Mapping[str, Any], inputs: Sequence[Shape]) -> Shape:
    if kind == "embedding":
        if len(inputs[0]) != 1:
            raise ValueError("embedding needs token ids (N, S)")
        s = inputs[0][0]
        if params["positions"] and s > params["positions"]:
            raise ValueError(f"sequence length {s} exceeds the {params['positions']} learned "
                             "positions")
        return (_scattered(s, params), params["hidden"])
    if kind == "attn_softmax":
        if len(inputs[0]) != 3:
            raise ValueError("attn_softmax needs (N, heads, S, S) scores")
        return tuple(inputs[0])
    if kind == "attn_context":  # inputs [probs (heads, S, S), qkv (S, W)]
        probs = inputs[0]
        s, w = _need_tokens(kind, inputs[1])
        if tuple(probs) != (params["heads"], s, s):
            raise ValueError(f"attn_context probs must be ({params['heads']}, {s}, {s}), got "
                             f"({', '.join(map(str, probs))})")
        return (s, params["heads"] * head_dim(params, w))
    s, d = _need_tokens(kind, inputs[0])
    if kind == "linear":
        return (_scattered(s * params["sequence_gather"], params), params["num_output"])
    if kind in ("layernorm", "rmsnorm", "gelu", "cross_entropy", "rope"):
        if kind == "rope" and head_dim(params, d) % 2:
            raise ValueError(f"rope rotates pairs of a head's channels: its head dimension "
                             f"must be even, got {head_dim(params, d)}")
        return (s, d)
    if kind == "swiglu":
        if d % 2:
            raise ValueError(f"swiglu needs an even width (gate and up), got {d}")
        return (s, d // 2)
    if kind == "attn_scores":
        head_dim(params, d)
        return (params["heads"], s, s)
    if kind == "flash_attention":
        return (s, params["heads"] * head_dim(params, d))
    raise ValueError(f"no shape rule for kind '{kind}'")
