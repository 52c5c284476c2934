"""Every cDMA engine of a run plans the same tensors from the same density profile: a tensor's
estimate (every algorithm's ratio and its density) is worked out once per profile, tensor,
progress and element type, handed to each plan as its own copy, and forgotten when the
registered codecs change."""
from __future__ import annotations

import pytest

from components import wire_plan
from components.messages import MovedTensor
from sst_cdma.codecs import registry
from sst_cdma.profiles import load_profile


@pytest.fixture
def counted(monkeypatch):
    """The calls that work an estimate out (the memo's misses)."""
    calls = []
    afresh = wire_plan._estimate_afresh

    def spy(*args):
        calls.append(args)
        return afresh(*args)

    monkeypatch.setattr(wire_plan, "_estimate_afresh", spy)
    wire_plan._estimates.clear()
    return calls


def _sparse_tensor():
    profile = load_profile("alexnet")
    name = next(iter(profile.tensors))
    return profile, MovedTensor(name, 1 << 20, True)


def test_a_tensor_is_estimated_once_for_every_engine_and_each_gets_its_own_copy(counted):
    profile, tensor = _sparse_tensor()
    first = wire_plan._estimate(tensor, profile, 0.5, "float32")
    second = wire_plan._estimate(tensor, profile, 0.5, "float32")
    assert first == second == wire_plan._estimate_afresh(tensor, profile, 0.5, "float32")
    assert len(counted) == 2  # the first call, and the direct one just above
    first[0]["zvc"] = -1.0  # one plan's ratios are its own
    assert wire_plan._estimate(tensor, profile, 0.5, "float32")[0]["zvc"] > 0
    wire_plan._estimate(tensor, profile, 0.25, "float32")  # another progress: worked out
    wire_plan._estimate(tensor, profile, 0.5, "float16")  # another element type: too
    assert len(counted) == 4


def test_a_codec_registered_after_an_estimate_has_its_ratio_in_the_next(counted):
    profile, tensor = _sparse_tensor()
    assert "flat" not in wire_plan._estimate(tensor, profile, 0.5, "float32")[0]
    with registry.registered("flat", 251, "no.such:Codec", ratio_formula=lambda d, size: 3.0):
        ratios, _ = wire_plan._estimate(tensor, profile, 0.5, "float32")
        assert ratios["flat"] == 3.0
    assert "flat" not in wire_plan._estimate(tensor, profile, 0.5, "float32")[0]
