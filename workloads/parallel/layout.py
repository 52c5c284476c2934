"""The parallel layout of one training job: tensor (tp), pipeline (pp) and data (dp) parallel
sizes, virtual pipeline stages, the pipeline schedule, the micro-batches, the ZeRO stage,
sequence parallelism and the split of the layers over the pipeline's stages.

:func:`make_layout` builds a :class:`ParallelLayout` from what a user gives (a GPU count or dp,
micro-batches or a global batch) and checks it against the model's shape
(:class:`ModelShape`); each bad input is refused with one line naming the params and their
numbers (:class:`LayoutError`). The checks are Megatron-LM's where it has one; each cites the
file (docs/parallel.md lists them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import WorkloadError

__all__ = ["SCHEDULES", "LayoutError", "ModelShape", "ParallelLayout", "make_layout"]

#: the pipeline schedules: all forwards then all backwards (GPipe), one forward one backward
#: (Megatron's non-interleaved schedule), interleaved 1F1B (virtual stages)
SCHEDULES = ("gpipe", "1f1b", "interleaved")


class LayoutError(WorkloadError):
    """A parallel layout that cannot run: one line naming the params and their numbers."""


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a transformer that the layout is checked against: ``layers`` blocks,
    ``heads`` attention heads, ``kv_heads`` key/value heads (grouped-query attention: fewer than
    ``heads``), ``hidden`` width, ``ffn`` width of the MLP and ``vocab`` size."""

    layers: int
    heads: int
    kv_heads: int
    hidden: int
    ffn: int
    vocab: int

    def __post_init__(self) -> None:
        _positive(layers=self.layers, heads=self.heads, kv_heads=self.kv_heads,
                  hidden=self.hidden, ffn=self.ffn, vocab=self.vocab)


@dataclass(frozen=True)
class ParallelLayout:
    """A checked layout (build it with :func:`make_layout`).

    ``tp`` x ``pp`` x ``dp`` GPUs; ``vpp`` model chunks per pipeline rank (1: no virtual
    stages); ``schedule`` one of :data:`SCHEDULES`; ``micro_batches`` per optimizer step on
    each data-parallel replica, of ``micro_batch_size`` samples each; ``zero`` the ZeRO stage
    (0 none, 1 optimizer states, 2 and gradients, 3 and weights sharded over dp);
    ``sequence_parallel`` Megatron's sequence parallelism over the tp group; ``stage_split``
    None (the layers split evenly) or the layer count of each virtual stage, in virtual-stage
    order (virtual stage ``c * pp + s`` is chunk ``c`` of pipeline rank ``s``)."""

    tp: int
    pp: int
    dp: int
    vpp: int = 1
    schedule: str = "1f1b"
    micro_batches: int = 1
    micro_batch_size: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    stage_split: Optional[tuple[int, ...]] = None

    @property
    def gpus(self) -> int:
        """The GPU count: tp x pp x dp."""
        return self.tp * self.pp * self.dp

    @property
    def virtual_stages(self) -> int:
        """The model chunks of the whole pipeline: pp x vpp."""
        return self.pp * self.vpp

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step: micro_batches x micro_batch_size x dp."""
        return self.micro_batches * self.micro_batch_size * self.dp

    def stage_sizes(self, layers: int) -> tuple[int, ...]:
        """The layer count of each virtual stage (virtual-stage order) for a model of
        ``layers`` blocks: the given split, or ``layers`` split evenly (checked by
        :func:`make_layout` to divide)."""
        if self.stage_split is not None:
            return self.stage_split
        return (layers // self.virtual_stages,) * self.virtual_stages


def _positive(**values: int) -> None:
    """Refuse a size that is not a positive integer (bools are not sizes)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LayoutError(f"{name} {value!r}: must be a positive integer")


def _data_parallel(tp: int, pp: int, dp: Optional[int], gpus: Optional[int]) -> int:
    """dp as given or derived from ``gpus``; tp x pp x dp must be the GPU count."""
    if gpus is not None:
        _positive(gpus=gpus)
    if dp is not None:
        _positive(dp=dp)
        if gpus is not None and tp * pp * dp != gpus:
            raise LayoutError(f"tp {tp} x pp {pp} x dp {dp} = {tp * pp * dp} GPUs, "
                              f"but gpus is {gpus}")
        return dp
    if gpus is None:
        return 1
    if gpus % (tp * pp):
        raise LayoutError(f"gpus {gpus} is not a multiple of tp {tp} x pp {pp} = {tp * pp}: "
                          "no dp fits")
    return gpus // (tp * pp)


def _micro_batches(micro_batches: Optional[int], global_batch: Optional[int],
                   micro_batch_size: int, dp: int) -> int:
    """micro_batches as given or derived from ``global_batch`` = micro_batches x
    micro_batch_size x dp (Megatron-LM megatron/core/num_microbatches_calculator.py refuses a
    global batch that micro_batch_size x dp does not divide)."""
    if micro_batches is not None:
        _positive(micro_batches=micro_batches)
    if global_batch is None:
        return 1 if micro_batches is None else micro_batches
    _positive(global_batch=global_batch)
    per_micro = micro_batch_size * dp
    if global_batch % per_micro:
        raise LayoutError(f"global_batch {global_batch} is not a multiple of micro_batch_size "
                          f"{micro_batch_size} x dp {dp} = {per_micro}")
    derived = global_batch // per_micro
    if micro_batches is not None and micro_batches != derived:
        raise LayoutError(f"global_batch {global_batch} is micro_batches {derived} of "
                          f"micro_batch_size {micro_batch_size} x dp {dp}, but micro_batches "
                          f"is {micro_batches}")
    return derived


def _check_tensor_parallel(shape: ModelShape, tp: int, sequence_parallel: bool) -> None:
    """tp must divide the heads, the KV heads and the FFN width (Megatron-LM
    megatron/core/transformer/transformer_config.py for the heads, megatron/core/
    tensor_parallel/layers.py's ColumnParallelLinear for the FFN); sequence parallelism needs
    tp > 1 (megatron/core/model_parallel_config.py raises "Cannot use sequence parallelism
    without tensor parallelism")."""
    for name, width in (("heads", shape.heads), ("kv_heads", shape.kv_heads),
                        ("ffn", shape.ffn)):
        if width % tp:
            raise LayoutError(f"tp {tp} does not divide the model's {name} {width}")
    if sequence_parallel and tp == 1:
        raise LayoutError("sequence_parallel needs tp > 1, but tp is 1")


def _check_schedule(schedule: str, pp: int, vpp: int, micro_batches: int) -> None:
    """The schedule is known; virtual stages only with the interleaved schedule, which needs
    vpp >= 2, pp >= 2 (megatron/core/parallel_state.py) and micro_batches a multiple of pp
    (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_
    interleaving: micro-batches go in groups of microbatch_group_size_per_vp_stage, pp by
    default, and a last group short of pp is refused)."""
    if schedule not in SCHEDULES:
        raise LayoutError(f"schedule {schedule!r}: not one of {', '.join(SCHEDULES)}")
    if schedule != "interleaved":
        if vpp != 1:
            raise LayoutError(f"vpp {vpp} needs schedule 'interleaved', but schedule is "
                              f"{schedule!r}")
        return
    if vpp < 2:
        raise LayoutError(f"schedule 'interleaved' needs vpp >= 2 model chunks per stage, "
                          f"but vpp is {vpp}")
    if pp < 2:
        raise LayoutError(f"schedule 'interleaved' needs pp >= 2, but pp is {pp}")
    if micro_batches % pp:
        raise LayoutError(f"schedule 'interleaved' needs micro_batches a multiple of pp {pp}, "
                          f"but micro_batches is {micro_batches}")


def _check_split(shape: ModelShape, pp: int, vpp: int,
                 stage_split: Optional[tuple[int, ...]]) -> Optional[tuple[int, ...]]:
    """pp at most the layers; the given split has one positive count per virtual stage and
    sums to the layers; without one, the layers divide evenly over pp x vpp virtual stages
    (megatron/core/transformer/transformer_block.py, get_num_layers_to_build, asserts it)."""
    stages = pp * vpp
    if pp > shape.layers:
        raise LayoutError(f"pp {pp} is larger than the model's layers {shape.layers}")
    if stage_split is None:
        if shape.layers % stages:
            raise LayoutError(f"the model's layers {shape.layers} do not split evenly over pp "
                              f"{pp} x vpp {vpp} = {stages} virtual stages: give stage_split")
        return None
    split = tuple(stage_split)
    if len(split) != stages:
        raise LayoutError(f"stage_split has {len(split)} entries, but pp {pp} x vpp {vpp} = "
                          f"{stages} virtual stages")
    for k, count in enumerate(split):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise LayoutError(f"stage_split entry {k} is {count!r}: every virtual stage needs "
                              "at least one layer")
    if sum(split) != shape.layers:
        raise LayoutError(f"stage_split {list(split)} sums to {sum(split)}, but the model has "
                          f"layers {shape.layers}")
    return split


def make_layout(shape: ModelShape, *, tp: int = 1, pp: int = 1, dp: Optional[int] = None,
                gpus: Optional[int] = None, vpp: int = 1, schedule: str = "1f1b",
                micro_batches: Optional[int] = None, global_batch: Optional[int] = None,
                micro_batch_size: int = 1, zero: int = 0, sequence_parallel: bool = False,
                stage_split: Optional[tuple[int, ...]] = None) -> ParallelLayout:
    """A checked :class:`ParallelLayout` for a model of ``shape``.

    dp is derived from ``gpus`` when omitted (1 when both are); micro_batches from
    ``global_batch`` = micro_batches x micro_batch_size x dp when omitted (1 when both are);
    given both, they must agree. Raises :class:`LayoutError` on the first bad input."""
    _positive(tp=tp, pp=pp, vpp=vpp, micro_batch_size=micro_batch_size)
    dp = _data_parallel(tp, pp, dp, gpus)
    m = _micro_batches(micro_batches, global_batch, micro_batch_size, dp)
    if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
        raise LayoutError(f"zero {zero!r}: the ZeRO stage is 0, 1, 2 or 3")
    _check_tensor_parallel(shape, tp, sequence_parallel)
    _check_schedule(schedule, pp, vpp, m)
    split = _check_split(shape, pp, vpp, stage_split)
    return ParallelLayout(tp=tp, pp=pp, dp=dp, vpp=vpp, schedule=schedule, micro_batches=m,
                          micro_batch_size=micro_batch_size, zero=zero,
                          sequence_parallel=bool(sequence_parallel), stage_split=split)
