"""The model-state driver's gradient accumulation on the host (``--gradients host`` with
``--grad-accum N``), end to end: each micro-batch's gradients leave the GPU, from the second
on the sum so far comes back and is added there (DeepSpeed's
``async_accumulate_grad_in_cpu_via_gpu``, docs/workloads.md section 9), so the link carries
2N - 1 more copies of the 16-bit gradients than one micro-batch does."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = "topologies/pascal_cdma.py"
#: GPT-2 small over PCIe gen1 in 8 MiB buckets: the link, not the backward pass, sets the pace
#: of the gradient copies (tests/model/test_zero_offload_closed_form.py); a CPU Adam rate that
#: leaves the host DRAM unsaturated
SLOW_LINK = ("--cpu-adam-throughput", "1e7", "--network", "gpt2_small", "--seq-len", "256",
             "--batch", "1", "--pcie-gen", "1", "--bucket-size", "8MiB", "--dtype", "float16",
             "--policy", "none", "--algorithm", "none", "--optimizer", "adam",
             "--optimizer-states", "host", "--gradients", "host", "--no-baselines")


def run(repo, micro_batches: int, *extra: str):
    return sst_cdma.run(repo / TOPOLOGY, [*SLOW_LINK, "--grad-accum", str(micro_batches),
                                          *extra], console=io.StringIO())


def _copies(gpu, accumulation: bool) -> list[tuple[str, int, int]]:
    """The gradient stream's copies on the GPU's timeline: the accumulation's (``:acc``) or
    the step's."""
    return [(label, a, b) for kind, label, a, b in gpu.timeline if kind == "gradients"
            and "(" not in label and label.endswith(":acc") == accumulation]


@pytest.fixture(scope="module")
def runs():
    return {n: run(REPO, n) for n in (1, 2, 3)}


@pytest.mark.parametrize("n", [2, 3])
def test_the_link_carries_2n_minus_1_more_gradient_copies(runs, n):
    one = runs[1].results["gpu0"].model_states
    many = runs[n].results["gpu0"].model_states
    grads = sum(one["bucket_bytes"])  # the 16-bit gradients, once
    assert one["gradients_to_host_bytes"] == grads and "gradients_to_gpu_bytes" not in one
    # every micro-batch's sum goes out, every one after the first reads the sum back
    assert many["gradients_to_host_bytes"] == (n + 1) * grads
    assert many["gradients_to_gpu_bytes"] == (n - 1) * grads
    moved = many["gradients_to_host_bytes"] + many["gradients_to_gpu_bytes"]
    assert moved - one["gradients_to_host_bytes"] == (2 * n - 1) * grads
    assert many["host_state_bytes"]["accumulated_gradients"] == grads
    assert many["tiers"]["host"]["peak_bytes"] == one["tiers"]["host"]["peak_bytes"] + grads


@pytest.mark.parametrize("n", [2, 3])
def test_with_the_link_the_bottleneck_the_step_grows_by_at_least_the_copies(runs, n):
    one, many = runs[1].results["gpu0"], runs[n].results["gpu0"]
    # the time the link takes to move the gradients once, as the one micro-batch's run did
    once = sum(b - a for _, a, b in _copies(one, accumulation=False))
    assert once > one.model_states["micro_batch_time_ps"][0]  # the link is the bottleneck
    assert sum(b - a for _, a, b in _copies(many, accumulation=True)) == (2 * n - 1) * once
    assert many.iteration_time_ps - one.iteration_time_ps >= (2 * n - 1) * once


def test_a_micro_batch_starts_once_the_one_before_is_accumulated(runs):
    gpu = runs[3].results["gpu0"]
    times = gpu.model_states["micro_batch_time_ps"]
    starts = [0, times[0], times[0] + times[1]]
    copies = sorted(_copies(gpu, accumulation=True), key=lambda c: c[1])
    per_micro = len(copies) // 5  # 1, 2 and 2 copies a bucket in the three micro-batches
    bounds = [per_micro, 3 * per_micro]
    for first, start in zip(bounds, starts[1:]):
        assert max(b for _, _, b in copies[:first]) <= start  # DeepSpeed's synchronize
        assert copies[first][1] >= start


def test_the_add_is_priced_as_the_streams_memory_bound_kernels(repo):
    result = run(repo, 2, "--no-contention")
    gpu = result.simulation.components["gpu0"]
    adds = {label.split()[0]: b - a for kind, label, a, b in gpu.timeline
            if kind == "gradients" and label.endswith("(accumulate)")}
    buckets = gpu.states.plan.buckets
    assert set(adds) == {b.name for b in buckets}
    for bucket in buckets:  # reads both gradients, writes the sum
        assert adds[bucket.name] == gpu.kernels.kernel_ps(None, bucket.params,
                                                          3 * bucket.grad_bytes,
                                                          gpu.dram_bandwidth)


def test_gradients_on_the_gpu_with_several_micro_batches_go_out_once(repo):
    states = sst_cdma.run(repo / TOPOLOGY, [*SLOW_LINK[:-3], "--no-baselines", "--grad-accum",
                                            "3"], console=io.StringIO()
                          ).results["gpu0"].model_states
    assert states["placement"]["gradients"] == "gpu"
    assert states["gradients_to_host_bytes"] == sum(states["bucket_bytes"])
    assert "gradients_to_gpu_bytes" not in states


def test_data_parallel_accumulation_on_the_host_is_one_line(repo):
    with pytest.raises(RunError) as err:
        sst_cdma.run(repo / "topologies" / "dgx1_cdma.py",
                     ["--network", "alexnet", "--batch", "16", "--dtype", "float16",
                      "--optimizer", "adam", "--policy", "none", "--optimizer-states", "host",
                      "--gradients", "host", "--grad-accum", "2", "--data-parallel", "--gpus",
                      "2", "--no-baselines"], console=io.StringIO())
    message = str(err.value)
    assert "\n" not in message
    assert "gpu0: --gradients host with --grad-accum 2 accumulates one GPU's gradients on its " \
           "host; with --data-parallel" in message
