"""Layer-times files: exact durations, validation naming the file and the fault, the check
against a network, and the times reaching the stream and the simulation."""
from __future__ import annotations

import io
import json
import os

import pytest

import sst_cdma
from sst_cdma.model.closed_form import from_simulation
from sst_cdma.engine.runner import RunError
from workloads import WorkloadError, load_network
from sst_cdma.model.fitted import kernel_model_for
from workloads.kernel_pricing import price_network
from workloads.layer_times import (PASSES, LayerTimes, format_ps,
                                            implied_compute_efficiency, load_layer_times,
                                            sequence_length, tensor_core_check)
from workloads.render import iteration_stream
from workloads.stream import parse_duration


def made_up_times(network: str, batch: int, dtype: str = "float32") -> LayerTimes:
    """Distinct times for every kernel: layer k's forward takes (k+1) x 10.5 us, its backward
    twice that plus 1 ps, so a misplaced time would show."""
    net = load_network(network)
    layers = [layer.name for layer in net.layers if layer.kind != "data"]
    return LayerTimes(net.name, batch, dtype, "a made-up device",
                      {name: {"fwd": (k + 1) * 10_500_000, "bwd": 2 * (k + 1) * 10_500_000 + 1}
                       for k, name in enumerate(layers)}, "test")


@pytest.mark.parametrize("ps", [0, 1, 999, 1000, 1234, 10**6, 1_234_567, 10**9 + 1,
                                123_456_789_012, 7 * 10**12])
def test_durations_are_written_exactly(ps):
    assert parse_duration(format_ps(ps)) == ps


def test_a_written_file_reads_back_the_same(tmp_path):
    times = made_up_times("alexnet", 16)
    times.write(tmp_path / "t.json")
    back = load_layer_times(tmp_path / "t.json")
    assert back == times
    assert back.source == str(tmp_path / "t.json")
    assert not list(tmp_path.glob("*.tmp"))


def _doc(**changes):
    doc = made_up_times("alexnet", 16).to_json()
    doc.update(changes)
    return doc


@pytest.mark.parametrize("content,message", [
    ("{not json", "invalid JSON at line 1"),
    (json.dumps([1, 2]), "a layer-times file holds a JSON object"),
    (json.dumps(_doc(format="profile")), "not a layer-times file"),
    (json.dumps(_doc(version=7)), "unsupported version 7"),
    (json.dumps(_doc(colour="red")), "unknown key 'colour'"),
    (json.dumps(_doc(network="")), "'network' must be a non-empty string"),
    (json.dumps(_doc(batch=0)), "'batch' must be a positive integer, got 0"),
    (json.dumps(_doc(batch=1.5)), "'batch' must be a positive integer, got 1.5"),
    (json.dumps(_doc(layers={})), "'layers' must map layer names"),
    (json.dumps(_doc(layers={"conv1": {"sideways": "1ms"}})), "layer 'conv1': unknown pass"),
    (json.dumps(_doc(layers={"conv1": {"fwd": 0.001}})), "layer 'conv1' fwd: time must be a "
                                                         "string with a unit"),
    (json.dumps(_doc(layers={"conv1": {"fwd": "3 fortnights"}})), "layer 'conv1' fwd: bad "
                                                                   "duration"),
    (json.dumps(_doc(layers={"conv1": {"bwd": "-2ms"}})), "layer 'conv1' bwd: bad duration"),
    (json.dumps(_doc(layers={"conv1": {"fwd": "0ms"}})), "layer 'conv1' fwd: a measured time "
                                                         "must be positive, got '0ms'"),
    (json.dumps(_doc(layers={"conv1": {"bwd": "1e-30s"}})), "layer 'conv1' bwd: '1e-30s' is "
                                                             "under a picosecond"),
    (json.dumps(_doc(gpu="gtx480")), "'gpu' must name a GPU preset"),
])
def test_a_bad_file_is_one_error_naming_it_and_the_fault(tmp_path, content, message):
    path = tmp_path / "times.json"
    path.write_text(content)
    with pytest.raises(WorkloadError) as err:
        load_layer_times(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(WorkloadError, match="missing.json: cannot read layer times"):
        load_layer_times(tmp_path / "missing.json")


@pytest.mark.parametrize("change,message", [
    (lambda t: setattr(t, "network", "vgg16"), "times measured for network 'vgg16', not "
                                               "'alexnet'"),
    (lambda t: setattr(t, "batch", 32), "times measured at batch 32, not 16"),
    (lambda t: setattr(t, "dtype", "float16"), "times measured in float16, not float32"),
    (lambda t: t.times_ps.update(conv9={"fwd": 1, "bwd": 1}), "no layer 'conv9' in network"),
    (lambda t: t.times_ps["fc7"].pop("bwd"), "no time for fc7.bwd; every layer needs"),
    (lambda t: [t.times_ps.pop(k) for k in ("relu1", "norm1")], "no time for relu1.fwd (and "
                                                                 "3 more)"),
    (lambda t: t.times_ps["pool1"].update(bwd=0), "layer 'pool1' bwd: a measured time of zero, "
                                                  "but its backward runs"),
])
def test_times_must_be_for_this_network_batch_and_dtype_and_cover_it(change, message):
    times = made_up_times("alexnet", 16)
    times.source = "t.json"
    change(times)
    with pytest.raises(WorkloadError) as err:
        times.check(load_network("alexnet"), 16, "float32")
    assert str(err.value).startswith("t.json: ")
    assert message in str(err.value)


def test_every_kernel_of_the_stream_takes_its_measured_time(tmp_path):
    times = made_up_times("googlenet", 8)
    times.write(tmp_path / "t.json")
    stream = iteration_stream("googlenet", 8, "float32", "all", tmp_path / "t.json")
    computes = [op for op in stream.ops if op.op == "compute"]
    assert len(computes) == 2 * len(times.times_ps)
    for op in computes:
        assert op.time_ps == times.times_ps[op.name][op.pass_], (op.name, op.pass_)
    roofline = iteration_stream("googlenet", 8, "float32", "all")
    assert all(op.time_ps is None for op in roofline.ops if op.op == "compute")


POOL_FIRST = """\
name: pool_first
layers:
  - {name: data, kind: data, params: {shape: [3, 16, 16]}}
  - {name: pool0, kind: pool, params: {kernel_size: 2, stride: 2}}
  - {name: conv1, kind: conv, params: {num_output: 8, kernel_size: 3, pad: 1}}
  - {name: relu1, kind: relu}
  - {name: fc, kind: fc, params: {num_output: 10}}
  - {name: loss, kind: loss}
"""


def test_a_backward_with_nothing_to_differentiate_does_not_run(tmp_path):
    """A pool on the network input has no weights and no input needing a gradient: no backward
    kernel runs for it, the convolution after it computes no input gradient, and a file giving
    that backward zero (as time-layers writes it) reads back and drives the stream."""
    net_path = tmp_path / "pool_first.yaml"
    net_path.write_text(POOL_FIRST)
    infos = {i.name: i for i in load_network(net_path).infer(4)}
    assert not infos["pool0"].has_backward and infos["pool0"].bwd_needs == ()
    assert infos["conv1"].grad_inputs == () and infos["conv1"].has_backward
    assert infos["conv1"].flops_bwd == infos["conv1"].flops_fwd  # the filter gradient alone
    assert infos["relu1"].grad_inputs == ("conv1",)
    times = LayerTimes("pool_first", 4, "float32", "a made-up device",
                       {n: {"fwd": 1000 * (k + 1), "bwd": 0 if n == "pool0" else 2000 * (k + 1)}
                        for k, n in enumerate(["pool0", "conv1", "relu1", "fc", "loss"])}, "test")
    times.write(tmp_path / "t.json")
    assert load_layer_times(tmp_path / "t.json").times_ps == times.times_ps
    stream = iteration_stream(str(net_path), 4, "float32", "all", tmp_path / "t.json")
    computes = [(op.name, op.pass_) for op in stream.ops if op.op == "compute"]
    assert ("pool0", "fwd") in computes and ("pool0", "bwd") not in computes
    assert ("conv1", "bwd") in computes


def test_an_edited_times_file_is_read_afresh(tmp_path):
    path = tmp_path / "t.json"
    times = made_up_times("alexnet", 8)
    times.write(path)
    first = iteration_stream("alexnet", 8, "float32", "conv", path)
    assert iteration_stream("alexnet", 8, "float32", "conv", path) is first
    times.times_ps["conv1"]["fwd"] += 1
    times.write(path)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = iteration_stream("alexnet", 8, "float32", "conv", path)
    conv1 = next(op for op in second.ops if op.op == "compute" and op.name == "conv1")
    assert conv1.time_ps == times.times_ps["conv1"]["fwd"]


def _simulate(repo, *opts, out=None):
    return sst_cdma.run(repo / "topologies/pascal_cdma.py", list(opts), output_directory=out,
                        console=io.StringIO())


def test_without_offload_the_iteration_is_the_sum_of_the_measured_times(repo, tmp_path):
    times = made_up_times("squeezenet", 16)
    times.write(tmp_path / "t.json")
    result = _simulate(repo, "--network", "squeezenet", "--batch", "16", "--policy", "none",
                       "--layer-times", str(tmp_path / "t.json"), out=tmp_path / "out")
    gpu = result.results["gpu0"]
    forward = sum(t["fwd"] for t in times.times_ps.values())
    backward = sum(t["bwd"] for t in times.times_ps.values())
    assert gpu.forward_time_ps == forward
    assert gpu.iteration_time_ps == forward + backward
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["kernel_times"] == (f"measured on a made-up device ({tmp_path / 't.json'}), "
                                       "used unscaled on pascal (the file names no GPU preset "
                                       "to scale from: it has no 'gpu' field)")
    assert summary["baselines"]["oracle"]["iteration_time_s"] == pytest.approx(
        (forward + backward) / 1e12, rel=1e-15)  # the baselines run the same kernels
    roofline = _simulate(repo, "--network", "squeezenet", "--batch", "16", "--policy", "none",
                         "--kernel-model", "roofline")
    assert roofline.reports["summary"]["kernel_times"] == "roofline"
    fitted = _simulate(repo, "--network", "squeezenet", "--batch", "16", "--policy", "none")
    assert fitted.reports["summary"]["kernel_times"].startswith("model fitted on P100")


@pytest.mark.parametrize("policy", ["all", "conv"])
def test_measured_times_keep_the_simulation_equal_to_the_closed_form(repo, tmp_path, policy):
    times = made_up_times("vgg16", 16)
    times.write(tmp_path / "t.json")
    result = _simulate(repo, "--network", "vgg16", "--batch", "16", "--policy", policy,
                       "--algorithm", "zvc", "--no-baselines", "--layer-times",
                       str(tmp_path / "t.json"))
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.iteration_time_ps == closed.iteration_ps
    assert [(ln["layer"], ln["phase"], ln["end_ps"]) for ln in gpu.layers] == closed.boundaries
    assert gpu.compute_time_ps == sum(t["fwd"] + t["bwd"] for t in times.times_ps.values())


def test_bad_layer_times_stop_the_run_before_it_starts(repo, tmp_path):
    made_up_times("alexnet", 16).write(tmp_path / "t.json")
    with pytest.raises(RunError, match="--compute-efficiency contradicts --layer-times: every "
                                       "kernel takes its measured time"):
        _simulate(repo, "--network", "alexnet", "--batch", "16", "--kernel-model", "roofline",
                  "--compute-efficiency", "0.05", "--layer-times", str(tmp_path / "t.json"))
    with pytest.raises(RunError) as err:
        _simulate(repo, "--network", "alexnet", "--batch", "32", "--layer-times",
                  str(tmp_path / "t.json"))
    assert "model option error: --layer-times: " in str(err.value)
    assert "times measured at batch 16, not 32" in str(err.value)
    with pytest.raises(RunError, match="--layer-times contradicts --workload: it applies to a rendered --network"):
        _simulate(repo, "--workload", "x.stream", "--layer-times", str(tmp_path / "t.json"))


def test_the_implied_efficiency_recovers_the_one_the_times_were_made_with():
    net = load_network("vgg16")
    peak = 10.6e12
    times = made_up_times("vgg16", 16)
    for info in net.infer(16):
        if info.kind == "conv":  # what the roofline gives at 37% of peak, compute-bound
            times.times_ps[info.name] = {"fwd": round(info.flops_fwd / (peak * 0.37) * 1e12),
                                         "bwd": round(info.flops_bwd / (peak * 0.37) * 1e12)}
    assert implied_compute_efficiency(times, net, peak) == pytest.approx(0.37, rel=1e-9)
    times.times_ps["conv1_1"]["fwd"] *= 3  # slower convolutions: a lower efficiency
    assert implied_compute_efficiency(times, net, peak) < 0.37
    with pytest.raises(WorkloadError, match="no convolution times"):
        implied_compute_efficiency(LayerTimes("alexnet", 16, "float32", "x",
                                              {"relu1": {"fwd": 1, "bwd": 1}}),
                                   load_network("alexnet"), peak)


def test_the_roofline_efficiency_is_a_model_option(repo):
    fast = _simulate(repo, "--network", "vgg16", "--batch", "16", "--policy", "none",
                     "--no-baselines", "--no-contention", "--compute-efficiency", "0.6",
                     "--kernel-model", "roofline")
    slow = _simulate(repo, "--network", "vgg16", "--batch", "16", "--policy", "none",
                     "--no-baselines", "--no-contention", "--compute-efficiency", "0.3",
                     "--kernel-model", "roofline")
    assert slow.simulation.components["gpu0"].kernels.params["compute_efficiency"] == 0.3
    ratio = slow.results["gpu0"].compute_time_ps / \
        fast.results["gpu0"].compute_time_ps
    assert 1.5 < ratio <= 2.0  # compute-bound kernels take twice as long, memory-bound ones not
    with pytest.raises(RunError, match="argument --compute-efficiency: '0' must be >= 0.0001"):
        _simulate(repo, "--compute-efficiency", "0")


def test_a_layer_times_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "times.json"
    path.write_bytes(b'{"device": "\xff"}')
    with pytest.raises(WorkloadError) as err:
        load_layer_times(path)
    assert str(err.value) == f"{path}: not UTF-8 text (byte 0xff at offset 12)"


def test_the_tensor_core_check_sums_the_kernels_the_model_runs_on_tensor_cores():
    net = load_network("alexnet")
    times = made_up_times("alexnet", 16, "bfloat16")
    check = tensor_core_check(times, net, "h100_pcie")
    priced = price_network(net, 16, "bfloat16", kernel_model_for("h100_pcie"))
    fc = ("fc6", "fc7", "fc8")  # AlexNet's GEMMs; its convolutions stay at the fp32 rate
    assert check.kernels == 2 * len(fc)
    assert check.measured_s == sum(times.times_ps[n][p] for n in fc for p in PASSES) / 1e12
    assert check.modelled_s == sum(priced[n][p].time_ps for n in fc for p in PASSES) / 1e12
    assert check.ratio == check.measured_s / check.modelled_s
    # no tensor cores for bfloat16 (Volta), or fp32: nothing to check
    assert tensor_core_check(times, net, "volta").kernels == 0
    assert tensor_core_check(made_up_times("alexnet", 16), net, "h100_pcie").kernels == 0


def test_a_transformers_sequence_length_is_recorded_and_checked(tmp_path):
    net = load_network("gpt2_small", seq_len=128)
    assert sequence_length(net) == 128 and sequence_length(load_network("alexnet")) == 0
    layers = [layer.name for layer in net.layers if layer.kind != "data"]
    times = LayerTimes("gpt2_small", 2, "bfloat16", "a made-up device",
                       {name: {"fwd": 1000, "bwd": 2000} for name in layers}, seq_len=128)
    times.write(tmp_path / "t.json")
    back = load_layer_times(tmp_path / "t.json")
    assert back.seq_len == 128
    back.check(net, 2, "bfloat16")
    with pytest.raises(WorkloadError, match="times measured at sequence length 128, not 1024"):
        back.check(load_network("gpt2_small"), 2, "bfloat16")
    doc = json.loads((tmp_path / "t.json").read_text())
    doc["seq_len"] = -1
    (tmp_path / "t.json").write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match="'seq_len' must be a non-negative integer, got -1"):
        load_layer_times(tmp_path / "t.json")
