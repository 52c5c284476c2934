"""cuDNN workspace: each convolution kernel holds it for exactly its own duration, the peak
grows by at most that much, and a workspace too big for the GPU is an out-of-memory report
naming the convolution."""
from __future__ import annotations

import io

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError
from workloads import (CNNS, WorkloadError, load_network, parse_stream,
                                stream_stats)
from workloads.render import render_stream
from workloads.vdnn import plan_iteration

MiB = 1 << 20


@pytest.mark.parametrize("network", CNNS)  # the workspace is the convolutions'
@pytest.mark.parametrize("policy", ["none", "all"])
def test_each_convolution_holds_its_workspace_for_its_kernel_only(network, policy):
    stream = parse_stream(render_stream(network, 8, "float32", policy, workspace=64 * MiB),
                          network)
    convs = {layer.name for layer in load_network(network).layers if layer.kind == "conv"}
    spaces = {t.layer: t.bytes for t in stream.tensors.values() if t.kind == "workspace"}
    assert spaces == {name: 64 * MiB for name in convs}
    ops = stream.ops
    for k, op in enumerate(ops):
        if op.op == "compute" and op.name in convs and op.pass_ in ("fwd", "bwd"):
            ws = f"{op.name}:ws"
            assert (ops[k - 1].op, ops[k - 1].name) == ("alloc", ws)
            assert ws in op.writes
            assert (ops[k + 1].op, ops[k + 2].op, ops[k + 2].name) == ("sync", "free", ws)
    stats = stream_stats(stream)
    plain = stream_stats(parse_stream(render_stream(network, 8, "float32", policy), network))
    assert stats.leaked == ()
    assert plain.peak_bytes < stats.peak_bytes <= plain.peak_bytes + 64 * MiB


def test_no_workspace_is_the_plain_stream_and_a_negative_one_is_refused():
    assert render_stream("alexnet", 8, workspace=0) == render_stream("alexnet", 8)
    with pytest.raises(WorkloadError, match="workspace must not be negative"):
        plan_iteration(load_network("alexnet"), 8, workspace=-1)


def _simulate(repo, *opts):
    return sst_cdma.run(repo / "topologies/pascal_cdma.py", list(opts), console=io.StringIO())


def test_a_workspace_can_make_a_network_stop_fitting(repo):
    base = ["--network", "vgg16", "--batch", "256", "--policy", "none", "--algorithm", "none",
            "--no-baselines", "--kernel-model", "roofline"]
    fits = _simulate(repo, *base).reports["summary"]
    short = _simulate(repo, *base, "--workspace", "1GiB").reports["summary"]
    assert fits["fits_in_memory"] and not short["fits_in_memory"]
    assert 0 < short["peak_gpu_memory_bytes"] - fits["peak_gpu_memory_bytes"] <= 1 << 30
    assert short["iteration_time_s"] == fits["iteration_time_s"]  # memory only
    oom = short["out_of_memory"]
    assert oom["tensor"].endswith(":ws") and oom["layer"] == oom["tensor"][:-3]
    assert load_network("vgg16").layer(oom["layer"]).kind == "conv"


@pytest.mark.parametrize("value,message", [
    ("lots", "--workspace: 'lots' is not a number with a unit"),
    ("-1GiB", "--workspace: '-1GiB' is negative"),
    ("5s", "--workspace: '5s' is not a size"),
])
def test_a_bad_workspace_stops_the_run_before_it_starts(repo, value, message):
    with pytest.raises(RunError) as err:
        _simulate(repo, f"--workspace={value}")
    assert "model option error: " + message in str(err.value)


def test_a_workload_stream_declares_its_own_workspace(repo, tmp_path):
    with pytest.raises(RunError, match="--workspace contradicts --workload: it applies to a rendered --network"):
        _simulate(repo, "--workload", str(tmp_path / "x.stream"), "--workspace", "1MiB")
