"""Many GPUs, one model: the parallel layout (``layout``), the ranks with their coordinates,
process groups, layers and pipeline order (``ranks``), and the pipeline schedules with their
reference executor (``pipeline``). Docs: docs/parallel.md.

Public API::

    from workloads.parallel import ModelShape, make_layout, ParallelPlan
    shape = ModelShape(layers=32, heads=32, kv_heads=8, hidden=4096, ffn=14336, vocab=32000)
    layout = make_layout(shape, tp=2, pp=4, gpus=32, global_batch=64, schedule="1f1b")
    plan = ParallelPlan(layout, shape)
    plan.rank(9).coords, plan.rank(9).stage.order       # (tp, pp, dp) and its passes
"""
from __future__ import annotations

from .layout import SCHEDULES, LayoutError, ModelShape, ParallelLayout, make_layout
from .pipeline import (BACKWARD, FORWARD, ChunkSpan, Makespan, Order, Work, gpipe_order,
                       in_flight, interleaved_order, makespan, one_f_one_b_order,
                       schedule_table, stage_order, stage_orders, stage_steps, virtual_stage)
from .ranks import (ChunkLayers, Coords, ParallelPlan, ProcessGroups, RankPlan, StagePlan,
                    coords_of, process_groups, rank_of, stage_plans)

__all__ = [
    "BACKWARD", "FORWARD", "SCHEDULES",
    "ChunkLayers", "ChunkSpan", "Coords", "LayoutError", "Makespan", "ModelShape", "Order",
    "ParallelLayout", "ParallelPlan", "ProcessGroups", "RankPlan", "StagePlan", "Work",
    "coords_of", "gpipe_order", "in_flight", "interleaved_order", "make_layout", "makespan",
    "one_f_one_b_order", "process_groups", "rank_of", "schedule_table", "stage_order",
    "stage_orders", "stage_plans", "stage_steps", "virtual_stage",
]
