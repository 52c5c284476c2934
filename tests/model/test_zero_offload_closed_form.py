"""The ZeRO-Offload step (optimizer states on the host, the step on the host CPU) against its
closed form (sst_cdma.model.zero_offload): where nothing interferes — kernels not sharing DRAM
with the copies, no activation offloads, host DRAM not saturated — the step ends at the same
picosecond, with and without the delayed update and over several micro-batches."""
from __future__ import annotations

import io

import pytest

import sst_cdma
from sst_cdma.model.zero_offload import from_simulation

TOPOLOGY = "topologies/pascal_cdma.py"


#: a CPU Adam rate (per core, 32 cores) whose DRAM traffic (28 bytes a parameter, 9 GB/s)
#: leaves the host DRAM unsaturated beside both copy directions: nothing interferes
UNSATURATED = ("--cpu-adam-throughput", "1e7")


def simulate(repo, *extra, cpu=UNSATURATED):
    opts = [*cpu, "--network", "alexnet", "--batch", "16", "--dtype", "float16", "--policy", "none",
            "--algorithm", "none", "--optimizer", "adam", "--optimizer-states", "host",
            "--no-baselines", "--no-contention", *extra]
    return sst_cdma.run(repo / TOPOLOGY, opts, console=io.StringIO())


@pytest.mark.parametrize("extra", [
    (), ("--gradients", "host"), ("--delayed-update",), ("--gradients", "host", "--delayed-update"),
    ("--bucket-size", "8MiB"), ("--bucket-size", "8MiB", "--delayed-update"),
    ("--grad-accum", "3", "--bucket-size", "8MiB"),
    ("--weights", "host", "--gradients", "host", "--bucket-size", "8MiB"),
    ("--weights", "host", "--bucket-size", "8MiB", "--delayed-update"),
    ("--gradients", "host", "--grad-accum", "2"),
    ("--gradients", "host", "--grad-accum", "3", "--bucket-size", "8MiB"),
], ids=lambda e: " ".join(e) or "default")
def test_step_equals_closed_form(repo, extra):
    result = simulate(repo, *extra)
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.completed
    assert gpu.iteration_time_ps == closed.step_ps
    assert gpu.model_states["buckets"] == len(closed.buckets)


def test_with_the_measured_cpu_the_immediate_step_runs_alone(repo):
    # the shipped measurement's rate on 32 cores wants more host DRAM bandwidth than there
    # is: the step is DRAM-bound; without the delayed update it runs after every gradient
    # copy and before the weights' copy back, alone on the host DRAM, as the closed form
    # prices it
    result = simulate(repo, "--bucket-size", "8MiB", cpu=())
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.iteration_time_ps == closed.step_ps
    states = gpu.model_states
    assert states["cpu_step_time_ps"] == states["cpu_step_alone_ps"]


def test_with_the_measured_cpu_sharing_host_dram_only_delays(repo):
    # delayed: the CPU's step runs beside this iteration's gradient copies, which land in
    # the host DRAM it is bound by: slower than alone, and the closed form a lower bound
    result = simulate(repo, "--bucket-size", "8MiB", "--delayed-update", cpu=())
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert closed.step_ps <= gpu.iteration_time_ps <= closed.step_ps * 1.5
    states = gpu.model_states
    assert states["cpu_step_time_ps"] > states["cpu_step_alone_ps"]


def test_bucket_size_sets_the_buckets_and_the_overlap(repo):
    one = simulate(repo)
    many = simulate(repo, "--bucket-size", "8MiB")
    assert one.results["gpu0"].model_states["buckets"] == 1
    assert many.results["gpu0"].model_states["buckets"] > 2
    # small buckets start their copies during the backward pass
    assert many.results["gpu0"].iteration_time_ps < one.results["gpu0"].iteration_time_ps


def test_delayed_update_hides_the_cpu_step(repo):
    plain = simulate(repo, "--bucket-size", "8MiB").results["gpu0"]
    delayed = simulate(repo, "--bucket-size", "8MiB", "--delayed-update").results["gpu0"]
    assert delayed.iteration_time_ps < plain.iteration_time_ps
    # the CPU steps from time 0, beside the forward pass; without the delayed update only
    # after the backward pass (DeepSpeed's step())
    assert delayed.model_states["cpu_step_span_ps"][0] == 0
    assert plain.model_states["cpu_step_span_ps"][0] >= \
        plain.forward_time_ps + plain.backward_time_ps


@pytest.mark.parametrize("extra", [
    ("--optimizer-states", "nvme"),
    ("--optimizer-states", "nvme", "--bucket-size", "8MiB"),
    ("--optimizer-states", "nvme", "--bucket-size", "8MiB", "--delayed-update"),
    ("--optimizer-states", "nvme", "--bucket-size", "8MiB", "--nvme-path", "gds"),
    ("--optimizer-states", "host", "--weights", "nvme", "--bucket-size", "8MiB"),
    ("--optimizer-states", "host", "--weights", "nvme", "--bucket-size", "8MiB",
     "--delayed-update"),
], ids=lambda e: " ".join(e))
def test_zero_infinity_step_equals_closed_form(repo, extra):
    # ZeRO-Infinity: the states read from and written to one SSD around each CPU step (or the
    # weights streamed from it); the drive's reads and writes do not share a resource
    result = simulate_on(repo, *extra)
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.completed
    assert gpu.iteration_time_ps == closed.step_ps


def test_states_and_weights_on_one_drive_share_its_reads(repo):
    # the stream's weight reads and the states' reads share the drive: the closed form, which
    # prices each alone, is a lower bound
    result = simulate_on(repo, "--optimizer-states", "nvme", "--weights", "nvme",
                         "--bucket-size", "8MiB")
    closed = from_simulation(result.simulation, "gpu0")
    assert closed.step_ps < result.results["gpu0"].iteration_time_ps


def simulate_on(repo, *extra):
    """One AlexNet step with one SSD and the placement in ``extra`` (replacing ``host``)."""
    opts = [*UNSATURATED, "--network", "alexnet", "--batch", "16", "--dtype", "float16",
            "--policy", "none", "--algorithm", "none", "--optimizer", "adam", "--nvme", "1",
            "--no-baselines", "--no-contention", *extra]
    return sst_cdma.run(repo / TOPOLOGY, opts, console=io.StringIO())


#: GPT-2 small over PCIe gen1 in 8 MiB buckets: the backward pass makes gradients faster than
#: the link drains them
SLOW_LINK = ("--network", "gpt2_small", "--seq-len", "256", "--batch", "1", "--pcie-gen", "1",
             "--bucket-size", "8MiB")


def _slow_link(repo, *extra):
    opts = [*UNSATURATED, *SLOW_LINK, "--dtype", "float16", "--policy", "none", "--algorithm",
            "none", "--optimizer", "adam", "--optimizer-states", "host", "--no-baselines",
            "--no-contention", *extra]
    return sst_cdma.run(repo / TOPOLOGY, opts, console=io.StringIO())


@pytest.mark.parametrize("extra", [("--gradients", "host"),
                                   ("--gradients", "host", "--delayed-update")],
                         ids=lambda e: " ".join(e))
def test_gradients_on_the_host_hold_the_backward_pass_back_as_the_closed_form_says(repo, extra):
    """With the gradients on the host the GPU holds two buckets of them at once: a kernel
    that starts a bucket waits for the copy of the bucket two before, so the backward pass
    stretches towards the copies and the GPU's peak memory falls, the step still at the
    closed form's picosecond."""
    held = _slow_link(repo, *extra)
    kept = _slow_link(repo, *[e for e in extra if e == "--delayed-update"])
    gpu = held.results["gpu0"]
    closed = from_simulation(held.simulation, "gpu0")
    assert gpu.iteration_time_ps == closed.step_ps
    assert gpu.model_states["buckets"] > 10
    summary, baseline = held.reports["summary"], kept.reports["summary"]
    assert summary["backward_time_s"] > 3 * baseline["backward_time_s"]
    grads = sum(gpu.model_states["bucket_bytes"])
    two = sum(sorted(gpu.model_states["bucket_bytes"])[-3:])  # two buffers and the one landing
    assert baseline["peak_gpu_memory_bytes"] - summary["peak_gpu_memory_bytes"] >= grads - two


@pytest.mark.parametrize("n", [2, 3])
def test_gradients_accumulated_on_the_host_over_a_slow_link_end_at_the_closed_form(repo, n):
    """Each micro-batch's buckets through the reduction stream (sum in, add, sum out; the
    last one's then the step's copy), the link the bottleneck and the backward pass held
    back by the two buffers: the step at the closed form's picosecond."""
    result = _slow_link(repo, "--gradients", "host", "--grad-accum", str(n))
    gpu = result.results["gpu0"]
    assert gpu.iteration_time_ps == from_simulation(result.simulation, "gpu0").step_ps
    assert gpu.model_states["gradients_to_gpu_bytes"] == (n - 1) * sum(
        gpu.model_states["bucket_bytes"])


@pytest.mark.parametrize("extra, n", [(("--delayed-update",), 3), (("--weights", "host"), 2)],
                         ids=lambda e: " ".join(e) if isinstance(e, tuple) else str(e))
def test_accumulation_copies_sharing_the_link_make_the_closed_form_a_lower_bound(repo, extra,
                                                                                 n):
    # the sums copied in share the host-to-GPU direction with the weights (coming back
    # beside the passes, or prefetched for each layer), which the closed form prices alone
    result = _slow_link(repo, "--gradients", "host", "--grad-accum", str(n), *extra)
    closed = from_simulation(result.simulation, "gpu0")
    assert closed.step_ps < result.results["gpu0"].iteration_time_ps
