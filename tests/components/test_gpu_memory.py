"""GPU memory as vDNN measures it: the time-weighted average of allocated memory beside the
peak (run, baselines, every GPU), the trace's GPU memory counter, and the allocation mode."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.engine.runner import RunError
from workloads import parse_stream, stream_stats
from workloads.render import iteration_stream

REPO = Path(__file__).resolve().parents[2]

# Three kernels with measured times: l1 forward 10 us, l2 forward 30 us, l2 backward 20 us.
# Bytes in use: 1500 over [0, 10) us, 4500 over [10, 40), 3500 over [40, 60), 0 from 60 us.
TINY = """\
stream version=1 network=tiny batch=1 dtype=float32 policy=none
tensor w bytes=500 kind=weight layer=l1
tensor a bytes=1000 kind=activation layer=l1
tensor b bytes=3000 kind=activation layer=l2
phase forward
alloc w
alloc a
compute l1 pass=fwd flops=0 dram=0 time=10us reads=w writes=a
sync l1
alloc b
compute l2 pass=fwd flops=0 dram=0 time=30us reads=a writes=b
sync l2
free a
phase backward
compute l2 pass=bwd flops=0 dram=0 time=20us reads=b
sync l2
free b
free w
end
"""
TINY_CURVE = [(0, 1500), (10_000_000, 4500), (40_000_000, 3500), (60_000_000, 0)]


def run(*opts, topology="pascal_cdma.py", out=None):
    console = io.StringIO()
    result = sst_cdma.run(REPO / "topologies" / topology, list(opts), output_directory=out,
                          console=console)
    return result, console.getvalue()


def counters(trace: dict) -> dict[str, list[tuple[float, int]]]:
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    out: dict[str, list[tuple[float, int]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "C":
            assert e["name"] == "GPU memory" and set(e["args"]) == {"bytes"}
            out.setdefault(names[e["pid"]], []).append((e["ts"], e["args"]["bytes"]))
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.stream").write_text(TINY)
    result, console = run("--workload", str(folder / "tiny.stream"), "--algorithm", "none",
                          "--no-baselines", out=folder / "out")
    return result, console, folder / "out"


def test_the_average_is_the_exact_time_weighted_integral(tiny):
    result, console, _ = tiny
    s = result.reports["summary"]
    assert s["iteration_time_s"] == pytest.approx(60e-6, abs=1e-15)
    assert s["peak_gpu_memory_bytes"] == 4500
    # (1500 x 10 + 4500 x 30 + 3500 x 20) / 60 = 3666.67 bytes: rounded to the nearest byte
    assert s["average_gpu_memory_bytes"] == 3667
    gpu = result.results["gpu0"]
    assert gpu.memory_curve == TINY_CURVE
    assert gpu.allocation == "stream" and s["allocation"] == "stream"
    assert "peak GPU memory: 4.39 KiB of 16 GiB (fits), average 3.58 KiB" in console


def test_the_integral_is_exact_in_integers(tiny):
    result, _, _ = tiny
    hbm = result.simulation.components["gpu0.hbm"]
    assert hbm.usage_integral(60_000_000) == 220_000 * 1_000_000
    assert hbm.usage_integral(25_000_000) == 1500 * 10_000_000 + 4500 * 15_000_000
    assert hbm.average_usage(10_000_000) == 1500
    # past the end nothing is allocated: the average over a longer window drops
    assert hbm.average_usage(120_000_000) == (220_000 * 1_000_000 + 60_000_000) // 120_000_000
    assert hbm.average_usage(0) == 1500  # what was in use at time 0
    assert hbm.history[:2] == [(0, 500), (0, 1500)]  # every change, before collapsing


def test_the_trace_has_a_gpu_memory_counter_at_every_change(tiny):
    _, _, out = tiny
    trace = json.loads((out / "trace.json").read_text())
    assert counters(trace) == {"gpu0": [(t / 1e6, n) for t, n in TINY_CURVE]}


def test_every_gpu_process_of_a_run_has_a_monotone_memory_counter(tmp_path):
    result, _ = run("--network", "alexnet", "--batch", "16", "--policy", "conv", out=tmp_path)
    tracks = counters(json.loads((tmp_path / "trace.json").read_text()))
    assert set(tracks) == {"gpu0", "oracle.gpu0", "vdnn.gpu0"}
    for name, points in tracks.items():
        times = [t for t, _ in points]
        assert times == sorted(times) and len(set(times)) == len(times), name  # collapsed
        assert points[-1][1] == 0  # everything is freed at the end
        peak = result.results[name].peak_gpu_memory_bytes
        assert max(n for _, n in points) <= peak


@pytest.mark.parametrize("allocation", ["liveness", "network-wide"])
@pytest.mark.parametrize("policy", ["none", "conv", "all"])
def test_the_average_is_at_most_the_peak_for_the_run_and_its_baselines(policy, allocation):
    result, _ = run("--network", "googlenet", "--batch", "8", "--policy", policy,
                    "--allocation", allocation)
    s = result.reports["summary"]
    # network-wide holds buffers only where the schedule moves nothing (policy none); a run
    # that offloads is allocated layer-wise, and its summary says so
    assert s["allocation"] == (allocation if policy == "none" else "liveness")
    for entry in (s, s["baselines"]["oracle"], s["baselines"]["vdnn"]):
        assert 0 < entry["average_gpu_memory_bytes"] <= entry["peak_gpu_memory_bytes"]
    # with liveness allocation memory comes and goes: the average is well below the peak
    if allocation == "liveness":
        assert s["average_gpu_memory_bytes"] < 0.95 * s["peak_gpu_memory_bytes"]


def test_network_wide_without_offload_holds_every_buffer_all_iteration():
    result, console = run("--network", "alexnet", "--batch", "16", "--policy", "none",
                          "--algorithm", "none", "--allocation", "network-wide")
    s = result.reports["summary"]
    stream = result.simulation.components["gpu0"].stream  # workspaces of the fitted model's picks
    assert stream is iteration_stream("alexnet", 16, "float32", "none", allocation="network-wide",
                                      kernel_model=kernel_model_for("pascal"),
                                      memory_capacity=16 << 30)
    total = sum(t.bytes for t in stream.tensors.values())
    assert total == stream_stats(stream).declared_bytes
    assert s["peak_gpu_memory_bytes"] == s["average_gpu_memory_bytes"] == total
    oracle = s["baselines"]["oracle"]  # the oracle allocates as the run does
    assert oracle["peak_gpu_memory_bytes"] == oracle["average_gpu_memory_bytes"] == total
    assert "network-wide allocation" in console.splitlines()[0]


def test_the_allocation_mode_changes_memory_but_not_time():
    live, live_console = run("--network", "alexnet", "--batch", "16", "--policy", "conv")
    wide, _ = run("--network", "alexnet", "--batch", "16", "--policy", "conv",
                  "--allocation", "network-wide")
    a, b = live.reports["summary"], wide.reports["summary"]
    memory = {"allocation", "peak_gpu_memory_bytes", "average_gpu_memory_bytes",
              "fits_in_memory", "out_of_memory", "baselines"}
    assert {k: v for k, v in a.items() if k not in memory} == \
        {k: v for k, v in b.items() if k not in memory}
    assert a["allocation"] == "liveness" and "liveness allocation" in live_console
    assert b["allocation"] == "liveness"  # it offloads: layer-wise, as vDNN's memory manager
    for label in ("oracle", "vdnn"):
        assert a["baselines"][label]["iteration_time_s"] == \
            b["baselines"][label]["iteration_time_s"]
    # vDNN's comparison in one run: the offloading run (and the vDNN baseline) on vDNN's
    # layer-wise memory manager, the oracle (nothing offloaded) on the network-wide baseline
    figures = ("peak_gpu_memory_bytes", "average_gpu_memory_bytes")
    for key in figures:
        assert b[key] == a[key]
        assert b["baselines"]["vdnn"][key] == a["baselines"]["vdnn"][key]
        assert b["baselines"]["oracle"][key] > a["baselines"]["oracle"][key]
    oracle = b["baselines"]["oracle"]
    assert oracle["peak_gpu_memory_bytes"] == oracle["average_gpu_memory_bytes"]


def test_several_gpus_report_their_average_and_the_top_level_takes_the_max():
    result, _ = run("--network", "alexnet", "--batch", "8", "--policy", "all",
                    topology="dgx1_cdma.py")
    s = result.reports["summary"]
    assert len(s["gpus"]) == 8
    assert s["average_gpu_memory_bytes"] == max(g["average_gpu_memory_bytes"] for g in s["gpus"])
    assert s["allocation"] == "liveness"
    for label in ("oracle", "vdnn"):
        assert s["baselines"][label]["average_gpu_memory_bytes"] == max(
            g["baselines"][label]["average_gpu_memory_bytes"] for g in s["gpus"])
    for g in s["gpus"]:
        assert 0 < g["average_gpu_memory_bytes"] <= g["peak_gpu_memory_bytes"]


def test_allocation_does_not_apply_to_a_workload_stream(tmp_path):
    (tmp_path / "tiny.stream").write_text(TINY)
    with pytest.raises(RunError) as err:
        run("--workload", str(tmp_path / "tiny.stream"), "--allocation", "network-wide")
    assert "--allocation contradicts --workload: it applies to a rendered --network" \
        in str(err.value)


def test_a_bogus_allocation_is_one_line_naming_the_option():
    with pytest.raises(RunError) as err:
        run("--no-baselines", "--allocation", "bogus")
    message = str(err.value)
    assert "argument --allocation: 'bogus' is not one of liveness, network-wide" in message
    assert "\n" not in message


def test_the_stream_of_a_network_wide_run_is_written_and_parses(tmp_path):
    run("--network", "alexnet", "--batch", "4", "--policy", "none", "--allocation",
        "network-wide", "--no-baselines", out=tmp_path)
    text = (tmp_path / "gpu0.stream").read_text()
    assert "# network-wide allocation" in text
    assert not stream_stats(parse_stream(text, "gpu0.stream")).leaked


def test_a_workload_stream_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "tiny.stream"
    path.write_bytes(TINY.replace("network=tiny", "network=t\u00efny").encode("latin-1"))
    with pytest.raises(RunError) as err:
        run("--workload", str(path), "--no-baselines")
    message = str(err.value)
    assert "\n" not in message
    assert f"{path}: not UTF-8 text (byte 0xef at offset 26)" in message



def test_data_parallel_without_an_optimizer_keeps_gradients_until_the_all_reduce_ends():
    # a slow fabric: the all-reduce ends long after the backward pass freed everything else
    topology = Path(__file__).resolve().parents[2] / "topologies" / "pascal_cdma.py"
    result = sst_cdma.run(topology, "--network alexnet --batch 8 --gpus 2 --data-parallel "
                                    "--no-baselines --optimizer none --nvlink-rate 0.1GB/s",
                          console=io.StringIO())
    gpu = result.results["gpu0"]
    [(backward_done, held), (end, empty)] = gpu.memory_curve[-2:]
    assert empty == 0 and end == gpu.iteration_time_ps   # freed when the all-reduce ends
    assert backward_done < end / 10
    # held meanwhile: the weight gradients, one float32 per parameter of (Caffe's) AlexNet
    assert held == 4 * 60_965_224
