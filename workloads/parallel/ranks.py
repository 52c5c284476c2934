"""Ranks of a parallel layout: each global rank's (tp, pp, dp) coordinates, the process groups
of each kind, the layers each pipeline rank holds and the order it runs them in.

Rank order is Megatron-LM's default (megatron/core/parallel_state.py,
``initialize_model_parallel(order="tp-cp-ep-dp-pp")`` with no context or expert parallelism,
``generate_masked_orthogonal_rank_groups``): tp varies fastest, then dp, then pp::

    rank = tp_rank + dp_rank * tp + pp_rank * tp * dp

A group of one kind holds the ranks that differ only in that coordinate; groups are numbered
as Megatron enumerates them (by the other coordinates, the faster one first). The embedding
group of each pipeline is its first and last rank (``default_embedding_ranks``; the first alone
when pp is 1). Layers: virtual stage ``c * pp + s`` is chunk ``c`` of pipeline rank ``s`` and
holds the next block of layers (megatron/core/transformer/transformer_layer.py,
``get_transformer_layer_offset``); the embedding is on virtual stage 0 and the LM head and loss
on the last (megatron/training/training.py builds ``pre_process`` on the first pipeline rank's
first chunk and ``post_process`` on the last rank's last chunk).

Everything per stage (layers, order) is built once per pipeline rank and shared by the
tp x dp ranks of that stage; the group tables hold each rank once per kind: O(ranks)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Iterator, Optional

from .layout import LayoutError, ModelShape, ParallelLayout
from .pipeline import Order, stage_order, virtual_stage

__all__ = ["Coords", "ProcessGroups", "ChunkLayers", "StagePlan", "RankPlan", "ParallelPlan",
           "rank_of", "coords_of", "process_groups", "stage_plans"]

#: the ranks of one process group, in rank order
Group = tuple[int, ...]


@dataclass(frozen=True)
class Coords:
    """A rank's place in the layout: its index in its tp, pp and dp groups."""

    tp: int
    pp: int
    dp: int


def rank_of(layout: ParallelLayout, coords: Coords) -> int:
    """The global rank at ``coords`` (tp fastest, then dp, then pp)."""
    if not (0 <= coords.tp < layout.tp and 0 <= coords.pp < layout.pp
            and 0 <= coords.dp < layout.dp):
        raise LayoutError(f"coordinates tp {coords.tp}, pp {coords.pp}, dp {coords.dp} lie "
                          f"outside tp {layout.tp} x pp {layout.pp} x dp {layout.dp}")
    return coords.tp + coords.dp * layout.tp + coords.pp * layout.tp * layout.dp


def coords_of(layout: ParallelLayout, rank: int) -> Coords:
    """The coordinates of global rank ``rank``."""
    if not 0 <= rank < layout.gpus:
        raise LayoutError(f"rank {rank} is not one of the layout's {layout.gpus} GPUs")
    return Coords(tp=rank % layout.tp, dp=rank // layout.tp % layout.dp,
                  pp=rank // (layout.tp * layout.dp))


@dataclass(frozen=True)
class ProcessGroups:
    """Every process group of a layout, by kind, numbered as Megatron-LM enumerates them:
    ``tp[dp_rank + pp_rank * dp]``, ``dp[tp_rank + pp_rank * tp]``,
    ``pp[tp_rank + dp_rank * tp]`` and ``embedding[i]``, the first and last rank of
    ``pp[i]``."""

    tp: tuple[Group, ...]
    dp: tuple[Group, ...]
    pp: tuple[Group, ...]
    embedding: tuple[Group, ...]


def process_groups(layout: ParallelLayout) -> ProcessGroups:
    """The group tables of ``layout``: each rank once in each kind."""
    t, d, p = layout.tp, layout.dp, layout.pp
    tp = tuple(tuple(range(i * t, (i + 1) * t)) for i in range(d * p))
    dp = tuple(tuple(x + k * t + y * t * d for k in range(d)) for y in range(p) for x in range(t))
    pp = tuple(tuple(x + y * t + k * t * d for k in range(p)) for y in range(d) for x in range(t))
    embedding = tuple((g[0], g[-1]) if len(g) > 1 else (g[0],) for g in pp)
    return ProcessGroups(tp=tp, dp=dp, pp=pp, embedding=embedding)


@dataclass(frozen=True)
class ChunkLayers:
    """Model chunk ``chunk`` of a pipeline rank: virtual stage ``virtual_stage``, the
    transformer blocks ``layers`` (indices into the model's), and whether it holds the
    embedding (the first virtual stage) and the LM head with the loss (the last)."""

    chunk: int
    virtual_stage: int
    layers: range
    embedding: bool
    head: bool


@dataclass(frozen=True)
class StagePlan:
    """What every rank of pipeline rank ``stage`` shares: its chunks (by chunk index) and the
    order of its passes."""

    stage: int
    chunks: tuple[ChunkLayers, ...]
    order: Order
    is_first: bool
    is_last: bool


def stage_plans(layout: ParallelLayout, layers: int) -> tuple[StagePlan, ...]:
    """One :class:`StagePlan` per pipeline rank of ``layout`` for a model of ``layers``
    blocks."""
    sizes = layout.stage_sizes(layers)
    if sum(sizes) != layers:
        raise LayoutError(f"stage_split sums to {sum(sizes)}, but the model has layers {layers}")
    starts = (0, *accumulate(sizes))
    last = layout.virtual_stages - 1
    plans = []
    for stage in range(layout.pp):
        chunks = []
        for chunk in range(layout.vpp):
            k = virtual_stage(layout.pp, stage, chunk)
            chunks.append(ChunkLayers(chunk, k, range(starts[k], starts[k + 1]), k == 0,
                                      k == last))
        plans.append(StagePlan(stage, tuple(chunks), stage_order(layout, stage), stage == 0,
                               stage == layout.pp - 1))
    return tuple(plans)


@dataclass(frozen=True)
class RankPlan:
    """One global rank: its coordinates, the groups it is in (the embedding group only on the
    first and last pipeline rank), and its pipeline rank's :class:`StagePlan` (shared with the
    other ranks of that stage)."""

    rank: int
    coords: Coords
    tp_group: Group
    dp_group: Group
    pp_group: Group
    embedding_group: Optional[Group]
    stage: StagePlan

    @property
    def is_first(self) -> bool:
        """Whether the rank is on the first pipeline stage."""
        return self.stage.is_first

    @property
    def is_last(self) -> bool:
        """Whether the rank is on the last pipeline stage."""
        return self.stage.is_last

    @property
    def layers(self) -> dict[int, range]:
        """The blocks each of the rank's chunks holds: chunk -> layer range."""
        return {c.chunk: c.layers for c in self.stage.chunks}


class ParallelPlan:
    """The ranks of ``layout`` for a model of ``shape``: the group tables and the stage plans
    built once; a :class:`RankPlan` made on request from them (O(1) a rank)."""

    def __init__(self, layout: ParallelLayout, shape: ModelShape) -> None:
        self.layout = layout
        self.shape = shape
        self.stages = stage_plans(layout, shape.layers)

    @cached_property
    def groups(self) -> ProcessGroups:
        """The group tables, built on first use."""
        return process_groups(self.layout)

    def __len__(self) -> int:
        """The number of ranks: the layout's GPUs."""
        return self.layout.gpus

    def rank(self, rank: int) -> RankPlan:
        """The plan of global rank ``rank``."""
        c = coords_of(self.layout, rank)
        t, d = self.layout.tp, self.layout.dp
        pp_index = c.tp + c.dp * t
        on_ends = c.pp in (0, self.layout.pp - 1)
        return RankPlan(rank=rank, coords=c, tp_group=self.groups.tp[c.dp + c.pp * d],
                        dp_group=self.groups.dp[c.tp + c.pp * t],
                        pp_group=self.groups.pp[pp_index],
                        embedding_group=self.groups.embedding[pp_index] if on_ends else None,
                        stage=self.stages[c.pp])

    def ranks(self) -> Iterator[RankPlan]:
        """Every rank's plan, in rank order."""
        return (self.rank(r) for r in range(self.layout.gpus))
