"""Model states placed off the GPU (ZeRO-Offload) and gradient accumulation, end to end: what
each tier holds, a full tier reported with its overshoot, the summary's figures, and every bad
input as one line naming the option and what is missing."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "pascal_cdma.py"
ALEX = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--optimizer", "adam",
        "--policy", "none"]
HOST = [*ALEX, "--optimizer-states", "host"]
#: AlexNet's parameters: the fp16 gradients are 2 bytes each, the fp32 master and moments 12
ALEX_PARAMS = 60_965_224


def run(options, **kw):
    return sst_cdma.run(TOPOLOGY, [*options, "--no-baselines"], console=io.StringIO(), **kw)


def one_line_error(options, **kw) -> str:
    with pytest.raises(RunError) as err:
        run(options, **kw)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_the_host_holds_master_weights_moments_and_gradients():
    result = run(HOST)
    states = result.results["gpu0"].model_states
    assert states["host_state_bytes"] == {"optimizer_states": 12 * ALEX_PARAMS,
                                          "gradients": 2 * ALEX_PARAMS}
    assert states["tiers"]["host"]["peak_bytes"] == 14 * ALEX_PARAMS
    assert states["gradients_to_host_bytes"] == states["weights_to_gpu_bytes"] == 2 * ALEX_PARAMS


def test_the_host_tier_counts_the_offloaded_activations_too():
    result = run([*ALEX, "--policy", "conv", "--algorithm", "none", "--optimizer-states", "host"])
    gpu = result.results["gpu0"]
    host = gpu.model_states["tiers"]["host"]
    assert gpu.offloaded_bytes > 0
    assert host["peak_bytes"] == 14 * ALEX_PARAMS + gpu.offloaded_bytes


def test_the_gpu_no_longer_holds_the_optimizer_state_and_with_gradients_host_fewer_gradients():
    on_gpu = run(ALEX).results["gpu0"]
    host = run(HOST).results["gpu0"]
    host_grads = run([*HOST, "--gradients", "host", "--bucket-size", "8MiB"]).results["gpu0"]
    # Adam's fp32 master and two moments (12 bytes a parameter) leave the GPU
    assert on_gpu.peak_gpu_memory_bytes - host.peak_gpu_memory_bytes >= 12 * ALEX_PARAMS
    assert host_grads.peak_gpu_memory_bytes < host.peak_gpu_memory_bytes
    assert host_grads.average_gpu_memory_bytes < host.average_gpu_memory_bytes


def test_a_full_host_tier_is_reported_with_the_overshoot():
    result = run(HOST, overrides={"host": {"pinned_capacity": "500MB"}})
    host = result.results["gpu0"].model_states["tiers"]["host"]
    assert not host["fits"]
    assert host["out_of_memory"]["tier"] == "host"
    # the first buffer past capacity (the master weights and moments) and what it lacked
    assert host["out_of_memory"]["tensor"] == "gpu0:optimizer_states"
    assert host["out_of_memory"]["bytes_short"] == 12 * ALEX_PARAMS - 500_000_000
    assert host["peak_bytes"] - host["capacity_bytes"] == 14 * ALEX_PARAMS - 500_000_000
    out = io.StringIO()
    sst_cdma.run(TOPOLOGY, [*HOST, "--no-baselines"], console=out,
                 overrides={"host": {"pinned_capacity": "500MB"}})
    assert "host tier:" in out.getvalue() and "DOES NOT FIT" in out.getvalue()


def test_a_full_gpu_tier_is_reported_with_the_overshoot():
    result = run([*ALEX, "--grad-accum", "2"], overrides={"gpu0.hbm": {"capacity": "500MB"}})
    gpu = result.results["gpu0"]
    tier = gpu.model_states["tiers"]["gpu"]
    assert not tier["fits"] and tier["out_of_memory"]["bytes_short"] == \
        gpu.out_of_memory["bytes_short"] > 0
    assert tier["peak_bytes"] - 500_000_000 >= tier["out_of_memory"]["bytes_short"]


def test_grad_accum_runs_every_micro_batch_and_steps_once():
    one = run(ALEX).results["gpu0"]
    three = run([*ALEX, "--grad-accum", "3"]).results["gpu0"]
    states = three.model_states
    assert states["micro_batches"] == 3 and len(states["micro_batch_time_ps"]) == 3
    assert three.update_time_ps == one.update_time_ps  # one optimizer step per step
    # each micro-batch is the one iteration's passes
    assert all(t == one.forward_time_ps + one.backward_time_ps
               for t in states["micro_batch_time_ps"])
    assert three.iteration_time_ps == 3 * (one.forward_time_ps + one.backward_time_ps) + \
        one.update_time_ps


@pytest.mark.parametrize("placement", [[], ["--optimizer-states", "host"]])
def test_grad_accum_forward_and_backward_times_sum_over_the_micro_batches(placement):
    # issue #34: forward_time was one micro-batch's forward pass, and the backward time
    # swallowed the other micro-batches' forward passes
    one = run([*ALEX, *placement]).results["gpu0"]
    four = run([*ALEX, *placement, "--grad-accum", "4"]).results["gpu0"]
    assert four.forward_time_ps == 4 * one.forward_time_ps
    assert four.backward_time_ps == 4 * one.backward_time_ps
    assert four.update_time_ps == one.update_time_ps
    assert four.forward_time_ps + four.backward_time_ps + four.update_time_ps == \
        four.iteration_time_ps


def test_the_summary_reports_placements_and_tiers(tmp_path):
    result = sst_cdma.run(TOPOLOGY, [*HOST, "--delayed-update", "--bucket-size", "8MiB"],
                          console=(out := io.StringIO()), output_directory=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert check_summary(summary) == []
    states = summary["model_states"]
    assert states["placement"] == {"optimizer_states": "host", "weights": "gpu",
                                   "gradients": "gpu", "delayed_update": True}
    assert set(states["tiers"]) == {"gpu", "host"}
    assert states["step_time_s"] == summary["iteration_time_s"]
    text = out.getvalue()
    assert "model states:    optimizer states host, gradients gpu, weights gpu, delayed update" \
        in text and "host tier:" in text and "host CPU step:" in text
    # the oracle keeps every state on its GPU
    assert summary["baselines"]["oracle"]["peak_gpu_memory_bytes"] > \
        summary["peak_gpu_memory_bytes"]
    assert result.results["oracle.gpu0"].model_states == {}


def test_defaults_leave_the_result_as_it_was():
    assert run(ALEX).results["gpu0"].model_states == {}


@pytest.mark.parametrize("options, words", [
    (["--optimizer-states", "nvme"], "--optimizer-states nvme needs an NVMe SSD to hold it: "
                                     "this system has no NVMe element (give --nvme N"),
    (["--weights", "nvme"], "--weights nvme needs an NVMe SSD to hold it"),
    (["--optimizer-states", "nvme", "--nvme", "1", "--nvme-capacity", "100MB"],
     "NVMe capacity exhausted storing 'gpu0.dma/bucket0:s'"),
    (["--weights", "nvme", "--nvme", "1"], "--weights nvme: the update kernels on the GPU"),
    (["--grad-accum", "0"], "--grad-accum: '0' must be >= 1"),
    (["--optimizer-states", "host", "--bucket-size", "1GB"],
     f"--bucket-size 1000000000 bytes is larger than the gradients ({2 * ALEX_PARAMS} bytes)"),
    (["--optimizer-states", "host", "--optimizer", "sgd"], "it needs --optimizer adam"),
    (["--delayed-update"], "--delayed-update overlaps the host CPU's optimizer step"),
    (["--gradients", "host"], "--gradients host: the gradients go to the host"),
    (["--weights", "host"], "--weights host: the update kernels on the GPU"),
    (["--bucket-size", "8MiB"], "--bucket-size needs --data-parallel"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_a_bad_option_is_one_line_naming_it(options, words):
    assert words in one_line_error([*ALEX, *options])


def test_a_stream_file_takes_no_placement():
    stream = REPO / "tests" / "data" / "golden" / "pascal-vdnn" / "gpu0.stream"
    assert "--optimizer-states contradicts --workload" in one_line_error(
        ["--workload", str(stream), "--optimizer-states", "host"])


def test_two_gpus_share_their_hosts_cpu():
    result = run([*HOST, "--gpus", "2"])
    cpu = result.results["cpu"]
    assert cpu.gpus == ["gpu0", "gpu1"]
    assert len(cpu.steps) == 2  # one bucket each, one after the other
    (_, a0, a1), (_, b0, b1) = cpu.steps
    assert a1 <= b0
    host = result.results["gpu0"].model_states["tiers"]["host"]
    assert host["peak_bytes"] == 2 * 14 * ALEX_PARAMS


def test_a_cpu_adam_file_of_another_format_is_refused(tmp_path):
    other = tmp_path / "adam.json"
    other.write_text(json.dumps({"format": "something else 2", "params_per_s_per_core": 1e9}))
    message = one_line_error([*HOST, "--cpu-adam-file", str(other)])
    assert "cpu (cdma.HostCPU): --cpu-adam-file: " in message
    assert "format: 'something else 2' is not 'sst-cdma-cpu-adam'" in message
    not_json = tmp_path / "adam.txt"
    not_json.write_text("fast")
    assert "not a JSON file" in one_line_error([*HOST, "--cpu-adam-file", str(not_json)])


def test_the_cpu_adam_throughput_sets_the_step():
    slow = run([*HOST, "--cpu-adam-throughput", "1e7"]).results["gpu0"].model_states
    fast = run([*HOST, "--cpu-adam-throughput", "1e8"]).results["gpu0"].model_states
    cores = 32
    assert slow["cpu_step_alone_ps"] == -(-ALEX_PARAMS * 10**12 // (10**7 * cores))
    assert fast["cpu_step_time_ps"] < slow["cpu_step_time_ps"]


def _gpu_only(tmp_path, workload: str) -> Path:
    script = tmp_path / "gpu_only.py"
    script.write_text(f"""import sst
gpu = sst.Component("gpu0", "cdma.GPU")
w = gpu.setSubComponent("workload", "cdma.NetworkWorkload")
w.addParams({{"network": "alexnet", "batch": 8, "dtype": "float16", "policy": "none",
             "optimizer": "adam", {workload}}})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
sst.Link("gpu0.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Component("report", "cdma.Reporter")
""")
    return script


@pytest.mark.parametrize("workload, words", [
    ('"optimizer_states": "host", "weights": "host"',
     "gpu0: weights=host: each layer's weights are copied from the host for its use, and "
     "port 'dma' is not connected"),
    ('"optimizer_states": "host"', "gpu0: optimizer_states=host: the model states' copies and "
                                   "the host CPU's steps need a driver, and slot "
                                   "'model_states' is empty"),
])
def test_a_placement_without_a_host_link_is_refused(tmp_path, workload, words):
    with pytest.raises(RunError) as err:
        sst_cdma.run(_gpu_only(tmp_path, workload), [], console=io.StringIO())
    assert words in str(err.value) and "\n" not in str(err.value)
