"""Ranks: rank <-> (tp, pp, dp) in Megatron-LM's default order, the group tables, the layers
each (pipeline rank, chunk) holds, and the per-rank plan that shares its stage's order."""
from __future__ import annotations

from itertools import product

import pytest

from workloads.parallel import (Coords, LayoutError, ModelShape, ParallelPlan, coords_of,
                                make_layout, process_groups, rank_of)
from workloads.parallel.pipeline import stage_order

SHAPES = list(product((1, 2, 4), (1, 2, 3, 4), (1, 2, 3, 5)))   # tp, pp, dp


def shape(layers: int = 24) -> ModelShape:
    """A small model whose heads, KV heads and FFN every tp here divides."""
    return ModelShape(layers=layers, heads=8, kv_heads=4, hidden=256, ffn=1024, vocab=1000)


@pytest.mark.parametrize("tp, pp, dp", SHAPES)
def test_rank_and_coordinates_are_a_bijection(tp, pp, dp):
    layout = make_layout(shape(), tp=tp, pp=pp, dp=dp)
    seen = set()
    for rank in range(layout.gpus):
        c = coords_of(layout, rank)
        assert rank_of(layout, c) == rank
        seen.add((c.tp, c.pp, c.dp))
    assert seen == set(product(range(tp), range(pp), range(dp)))


def test_tp_is_fastest_then_dp_then_pp():
    layout = make_layout(shape(), tp=2, pp=4, dp=3)
    assert coords_of(layout, 1) == Coords(tp=1, pp=0, dp=0)
    assert coords_of(layout, 2) == Coords(tp=0, pp=0, dp=1)
    assert coords_of(layout, 6) == Coords(tp=0, pp=1, dp=0)
    assert rank_of(layout, Coords(tp=1, pp=3, dp=2)) == 1 + 2 * 2 + 3 * 2 * 3


def test_the_dp_groups_are_megatrons_docstring_example():
    # megatron/core/parallel_state.py, generate_masked_orthogonal_rank_groups: sizes
    # [tp, dp, pp] = [2, 3, 4]: dp_group[0] = [0, 2, 4], [1] = [1, 3, 5], [7] = [19, 21, 23]
    groups = process_groups(make_layout(shape(), tp=2, pp=4, dp=3))
    assert groups.dp[0] == (0, 2, 4)
    assert groups.dp[1] == (1, 3, 5)
    assert groups.dp[7] == (19, 21, 23)
    assert groups.tp[0] == (0, 1) and groups.pp[0] == (0, 6, 12, 18)
    assert groups.embedding[0] == (0, 18) and groups.embedding[5] == (5, 23)


@pytest.mark.parametrize("tp, pp, dp", SHAPES)
def test_each_kind_of_group_partitions_the_ranks(tp, pp, dp):
    layout = make_layout(shape(), tp=tp, pp=pp, dp=dp)
    groups = process_groups(layout)
    for kind, size, table in (("tp", tp, groups.tp), ("dp", dp, groups.dp),
                              ("pp", pp, groups.pp)):
        assert all(len(g) == size for g in table), kind
        flat = [r for g in table for r in g]
        assert sorted(flat) == list(range(layout.gpus)), kind
        other = ("tp", "pp", "dp")
        for g in table:   # a group's ranks differ only in the group's own coordinate
            coords = [coords_of(layout, r) for r in g]
            fixed = [tuple(getattr(c, a) for a in other if a != kind) for c in coords]
            assert len(set(fixed)) == 1, (kind, g)
            assert [getattr(c, kind) for c in coords] == list(range(size)), (kind, g)


@pytest.mark.parametrize("tp, pp, dp", SHAPES)
def test_each_rank_is_in_its_groups_and_on_the_end_stages_in_the_embedding_group(tp, pp, dp):
    plan = ParallelPlan(make_layout(shape(), tp=tp, pp=pp, dp=dp), shape())
    for r in plan.ranks():
        assert r.rank in r.tp_group and r.rank in r.dp_group and r.rank in r.pp_group
        assert r.pp_group[r.coords.pp] == r.rank
        on_ends = r.coords.pp in (0, pp - 1)
        assert (r.embedding_group is not None) == on_ends
        if on_ends:
            assert r.embedding_group == tuple(dict.fromkeys((r.pp_group[0], r.pp_group[-1])))
        assert r.is_first == (r.coords.pp == 0) and r.is_last == (r.coords.pp == pp - 1)


def test_the_even_split_puts_contiguous_blocks_on_the_stages():
    plan = ParallelPlan(make_layout(shape(), pp=4), shape())
    assert [plan.stages[s].chunks[0].layers for s in range(4)] == [
        range(0, 6), range(6, 12), range(12, 18), range(18, 24)]
    assert [(c.embedding, c.head) for s in plan.stages for c in s.chunks] == [
        (True, False), (False, False), (False, False), (False, True)]


def test_interleaved_chunk_c_of_rank_s_is_virtual_stage_c_pp_plus_s():
    # megatron/core/transformer/transformer_block.py's example: 8 layers, 2 stages, 2 chunks:
    # stage 0 holds [0, 1] and [4, 5]; stage 1 holds [2, 3] and [6, 7]
    plan = ParallelPlan(make_layout(shape(8), pp=2, vpp=2, schedule="interleaved",
                                    micro_batches=2), shape(8))
    assert plan.rank(0).layers == {0: range(0, 2), 1: range(4, 6)}
    assert plan.rank(1).layers == {0: range(2, 4), 1: range(6, 8)}
    assert [c.virtual_stage for c in plan.stages[1].chunks] == [1, 3]
    assert plan.stages[0].chunks[0].embedding and not plan.stages[0].chunks[1].embedding
    assert plan.stages[1].chunks[1].head and not plan.stages[1].chunks[0].head


def test_a_given_split_is_laid_out_in_virtual_stage_order():
    split = (1, 3, 3, 3, 3, 3, 3, 2, 1, 2)   # 24 layers over pp 5 x vpp 2
    layout = make_layout(shape(), pp=5, vpp=2, schedule="interleaved", micro_batches=10,
                         stage_split=split)
    plan = ParallelPlan(layout, shape())
    held = {}
    for stage in plan.stages:
        for c in stage.chunks:
            assert len(c.layers) == split[c.virtual_stage]
            held[c.virtual_stage] = c.layers
    assert [layer for k in sorted(held) for layer in held[k]] == list(range(24))


def test_ranks_of_one_stage_share_one_stage_plan_and_order():
    layout = make_layout(shape(), tp=2, pp=3, dp=4, micro_batches=5)
    plan = ParallelPlan(layout, shape())
    by_stage = {}
    for r in plan.ranks():
        by_stage.setdefault(r.coords.pp, set()).add(id(r.stage))
    assert all(len(ids) == 1 for ids in by_stage.values())
    assert len(plan.stages) == 3
    assert plan.stages[1].order == stage_order(layout, 1)


def test_the_tables_grow_with_the_ranks_not_faster():
    # 16,384 GPUs (tp 8, pp 16, dp 128) for a 128-layer model: each rank once in each kind
    big = ModelShape(layers=128, heads=128, kv_heads=8, hidden=16384, ffn=53248, vocab=128256)
    layout = make_layout(big, tp=8, pp=16, gpus=16384, micro_batches=16)
    plan = ParallelPlan(layout, big)
    groups = plan.groups
    assert sum(map(len, groups.tp)) == sum(map(len, groups.dp)) == sum(map(len, groups.pp)) \
        == 16384
    assert len(plan.stages) == 16
    assert plan.rank(16383).coords == Coords(tp=7, pp=15, dp=127)


def test_coordinates_outside_the_layout_are_refused():
    layout = make_layout(shape(), tp=2, pp=2, dp=2)
    with pytest.raises(LayoutError, match="rank 8 is not one of the layout's 8 GPUs"):
        coords_of(layout, 8)
    with pytest.raises(LayoutError, match="coordinates tp 2, pp 0, dp 0 lie outside"):
        rank_of(layout, Coords(tp=2, pp=0, dp=0))
