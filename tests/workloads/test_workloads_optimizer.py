"""The optimizer step: state in GPU memory, one update kernel per layer with weights, an
``update`` phase the parser checks, and the simulation timing it as the closed form does."""
from __future__ import annotations

import math

import io

import pytest

import sst_cdma
from sst_cdma.model.closed_form import from_simulation
from sst_cdma.engine.runner import RunError
from workloads import NETWORKS, StreamError, load_network, parse_stream, stream_stats
from workloads.render import render_plan, render_stream
from workloads.vdnn import OPTIMIZERS, plan_iteration


def stream_for(network: str, policy: str, optimizer: str, batch: int = 8,
               dtype: str = "float32"):
    text = render_plan(plan_iteration(load_network(network), batch, dtype, policy,
                                      optimizer=optimizer))
    return text, parse_stream(text, f"{network}-{optimizer}")


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.every_network
def test_state_and_update_kernels_follow_the_weights(network, optimizer):
    step = OPTIMIZERS[optimizer]
    infos = [i for i in load_network(network).infer(8) if i.params]
    _, stream = stream_for(network, "all", optimizer)
    states = {t.layer: t.bytes for t in stream.tensors.values() if t.kind == "state"}
    if step.state_buffers:
        assert states == {i.name: step.state_buffers * i.weight_bytes for i in infos}
    else:
        assert states == {}
    updates = [op for op in stream.ops if op.op == "compute" and op.pass_ == "update"]
    assert [op.name for op in updates] == [i.name for i in infos]  # forward order
    # float32: read w, g and the state, write w and the state
    elements = {"sgd": 3, "momentum": 5, "adam": 7}[optimizer]
    for op, info in zip(updates, infos):
        assert op.phase == "update"
        assert op.flops == step.flops * info.params
        assert op.dram == elements * info.weight_bytes
    stats = stream_stats(stream)
    assert stats.leaked == ()
    assert stats.state_bytes == step.state_buffers * stats.weight_bytes
    assert stats.dram_update == elements * stats.weight_bytes


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("optimizer,state,dram", [("sgd", 4, 2 + 4 + 4 + 2),
                                                  ("momentum", 8, 2 + 4 + 4 + 4 + 4 + 2),
                                                  ("adam", 12, 2 + 4 + 8 + 4 + 8 + 2)])
def test_low_precision_steps_keep_a_float32_master_copy_and_state(dtype, optimizer, state, dram):
    """Bytes per weight: the state (master copy + buffers, float32), and the update's traffic:
    read g (2), master (4), buffers (4 each); write master, buffers, the 2-byte weights."""
    infos = [i for i in load_network("alexnet").infer(8, dtype) if i.params]
    _, stream = stream_for("alexnet", "all", optimizer, dtype=dtype)
    states = {t.layer: t.bytes for t in stream.tensors.values() if t.kind == "state"}
    assert states == {i.name: state * i.params for i in infos}
    updates = [op for op in stream.ops if op.op == "compute" and op.pass_ == "update"]
    assert [op.dram for op in updates] == [dram * i.params for i in infos]
    assert all(i.weight_bytes == 2 * i.params for i in infos)


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("policy", ["none", "all", "conv"])
@pytest.mark.every_network
def test_optimizer_state_adds_exactly_its_bytes_to_the_peak(network, policy):
    without = stream_stats(stream_for(network, policy, "none")[1])
    adam = stream_stats(stream_for(network, policy, "adam")[1])
    assert adam.peak_bytes == without.peak_bytes + adam.state_bytes
    assert adam.state_bytes == 2 * without.weight_bytes


def test_no_optimizer_is_the_stream_without_a_step():
    text, stream = stream_for("alexnet", "conv", "none")
    assert text == render_stream("alexnet", 8, "float32", "conv")
    assert "phase update" not in text
    assert all(op.phase != "update" for op in stream.ops)


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("phase backward\n", "phase update\n", 1), "'phase update' out of "
                                                                   "order"),
    (lambda t: t.replace("pass=update", "pass=bwd", 1), "'compute': pass=bwd inside 'phase "
                                                        "update'"),
    (lambda t: t.replace("phase update\n", "", 1), "'compute': pass=update inside 'phase "
                                                   "backward'"),
    (lambda t: t.replace("kind=state", "kind=momentum", 1), "unknown kind 'momentum'"),
])
def test_a_malformed_update_phase_names_its_line(edit, message):
    text, _ = stream_for("alexnet", "conv", "momentum")
    with pytest.raises(StreamError) as err:
        parse_stream(edit(text), "edited.stream")
    assert str(err.value).startswith("edited.stream:")
    assert message in str(err.value)


def _simulate(repo, *opts):
    return sst_cdma.run(repo / "topologies/pascal_cdma.py", list(opts), console=io.StringIO())


@pytest.mark.parametrize("network", ["alexnet", "googlenet", "resnet50"])
@pytest.mark.parametrize("policy", ["none", "all"])
def test_the_update_phase_is_timed_as_the_closed_form_says(repo, network, policy):
    result = _simulate(repo, "--network", network, "--batch", "16", "--policy", policy,
                       "--optimizer", "momentum", "--no-contention", "--no-baselines")
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.iteration_time_ps == closed.iteration_ps
    assert [(ln["layer"], ln["phase"], ln["end_ps"]) for ln in gpu.layers] == closed.boundaries
    updates = [ln for ln in gpu.layers if ln["phase"] == "update"]
    assert updates and gpu.update_time_ps == sum(ln["end_ps"] - ln["start_ps"] for ln in updates)
    assert gpu.forward_time_ps + gpu.backward_time_ps + gpu.update_time_ps == \
        gpu.iteration_time_ps


def test_a_run_reports_the_step_and_its_memory(repo):
    roofline = ("--kernel-model", "roofline")
    plain = _simulate(repo, "--network", "vgg16", "--batch", "32", "--policy", "conv", *roofline)
    sgd = _simulate(repo, "--network", "vgg16", "--batch", "32", "--policy", "conv",
                    "--optimizer", "momentum", *roofline)
    a, b = plain.reports["summary"], sgd.reports["summary"]
    assert (a["optimizer"], a["update_time_s"]) == ("none", 0.0)
    assert b["optimizer"] == "momentum"
    weights = stream_stats(stream_for("vgg16", "conv", "none", 32)[1]).weight_bytes
    assert b["peak_gpu_memory_bytes"] - a["peak_gpu_memory_bytes"] == weights
    for label in ("oracle", "vdnn"):  # the baselines take the same step
        assert b["baselines"][label]["peak_gpu_memory_bytes"] - \
            a["baselines"][label]["peak_gpu_memory_bytes"] == weights
    # memory-bound: 5 weight-sized reads and writes at the HBM's achievable bandwidth; each of the
    # 16 update kernels rounds up to a whole ps (<= 16 ps of 4.4 ms: rel 4e-9)
    assert b["update_time_s"] == pytest.approx(5 * weights / (732e9 * 0.85), rel=1e-8)
    assert b["iteration_time_s"] - a["iteration_time_s"] == pytest.approx(b["update_time_s"],
                                                                           rel=1e-8)


def test_bad_optimizer_options_stop_the_run_before_it_starts(repo, tmp_path):
    with pytest.raises(RunError, match="argument --optimizer: 'lion' is not one of none, sgd, momentum, adam"):
        _simulate(repo, "--optimizer", "lion")
    with pytest.raises(RunError, match="--optimizer contradicts --workload: it applies to a rendered --network"):
        _simulate(repo, "--workload", str(tmp_path / "x.stream"), "--optimizer", "sgd")


def test_the_workloads_cli_renders_the_step(tmp_path, capsys):
    from sst_cdma.tools.workloads import main

    out = tmp_path / "alexnet.stream"
    assert main(["render", "alexnet", "--batch", "8", "--optimizer", "adam", "-o", str(out)]) == 0
    assert out.read_text() == stream_for("alexnet", "conv", "adam")[0]
    assert main(["stats", str(out)]) == 0


def test_the_fitted_model_runs_update_kernels_at_the_hbm_rate_or_its_launch(repo):
    from sst_cdma.model.fitted import kernel_model_for

    run = _simulate(repo, "--network", "alexnet", "--batch", "16", "--policy", "none",
                    "--optimizer", "adam", "--no-baselines", "--no-contention")
    gpu = run.simulation.components["gpu0"]
    launch = kernel_model_for("pascal").params.launch_s
    assert gpu.kernels.launch_ps == math.ceil(launch * 1e12) > 0
    updates = [op for op in gpu.stream.ops if op.op == "compute" and op.pass_ == "update"]
    assert updates and all(op.time_ps is None for op in updates)
    # memory-bound: the bytes at the HBM's achievable bandwidth (732 GB/s x 0.85), at least
    # the fitted launch interval, each rounded up to a whole ps; the stream synchronizes after
    # each layer's update, so each kernel also waits the launch latency
    expected = sum(max(math.ceil(op.dram / (732e9 * 0.85) * 1e12), gpu.kernels.launch_ps)
                   + gpu.kernels.launch_ps for op in updates)
    assert abs(run.results["gpu0"].update_time_ps - expected) <= len(updates)
