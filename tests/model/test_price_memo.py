"""Kernel prices are computed once per (shape, pass, limit, dtype, GPU, constants) and kept:
the same shape priced again is not recomputed, and what the memory returns is bit for bit what
pricing afresh gives."""
from __future__ import annotations

import numpy as np
import pytest

from sst_cdma.model import kernel_model, price_memo
from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.model.kernel_model import ConvProblem, price_convs, price_gemm
from sst_cdma.model.price_memo import PriceMemo
from workloads import load_network
from workloads.kernel_pricing import price_network
from workloads.loader import build_network


@pytest.fixture
def counted(monkeypatch):
    """Start from empty memories and count what is computed: GEMM shapes, convolution
    problems (per call, how many) and attention kernels."""
    price_memo.clear()
    calls = {"gemm": 0, "conv": [], "attention": 0}
    gemm, conv, attention = (kernel_model._price_gemm_once, kernel_model._price_convs_once,
                             kernel_model._price_attention_once)

    def count_gemm(*args, **kwargs):
        calls["gemm"] += 1
        return gemm(*args, **kwargs)

    def count_conv(problems, *args, **kwargs):
        calls["conv"].append(len(problems))
        return conv(problems, *args, **kwargs)

    def count_attention(*args, **kwargs):
        calls["attention"] += 1
        return attention(*args, **kwargs)

    monkeypatch.setattr(kernel_model, "_price_gemm_once", count_gemm)
    monkeypatch.setattr(kernel_model, "_price_convs_once", count_conv)
    monkeypatch.setattr(kernel_model, "_price_attention_once", count_attention)
    yield calls
    price_memo.clear()


@pytest.fixture
def no_memo(monkeypatch):
    """Every memory forgets: each price is computed afresh."""
    price_memo.clear()
    monkeypatch.setattr(PriceMemo, "get", lambda self, key: None)
    yield
    price_memo.clear()


def test_a_gemm_shape_priced_twice_is_computed_once(counted):
    model = kernel_model_for("pascal")
    first = price_gemm(64, 1000, 4096, model.hardware, model.params)
    again = price_gemm(64, 1000, 4096, model.hardware, model.params)
    assert counted["gemm"] == 1 and again == first
    price_gemm(64, 1000, 2048, model.hardware, model.params)
    other = kernel_model_for("volta")
    price_gemm(64, 1000, 4096, other.hardware, other.params)
    assert counted["gemm"] == 3  # another shape, another GPU: priced


def test_a_convolution_priced_twice_is_computed_once(counted):
    model = kernel_model_for("pascal")
    conv = ConvProblem(32, 64, 56, 56, 64, 3, 3, 1, 1)
    wide = ConvProblem(32, 64, 56, 56, 128, 3, 3, 1, 1)
    first = price_convs([conv], "fwd", model.hardware, model.params)
    both = price_convs([conv, wide, conv], "fwd", model.hardware, model.params)
    assert counted["conv"] == [1, 1]  # the second call prices only the new shape
    assert both[0] == both[2] == first[0]
    price_convs([conv], "bwd_data", model.hardware, model.params)
    price_convs([conv], "fwd", model.hardware, model.params, workspace_limit=0)
    assert counted["conv"] == [1, 1, 1, 1]  # another pass, another limit: priced


def test_a_network_of_many_small_fully_connected_layers_prices_each_shape_once(counted):
    layers = [{"name": "data", "kind": "data", "params": {"shape": [256]}}]
    layers += [{"name": f"fc{i}", "kind": "fc", "params": {"num_output": 256}}
               for i in range(2000)]
    net = build_network({"name": "many_fc", "layers": layers + [{"name": "loss",
                                                                 "kind": "loss"}]}, "many_fc")
    prices = price_network(net, 64, "float32", kernel_model_for("pascal"))
    assert len(prices) == 2001
    # forward 64x256x256, data gradient the same shape, weight gradient 256x256x64
    assert counted["gemm"] == 2
    assert len({p["fwd"] for name, p in prices.items() if name != "loss"}) == 1


def test_an_out_of_memory_retry_reprices_only_the_layers_whose_limit_changed(counted):
    model, net = kernel_model_for("maxwell"), load_network("vgg16")
    price_network(net, 64, "float32", model)
    counted["conv"].clear()
    retry = price_network(net, 64, "float32", model, limits={"conv1_2": {"fwd": 0}})
    assert counted["conv"] == [1]  # conv1_2's forward, nothing else
    assert retry["conv1_2"]["fwd"].workspace == 0


def test_a_baseline_on_the_same_gpu_reuses_the_main_systems_prices(counted):
    net = load_network("gpt2_small", seq_len=256)
    main = price_network(net, 4, "bfloat16", kernel_model_for("hopper"))
    computed = (counted["gemm"], list(counted["conv"]), counted["attention"])
    assert computed[0] > 0
    baseline = price_network(net, 4, "bfloat16", kernel_model_for("hopper"))
    assert baseline == main
    assert (counted["gemm"], counted["conv"], counted["attention"]) == computed


@pytest.mark.parametrize("network, preset, dtype", [
    ("alexnet", "pascal", "float32"), ("googlenet", "maxwell", "float32"),
    ("resnet50", "ampere", "float16"), ("gpt2_small", "hopper", "bfloat16")])
def test_prices_are_bit_identical_with_and_without_the_memo(network, preset, dtype,
                                                            monkeypatch):
    model, net = kernel_model_for(preset), load_network(network)
    price_memo.clear()
    cold = price_network(net, 8, dtype, model)
    warm = price_network(net, 8, dtype, model)
    with monkeypatch.context() as patch:
        patch.setattr(PriceMemo, "get", lambda self, key: None)
        fresh = price_network(net, 8, dtype, model)
    price_memo.clear()
    assert cold == warm == fresh


def test_memoized_seconds_are_the_same_floats_as_fresh_ones(no_memo, monkeypatch):
    model = kernel_model_for("pascal")
    hw, kp = model.hardware, model.params
    problems = [ConvProblem(16, c, 28, 28, k, r, r, r // 2, r // 2)
                for c, k, r in ((3, 64, 7), (64, 64, 3), (64, 256, 1), (256, 512, 3))]
    fresh = {p: [x.seconds.hex() for x in price_convs(problems, p, hw, kp)]
             for p in ("fwd", "bwd_data", "bwd_filter")}
    fresh_gemm = price_gemm(128, 4096, 1024, hw, kp).seconds.hex()
    monkeypatch.undo()
    price_memo.clear()
    for p, seconds in fresh.items():
        one_by_one = [price_convs([pr], p, hw, kp)[0].seconds.hex() for pr in problems]
        assert one_by_one == seconds
        assert [x.seconds.hex() for x in price_convs(problems, p, hw, kp)] == seconds
    for _ in range(2):
        assert price_gemm(128, 4096, 1024, hw, kp).seconds.hex() == fresh_gemm


def test_gemm_candidates_of_a_batch_are_those_of_each_problem_alone():
    rng = np.random.default_rng(7)
    m, n, k = (rng.integers(1, 4000, 25).astype(float) for _ in range(3))
    batch = rng.integers(1, 20, 25).astype(float)
    together = kernel_model._gemm_candidates(m, n, k, 56, batch, fill_skinny=True)
    for i in range(25):
        alone = kernel_model._gemm_candidates(m[i:i + 1], n[i:i + 1], k[i:i + 1], 56,
                                              batch[i:i + 1], fill_skinny=True)
        for key, values in together.items():
            assert values[i].tobytes() == alone[key][0].tobytes(), key
    assert not together["flops"].flags.writeable  # kept arrays cannot be changed in place


def test_a_memory_forgets_the_least_recently_used_beyond_its_limits():
    memo = PriceMemo(2)
    for key in "abc":
        memo.put(key, key.upper())
    assert (memo.get("a"), memo.get("b"), memo.get("c"), len(memo)) == (None, "B", "C", 2)
    sized = PriceMemo(10, budget=5, weigh=len)
    sized.put("x", "aaa")
    sized.get("x")
    sized.put("y", "bbb")  # 6 > 5: the older goes
    assert (sized.get("x"), sized.get("y")) == (None, "bbb")


def test_a_value_per_held_object_is_made_once_and_keeps_its_object():
    memo = PriceMemo(4)
    made = []
    held = [1, 2]

    def make():
        made.append(1)
        return sum(held)

    assert memo.of_object(held, "x", make) == 3 and memo.of_object(held, "x", make) == 3
    assert len(made) == 1                             # once per object and extra
    assert memo.of_object(held, "y", make) == 3 and len(made) == 2
    assert memo.get((id(held), "x"))[0] is held       # kept beside its value
    assert memo.of_object([1, 2], "x", make) == 3 and len(made) == 3  # another object alike
