"""Every stage plans its memory (workloads/parallel/stage_planner.py): the pressure of each
stage's order, the stage's cut of the planner's model, the greedy plan against the MILP per
stage, and the plans' exact peaks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads import load_network
from workloads.parallel import ModelShape, in_flight, make_layout, stage_orders
from workloads.parallel.stage_planner import (StageProblem, plan_stage, stage_model,
                                              stage_peak, stage_pressure, stage_state_bytes)
from workloads.parallel.transformer_stages import tied_head, transformer_stage_stream
from workloads.planner import build_model, lower_bound_peak, plan_greedy, plan_milp
from workloads.vdnn import plan_iteration

from planner_costs import copy_costs, kernel_ps

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "tests" / "data" / "tiny_transformer.yaml"


def problem(network, blocks, pp, m, stage, batch=2, schedule="1f1b", vpp=1, costs=True):
    """Stage ``stage`` of ``network`` (``blocks`` blocks) over ``pp`` stages, Adam's states,
    roofline kernels and a compressing engine's copy costs."""
    net = load_network(network) if not isinstance(network, str) or "/" in network \
        else load_network(network, 128)
    shape = ModelShape(layers=blocks, heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
    layout = make_layout(shape, pp=pp, micro_batches=m, micro_batch_size=batch,
                         schedule=schedule, vpp=vpp)
    base = plan_iteration(net, batch, "float32", "none", None, "adam")
    tied = tied_head(net, "adam")

    def render(choices):
        return plan_iteration(net, batch, "float32", "auto", None, "adam", choices=choices)

    def cut(plan, layout=layout):
        return transformer_stage_stream(plan, layout, stage, "test", tied, None, "adam")
    return StageProblem(net, base, layout, stage, kernel_ps,
                        copy_costs(net, batch) if costs else None, render, cut)


@pytest.mark.parametrize("schedule, pp, m, vpp", [("1f1b", 4, 8, 1), ("1f1b", 4, 2, 1),
                                                  ("gpipe", 3, 5, 1),
                                                  ("interleaved", 2, 4, 2)])
def test_the_pressure_is_the_passes_the_order_holds(schedule, pp, m, vpp):
    layout = make_layout(ModelShape(layers=pp * vpp, heads=1, kv_heads=1, hidden=1, ffn=1,
                                    vocab=1), pp=pp, micro_batches=m, schedule=schedule, vpp=vpp)
    orders = stage_orders(layout)
    for s, order in enumerate(orders):
        pressure = stage_pressure(order, vpp)
        assert pressure.in_flight == in_flight(orders)[s]
        # at the peak every pass but the running one waits
        assert pressure.waiting == pressure.in_flight - 1
        assert set(pressure.moments) == {(c, phase) for c in range(vpp)
                                         for phase in ("forward", "backward")}
        # other micro-batches' passes only: the running one's other chunks are in its model
        most = max(sum(w) for moments in pressure.moments.values() for w in moments)
        assert most == pressure.waiting if vpp == 1 else most <= pressure.waiting
        for moments in pressure.moments.values():  # none outnumbered in every chunk
            for a in moments:
                assert not any(b != a and all(x >= y for x, y in zip(b, a)) for b in moments)
        if vpp == 1:
            expected = {"1f1b": min(pp - s, m), "gpipe": m}[schedule]
            assert pressure.moments[(0, "backward")] == ((expected - 1,),)


def test_a_waiting_pass_holds_what_its_choice_keeps_across_the_seam():
    """With one micro-batch nothing waits: the stage's model is the whole model's cut; with
    four, stage 0 of two holds two at once, and every kept row that spans the seam holds one
    more copy."""
    alone = stage_model(problem(TINY, 2, 2, 1, 0), 10**12)
    busy = stage_model(problem(TINY, 2, 2, 4, 0), 10**12)
    assert alone.tensors == busy.tensors and alone.row_choice == busy.row_choice
    extra = busy.resident - alone.resident
    held = extra.max(axis=1)
    kept = [r for r, c in enumerate(busy.row_choice) if c == "keep"]
    assert all(held[r] in (0, alone.resident[r].max()) for r in kept)
    assert any(held[r] > 0 for r in kept)
    # each row holds its waiting copies in every forward and backward slot alike, and none in
    # the optimizer step's (no pass waits then)
    assert all(set(np.unique(extra[r])) <= {0.0, held[r]} for r in kept)
    assert not extra[:, -1].any()
    moved = [r for r, c in enumerate(busy.row_choice) if c != "keep"]
    assert moved and not extra[moved].any()
    assert np.array_equal(busy.fixed, alone.fixed)  # the fixed bytes are one pass's


@pytest.mark.parametrize("schedule, pp, vpp, m", [("1f1b", 4, 1, 8), ("gpipe", 3, 1, 4),
                                                  ("interleaved", 2, 2, 4),
                                                  ("interleaved", 3, 2, 6)])
def test_the_model_s_all_keep_peak_is_the_cut_stream_s(schedule, pp, vpp, m):
    """Each stage's model, all kept, peaks at its cut stream's allocations replayed in the
    schedule's order, byte for byte: the waiting passes are modelled, not estimated."""
    for stage in range(pp):
        p = problem("gpt2_small", 12, pp, m, stage, batch=8, schedule=schedule, vpp=vpp)
        keep = p.cut(p.base)
        model = stage_model(p, 10**15, keep=keep)
        assert int(model.memory(model.first_row).max()) == stage_peak(keep)


def test_the_stage_holds_its_own_model_states_only():
    p = problem("gpt2_small", 12, 4, 4, 1)
    keep = p.cut(p.base)
    model = stage_model(p, 10**12, keep=keep)
    whole = build_model(p.network, 2, "float32", p.base, kernel_ps, 10**12)
    states = stage_state_bytes(keep)
    assert 0 < states < whole.fixed.min()
    assert model.fixed.min() >= states and model.fixed.max() < whole.fixed.max()
    assert {t.split("/")[0] for t in model.tensors} <= {"blk3", "blk4", "blk5", "blk2"}


SLOW = pytest.mark.slow
SMALL = [(TINY, 2, 2, 4, 16, 0.5, "1f1b"), (TINY, 2, 2, 4, 64, 0.3, "1f1b")] + [
    pytest.param(*case, marks=SLOW) for case in (
        ("gpt2_small", 12, 3, 4, 2, 0.5, "1f1b"), ("gpt2_small", 12, 4, 8, 2, 0.3, "1f1b"),
        ("gpt2_small", 12, 4, 8, 2, 0.7, "1f1b"), ("gpt2_small", 12, 3, 4, 2, 0.5, "gpipe"),
        ("gpt2_small", 12, 2, 4, 2, 0.5, "interleaved"))]


@pytest.mark.parametrize("network, blocks, pp, m, batch, fraction, schedule", SMALL)
def test_the_greedy_stage_plan_is_within_5_percent_of_the_milp(network, blocks, pp, m, batch,
                                                               fraction, schedule):
    """Per stage, on the stage's model at a capacity ``fraction`` of the way from the least
    any plan holds to the all-keep peak (its activations must give up that room)."""
    vpp = 2 if schedule == "interleaved" else 1
    for stage in range(pp):
        p = problem(network, blocks, pp, m, stage, batch, schedule, vpp)
        keep = p.cut(p.base)
        whole = stage_model(p, 10**15, keep=keep)
        least, most = lower_bound_peak(whole), int(whole.memory(whole.first_row).max())
        assert most == stage_peak(keep)  # the model's all-keep peak is exact
        capacity = int(least + fraction * (most - least))
        model = stage_model(p, capacity, keep=keep)
        greedy, best = plan_greedy(model), plan_milp(model)
        assert greedy.model_peak_bytes <= capacity and best.model_peak_bytes <= capacity
        assert best.predicted_time_ps <= greedy.predicted_time_ps * (1 + 1e-9)
        assert greedy.predicted_time_ps <= 1.05 * best.predicted_time_ps
        assert best.predicted_time_ps >= model.time_ps(model.first_row)
        assert set(greedy.choices.values()) != {"keep"}  # the all-keep plan does not fit


def test_each_stage_plans_for_its_own_pressure_and_its_exact_peak():
    """gpt2_small over 4 stages, 8 micro-batches of 8 samples, every stage's memory halfway
    from the least stage 1 could hold to its all-keep peak: stage 1 (3 in flight) moves more
    of the same blocks' bytes than stage 2 (2 in flight), both fit; stage 0 (the embedding's
    states, 4 in flight) and stage 3 (the LM head's) do not, and are reported short. Every
    plan's peak is its cut stream's, replayed."""
    second = problem("gpt2_small", 12, 4, 8, 1, batch=8)
    keep = second.cut(second.base)
    capacity = (lower_bound_peak(stage_model(second, 10**15, keep=keep)) +
                stage_peak(keep)) // 2
    made = [plan_stage(problem("gpt2_small", 12, 4, 8, stage, batch=8), capacity)
            for stage in range(4)]
    for stage, plan in enumerate(made):
        assert plan.peak_bytes == stage_peak(plan.built)
        assert plan.fits == (plan.peak_bytes <= capacity)
        assert plan.pressure.in_flight == 4 - stage
    assert [plan.fits for plan in made] == [False, True, True, False]
    assert made[0].short_bytes > 0 and made[3].short_bytes > 0

    def moved(plan):
        sizes = {t.name: t.bytes for t in plan.built.stream.tensors.values()}
        return sum(sizes[f"{t}.m0"] for t, c in plan.choices.items() if c != "keep")
    assert moved(made[1]) > moved(made[2]) > 0


def test_a_stage_that_fits_keeps_everything():
    made = plan_stage(problem("gpt2_small", 12, 4, 8, 3), 80 * 2**30)
    assert made.fits and not made.planned and made.rounds == 0
    assert set(made.choices.values()) == {"keep"}
    assert made.built.stream.policy == "auto"


def test_a_stage_no_plan_fits_runs_its_least_memory_plan_reported_short():
    p = problem("gpt2_small", 12, 4, 8, 0)
    keep = p.cut(p.base)
    made = plan_stage(p, stage_state_bytes(keep) + 2**20)
    assert not made.fits and made.short_bytes == made.peak_bytes - made.capacity_bytes > 0
    assert made.planned and made.peak_bytes == stage_peak(made.built) < stage_peak(keep)
    assert set(made.choices.values()) - {"keep"}


def _offloading_everything(p):
    """Stage ``p.stage``'s stream with every activation it may offload offloaded (the rest
    kept): no recomputation, so no tensor held for a rebuild."""
    model = stage_model(p, 10**15)
    choices = {t: "offload" if "offload" in model.choices[k] else "keep"
               for k, t in enumerate(model.tensors)}
    return p.cut(p.render(choices), p.layout)


@pytest.mark.parametrize("stage", [0, 1])
def test_a_stage_that_offloading_everything_fits_fits(stage):
    """The greedy's recomputations add backward reads that only grow, until its model holds
    more than any plan needs and refuses: a plan without recomputation, which induces none,
    still fits at the capacity offloading everything holds (gpt2_small, 2 stages)."""
    p = problem("gpt2_small", 12, 2, 4, stage, batch=8)
    capacity = stage_peak(_offloading_everything(p))
    made = plan_stage(p, capacity)
    assert made.fits and made.peak_bytes == stage_peak(made.built) <= capacity


def test_a_stage_s_shortfall_shrinks_as_its_memory_grows():
    """Below what offloading everything holds, the stage runs its least-memory plan: never
    more than offloading everything (recomputing everything holds each rebuild's inputs
    until it runs), and never more short with more memory."""
    p = problem("gpt2_small", 12, 2, 4, 1, batch=8)
    offloaded = stage_peak(_offloading_everything(p))
    shorts = []
    for fraction in (0.90, 0.95, 0.98, 1.0):
        made = plan_stage(p, int(offloaded * fraction))
        assert made.peak_bytes <= offloaded
        shorts.append(made.short_bytes)
    assert shorts == sorted(shorts, reverse=True) and shorts[-1] == 0 < shorts[0]


def test_without_an_engine_a_stage_only_recomputes():
    p = problem("gpt2_small", 12, 4, 8, 1, batch=8, costs=False)
    capacity = int(stage_peak(p.cut(p.base)) * 0.85)
    made = plan_stage(p, capacity)
    assert made.fits and set(made.choices.values()) <= {"keep", "recompute"}
    assert "recompute" in made.choices.values()


def test_a_received_boundary_tensor_is_never_recomputed():
    model = stage_model(problem("gpt2_small", 12, 4, 4, 2), 10**12)
    received = [t for t in model.tensors if t == "blk5/res2"]
    assert received
    for name in received:
        assert "recompute" not in model.choices[model.tensors.index(name)]
