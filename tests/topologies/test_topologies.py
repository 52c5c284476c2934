"""Every topology script runs, tells the user what they need, and rejects bad input with one
clear line before the simulation starts."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import sst_cdma
from components.console import binary_size
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
#: topology scripts that take no cDMA model options, and why
NOT_CDMA = {"phold_torus.py": "the PHOLD benchmark, no cDMA system",
            "hand_wired_p100.py": "wired by hand, takes no model options",
            "pipeline_cdma.py": "pipeline stages (of identical layers, or a transformer's "
                                "blocks): its own options, no baselines "
                                "(tests/topologies/test_pipeline_topology.py, "
                                "test_pipeline_transformer.py)",
            "tp_cdma.py": "tensor-parallel blocks written by hand on a cluster fabric, no "
                          "network: its own options (tests/topologies/test_tp_topology.py)",
            "dgx_h100_cluster.py": "a transformer over tp x pp x dp ranks of DGX H100 nodes: "
                                   "the pipeline's options (tests/topologies/test_dgx_cluster.py)",
            "dgx_a100_cluster.py": "the same on DGX A100 nodes "
                                   "(tests/topologies/test_dgx_cluster.py)",
            "__init__.py": "the package's marker (topologies ship as package data)"}
TOPOLOGIES = sorted(p.name for p in (REPO / "topologies").glob("*.py")
                    if p.name not in NOT_CDMA)
CONTRACT = ["network", "batch", "policy", "algorithm", "iteration_time_s", "forward_time_s",
            "backward_time_s", "stall_time_s", "offloaded_bytes", "wire_bytes",
            "compression_ratio", "peak_gpu_memory_bytes", "fits_in_memory", "baselines"]


def run(topology, *opts, out=None):
    console = io.StringIO()
    result = sst_cdma.run(REPO / "topologies" / topology, list(opts), output_directory=out,
                          console=console)
    return result, console.getvalue()


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_topology_writes_the_summary_contract(topology, tmp_path):
    result, console = run(topology, "--network", "alexnet", "--batch", "32", "--algorithm",
                          "none", out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in CONTRACT:
        assert key in summary, key
    for label in ("oracle", "vdnn"):
        for key in ("iteration_time_s", "peak_gpu_memory_bytes", "fits_in_memory"):
            assert key in summary["baselines"][label]
    assert summary["iteration_time_s"] >= summary["baselines"]["oracle"]["iteration_time_s"]
    assert (tmp_path / "StatisticOutput.csv").read_text().startswith(
        "ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime, Rank")
    trace = json.loads((tmp_path / "trace.json").read_text())
    cats = {e.get("cat") for e in trace["traceEvents"]}
    assert {"compute", "offload", "prefetch"} <= cats
    config = json.loads((tmp_path / "config.json").read_text())
    gpu = next(c for c in config["components"] if c["name"] == "gpu0")
    kernels = next(s for s in gpu["subcomponents"] if s["slot_name"] == "kernels")
    assert kernels["params"]["compute_efficiency"] == 0.6  # defaults are resolved
    assert gpu["params"]["hbm_contention"] is True
    assert re.search(r"^iteration( \(slowest of \d+ GPUs\))?: ", console, re.M)
    assert re.search(r"^oracle( \(slowest of \d+ GPUs\))?: ", console, re.M)


def test_dgx1_reports_every_gpu_and_the_shared_switch_costs_time(tmp_path):
    result, _ = run("dgx1_cdma.py", "--network", "alexnet", "--batch", "32", "--algorithm",
                    "none", "--policy", "all", out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["gpus"]) == 8
    alone, _ = run("pascal_cdma.py", "--network", "alexnet", "--batch", "32", "--algorithm",
                   "none", "--policy", "all", "--no-baselines")
    single = alone.reports["summary"]["iteration_time_s"]
    # two GPUs share each switch's upstream port: transfers take up to twice as long
    assert summary["iteration_time_s"] > single * 1.05
    assert "switch_utilization" not in alone.reports["summary"]


def test_dgx1_reports_how_busy_each_switch_uplink_is(tmp_path):
    result, console = run("dgx1_cdma.py", "--network", "alexnet", "--batch", "32",
                          "--policy", "all", "--no-baselines")
    s = result.reports["summary"]
    switches = s["switch_utilization"]
    assert len(switches) == 4
    # every offloaded wire byte crossed exactly one switch uplink towards the host
    carried = sum(u["d2h"] * u["bandwidth_Bps"] * s["iteration_time_s"]
                  for u in switches.values())
    assert carried == pytest.approx(s["wire_bytes"], rel=1e-9)
    # each uplink carries two GPUs' traffic, so it is busier than either GPU's own link
    for u in switches.values():
        assert u["d2h"] > s["pcie_utilization"]["d2h"]
    assert "switch uplink:   4 shared, busiest switch" in console


def test_policy_none_reports_the_memory_it_needed_instead_of_failing():
    result, console = run("maxwell_titanx_cdma.py", "--network", "vgg16", "--batch", "256",
                          "--policy", "none", "--algorithm", "none")
    s = result.reports["summary"]
    assert s["fits_in_memory"] is False
    assert s["peak_gpu_memory_bytes"] > s["gpu_memory_capacity_bytes"]
    assert s["out_of_memory"]["bytes_short"] > 0 and s["out_of_memory"]["layer"]
    assert "DOES NOT FIT" in console and "out of memory:" in console
    # the first allocation that fails is short by less than the whole overshoot, which the
    # line gives too
    over = s["peak_gpu_memory_bytes"] - s["gpu_memory_capacity_bytes"]
    assert s["out_of_memory"]["bytes_short"] < over
    line = next(ln for ln in console.splitlines() if ln.startswith("out of memory:"))
    assert line.endswith(f"; the peak needs {binary_size(over)} more")
    # vDNN's claim: VGG-16 at batch 256 trains on a 12 GB Titan X once feature maps are
    # offloaded, although keeping everything resident does not fit. The fastest algorithms'
    # workspace (FFT, non-fused Winograd at batch 256) would not fit beside the feature maps:
    # the kernels that would overflow take the fastest algorithm that fits.
    vdnn = s["baselines"]["vdnn"]
    assert vdnn["fits_in_memory"] is True
    assert vdnn["peak_gpu_memory_bytes"] <= s["gpu_memory_capacity_bytes"]


def test_statistics_are_byte_identical_run_after_run(tmp_path):
    for i in (1, 2):
        run("pascal_cdma.py", "--network", "squeezenet", "--batch", "16", "--algorithm", "none",
            "--mode", "chunk", out=tmp_path / str(i))
    for name in ("StatisticOutput.csv", "summary.json"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()


@pytest.mark.parametrize("opts,message", [
    (["--network", "lenet"], "unknown network 'lenet'"),
    (["--policy", "some"], "argument --policy: 'some': unknown term 'some'"),
    (["--algorithm", "brotli"],
     "argument --algorithm: 'brotli' is not one of none, zvc, rle, zlib, lz4, zstd, bplane_zstd"),
    (["--network", "vgg16", "--batch", "200000"], "more than the GPU memory"),
    (["--codec-units", "0"], "argument --codec-units: '0' must be >= 1"),
    (["--codec-unit-throughput=-5GB/s"], "argument --codec-unit-throughput: '-5GB/s' must be >= 1e+06 B/s"),
    (["--codec-unit-throughput", "5 parsecs"], "unknown unit"),
    (["--mode", "chunk", "--burst", "0B"], "argument --burst: '0B' must be >= 4096 B"),
    (["--batch", "0"], "argument --batch: '0' must be >= 1"),
])
def test_bad_model_input_is_one_clear_error(opts, message):
    with pytest.raises(RunError) as err:
        run("pascal_cdma.py", "--no-baselines", *opts)
    assert message in str(err.value)
    assert "pascal_cdma.py" in err.value.where


def test_malformed_workload_stream_names_the_line(tmp_path):
    from workloads import render_stream

    text = render_stream("alexnet", 8, "float32", "conv").splitlines()
    bad = next(i for i, line in enumerate(text) if line.startswith("compute "))
    text[bad] = text[bad].replace("flops=", "flops=lots")
    path = tmp_path / "broken.stream"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(RunError) as err:
        run("pascal_cdma.py", "--no-baselines", "--algorithm", "none", "--workload", str(path))
    assert f"broken.stream:{bad + 1}:" in str(err.value)


def test_gpus_beyond_a_node_get_hosts_of_their_own():
    result, _ = run("dgx1_cdma.py", "--network", "alexnet", "--batch", "8", "--gpus", "24",
                    "--no-baselines", "--policy", "all", "--simulate-every-node")
    comps = result.simulation.components
    hosts = sorted(n for n in comps if n.startswith("host"))
    assert hosts == ["host0", "host1", "host2"]  # eight GPUs per DGX-1 node
    # every switch's upstream port lands on its own node's host
    for k in range(12):
        (end,) = [e for (c, p), e in result.simulation._ends.items() if c == f"switch{k}" and p == "up"]
        peer = [c for (c, p), e in result.simulation._ends.items() if e is end.peer]
        assert peer == [f"host{k // 4}"]
    s = result.reports["summary"]
    assert len(s["gpus"]) == 24 and s["complete"]
    # one node's GPUs run exactly as the eight-GPU system does
    eight, _ = run("dgx1_cdma.py", "--network", "alexnet", "--batch", "8", "--no-baselines",
                   "--policy", "all")
    assert s["iteration_time_s"] == eight.reports["summary"]["iteration_time_s"]


@pytest.mark.parametrize("opts,message", [
    (("--gpus-per-host", "-1"), "--gpus-per-host must be >= 0"),
    (("--gpus-per-host", "6"), "--gpus-per-host 6 is not a multiple of --gpus-per-switch 4"),
])
def test_bad_host_sizes_are_refused(opts, message):
    with pytest.raises(RunError, match=message):
        run("dgx1_cdma.py", "--gpus-per-switch", "4", *opts)


def test_model_options_a_script_never_reads_are_refused_not_ignored():
    with pytest.raises(RunError, match=r"hand_wired_p100.py: the script reads no model options "
                       r"\(it never looks at sys.argv\), so --network alexnet would be ignored"):
        run("hand_wired_p100.py", "--network", "alexnet")


def test_a_script_that_reads_its_options_is_not_refused(tmp_path):
    script = tmp_path / "reads.py"
    script.write_text("import sys\nimport sst\n"
                      "size = int(sys.argv[1])\n"
                      "a = sst.Component('a', 'testElement.Echo')\n"
                      "b = sst.Component('b', 'testElement.Echo')\n"
                      "sst.Link('l').connect((a, 'port', '1ns'), (b, 'port', '1ns'))\n")
    sst_cdma.run(script, ["3"], console=io.StringIO())
    ignored = tmp_path / "ignores.py"
    ignored.write_text("import sys\nimport sst\nprint(sys.argv[0])\n"
                       "a = sst.Component('a', 'testElement.Echo')\n"
                       "b = sst.Component('b', 'testElement.Echo')\n"
                       "sst.Link('l').connect((a, 'port', '1ns'), (b, 'port', '1ns'))\n")
    sst_cdma.run(ignored, [], console=io.StringIO())  # no options: nothing to refuse
    with pytest.raises(RunError, match="would be ignored"):
        sst_cdma.run(ignored, ["3"], console=io.StringIO())
