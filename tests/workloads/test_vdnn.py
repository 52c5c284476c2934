"""The schedules of one network's inputs share what they make alike (issue 35): each layer's
kernel ops, plain ops and block comments are made once and are the very objects the next
schedule uses; every plan equals the one made with nothing kept."""
from __future__ import annotations

import pytest

from sst_cdma.model.price_memo import PriceMemo
from workloads import load_network
from workloads import vdnn
from workloads.model_states import Placement
from workloads.vdnn import plan_iteration

#: (policy, choices, placement) of the schedules a policy auto run makes of one network
REQUESTS = [("none", None, None), ("all", None, None),
            ("auto", {"conv1": "offload", "pool1": "recompute", "conv2": "compress"}, None),
            ("none", None, Placement(optimizer_states="host", gradients="host",
                                     weights="host"))]


def _plans(monkeypatch):
    monkeypatch.setattr(vdnn, "_MADE", PriceMemo(8))
    net = load_network("alexnet")
    return [plan_iteration(net, 16, "float32", policy, None, "adam", 1 << 20,
                           choices=choices, placement=placement)
            for policy, choices, placement in REQUESTS]


def _comments(plan):
    return [b.comment for b in plan.forward + plan.backward + plan.update]


def test_every_plan_is_the_plan_made_afresh(monkeypatch):
    shared = _plans(monkeypatch)
    for k, request in enumerate(REQUESTS):
        afresh = _plans(monkeypatch)[k]  # a fresh memo: this plan first
        assert shared[k].ops() == afresh.ops(), request
        assert _comments(shared[k]) == _comments(afresh)
        assert shared[k].tensors == afresh.tensors


def test_schedules_of_the_same_inputs_share_their_ops(monkeypatch):
    none, every, auto, host = _plans(monkeypatch)
    assert all(a is b for a, b in zip(none.tensors, every.tensors))  # declared once
    assert none.tensors is not every.tensors  # each plan its own list
    assert len(host.tensors) < len(none.tensors)  # the host steps: no state on the GPU
    for plan in (every, auto, host):
        for a, b in zip(none.forward + none.backward, plan.forward + plan.backward):
            assert (a.layer, a.comment) == (b.layer, b.comment)
            for op in a.ops:
                if op.op in ("compute", "sync"):  # the layer's kernel and its sync: the same
                    assert any(op is o for o in b.ops), (op, b.layer)
    # another workspace: other kernels (they write their workspace), made anew
    other = plan_iteration(load_network("alexnet"), 16, "float32", "none", None, "adam", 0)
    assert not any(a is b for a, b in zip(none.ops(), other.ops()) if a.op == "compute")


@pytest.mark.parametrize("policy", ["none", "all"])
def test_a_plan_without_offloads_prefetches_nothing(monkeypatch, policy):
    monkeypatch.setattr(vdnn, "_MADE", PriceMemo(8))
    plan = plan_iteration(load_network("alexnet"), 16, "float32", policy)
    moved = [op for op in plan.ops() if op.op in ("offload", "prefetch", "wait")]
    assert bool(moved) == (policy == "all")
