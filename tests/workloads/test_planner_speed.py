"""The planner made fast (issue 35) chooses the same plans: the greedy against the way it was
computed before (``greedy_reference``), with whole-picosecond times (the engine's and the
kernels slot's) and with fractional ones; the model built in place against one built afresh;
the memoized schedules, layer tables and plans against the work done again."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from components.kernel_times import roofline_ps
from components.messages import CopyCost
from sst_cdma.model.price_memo import PriceMemo
from workloads import load_network
from workloads import planner as planner_module
from workloads.model_states import Placement
from workloads.planner import (PlanInfeasible, PlanModel, _ModelBuilder, _whole_ps, build_model,
                               induced_needs, lower_bound_peak, plan_greedy, plan_peak,
                               plan_to_fit)
from workloads.render import _scheduled
from workloads.vdnn import inferred, plan_iteration

sys.path.insert(0, str(Path(__file__).resolve().parent))
from greedy_reference import (plan_greedy_reference, reference_build_model,  # noqa: E402
                              reference_lower_bound)

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_transformer.yaml"
#: (network, batch, fraction of the all-keep peak the GPU holds)
CASES = [("alexnet", 64, 0.9), ("squeezenet", 32, 0.7), ("resnet50", 8, 0.5),
         ("googlenet", 16, 0.6), (str(TINY), 64, 0.85), (str(TINY), 64, 0.75)]


def kernel_ps(op):
    return roofline_ps(op.flops or 0, op.dram or 0, 10e12, 0.6, 500e9, 5_000_000)


def fractional_ps(op):
    """Kernel times that are not whole picoseconds (the greedy's exact one-by-one path)."""
    return kernel_ps(op) / 3


def copy_costs(net, batch, link=12e9, codec=30e9, ratio=3.0, latency=1_000_000, sm=False):
    out = {}
    for name, t in net.tensors(batch, "float32").items():
        plain = latency + int(t.bytes / link * 1e12)
        packed = latency + int(max(t.bytes / codec, t.bytes / ratio / link) * 1e12)
        kernel = int(t.bytes / 25e9 * 1e12) if sm else 0
        out[name] = CopyCost(plain, plain, packed + kernel, packed, int(t.bytes / ratio),
                             kernel, 0)
    return out


def model_for(network, batch, fraction, kernels=kernel_ps, sm=False, needs=None):
    net = load_network(network)
    base = plan_iteration(net, batch, "float32", "none")
    capacity = int(plan_peak(base) * fraction)
    return build_model(net, batch, "float32", base, kernels, capacity,
                       copy_costs(net, batch, sm=sm), extra_needs=needs)


def same_plan(a, b):
    assert a.choices == b.choices
    assert list(a.choices) == list(b.choices)
    assert a.predicted_time_ps == b.predicted_time_ps
    assert a.model_peak_bytes == b.model_peak_bytes
    assert a.backward_end_ps == b.backward_end_ps


@pytest.mark.parametrize("network,batch,fraction", CASES)
def test_greedy_chooses_what_it_chose_before(network, batch, fraction):
    model = model_for(network, batch, fraction)
    assert _whole_ps(model)  # times the engine and the kernels slot give: whole ps
    same_plan(plan_greedy(model), plan_greedy_reference(model))


@pytest.mark.parametrize("network,batch,fraction", CASES[:4])
def test_greedy_chooses_what_it_chose_before_with_fractional_times(network, batch, fraction):
    model = model_for(network, batch, fraction, fractional_ps)
    assert not _whole_ps(model)  # the one-by-one path
    same_plan(plan_greedy(model), plan_greedy_reference(model))


def test_greedy_chooses_what_it_chose_before_with_sm_codec_kernels():
    model = model_for("googlenet", 16, 0.6, sm=True)
    assert model.compute_cols == (0, 1, 2)
    same_plan(plan_greedy(model), plan_greedy_reference(model))


def refusals(model):
    """What the fast and the old greedy make of ``model``: a plan or a refusal each."""
    outcomes = []
    for plan in (plan_greedy, plan_greedy_reference):
        try:
            result = plan(model)
            outcomes.append((result.choices, result.predicted_time_ps))
        except PlanInfeasible as exc:
            outcomes.append((str(exc), exc.short_bytes))
    return outcomes


def test_greedy_refuses_below_the_bound_as_it_did_before():
    model = model_for("squeezenet", 32, 1.0)
    model.capacity = int(reference_lower_bound(model) * 0.995)
    fast, old = refusals(model)
    assert fast == old and "even with every activation" in fast[0]


def test_greedy_refuses_where_its_descent_ends_short_as_it_did_before():
    """One tensor whose two other choices each free one slot of two: the bound (each slot at
    its least) fits, no plan does, and the descent stops with the slots still over."""
    gib = 2 ** 30
    model = PlanModel(["t"], [("keep", "offload", "recompute")], np.array([0, 0, 0]),
                      ["keep", "offload", "recompute"],
                      np.array([[2.0, 2.0], [1.0, 2.0], [2.0, 1.0]]) * gib, np.zeros(2),
                      np.array([10.0, 10.0]), np.zeros((3, 3), dtype=int),
                      np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 0.0, 7.0]]), gib,
                      np.array([0]))
    fast, old = refusals(model)
    assert fast == old and "found no plan" in fast[0]


def test_lower_bound_is_the_same_kept_or_worked_out():
    model = model_for(str(TINY), 64, 0.75)
    assert model.least_resident is not None
    kept = lower_bound_peak(model)
    model.least_resident = None
    assert kept == lower_bound_peak(model) == reference_lower_bound(model)


MODEL_ARRAYS = ("resident", "row_slots", "row_costs", "row_sm", "row_tensor", "first_row",
                "fixed", "compute", "fixed_copies")


def same_model(model, old):
    """``model`` (the builder's) is ``old`` (built row by row as before), with the least and
    most bytes per slot it keeps besides."""
    for name in MODEL_ARRAYS:
        assert np.array_equal(getattr(model, name), getattr(old, name)), name
        assert getattr(model, name).dtype == getattr(old, name).dtype, name
    assert (model.tensors, model.choices, model.row_choice, model.capacity,
            model.backward_slot) == (old.tensors, old.choices, old.row_choice, old.capacity,
                                     old.backward_slot)
    kept = model.least_resident
    model.least_resident = None
    assert lower_bound_peak(model) == int((model.fixed + kept).max())
    model.least_resident = kept
    assert (model.most_resident >= old.resident.max(axis=0)).all()


@pytest.mark.parametrize("network,batch,fraction", CASES[:2] + CASES[-1:])
def test_the_model_is_the_model_built_before(network, batch, fraction):
    net = load_network(network)
    base = plan_iteration(net, batch, "float32", "none")
    capacity = int(plan_peak(base) * fraction)
    for costs in (copy_costs(net, batch), copy_costs(net, batch, sm=True), None):
        model = build_model(net, batch, "float32", base, kernel_ps, capacity, costs)
        same_model(model, reference_build_model(net, batch, "float32", base, kernel_ps,
                                                capacity, costs))


def _at_share(network=str(TINY), share=0.75):
    """A network at batch 64: its all-keep plan, ``share`` of that plan's peak as the
    capacity, and its copy costs."""
    net = load_network(network)
    base = plan_iteration(net, 64, "float32", "none")
    return net, base, int(plan_peak(base) * share), copy_costs(net, 64)

def test_a_model_built_in_place_is_the_model_built_before():
    """The builder rewrites the rows whose reads moved in arrays it keeps: each model equals
    the one built row by row with the same reads, and a model handed out before does not
    change."""
    net, base, capacity, costs = _at_share()
    build = _ModelBuilder(net, 64, "float32", base, kernel_ps, costs, False, None)
    first = build(capacity)
    needs = induced_needs(net, 64, "float32", plan_greedy(first).choices)
    assert needs  # recomputation reads some producers' inputs later: rows move
    second = build(capacity, needs)
    for model, reads in ((first, None), (second, needs)):
        same_model(model, reference_build_model(net, 64, "float32", base, kernel_ps, capacity,
                                                costs, extra_needs=reads))
    assert not np.array_equal(first.resident, second.resident)


def test_builders_alike_start_from_one_layout_and_write_on_copies(monkeypatch):
    """A second builder of the same rows (another placement's all-keep plan, the same slots
    and prices) adopts the first's laid-out arrays; the models both then build, with reads
    moved in either order, are those built row by row, and neither changes the other's."""
    monkeypatch.setattr(planner_module, "_SHARED", PriceMemo(8))
    net, base, capacity, costs = _at_share()
    one = _ModelBuilder(net, 64, "float32", base, kernel_ps, costs, False, None)
    first = one(capacity)
    needs = induced_needs(net, 64, "float32", plan_greedy(first).choices)
    assert needs
    other = _ModelBuilder(net, 64, "float32", plan_iteration(net, 64, "float32", "none"),
                          kernel_ps, costs, False, None)
    adopted = other(capacity)
    assert adopted.resident is first.resident  # one layout, shared until written
    moved = other(capacity, needs)
    again = one(capacity, needs)
    for model, reads in ((first, None), (adopted, None), (moved, needs), (again, needs)):
        same_model(model, reference_build_model(net, 64, "float32", base, kernel_ps, capacity,
                                                costs, extra_needs=reads))
    apart = _ModelBuilder(net, 64, "float32", base, kernel_ps, None, False, None)(capacity)
    assert apart.resident is not first.resident  # no engine: other rows, laid out afresh


@pytest.mark.parametrize("network,placement", [
    ("alexnet", None), (str(TINY), None),
    ("alexnet", Placement(optimizer_states="host", gradients="host")),
    (str(TINY), Placement(optimizer_states="host", gradients="host", weights="host"))])
def test_the_all_keep_plan_is_the_models_keep_rows(network, placement):
    """Where everything fits, plan_to_fit's all-keep plan (worked out without a model) is the
    one a model's keep rows give: choices, predicted time, modelled peak, slot ends."""
    net = load_network(network)
    base = plan_iteration(net, 16, "float32", "none", None, "adam", placement=placement)
    transfer = (lambda op, nbytes: 1_000_000 + nbytes // 10) if placement else None
    build = _ModelBuilder(net, 16, "float32", base, kernel_ps, copy_costs(net, 16), True,
                          transfer)
    model = build(plan_peak(base))
    same_plan(build.kept(), planner_module._result(model, model.first_row.copy()))
    assert bool(model.fixed_copies.any()) == bool(placement and placement.weights == "host")


def test_a_plan_is_made_once_per_model_and_handed_out_as_a_copy(monkeypatch):
    net, base, capacity, _ = _at_share("alexnet", 0.9)
    calls = []
    monkeypatch.setattr(planner_module, "plan_greedy",
                        lambda model, label="": calls.append(label) or plan_greedy(model, label))
    monkeypatch.setattr(planner_module, "_GREEDY", PriceMemo(32))

    def plan():
        build = _ModelBuilder(net, 64, "float32", base, kernel_ps, copy_costs(net, 64),
                              False, None)
        return build.plan(capacity, {}, "x")
    first, second = plan(), plan()
    assert calls == ["x"]  # the second builder (another run's GPU) found the plan made
    same_plan(first, second)
    first.choices.clear()  # a copy each time: the kept plan is not touched
    assert plan().choices == second.choices
    with pytest.raises(PlanInfeasible) as refused:
        _ModelBuilder(net, 64, "float32", base, kernel_ps, copy_costs(net, 64), False,
                      None).plan(1, {}, "x")
    with pytest.raises(PlanInfeasible) as again:
        _ModelBuilder(net, 64, "float32", base, kernel_ps, copy_costs(net, 64), False,
                      None).plan(1, {}, "x")
    assert str(again.value) == str(refused.value)
    assert again.value.short_bytes == refused.value.short_bytes
    assert calls == ["x", "x"]


def test_engines_whose_codecs_gain_nothing_share_their_plans(monkeypatch):
    """A plain-copy engine and a codec slower than its link price every plain copy alike and
    offer no compressed one: the model is the same, so the second engine's plan is the
    first's; a codec that beats the link offers compress and plans anew."""
    net, base, capacity, _ = _at_share("alexnet", 0.9)
    calls = []
    monkeypatch.setattr(planner_module, "plan_greedy",
                        lambda model, label="": calls.append(model) or plan_greedy(model, label))
    monkeypatch.setattr(planner_module, "_GREEDY", PriceMemo(32))
    plain = copy_costs(net, 64, codec=1e9)  # the codec slower than the 12 GB/s link
    assert not any(c.packed_out_ps < c.plain_out_ps for c in plain.values())
    raw = {name: CopyCost(c.plain_out_ps, c.plain_in_ps, c.plain_out_ps, c.plain_in_ps,
                          c.wire_bytes * 3) for name, c in plain.items()}  # a plain engine

    def plan(costs):
        return _ModelBuilder(net, 64, "float32", base, kernel_ps, costs, False,
                             None).plan(capacity, {}, "x")
    first = plan(plain)
    same_plan(first, plan(raw))
    assert len(calls) == 1
    assert "compress" not in calls[0].row_choice
    faster = plan(copy_costs(net, 64))
    assert len(calls) == 2 and "compress" in calls[1].row_choice
    assert faster.choices != first.choices


def test_plan_to_fit_plans_what_it_planned_before(monkeypatch):
    """plan_to_fit's rounds on the old greedy and the full rebuild of every model give the
    plan the fast greedy and the builder give."""
    net, base, capacity, costs = _at_share()
    fast = plan_to_fit(net, 64, "float32", capacity, kernel_ps, costs, base=base)
    monkeypatch.setattr(planner_module, "plan_greedy", plan_greedy_reference)
    monkeypatch.setattr(planner_module, "_GREEDY", PriceMemo(32))
    slow = plan_to_fit(net, 64, "float32", capacity, kernel_ps, copy_costs(net, 64), base=base)
    same_plan(fast, slow)
    assert (fast.rendered_peak_bytes, fast.rounds) == (slow.rendered_peak_bytes, slow.rounds)


def test_a_schedule_is_made_once_per_inputs():
    net = load_network("alexnet")
    chosen = {"conv1": "offload", "pool1": "recompute"}
    plan = _scheduled(net, 16, "float32", "auto", None, "none", 0, None, "liveness", chosen)
    again = _scheduled(net, 16, "float32", "auto", None, "none", 0, None, "liveness",
                       dict(reversed(list(chosen.items()))))
    assert again is plan  # the same choices in another order: the same schedule
    other = _scheduled(net, 16, "float32", "auto", None, "none", 0, None, "liveness",
                       {"conv1": "offload"})
    assert other is not plan
    afresh = plan_iteration(net, 16, "float32", "auto", choices=chosen)
    assert plan.ops() == afresh.ops() and plan.tensors == afresh.tensors


def test_a_schedules_workspace_limits_are_worked_out_once_per_capacity(monkeypatch):
    from workloads import kernel_pricing, render

    calls = []
    real = kernel_pricing.limits_from_free_memory
    monkeypatch.setattr(kernel_pricing, "limits_from_free_memory",
                        lambda plan, capacity: calls.append(capacity) or real(plan, capacity))
    monkeypatch.setattr(render, "_LIMITS", PriceMemo(16))
    net = load_network("alexnet")
    plan = _scheduled(net, 16, "float32", "none", None, "none", 1 << 30, None)
    tight = int(plan_peak(plan) * 0.95)
    first = render._limits(plan, tight)
    assert first == real(plan, tight) and first  # the workspace does not all fit
    assert render._limits(plan, tight) is first
    assert render._limits(plan, 2 * tight) == {}
    assert calls == [tight, 2 * tight]


def test_the_default_placement_is_the_schedule_of_none_given():
    net = load_network("alexnet")
    plan = _scheduled(net, 16, "float32", "none", None, "adam", 0, None)
    assert _scheduled(net, 16, "float32", "none", None, "adam", 0, None,
                      placement=Placement()) is plan
    host = _scheduled(net, 16, "float32", "none", None, "adam", 0, None,
                      placement=Placement(optimizer_states="host"))
    assert host is not plan and host.model_states is not None


def test_a_networks_layers_are_worked_out_once():
    net = load_network("alexnet")
    infos, tensors = inferred(net, 16, "float32")
    assert inferred(net, 16, "float32")[0] is infos
    assert infos == net.infer(16, "float32") and tensors == net.tensors(16, "float32")
    assert inferred(net, 8, "float32")[0] != infos
