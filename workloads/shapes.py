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
    raise ValueError(f"no shape rule for kind '{kind}'")
