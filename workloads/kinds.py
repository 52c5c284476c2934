"""The layer kinds a network definition may use: their parameters, arity and backward needs.

Each kind is declared once in :data:`KINDS` with its parameters (type, default, one-line doc),
how many inputs it takes, whether it runs in place (Caffe style: it shares its producer's
buffer and creates no tensor), and which tensors its backward kernel reads besides gradients
and weights (what vDNN must have resident — prefetched — before the kernel runs).

:func:`normalize_params` validates a layer's ``params`` mapping against its kind and returns a
new mapping with defaults filled in and values coerced (``kernel_size: 3`` becomes ``(3, 3)``).
It raises plain :class:`ValueError`; the loader adds the file and layer to the message.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.attention import FUSED_FORMS

__all__ = ["ParamSpec", "KindSpec", "KINDS", "normalize_params"]

_REQUIRED = object()


def _as_int(value: Any, name: str, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"param '{name}' must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"param '{name}' must be >= {minimum}, got {value}")
    return value


def _int(minimum: int | None = None) -> Callable[[Any, str], int]:
    return lambda v, n: _as_int(v, n, minimum)


def _pair(minimum: int) -> Callable[[Any, str], tuple[int, int]]:
    def conv(v: Any, n: str) -> tuple[int, int]:
        if isinstance(v, (list, tuple)):
            if len(v) != 2:
                raise ValueError(f"param '{n}' must be an integer or [h, w], got {list(v)!r}")
            return (_as_int(v[0], n, minimum), _as_int(v[1], n, minimum))
        x = _as_int(v, n, minimum)
        return (x, x)

    return conv


def _float(minimum: float | None = None, below: float | None = None) -> Callable[[Any, str], float]:
    def conv(v: Any, n: str) -> float:
        if isinstance(v, bool):
            raise ValueError(f"param '{n}' must be a number, got {v!r}")
        if isinstance(v, str):  # PyYAML reads "1e-4" as a string (YAML 1.1); accept it
            try:
                v = float(v)
            except ValueError:
                raise ValueError(f"param '{n}' must be a number, got {v!r}") from None
        if not isinstance(v, (int, float)):
            raise ValueError(f"param '{n}' must be a number, got {v!r}")
        x = float(v)
        if x != x:
            raise ValueError(f"param '{n}' must be a number, got NaN")
        if minimum is not None and x < minimum:
            raise ValueError(f"param '{n}' must be >= {minimum}, got {x}")
        if below is not None and x >= below:
            raise ValueError(f"param '{n}' must be < {below}, got {x}")
        return x

    return conv


def _bool(v: Any, n: str) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"param '{n}' must be true or false, got {v!r}")
    return v


def _choice(*options: Any) -> Callable[[Any, str], Any]:
    def conv(v: Any, n: str) -> Any:
        if v not in options or isinstance(v, bool):
            raise ValueError(
                f"param '{n}' must be one of {', '.join(map(str, options))}, got {v!r}"
            )
        return v

    return conv


def _shape(v: Any, n: str) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)) or len(v) not in (1, 3):
        raise ValueError(f"param '{n}' must be [C, H, W] or [F], got {v!r}")
    return tuple(_as_int(x, n, 1) for x in v)


@frozen_record
class ParamSpec(FrozenRecord):
    """One declared parameter of a layer kind."""

    name: str
    convert: Callable[[Any, str], Any]
    default: Any = _REQUIRED
    doc: str = ""

    @property
    def required(self) -> bool:
        """True when the parameter has no default."""
        return self.default is _REQUIRED


@frozen_record
class KindSpec(FrozenRecord):
    """Declaration of one layer kind.

    ``bwd_needs_inputs`` / ``bwd_needs_output``: whether the backward kernel reads the layer's
    input feature maps X / its output Y (cuDNN's contract), besides dY and the weights.
    """

    name: str
    doc: str
    params: tuple[ParamSpec, ...] = ()
    min_inputs: int = 1
    max_inputs: int | None = 1
    in_place: bool = False
    bwd_needs_inputs: bool = False
    bwd_needs_output: bool = False
    #: True when the output keeps zeros of sparse (post-ReLU) inputs as zeros.
    zero_preserving: bool = False


KINDS: dict[str, KindSpec] = {
    k.name: k
    for k in (
        KindSpec(
            "data",
            "network input batch (no compute)",
            (ParamSpec("shape", _shape, doc="per-sample shape [C, H, W] or [F]"),),
            min_inputs=0,
            max_inputs=0,
        ),
        KindSpec(
            "conv",
            "2-D convolution (Caffe Convolution), floor output size",
            (
                ParamSpec("num_output", _int(1), doc="output channels"),
                ParamSpec("kernel_size", _pair(1), doc="kernel size k or [kh, kw]"),
                ParamSpec("stride", _pair(1), (1, 1), "stride"),
                ParamSpec("pad", _pair(0), (0, 0), "zero padding"),
                ParamSpec("dilation", _pair(1), (1, 1), "dilation"),
                ParamSpec("group", _int(1), 1, "channel groups (AlexNet uses 2)"),
                ParamSpec("bias", _bool, True, "learnable bias"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "pool",
            "max/average pooling (Caffe Pooling: ceil-mode output size by default)",
            (
                ParamSpec("mode", _choice("max", "avg"), "max", "max or avg"),
                ParamSpec("kernel_size", _pair(1), None, "window k or [kh, kw] (unless global)"),
                ParamSpec("stride", _pair(1), (1, 1), "stride"),
                ParamSpec("pad", _pair(0), (0, 0), "padding"),
                ParamSpec("ceil_mode", _bool, True, "round the output size up, as Caffe"),
                ParamSpec("global", _bool, False, "pool the whole plane to 1x1"),
            ),
            bwd_needs_inputs=True,
            bwd_needs_output=True,
            zero_preserving=True,
        ),
        KindSpec(
            "lrn",
            "local response normalization across channels (Caffe LRN)",
            (
                ParamSpec("local_size", _int(1), 5, "channels in the window (odd)"),
                ParamSpec("alpha", _float(0.0), 1e-4, "scale"),
                ParamSpec("beta", _float(0.0), 0.75, "exponent"),
                ParamSpec("k", _float(0.0), 1.0, "bias"),
            ),
            bwd_needs_inputs=True,
            bwd_needs_output=True,
            zero_preserving=True,
        ),
        KindSpec(
            "relu",
            "ReLU, in place: no new tensor; marks its tensor post-ReLU (sparse)",
            in_place=True,
            bwd_needs_output=True,
        ),
        KindSpec(
            "fc",
            "fully connected (Caffe InnerProduct); flattens its input to (N, C*H*W)",
            (
                ParamSpec("num_output", _int(1), doc="output features"),
                ParamSpec("bias", _bool, True, "learnable bias"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "dropout",
            "dropout, in place (its mask is not modelled)",
            (ParamSpec("ratio", _float(0.0, 1.0), 0.5, "drop probability"),),
            in_place=True,
            zero_preserving=True,
        ),
        KindSpec(
            "concat",
            "channel concatenation of 4-D inputs (inception/fire outputs)",
            (ParamSpec("axis", _choice(1), 1, "concatenation axis (only 1)"),),
            min_inputs=1,
            max_inputs=None,
            zero_preserving=True,
        ),
        KindSpec(
            "add",
            "element-wise sum of equally shaped inputs (residual add)",
            min_inputs=2,
            max_inputs=None,
        ),
        KindSpec(
            "batchnorm",
            "batch normalization with learnable scale and shift (Caffe BatchNorm+Scale)",
            (
                ParamSpec("eps", _float(0.0), 1e-5, "variance epsilon"),
                ParamSpec("affine", _bool, True, "learnable gamma and beta"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "softmax",
            "softmax over the flattened features, output (N, F)",
            bwd_needs_output=True,
        ),
        KindSpec(
            "loss",
            "softmax with cross-entropy loss (Caffe SoftmaxWithLoss): its output is the "
            "(N, F) probability tensor the backward pass reads; labels are not modelled",
            bwd_needs_output=True,
        ),
        KindSpec(
            "embedding",
            "token embedding (+ learned positions): token ids (S,) -> (S, hidden); backward "
            "reads the ids (scatter-add into the table)",
            (
                ParamSpec("vocab", _int(1), doc="vocabulary size (rows of the token table)"),
                ParamSpec("hidden", _int(1), doc="embedding width"),
                ParamSpec("positions", _int(0), 0, "rows of the learned position table (0: none)"),
                ParamSpec("position_dim", _int(0), 0, "width of the position table (0: "
                          "hidden; OPT-350m adds its 1024-wide positions after projecting "
                          "its 512-wide embedding in)"),
                ParamSpec("sequence_scatter", _int(1), 1, "ranks the output's sequence is "
                          "split over (sequence parallelism): the output keeps 1/n of the "
                          "tokens"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "linear",
            "per-token linear (GEMM on the last dim): (S, Din) -> (S, num_output); backward "
            "reads its input",
            (
                ParamSpec("num_output", _int(1), doc="output features"),
                ParamSpec("bias", _bool, True, "learnable bias"),
                ParamSpec("tied", _bool, False, "weight shared with the embedding (LM head "
                          "tied to it): no parameters of its own"),
                ParamSpec("sequence_gather", _int(1), 1, "ranks whose sequence shards are "
                          "all-gathered into the GEMM's input (sequence parallelism): the "
                          "output has n times the input's tokens; the backward pass keeps "
                          "only the shard"),
                ParamSpec("sequence_scatter", _int(1), 1, "ranks the output's sequence is "
                          "reduce-scattered over (sequence parallelism): the output keeps 1/n "
                          "of the GEMM's tokens"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "layernorm",
            "LayerNorm over the last dim; backward reads its input (and the (S,) float32 "
            "mean/rstd, not modelled)",
            (
                ParamSpec("eps", _float(0.0), 1e-5, "variance epsilon"),
                ParamSpec("bias", _bool, True, "learnable shift (beta) besides the scale"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "rmsnorm",
            "RMSNorm over the last dim (learnable scale); backward reads its input",
            (ParamSpec("eps", _float(0.0), 1e-6, "epsilon"),),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "gelu",
            "GELU, out of place; backward reads its input",
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "swiglu",
            "SwiGLU: silu(gate) * up of a (S, 2F) input -> (S, F); backward reads its input",
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "rope",
            "rotary position embedding of the Q and K parts of a fused QKV tensor (V passes "
            "through: the output has the input's shape); backward needs only the cos/sin "
            "tables (not modelled)",
            (
                ParamSpec("heads", _int(1), doc="query heads"),
                ParamSpec("kv_heads", _int(1), doc="key/value heads"),
            ),
        ),
        KindSpec(
            "attn_scores",
            "naive attention scores Q K^T / sqrt(d) with the causal mask, from a fused QKV "
            "(S, (heads + 2 kv_heads) d) -> (heads, S, S); backward reads Q and K (its input)",
            (
                ParamSpec("heads", _int(1), doc="query heads"),
                ParamSpec("kv_heads", _int(1), doc="key/value heads"),
            ),
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "attn_softmax",
            "softmax over the last dim of the attention scores (heads, S, S); backward reads "
            "its output",
            bwd_needs_output=True,
        ),
        KindSpec(
            "attn_context",
            "attention context P V: inputs [probs (heads, S, S), fused QKV] -> (S, heads d); "
            "backward reads P and V (both inputs)",
            (
                ParamSpec("heads", _int(1), doc="query heads"),
                ParamSpec("kv_heads", _int(1), doc="key/value heads"),
            ),
            min_inputs=2,
            max_inputs=2,
            bwd_needs_inputs=True,
        ),
        KindSpec(
            "flash_attention",
            "fused causal attention (FlashAttention style) of a fused QKV -> (S, heads d); "
            "its output tensor also keeps the float32 row statistics (heads, S); backward "
            "re-reads Q, K, V, the output and the statistics",
            (
                ParamSpec("heads", _int(1), doc="query heads"),
                ParamSpec("kv_heads", _int(1), doc="key/value heads"),
                ParamSpec("kernel", _choice(*FUSED_FORMS), "fused",
                          "the kernel: FlashAttention-2 or -3, or fused (the best the GPU "
                          "runs)"),
            ),
            bwd_needs_inputs=True,
            bwd_needs_output=True,
        ),
        KindSpec(
            "cross_entropy",
            "cross-entropy over the vocabulary of (S, V) logits: its output is the (S, V) "
            "log-probabilities log_softmax saves for the backward pass; labels not modelled",
            bwd_needs_output=True,
        ),
    )
}


def normalize_params(kind: KindSpec, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``params`` against ``kind`` and return them complete and coerced.

    Raises :class:`ValueError` naming the offending parameter for unknown or missing
    parameters and values of the wrong type or range.
    """
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    known = {p.name: p for p in kind.params}
    unknown = sorted(set(params) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise ValueError(
            f"unknown param(s) {', '.join(map(repr, unknown))} for kind '{kind.name}' "
            f"(allowed: {allowed})"
        )
    out: dict[str, Any] = {}
    for spec in kind.params:
        if spec.name in params:
            out[spec.name] = spec.convert(params[spec.name], spec.name)
        elif spec.required:
            raise ValueError(f"missing required param '{spec.name}' for kind '{kind.name}'")
        else:
            out[spec.name] = spec.default
    if kind.name == "pool":
        if not out["global"]:
            if out["kernel_size"] is None:
                raise ValueError("pool needs 'kernel_size' unless 'global: true'")
            for pad, k in zip(out["pad"], out["kernel_size"]):
                if pad >= k:
                    raise ValueError(f"pool pad {pad} must be smaller than its kernel {k}")
    if "kv_heads" in out and out["heads"] % out["kv_heads"]:
        raise ValueError(f"param 'kv_heads' ({out['kv_heads']}) must divide 'heads' "
                         f"({out['heads']})")
    if kind.name == "lrn" and out["local_size"] % 2 == 0:
        raise ValueError(f"param 'local_size' must be odd, got {out['local_size']}")
    return out
