"""Tensor and sequence parallelism (Megatron-LM) of a decoder-only transformer: one rank's shard.

:func:`shard_transformer` takes a transformer :class:`~workloads.network.Network` (the layers
:func:`~workloads.transformer.expand_transformer` names) and a tensor-parallel size ``tp`` and
returns the network one tensor-parallel rank runs (every rank's is the same), as a plain
:class:`Network` the planner, the render and the pricing take as they take any other:

* ``qkv`` and ``fc1`` are column-parallel (their output features / tp: heads / tp and
  kv_heads / tp of the fused QKV; the gate and the up halves of a SwiGLU ``fc1`` each / tp),
  ``proj`` and ``fc2`` row-parallel (their input features / tp; their bias whole, added after
  the reduction), the attention core on heads / tp;
* the embedding and the LM head are vocab-parallel (the vocabulary padded as Megatron pads it,
  to a multiple of ``make_vocab_size_divisible_by`` x tp, then / tp), the cross entropy on the
  rank's vocab shard;
* norms and residual adds run on the whole sequence, or with ``sequence_parallel`` on sequence
  / tp: ``qkv``, ``fc1`` and ``lm_head`` all-gather their input's sequence shards
  (``sequence_gather``), ``proj``, ``fc2`` and the embedding reduce-scatter their output
  (``sequence_scatter``).

:meth:`TensorShard.comm_ops` lists the collectives a rank's iteration runs over its
tensor-parallel group, as :class:`CommOp` records (kind, group, bytes, the layer after which,
the phase) for the partitioner to turn into stream ops; :func:`saved_activations` sums what a
rank keeps for the backward pass per block from the simulator's own tensors, and
:func:`korthikanti_rows` sets it beside Korthikanti et al. (2022)'s accounting term by term.
``python -m sst_cdma.tools.tensor_parallel --table`` prints the comparison docs/tensor_parallel.md
shows. Sources: docs/tensor_parallel.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Collection, Mapping, Optional

from ..dtypes import itemsize
from ..errors import WorkloadError
from ..kinds import KINDS, normalize_params
from ..loader import build_network, load_network
from ..network import Layer, Network, TensorInfo
from ..transformer import split_name

__all__ = ["CommOp", "COMM_KINDS", "COMM_PHASES", "TP_GROUP", "MAKE_VOCAB_SIZE_DIVISIBLE_BY",
           "CROSS_ENTROPY_ALL_REDUCES", "RECOMPUTE", "TransformerDims", "TensorShard",
           "transformer_dims", "padded_vocab", "shard_transformer", "saved_activations",
           "block_input", "PaperTerm", "PAPER_TERMS", "KorthikantiRow", "korthikanti_rows",
           "GPT3", "gpt3_like", "comparison_tables"]

#: The collectives a tensor-parallel rank runs (NCCL's names, snake case).
COMM_KINDS = ("all_reduce", "reduce_scatter", "all_gather")
#: When a :class:`CommOp` runs: after a layer's forward or backward kernel, or once a step
#: before the optimizer (``update``), the phases of the stream (workloads/stream_schema.py).
COMM_PHASES = ("forward", "backward", "update")
#: The process group every op here names.
TP_GROUP = "tp"
#: Megatron-LM's default ``make_vocab_size_divisible_by`` (megatron/training/arguments.py).
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128
#: All-reduces of Megatron's vocab-parallel cross entropy per forward pass, each of one float32
#: per token: the logits' maximum, the target's logit, the sum of the exponentials
#: (megatron/core/tensor_parallel/cross_entropy.py, ``_VocabParallelCrossEntropy.forward``).
CROSS_ENTROPY_ALL_REDUCES = 3
#: Float32 bytes of each of those values per token.
_FP32 = 4
#: What a block keeps for its backward pass: everything, all but the attention core's
#: quadratic tensors (selective recomputation), or its input alone (full recomputation).
RECOMPUTE = ("none", "selective", "full")
#: The parts of a block that form the attention core (what selective recomputation redoes).
_CORE = frozenset({"scores", "probs", "context", "attn"})
_HEADED = frozenset({"rope", "attn_scores", "attn_context", "flash_attention"})


@dataclass(frozen=True)
class CommOp:
    """One collective of a tensor-parallel rank's iteration.

    ``kind``: one of :data:`COMM_KINDS`; ``group``: the process group (``"tp"``); ``bytes``:
    the whole buffer, as nccl-tests count a collective's size (the all-reduced tensor, the
    reduce-scatter's input, the all-gather's output; each rank sends or receives
    (tp - 1) / tp of it per step of a ring); ``after_layer``: the layer whose kernel of
    ``phase`` it follows (forward: that layer's forward kernel; backward: its backward kernel,
    the backward pass running the layers in reverse; update: the last backward kernel of the
    step, once before the optimizer); ``purpose``: what it is, in Megatron's and Korthikanti's
    words."""

    kind: str
    group: str
    bytes: int
    after_layer: str
    phase: str
    purpose: str = ""

    def __post_init__(self) -> None:
        if self.kind not in COMM_KINDS or self.phase not in COMM_PHASES:
            raise ValueError(f"CommOp kind {self.kind!r} / phase {self.phase!r} (expected one "
                             f"of {', '.join(COMM_KINDS)} / {', '.join(COMM_PHASES)})")


@dataclass(frozen=True)
class TransformerDims:
    """The sizes tensor parallelism splits, read off an expanded transformer: ``ffn`` is the
    FFN width (a SwiGLU ``fc1`` is twice as wide: gate and up), ``gated`` for SwiGLU."""

    blocks: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    gated: bool
    vocab: int
    seq_len: int
    positions: int


def transformer_dims(network: Network) -> TransformerDims:
    """The :class:`TransformerDims` of a network :func:`~workloads.transformer.expand_transformer`
    built; a network of other layers (or OPT-350m's projected embedding) is refused."""
    names = {layer.name for layer in network.layers}
    blocks = sorted({b for b, _ in map(split_name, names) if b is not None})
    missing = [n for n in ("tokens", "embed", "lm_head", "loss", "blk0/qkv", "blk0/fc1",
                           "blk0/act") if n not in names]
    attention = next((layer for layer in network.layers
                      if layer.kind in _HEADED and split_name(layer.name)[0] == 0), None)
    if attention is None:
        missing.append("attention in blk0")
    if missing or not blocks:
        raise WorkloadError(f"tensor parallelism shards a transformer (expand_transformer's "
                            f"layers); this network has no {', '.join(missing) or 'blocks'}",
                            file=network.file)
    if "proj_in" in names or "proj_out" in names:
        raise WorkloadError("tensor parallelism of a projected embedding (proj_in/proj_out, "
                            "embed_dim != hidden) is not modelled", file=network.file)
    assert attention is not None
    embed = network.layer("embed").params
    gated = network.layer("blk0/act").kind == "swiglu"
    width = network.layer("blk0/fc1").params["num_output"]
    return TransformerDims(len(blocks), embed["hidden"], attention.params["heads"],
                           attention.params["kv_heads"], width // 2 if gated else width, gated,
                           embed["vocab"], network.sample_shape("tokens")[0],
                           embed["positions"])


def padded_vocab(vocab: int, tp: int, divisible_by: int = MAKE_VOCAB_SIZE_DIVISIBLE_BY) -> int:
    """Megatron's padded vocabulary: ``vocab`` rounded up to a multiple of ``divisible_by`` x
    ``tp`` (megatron/training/vocab_utils.py, ``calculate_padded_vocab_size``; formerly
    megatron/training/tokenizer/tokenizer.py, ``_vocab_size_with_padding``)."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WorkloadError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_divides(dims: TransformerDims, tp: int, sequence_parallel: bool, file: str) -> None:
    """Refuse a ``tp`` that does not divide what Megatron splits (heads and query groups:
    megatron/core/transformer/transformer_config.py; the FFN width: ColumnParallelLinear's
    ``divide``; the sequence, with sequence parallelism: mappings.py's first-dimension split)."""
    splits = [("attention heads", dims.heads), ("KV heads", dims.kv_heads),
              ("FFN width", dims.ffn)]
    if sequence_parallel:
        splits.append(("tokens of the sequence (sequence parallelism)", dims.seq_len))
    for what, number in splits:
        if number % tp:
            raise WorkloadError(f"tp {tp} does not divide the {number} {what}", file=file)


def _shard_params(layer: Layer, tp: int, sp: int, vocab_shard: int) -> Mapping[str, object]:
    """``layer``'s params on one rank (``sp``: tp with sequence parallelism, else 1)."""
    part = split_name(layer.name)[1]
    params = dict(layer.params)
    if layer.kind in _HEADED:
        params.update(heads=params["heads"] // tp, kv_heads=params["kv_heads"] // tp)
    elif part == "embed":
        params.update(vocab=vocab_shard, sequence_scatter=sp)
    elif part in ("qkv", "fc1"):      # column-parallel: output features / tp, bias with them
        params.update(num_output=params["num_output"] // tp, sequence_gather=sp)
    elif part in ("proj", "fc2"):     # row-parallel: the input arrives split; bias whole
        params.update(sequence_scatter=sp)
    elif part == "lm_head":           # column-parallel over the (padded) vocabulary
        params.update(num_output=vocab_shard, sequence_gather=sp)
    else:
        return layer.params
    return normalize_params(KINDS[layer.kind], params)


@dataclass(frozen=True)
class TensorShard:
    """One tensor-parallel rank's shard of a transformer: ``network`` (what the rank runs),
    ``whole`` (the network it was cut from), ``tp``, ``sequence_parallel`` and the padded
    vocabulary (``padded_vocab``; ``padded_vocab // tp`` rows on each rank)."""

    network: Network
    whole: Network
    tp: int
    sequence_parallel: bool
    padded_vocab: int
    dims: TransformerDims

    def replicated_params(self) -> int:
        """Parameters every rank holds whole (per rank): the norms' scales and shifts, the
        row-parallel layers' biases (added after the reduction) and the learned position
        table. Each rank's count x tp is the whole's plus (tp - 1) x these, plus the padded
        vocabulary's rows."""
        return self._norms_and_biases(None) + self.dims.positions * self.dims.hidden

    def _norms_and_biases(self, layers: Optional[Collection[str]]) -> int:
        """The norms' parameters and the row-parallel layers' biases of ``layers`` (None:
        every layer)."""
        total = 0
        for info in self.network.infer(1):
            if layers is not None and info.name not in layers:
                continue
            part = split_name(info.name)[1]
            if info.kind in ("layernorm", "rmsnorm"):
                total += info.params
            elif part in ("proj", "fc2") and self.network.layer(info.name).params["bias"]:
                total += info.shape[-1]
        return total

    def sequence_parallel_params(self, layers: Optional[Collection[str]] = None) -> int:
        """With sequence parallelism, the parameters whose gradients each rank computes from
        its sequence shard alone, so the step all-reduces them over the group (Megatron's
        ``_allreduce_non_tensor_model_parallel_grads``: the norms and the row-parallel
        biases), of ``layers`` (None: the whole network's; a pipeline stage all-reduces its
        own layers'); 0 without."""
        if not self.sequence_parallel:
            return 0
        return self._norms_and_biases(layers)

    def comm_ops(self, batch: int, dtype: str) -> list[CommOp]:
        """The collectives one rank's iteration of ``batch`` samples runs over the group: the
        forward pass's in layer order, then the backward pass's in its order, then the
        step's (see :class:`CommOp`). ``tp`` 1 runs none."""
        if self.tp == 1:
            return []
        comm = _Comms(self, self.network.tensors(batch, dtype))
        for block in range(self.dims.blocks):
            comm.block(f"blk{block}/")
        comm.ends(batch)
        if self.sequence_parallel:
            comm.add("all_reduce", self.sequence_parallel_params() * itemsize(dtype),
                     "embed", "update", "sum the norms' and row-parallel biases' gradients "
                     "of the sequence shards (finalize_model_grads)")
        return comm.ordered()


class _Comms:
    """The :class:`CommOp` list of a shard being built (see :meth:`TensorShard.comm_ops`)."""

    def __init__(self, shard: TensorShard, tensors: Mapping[str, TensorInfo]) -> None:
        self.net = shard.network
        self.tp = shard.tp
        self.sp = shard.sequence_parallel
        self.tensors = tensors
        self.ops: list[CommOp] = []

    def add(self, kind: str, nbytes: int, after: str, phase: str, purpose: str) -> None:
        """Append one op."""
        self.ops.append(CommOp(kind, TP_GROUP, nbytes, after, phase, purpose))

    def whole(self, tensor: str) -> int:
        """Bytes of ``tensor`` over the whole sequence (its shard x tp with sequence
        parallelism)."""
        return self.tensors[tensor].bytes * (self.tp if self.sp else 1)

    def next_layer(self, name: str) -> str:
        """The layer after ``name`` in forward order: its backward kernel runs just before
        ``name``'s."""
        return self.net.layers[self.net.index(name) + 1].name

    def pair(self, column: str, row: str) -> None:
        """The collectives around a column-parallel layer and the row-parallel one after it:
        Megatron's f and f-bar (all-reduces), or g and g-bar with sequence parallelism."""
        x = self.net.layer(column).input_tensors[0]
        x_bytes, y_bytes = self.whole(x), self.whole(row)
        if not self.sp:
            self.add("all_reduce", y_bytes, row, "forward",
                     f"f-bar: sum {row}'s partial outputs")
            self.add("all_reduce", x_bytes, column, "backward",
                     f"f: sum the partial gradients of {column}'s input")
            return
        self.add("all_gather", x_bytes, self.net.layer(column).inputs[0], "forward",
                 f"g: gather the sequence of {column}'s input")
        self.add("reduce_scatter", y_bytes, row, "forward",
                 f"g-bar: sum {row}'s partial outputs onto the sequence shards")
        self.add("all_gather", y_bytes, self.next_layer(row), "backward",
                 f"g-bar's conjugate: gather the gradient of {row}'s output")
        self.add("all_gather", x_bytes, self.next_layer(column), "backward",
                 f"gather {column}'s saved input shard again for its weight gradient")
        self.add("reduce_scatter", x_bytes, column, "backward",
                 f"g's conjugate: sum {column}'s input gradient onto the sequence shards")

    def block(self, b: str) -> None:
        """A transformer block's two pairs: attention, then the FFN."""
        self.pair(b + "qkv", b + "proj")
        self.pair(b + "fc1", b + "fc2")

    def ends(self, batch: int) -> None:
        """The vocab-parallel embedding, LM head and cross entropy."""
        embed, head = self.whole("embed"), self.whole(self.net.layer("lm_head").input_tensors[0])
        if not self.sp or self.net.layer("embed").params["positions"]:
            self.add("all_reduce", embed, "embed", "forward",
                     "sum the vocab shards' embeddings (VocabParallelEmbedding)")
        else:
            self.add("reduce_scatter", embed, "embed", "forward",
                     "sum the vocab shards' embeddings onto the sequence shards")
        if self.sp:
            self.add("all_gather", embed, self.next_layer("embed"), "backward",
                     "gather the gradient of the embedding's sequence shards")
            self.pair_head(head)
        else:
            self.add("all_reduce", head, "lm_head", "backward",
                     "f: sum the partial gradients of lm_head's input")
        tokens = batch * self.net.sample_shape("tokens")[0]
        for value in ("the logits' maximum", "the target's logit", "the sum of exponentials"):
            self.add("all_reduce", tokens * _FP32, "loss", "forward",
                     f"vocab-parallel cross entropy: {value} per token (float32)")

    def pair_head(self, head: int) -> None:
        """The LM head with sequence parallelism: a column-parallel GEMM gathering its
        input."""
        feeder = self.net.layer("lm_head").inputs[0]
        self.add("all_gather", head, feeder, "forward", "g: gather the sequence of lm_head's "
                 "input")
        self.add("all_gather", head, "loss", "backward",
                 "gather lm_head's saved input shard again for its weight gradient")
        self.add("reduce_scatter", head, "lm_head", "backward",
                 "g's conjugate: sum lm_head's input gradient onto the sequence shards")

    def ordered(self) -> list[CommOp]:
        """The ops in the order they run: forward by layer, backward in reverse layer
        order, then the update's."""
        rank = {phase: i for i, phase in enumerate(COMM_PHASES)}

        def key(item: tuple[int, CommOp]) -> tuple[int, int, int]:
            n, op = item
            at = self.net.index(op.after_layer)
            return rank[op.phase], -at if op.phase == "backward" else at, n

        return [op for _, op in sorted(enumerate(self.ops), key=key)]


def shard_transformer(network: Network, tp: int, sequence_parallel: bool = False,
                      make_vocab_size_divisible_by: int = MAKE_VOCAB_SIZE_DIVISIBLE_BY
                      ) -> TensorShard:
    """One tensor-parallel rank's shard of the transformer ``network`` over ``tp`` ranks (see
    the module's docstring). Raises :class:`WorkloadError` naming tp and the number it does not
    divide."""
    tp = _positive("tp", tp)
    divisible_by = _positive("make_vocab_size_divisible_by", make_vocab_size_divisible_by)
    dims = transformer_dims(network)
    _check_divides(dims, tp, sequence_parallel, network.file)
    vocab = padded_vocab(dims.vocab, tp, divisible_by)
    sp = tp if sequence_parallel else 1
    layers = [replace(layer, params=_shard_params(layer, tp, sp, vocab // tp))
              for layer in network.layers]
    suffix = f"-tp{tp}" + ("-sp" if sequence_parallel else "")
    shard = Network(network.name + suffix, layers, file=network.file,
                    description=network.description, source=network.source)
    return TensorShard(shard, network, tp, sequence_parallel, vocab, dims)


# -- activations ----------------------------------------------------------------------------

def block_input(network: Network, block: int) -> list[str]:
    """The tensors block ``block`` reads that it did not make (what full recomputation keeps:
    the block's input)."""
    prefix = f"blk{block}/"
    made = {layer.tensor for layer in network.layers if layer.name.startswith(prefix)}
    return list(dict.fromkeys(t for layer in network.layers if layer.name.startswith(prefix)
                              for t in layer.input_tensors if t not in made))


def saved_activations(network: Network, batch: int, dtype: str, recompute: str = "none"
                      ) -> dict[int, dict[str, int]]:
    """Per transformer block, the tensors a rank keeps for the backward pass and their bytes,
    from the simulator's own :class:`~workloads.network.TensorInfo` (what the planner counts:
    a tensor some backward kernel reads, charged to the first block whose backward reads it).
    ``recompute``: ``none``; ``selective`` leaves out the tensors the attention core makes for
    itself alone (the naive attention's probabilities); ``full`` keeps each block's input
    alone."""
    if recompute not in RECOMPUTE:
        raise WorkloadError(f"recompute must be one of {', '.join(RECOMPUTE)}, got "
                            f"{recompute!r}")
    tensors = network.tensors(batch, dtype)
    owner: dict[str, int] = {}
    readers: dict[str, set[str]] = {}
    for info in network.infer(batch, dtype):
        block, part = split_name(info.name)
        if block is not None:
            for t in info.bwd_needs:
                owner.setdefault(t, block)
                readers.setdefault(t, set()).add(part)
    out: dict[int, dict[str, int]] = {b: {} for b in sorted(set(owner.values()))}
    for block in out:
        if recompute == "full":
            out[block] = {t: tensors[t].bytes for t in block_input(network, block)}
    if recompute == "full":
        return out
    for t, block in owner.items():
        made_by = split_name(tensors[t].producer)[1]
        if recompute == "selective" and made_by in _CORE and readers[t] <= _CORE:
            continue
        out[block][t] = tensors[t].bytes
    return out


@dataclass(frozen=True)
class PaperTerm:
    """One term of Korthikanti et al. (2022), section 4.1: ``sbh`` x s b h plus ``as2b`` x
    a s^2 b bytes (16-bit activations, 1-byte dropout masks); ``split``: divided by t under
    tensor parallelism alone (else only with sequence parallelism too); ``core``: left out by
    selective recomputation; ``part``: the block layer whose output tensor the simulator keeps
    for it (``input``: the block's input), '' where the simulator keeps none."""

    name: str
    sbh: int
    as2b: int
    split: bool
    core: bool
    part: str


#: Korthikanti et al. 2022, section 4.1 (Equation 1): attention block 11sbh + 5as^2b, MLP
#: 19sbh, layer norms 4sbh. The paper's Q and K (4sbh) and V (2sbh) are one fused tensor here.
PAPER_TERMS = (
    PaperTerm("layer-norm 1 input", 2, 0, False, False, "input"),
    PaperTerm("Q, K, V shared input", 2, 0, False, False, "ln1"),
    PaperTerm("Q and K (4sbh), V (2sbh)", 6, 0, True, False, "qkv"),
    PaperTerm("softmax output", 0, 2, True, True, "probs"),
    PaperTerm("softmax dropout mask", 0, 1, True, True, ""),
    PaperTerm("softmax dropout output", 0, 2, True, True, ""),
    PaperTerm("linear projection input", 2, 0, True, False, "context"),
    PaperTerm("attention dropout mask", 1, 0, False, False, ""),
    PaperTerm("layer-norm 2 input", 2, 0, False, False, "res1"),
    PaperTerm("h->4h linear input", 2, 0, False, False, "ln2"),
    PaperTerm("GeLU input", 8, 0, True, False, "fc1"),
    PaperTerm("4h->h linear input", 8, 0, True, False, "act"),
    PaperTerm("MLP dropout mask", 1, 0, False, False, ""),
)


@dataclass(frozen=True)
class KorthikantiRow:
    """One term beside the simulator: the paper's bytes and the simulator's (and the tensor
    holding them, '' for none) for one rank and one block."""

    term: str
    paper: int
    simulator: int
    tensor: str


def _part_tensor(network: Network, block: int, part: str) -> str:
    """The tensor the simulator keeps for a :class:`PaperTerm`'s ``part`` of ``block``."""
    b = f"blk{block}/"
    if part == "input":
        return block_input(network, block)[0]
    names = {layer.name for layer in network.layers}
    if part == "qkv" and b + "rope" in names:
        return b + "rope"
    if part == "context" and b + "attn" in names:
        return b + "attn"
    return network.layer(b + part).tensor if b + part in names else ""


def korthikanti_rows(shard: TensorShard, batch: int, dtype: str, recompute: str = "none",
                     block: int = 0) -> list[KorthikantiRow]:
    """Korthikanti et al.'s terms for one rank of ``shard`` (t = its tp; sequence parallel or
    not; ``recompute`` none, selective or full: Table 2) beside the bytes the simulator keeps
    for the same tensors in block ``block`` (:func:`saved_activations`)."""
    d, t = shard.dims, shard.tp
    saved = saved_activations(shard.network, batch, dtype, recompute)[block]
    sbh = d.seq_len * batch * d.hidden
    as2b = d.heads * d.seq_len * d.seq_len * batch
    if recompute == "full":  # Table 2: the layer's input, 2sbh
        tensor = block_input(shard.network, block)[0]
        return [KorthikantiRow("transformer layer input", 2 * sbh, saved[tensor], tensor)]
    rows = []
    for term in PAPER_TERMS:
        if recompute == "selective" and term.core:
            paper = 0
        else:
            paper = term.sbh * sbh + term.as2b * as2b
            paper = paper // t if term.split or shard.sequence_parallel else paper
        tensor = _part_tensor(shard.network, block, term.part) if term.part else ""
        rows.append(KorthikantiRow(term.name, paper, saved.get(tensor, 0), tensor))
    return rows


# -- the comparison docs/tensor_parallel.md shows -----------------------------------------

#: GPT-3 175B as Korthikanti et al. evaluate it (Table 3 and section 6: a = 96, h = 12288,
#: s = 2048, v = 51200, t = 8, micro-batch 1); two blocks are enough for per-block figures.
GPT3 = {"style": "gpt2", "layers": 2, "hidden": 12288, "heads": 96, "kv_heads": 96,
        "ffn": 4 * 12288, "vocab": 51200, "positions": 2048, "seq_len": 2048,
        "activation": "gelu", "norm": "layernorm", "attention": "naive",
        "tie_embeddings": True, "bias": True}
#: The tensor-parallel size, micro-batch and dtype of the comparison.
TABLE_TP, TABLE_BATCH, TABLE_DTYPE = 8, 1, "float16"


def gpt3_like(attention: str = "naive") -> Network:
    """The GPT-3 175B shape of :data:`GPT3` (two blocks) with ``attention`` naive or
    fused."""
    return build_network({"name": "gpt3_like", "transformer": {**GPT3, "attention": attention}},
                         "gpt3_like")


def _coef(nbytes: int, sbh: int) -> str:
    """``nbytes`` in units of s b h, exact: a decimal where it ends, else a fraction."""
    value = Fraction(nbytes, sbh)
    rest = value.denominator
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
    if rest != 1:
        return f"{value.numerator}/{value.denominator}"
    return format(Decimal(value.numerator) / Decimal(value.denominator), "f")


_CONFIGS = (  # label, paper formula (Table 2), tp, sequence parallel, recompute
    ("no parallelism", "34 + 5as/h", 1, False, "none"),
    ("tensor parallel", "10 + 24/t + 5as/(ht)", TABLE_TP, False, "none"),
    ("tensor + sequence parallel", "34/t + 5as/(ht)", TABLE_TP, True, "none"),
    ("tensor parallel + selective recomputation", "10 + 24/t", TABLE_TP, False, "selective"),
    ("tensor + sequence parallel + selective recomputation", "34/t", TABLE_TP, True,
     "selective"),
    ("full recomputation", "2", TABLE_TP, False, "full"),
    ("full recomputation + sequence parallel", "2", TABLE_TP, True, "full"),
)


def _summary(network: Network, label: str) -> list[str]:
    """Markdown rows: each configuration's per-block total, the paper's and the simulator's,
    in s b h units, and which terms differ."""
    lines = [f"| {label}: configuration | paper (Table 2) | paper | simulator | difference | "
             "terms that differ |", "|---|---|---:|---:|---:|---|"]
    for name, formula, tp, sp, recompute in _CONFIGS:
        shard = shard_transformer(network, tp, sp)
        rows = korthikanti_rows(shard, TABLE_BATCH, TABLE_DTYPE, recompute)
        sbh = shard.dims.seq_len * TABLE_BATCH * shard.dims.hidden
        paper, sim = sum(r.paper for r in rows), sum(r.simulator for r in rows)
        differ = ", ".join(f"{r.term} ({_coef(r.paper - r.simulator, sbh)})"
                           for r in rows if r.paper != r.simulator) or "none"
        lines.append(f"| {name} | sbh({formula}) | {_coef(paper, sbh)} | {_coef(sim, sbh)} | "
                     f"{_coef(paper - sim, sbh)} | {differ} |")
    return lines


def _terms(network: Network, sp: bool) -> list[str]:
    """Markdown rows: one rank's terms at :data:`TABLE_TP`, in s b h units."""
    shard = shard_transformer(network, TABLE_TP, sp)
    sbh = shard.dims.seq_len * TABLE_BATCH * shard.dims.hidden
    lines = [f"| term ({'tensor + sequence' if sp else 'tensor'} parallel, t = {TABLE_TP}) | "
             "paper | simulator | simulator's tensor |", "|---|---:|---:|---|"]
    for r in korthikanti_rows(shard, TABLE_BATCH, TABLE_DTYPE):
        lines.append(f"| {r.term} | {_coef(r.paper, sbh)} | {_coef(r.simulator, sbh)} | "
                     f"{r.tensor or 'none (not modelled)'} |")
    return lines


def comparison_tables() -> str:
    """The markdown tables of docs/tensor_parallel.md: per block and rank, in units of
    s b h bytes, Korthikanti et al.'s terms beside the simulator's tensors for the GPT-3 175B
    shape (naive attention, then fused) and LLaMA-7B."""
    llama = load_network("llama_7b")
    parts = [_summary(gpt3_like("naive"), "GPT-3 175B, naive attention"),
             _terms(gpt3_like("naive"), False), _terms(gpt3_like("naive"), True),
             _summary(gpt3_like("fused"), "GPT-3 175B, fused attention"),
             _summary(llama, "LLaMA-7B")]
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
