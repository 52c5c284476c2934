"""ZeRO-Infinity end to end: optimizer states on the SSDs, read into host buffers around each
bucket's CPU step and written back; weights on the SSDs, streamed in per layer in the forward
and backward passes and written back after the step; a drive too small reported with the
overshoot, and a placement on the SSDs without SSDs refused, each as one line."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "pascal_cdma.py"
ALEX = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--optimizer", "adam",
        "--policy", "none", "--bucket-size", "8MiB", "--nvme", "2"]
#: AlexNet's parameters: the fp16 weights are 2 bytes each, the fp32 master and moments 12
ALEX_PARAMS = 60_965_224


def run(*options, **kw):
    return sst_cdma.run(TOPOLOGY, [*ALEX, *options, "--no-baselines"], console=io.StringIO(),
                        **kw)


def test_states_on_the_ssds_are_read_and_written_around_each_step():
    result = run("--optimizer-states", "nvme")
    gpu = result.results["gpu0"]
    states = gpu.model_states
    assert gpu.completed
    assert states["states_from_nvme_bytes"] == states["states_to_nvme_bytes"] == \
        12 * ALEX_PARAMS
    assert sum(states["nvme_state_bytes"].values()) == 12 * ALEX_PARAMS
    # the host keeps two buckets' states, not all of them
    assert states["host_state_bytes"]["optimizer_state_buffers"] < 12 * ALEX_PARAMS
    drives = [result.results[f"nvme{d}"] for d in range(2)]
    # striped over both drives: each held, read and wrote half
    assert sum(d.peak_stored_bytes for d in drives) == 12 * ALEX_PARAMS
    assert sum(d.bytes_read for d in drives) == pytest.approx(12 * ALEX_PARAMS)
    assert drives[0].bytes_written == pytest.approx(drives[1].bytes_written, rel=1e-6)
    # the states cross no GPU link: the GPU's link carries the gradients and weights only
    host = run("--optimizer-states", "host").results["gpu0"]
    assert gpu.iteration_time_ps > host.iteration_time_ps


def test_a_step_waits_for_its_states_and_the_reads_pipeline_over_buckets():
    gpu = run("--optimizer-states", "nvme").results["gpu0"]
    timeline = gpu.timeline
    reads = {t: (a, b) for s, t, a, b in timeline if s == "states_in"}
    writes = {t: (a, b) for s, t, a, b in timeline if s == "states_out"}
    buckets = sorted(reads, key=lambda t: int(t[len("bucket"):].split(":")[0]))
    assert len(buckets) == gpu.model_states["buckets"] > 2
    for k in range(2, len(buckets)):  # two host buffers
        assert reads[buckets[k]][0] >= writes[buckets[k - 2]][1]
    # the next bucket's read overlaps this bucket's step and write-back
    assert reads[buckets[1]][0] < writes[buckets[0]][0]


def test_weights_on_the_ssds_stream_in_per_layer_and_go_back_after_the_step():
    result = run("--optimizer-states", "nvme", "--weights", "nvme")
    gpu = result.results["gpu0"]
    states = gpu.model_states
    assert gpu.completed and states["weights_to_gpu_bytes"] == 0
    assert states["weights_to_nvme_bytes"] == 2 * ALEX_PARAMS
    # each layer's weights read from the drives for its forward and its backward kernel
    assert gpu.prefetched_bytes == 2 * 2 * ALEX_PARAMS
    drives = [result.results[f"nvme{d}"] for d in range(2)]
    assert sum(d.bytes_read for d in drives) == pytest.approx(2 * 2 * ALEX_PARAMS +
                                                              12 * ALEX_PARAMS)
    assert gpu.peak_gpu_memory_bytes < run("--optimizer-states", "nvme").results[
        "gpu0"].peak_gpu_memory_bytes


def one_line_error(*options) -> str:
    with pytest.raises(RunError) as err:
        run(*options)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_drive_too_small_is_refused_with_the_overshoot():
    message = one_line_error("--optimizer-states", "nvme", "--nvme-capacity", "300MB")
    # striped over two drives of 300 MB: the first bucket past a drive's capacity
    assert "NVMe capacity exhausted storing 'gpu0.dma/bucket" in message
    assert "bytes short" in message and "--nvme-capacity" in message


@pytest.mark.parametrize("option", ["--optimizer-states", "--weights"])
def test_a_placement_on_the_ssds_without_ssds_is_refused(option):
    options = [o for o in ALEX if o not in ("--nvme", "2")]
    with pytest.raises(RunError) as err:
        sst_cdma.run(TOPOLOGY, [*options, "--optimizer-states", "host", option, "nvme",
                                "--no-baselines"], console=io.StringIO())
    assert f"{option} nvme needs an NVMe SSD to hold it" in str(err.value)
    assert "\n" not in str(err.value)
