"""The planner of --policy auto: greedy within 5% of the MILP optimum of the same cost model,
plans that really fit (rendered and simulated), the predicted iteration time against the
simulated one, and models that cannot fit at all."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import sst_cdma
from components.messages import CopyCost
from sst_cdma.engine.runner import RunError
from workloads import load_network
from workloads.planner import PlanInfeasible, build_model, \
    lower_bound_peak, plan_greedy, plan_milp, plan_peak, plan_to_fit
from workloads.vdnn import plan_iteration

from planner_costs import copy_costs, kernel_ps

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny_transformer.yaml"


def de_copy_costs(net, batch, link=12e9, sm=25e9, de=600e9, ratio=3.0, latency=1_000_000):
    """Copy costs as Blackwell's Decompression Engine has them: an offload's SM compression
    (at ``sm`` raw bytes per second) runs on the compute stream and its copy waits for it;
    the DE decompresses prefetches in the copy engine."""
    out = {}
    for name, t in net.tensors(batch, "float32").items():
        plain = latency + int(t.bytes / link * 1e12)
        kernel = int(t.bytes / sm * 1e12)
        out_ps = latency + kernel + int(t.bytes / ratio / link * 1e12)
        in_ps = latency + int(max(t.bytes / de, t.bytes / ratio / link) * 1e12)
        out[name] = CopyCost(plain, plain, out_ps, in_ps, int(t.bytes / ratio), kernel, 0)
    return out


CASES = [("alexnet", 64, 0.9), ("squeezenet", 32, 0.9), ("squeezenet", 32, 0.7),
         ("resnet50", 8, 0.7), ("resnet50", 8, 0.5), ("googlenet", 16, 0.6),
         (str(TINY), 64, 0.85), (str(TINY), 64, 0.75)]


@pytest.mark.parametrize("network,batch,fraction", CASES)
def test_greedy_is_within_5_percent_of_the_milp_optimum(network, batch, fraction):
    net = load_network(network)
    base = plan_iteration(net, batch, "float32", "none")
    capacity = int(plan_peak(base) * fraction)
    model = build_model(net, batch, "float32", base, kernel_ps, capacity,
                        copy_costs(net, batch))
    greedy, best = plan_greedy(model), plan_milp(model)
    keep = model.time_ps(model.first_row)
    assert greedy.model_peak_bytes <= capacity and best.model_peak_bytes <= capacity
    assert best.predicted_time_ps <= greedy.predicted_time_ps * (1 + 1e-9)
    assert greedy.predicted_time_ps <= 1.05 * best.predicted_time_ps
    assert best.predicted_time_ps >= keep  # memory is short: something costs time


@pytest.mark.parametrize("network,batch,fraction", [("alexnet", 64, 0.9),
                                                    ("squeezenet", 32, 0.7),
                                                    ("googlenet", 16, 0.6)])
def test_greedy_is_within_5_percent_of_the_milp_optimum_with_sm_codec_kernels(network, batch,
                                                                            fraction):
    net = load_network(network)
    base = plan_iteration(net, batch, "float32", "none")
    capacity = int(plan_peak(base) * fraction)
    model = build_model(net, batch, "float32", base, kernel_ps, capacity,
                        de_copy_costs(net, batch))
    greedy, best = plan_greedy(model), plan_milp(model)
    assert best.model_peak_bytes <= capacity
    assert best.predicted_time_ps <= greedy.predicted_time_ps * (1 + 1e-9)
    assert greedy.predicted_time_ps <= 1.05 * best.predicted_time_ps


def test_sm_codec_kernels_are_charged_to_the_compute_stream():
    """A compressed copy whose (de)compression runs on the SMs lengthens its slot's compute
    stream by the kernel, on top of the layer's own kernels, not only the copy waiting for it:
    with copies that take just their kernels' time (a link and engine that cost nothing
    beyond), compressing every tensor adds exactly every kernel to the iteration."""
    net = load_network("alexnet")
    base = plan_iteration(net, 16, "float32", "none")
    costs = {}
    for name, t in net.tensors(16, "float32").items():
        out, back = int(t.bytes / 25e9 * 1e12), int(t.bytes / 50e9 * 1e12)
        costs[name] = CopyCost(10 ** 15, 10 ** 15, out, back, t.bytes // 3, out, back)
    model = build_model(net, 16, "float32", base, kernel_ps, 0, costs)
    rows = np.array([model.first_row[t] + (c.index("compress") if "compress" in c else 0)
                     for t, c in enumerate(model.choices)])
    assert (model.row_costs[rows, :2] > 0).any()
    kernels = float(model.row_costs[rows, :2].sum())  # each copy is its kernel alone
    keep = model.time_ps(model.first_row)
    assert model.time_ps(rows) == pytest.approx(keep + kernels, rel=1e-12)


def test_tight_memory_still_within_5_percent_with_slow_links():
    net = load_network("squeezenet")
    base = plan_iteration(net, 32, "float32", "none")
    model = build_model(net, 32, "float32", base, kernel_ps, 0,
                        copy_costs(net, 32, link=2e9, ratio=1.5))
    model.capacity = int(lower_bound_peak(model) * 1.02)  # barely feasible
    greedy, best = plan_greedy(model), plan_milp(model)
    assert greedy.predicted_time_ps <= 1.05 * best.predicted_time_ps


def test_planned_plans_really_fit_when_rendered():
    for network, batch, fraction in CASES:
        net = load_network(network)
        base = plan_iteration(net, batch, "float32", "none")
        capacity = int(plan_peak(base) * fraction)
        result = plan_to_fit(net, batch, "float32", capacity, kernel_ps,
                             copy_costs(net, batch), base=base)
        rendered = plan_iteration(net, batch, "float32", "auto", choices=result.choices)
        assert plan_peak(rendered) == result.rendered_peak_bytes <= capacity, network


def test_without_an_engine_only_keep_and_recompute_are_chosen():
    net = load_network("resnet50")
    base = plan_iteration(net, 8, "float32", "none")
    result = plan_to_fit(net, 8, "float32", int(plan_peak(base) * 0.7), kernel_ps, None,
                         base=base)
    assert set(result.choices.values()) == {"keep", "recompute"}


def test_memory_enough_keeps_everything():
    net = load_network("alexnet")
    base = plan_iteration(net, 8, "float32", "none")
    result = plan_to_fit(net, 8, "float32", plan_peak(base), kernel_ps, copy_costs(net, 8),
                         base=base)
    assert set(result.choices.values()) == {"keep"}


def test_a_model_that_cannot_fit_says_how_far_short_it_is():
    net = load_network("alexnet")
    base = plan_iteration(net, 64, "float32", "none")
    with pytest.raises(PlanInfeasible) as err:
        plan_to_fit(net, 64, "float32", 100_000_000, kernel_ps, copy_costs(net, 64), base=base)
    text = str(err.value)
    assert "cannot fit in 100000000 bytes (0.09 GiB)" in text
    assert f"{err.value.short_bytes} bytes" in text and "GiB) short" in text
    assert err.value.short_bytes > 0 and "\n" not in text


def _offloading_everything(net, batch):
    """The exact peak of ``net``'s plan with every activation it may offload offloaded (the
    rest kept): no recomputation, so no tensor held for a rebuild."""
    base = plan_iteration(net, batch, "float32", "none")
    model = build_model(net, batch, "float32", base, kernel_ps, 10**15, copy_costs(net, batch))
    choices = {t: "offload" if "offload" in model.choices[k] else "keep"
               for k, t in enumerate(model.tensors)}
    return plan_peak(plan_iteration(net, batch, "float32", "auto", choices=choices))


def test_what_offloading_everything_fits_the_planner_fits():
    """The greedy's recomputations add backward reads that only grow, until its model holds
    more than any plan needs and refuses: a plan without recomputation, which induces none,
    still fits at the capacity offloading everything holds (gpt2_small, sequence 128)."""
    net = load_network("gpt2_small", 128)
    capacity = _offloading_everything(net, 8)
    result = plan_to_fit(net, 8, "float32", capacity, kernel_ps, copy_costs(net, 8))
    assert result.rendered_peak_bytes <= capacity


def test_the_shortfall_is_a_plan_s_and_shrinks_as_the_memory_grows():
    """Below what offloading everything holds, the refusal names the least-memory plan's
    shortfall: a rendered plan's (never more than offloading everything's), and never more
    with more memory."""
    net = load_network("gpt2_small", 128)
    offloaded = _offloading_everything(net, 8)
    shorts = []
    for fraction in (0.90, 0.95, 0.98):
        capacity = int(offloaded * fraction)
        with pytest.raises(PlanInfeasible) as err:
            plan_to_fit(net, 8, "float32", capacity, kernel_ps, copy_costs(net, 8))
        assert 0 < err.value.short_bytes <= offloaded - capacity
        assert f"holds {capacity + err.value.short_bytes} bytes" in str(err.value)
        shorts.append(err.value.short_bytes)
    assert shorts == sorted(shorts, reverse=True)


def test_greedy_plan_is_deterministic():
    net = load_network("googlenet")
    base = plan_iteration(net, 16, "float32", "none")
    cap = int(plan_peak(base) * 0.6)
    a = plan_to_fit(net, 16, "float32", cap, kernel_ps, copy_costs(net, 16), base=base)
    b = plan_to_fit(net, 16, "float32", cap, kernel_ps, copy_costs(net, 16), base=base)
    assert a.choices == b.choices and a.predicted_time_ps == b.predicted_time_ps


def simulate(*opts):
    return sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", list(opts),
                        console=io.StringIO(), record_statistics=False).reports["summary"]


def test_simulated_auto_plan_fits_and_matches_the_prediction():
    s = simulate("--network", "squeezenet", "--batch", "640", "--policy", "auto",
                 "--no-baselines")
    assert s["fits_in_memory"] and s["out_of_memory"] is None
    planner = s["plan"]["planner"]
    assert planner["rendered_peak_bytes"] == s["peak_gpu_memory_bytes"]
    # without memory to spare the planner recomputes or offloads something
    assert s["plan"]["counts"]["keep"] < len(s["plan"]["tensors"])
    gap = abs(planner["predicted_time_s"] - s["iteration_time_s"]) / s["iteration_time_s"]
    assert gap < 0.02, gap


def test_simulated_model_that_cannot_fit_is_one_line_error():
    with pytest.raises(RunError) as err:
        simulate("--network", "vgg16", "--batch", "1024", "--policy", "auto",
                 "--no-baselines")
    text = str(err.value)
    assert "policy auto: cannot fit in 17179869184 bytes (16.00 GiB)" in text
    assert "GiB) short" in text and "\n" not in text.strip()


@pytest.mark.parametrize("codec,ratio,offered", [(30e9, 3.0, True), (30e9, 1.0, False),
                                                 (6e9, 3.0, False)])
def test_compress_is_offered_only_where_it_can_be_faster(codec, ratio, offered):
    """A codec that gains nothing (a ratio of 1: dense data sent as it is) or runs slower than
    the link (6 GB/s of codec against 12 GB/s of link) never makes a copy faster: the planner
    does not offer it, so a plan never says "compress" where the copy is a plain one."""
    net = load_network("alexnet")
    base = plan_iteration(net, 16, "float32", "none")
    model = build_model(net, 16, "float32", base, kernel_ps, 0,
                        copy_costs(net, 16, codec=codec, ratio=ratio))
    with_copies = [c for c in model.choices if "offload" in c]
    assert with_copies
    assert all(("compress" in c) == offered for c in with_copies)
