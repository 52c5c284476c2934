"""Decoder-only transformers: a network file's ``transformer:`` mapping expanded into layers.

A definition names its ``style`` (``gpt2``: learned positions; ``opt``: learned positions with
OPT's offset of 2 rows; ``llama``: rotary embeddings, no position table) and its sizes; every
field below is required except ``embed_dim`` (OPT-350m's narrower embedding, projected in and
out; default ``hidden``) and ``norm_position`` (``pre``, or ``post`` for OPT-350m: the norms
follow the residual adds and there is no final norm).

Layer names (block ``i`` = 0..layers-1): ``tokens``, ``embed``, ``[proj_in]``, ``blk{i}/ln1``,
``blk{i}/qkv``, ``[blk{i}/rope]``, ``blk{i}/scores``, ``blk{i}/probs``, ``blk{i}/context``
(naive attention) or ``blk{i}/attn`` (fused), ``blk{i}/proj``, ``blk{i}/res1``, ``blk{i}/ln2``,
``blk{i}/fc1``, ``blk{i}/act``, ``blk{i}/fc2``, ``blk{i}/res2``, ``[ln_f]``, ``[proj_out]``,
``lm_head``, ``loss``. :func:`split_name` parses a name into its block and the part after
``blk{i}/``; :func:`role_of` gives the layer's role (``Layer.role``).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from sst_cdma.model.attention import ATTENTION_FORMS

from .errors import WorkloadError

__all__ = ["STYLES", "ACTIVATIONS", "NORMS", "ATTENTIONS", "FIELDS", "split_name", "role_of",
           "expand_transformer", "TransformerConfig"]

STYLES = ("gpt2", "opt", "llama")
ACTIVATIONS = ("gelu", "relu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
ATTENTIONS = ATTENTION_FORMS
#: Required fields of a ``transformer:`` mapping and their types.
FIELDS: dict[str, type] = {
    "style": str, "layers": int, "hidden": int, "heads": int, "kv_heads": int, "ffn": int,
    "vocab": int, "positions": int, "seq_len": int, "activation": str, "norm": str,
    "attention": str, "tie_embeddings": bool, "bias": bool,
}
_OPTIONAL: dict[str, type] = {"embed_dim": int, "norm_position": str}
#: The most blocks a ``transformer:`` may have: the largest published decoders have 96 (GPT-3)
#: to 126 (Llama 3.1 405B); each block is some ten layers the simulator schedules one by one
MAX_LAYERS = 1024
#: Extra rows of OPT's learned position table (HF OPTLearnedPositionalEmbedding offset).
OPT_POSITION_OFFSET = 2

_BLOCK = re.compile(r"^blk(\d+)/(.+)$")
_ROLES = {
    "ln1": "norm", "ln2": "norm", "ln_f": "norm",
    "qkv": "attention", "rope": "attention", "scores": "attention", "probs": "attention",
    "context": "attention", "attn": "attention", "proj": "attention",
    "fc1": "ffn", "act": "ffn", "fc2": "ffn",
    "res1": "residual", "res2": "residual",
    "tokens": "embedding", "embed": "embedding", "proj_in": "embedding",
    "proj_out": "head", "lm_head": "head", "loss": "head",
}


def split_name(name: str) -> tuple[Optional[int], str]:
    """``"blk3/qkv"`` -> ``(3, "qkv")``; a name outside the blocks -> ``(None, name)``."""
    m = _BLOCK.match(name)
    if m:
        return int(m.group(1)), m.group(2)
    return None, name


def role_of(name: str) -> str:
    """The role of a transformer layer (``attention``, ``ffn``, ``norm``, ``residual``,
    ``embedding``, ``head``) from its name; '' for a name outside the convention."""
    return _ROLES.get(split_name(name)[1], "")


class TransformerConfig:
    """A validated ``transformer:`` mapping (``label`` names the file in errors); its
    attributes are the fields of ``FIELDS`` and ``_OPTIONAL``, with these types."""

    style: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    positions: int
    seq_len: int
    activation: str
    norm: str
    attention: str
    tie_embeddings: bool
    bias: bool
    embed_dim: int
    norm_position: str

    def __init__(self, doc: Any, label: str, seq_len: int = 0, attention: str = "") -> None:
        def fail(field: str, message: str) -> WorkloadError:
            return WorkloadError(f"transformer field '{field}': {message}", file=label)

        if not isinstance(doc, Mapping):
            raise WorkloadError("'transformer' must be a mapping", file=label)
        unknown = sorted(set(doc) - set(FIELDS) - set(_OPTIONAL))
        if unknown:
            raise WorkloadError(
                f"unknown transformer field(s) {', '.join(map(repr, unknown))} "
                f"(allowed: {', '.join(list(FIELDS) + list(_OPTIONAL))})", file=label)
        for field in FIELDS:
            if field not in doc:
                raise fail(field, "missing")
        values: dict[str, Any] = {}
        for field, kind in {**FIELDS, **_OPTIONAL}.items():
            if field not in doc:
                continue
            v = doc[field]
            if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise fail(field, f"must be a positive integer, got {v!r}")
            if kind is bool and not isinstance(v, bool):
                raise fail(field, f"must be true or false, got {v!r}")
            if kind is str and not isinstance(v, str):
                raise fail(field, f"must be a name, got {v!r}")
            values[field] = v
        if values["layers"] > MAX_LAYERS:
            raise fail("layers", f"{values['layers']} blocks is more than the {MAX_LAYERS} this "
                                 "simulator takes (the largest published decoders have 126)")
        if seq_len:
            values["seq_len"] = seq_len
        if attention:
            values["attention"] = attention
        values.setdefault("embed_dim", values["hidden"])
        values.setdefault("norm_position", "pre")
        for field, options in (("style", STYLES), ("activation", ACTIVATIONS),
                               ("norm", NORMS), ("attention", ATTENTIONS),
                               ("norm_position", ("pre", "post"))):
            if values[field] not in options:
                raise fail(field, f"unknown {field} {values[field]!r} (expected one of "
                                  f"{', '.join(options)})")
        if values["hidden"] % values["heads"]:
            raise fail("heads", f"{values['heads']} heads do not divide hidden "
                                f"{values['hidden']}")
        if values["heads"] % values["kv_heads"]:
            raise fail("kv_heads", f"{values['kv_heads']} kv_heads do not divide heads "
                                   f"{values['heads']}")
        if values["style"] != "llama" and values["seq_len"] > values["positions"]:
            raise fail("seq_len", f"sequence length {values['seq_len']} exceeds the "
                                  f"{values['positions']} learned positions")
        self.__dict__.update(values)

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def position_rows(self) -> int:
        """Rows of the learned position table (0 with rotary embeddings)."""
        if self.style == "llama":
            return 0
        return self.positions + (OPT_POSITION_OFFSET if self.style == "opt" else 0)


def _layer(name: str, kind: str, inputs: Any, params: Optional[dict] = None) -> dict:
    entry: dict[str, Any] = {"name": name, "kind": kind, "inputs": inputs}
    if params:
        entry["params"] = params
    return entry


def expand_transformer(cfg: TransformerConfig) -> list[dict]:
    """The layer entries (``{name, kind, inputs, params}``) of a transformer definition."""
    h, bias = cfg.hidden, cfg.bias
    norm = {"kind": cfg.norm}
    norm_params = {"bias": bias} if cfg.norm == "layernorm" else {}
    heads = {"heads": cfg.heads, "kv_heads": cfg.kv_heads}
    layers = [
        _layer("tokens", "data", [], {"shape": [cfg.seq_len]}),
        _layer("embed", "embedding", "tokens", {
            "vocab": cfg.vocab, "hidden": cfg.embed_dim, "positions": cfg.position_rows,
            "position_dim": h if cfg.embed_dim != h and cfg.position_rows else 0}),
    ]
    x = "embed"
    if cfg.embed_dim != h:
        layers.append(_layer("proj_in", "linear", x, {"num_output": h, "bias": False}))
        x = "proj_in"
    post = cfg.norm_position == "post"
    for i in range(cfg.layers):
        b = f"blk{i}/"
        if not post:
            layers.append(_layer(b + "ln1", norm["kind"], x, dict(norm_params)))
        qkv_in = x if post else b + "ln1"
        layers.append(_layer(b + "qkv", "linear", qkv_in,
                             {"num_output": h + 2 * cfg.kv_heads * cfg.head_dim, "bias": bias}))
        q = b + "qkv"
        if cfg.style == "llama":
            layers.append(_layer(b + "rope", "rope", q, dict(heads)))
            q = b + "rope"
        if cfg.attention == "naive":
            layers += [_layer(b + "scores", "attn_scores", q, dict(heads)),
                       _layer(b + "probs", "attn_softmax", b + "scores"),
                       _layer(b + "context", "attn_context", [b + "probs", q], dict(heads))]
            ctx = b + "context"
        else:
            kernel = {} if cfg.attention == "fused" else {"kernel": cfg.attention}
            layers.append(_layer(b + "attn", "flash_attention", q, {**heads, **kernel}))
            ctx = b + "attn"
        layers += [_layer(b + "proj", "linear", ctx, {"num_output": h, "bias": bias}),
                   _layer(b + "res1", "add", [x, b + "proj"])]
        if post:
            layers.append(_layer(b + "ln1", norm["kind"], b + "res1", dict(norm_params)))
            mid = b + "ln1"
        else:
            layers.append(_layer(b + "ln2", norm["kind"], b + "res1", dict(norm_params)))
            mid = b + "res1"
        width = 2 * cfg.ffn if cfg.activation == "swiglu" else cfg.ffn
        layers += [_layer(b + "fc1", "linear", mid if post else b + "ln2",
                          {"num_output": width, "bias": bias}),
                   _layer(b + "act", cfg.activation, b + "fc1"),
                   _layer(b + "fc2", "linear", b + "act", {"num_output": h, "bias": bias}),
                   _layer(b + "res2", "add", [mid, b + "fc2"])]
        x = b + "res2"
        if post:
            layers.append(_layer(b + "ln2", norm["kind"], x, dict(norm_params)))
            x = b + "ln2"
    if not post:
        layers.append(_layer("ln_f", norm["kind"], x, dict(norm_params)))
        x = "ln_f"
    if cfg.embed_dim != h:
        layers.append(_layer("proj_out", "linear", x, {"num_output": cfg.embed_dim,
                                                       "bias": False}))
        x = "proj_out"
    layers += [_layer("lm_head", "linear", x, {"num_output": cfg.vocab, "bias": False,
                                               "tied": cfg.tie_embeddings}),
               _layer("loss", "cross_entropy", "lm_head")]
    return layers
