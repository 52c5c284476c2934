"""The GPU and the cDMA engine execute per-tensor choices: codec=none offloads are raw copies
that bypass the codec, recompute kernels take the forward kernels' time."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]


def simulate(*opts, out=None):
    return sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", list(opts), output_directory=out,
                        console=io.StringIO(), record_statistics=False).reports["summary"]


ALEX = ("--network", "alexnet", "--batch", "16", "--algorithm", "zvc", "--no-baselines")


def test_the_ratio_by_algorithm_does_not_depend_on_the_codec_the_engine_runs():
    """Every registered algorithm's ratio on the same tensors: a plain copy engine reads the
    transformer's dense tensors (the causal softmax, half zeros) from the same profile as a
    compressing one."""
    gpt = ("--network", "gpt2_small", "--batch", "1", "--seq-len", "256", "--dtype", "bfloat16",
           "--policy", "compress-all", "--no-baselines")
    plain = simulate(*gpt, "--algorithm", "none")["compression_ratio_by_algorithm"]
    zvc = simulate(*gpt, "--algorithm", "zvc")["compression_ratio_by_algorithm"]
    assert plain == zvc
    assert zvc["zvc"] > 1.05  # the causal softmax's zeros count


def test_offloads_through_an_engine_without_a_codec_are_reported_as_plain_copies():
    none = simulate("--network", "alexnet", "--batch", "16", "--algorithm", "none",
                    "--no-baselines")["plan"]
    zvc = simulate("--network", "alexnet", "--batch", "16", "--algorithm", "zvc",
                   "--no-baselines")["plan"]
    assert zvc["counts"]["compress"] > 0 and zvc["counts"]["offload"] == 0
    assert none["counts"]["offload"] == zvc["counts"]["compress"]
    assert none["counts"]["compress"] == 0
    assert none["bytes"]["offload"] == zvc["bytes"]["compress"]
    assert {t for t, c in none["tensors"].items() if c == "offload"} == \
        {t for t, c in zvc["tensors"].items() if c == "compress"}


def test_plain_offload_bypasses_the_codec_and_compress_uses_it():
    plain = simulate(*ALEX, "--policy", "offload-all")
    packed = simulate(*ALEX, "--policy", "compress-all")
    assert plain["offloaded_bytes"] == packed["offloaded_bytes"] > 0
    assert plain["wire_bytes"] == plain["offloaded_bytes"]          # raw on the wire
    assert packed["wire_bytes"] < packed["offloaded_bytes"]         # ZVC on sparse maps
    assert "compression_ratio_by_algorithm" not in plain
    # a codec slower than the link slows the compressed copies only: plain ones skip it
    slow = ("--codec-units", "1", "--codec-unit-throughput", "1GB/s")
    assert simulate(*ALEX, "--policy", "offload-all", *slow)["iteration_time_s"] == \
        pytest.approx(plain["iteration_time_s"], rel=1e-12)
    assert simulate(*ALEX, "--policy", "compress-all", *slow)["iteration_time_s"] > \
        1.5 * packed["iteration_time_s"]


def test_recompute_kernels_take_the_forward_kernels_time():
    opts = ("--network", "resnet50", "--batch", "4", "--no-baselines", "--no-contention",
            "--kernel-model", "roofline")
    none = simulate(*opts, "--policy", "none")
    rec = simulate(*opts, "--policy", "recompute")
    extra = rec["plan"]["recompute_time_s"]
    assert extra > 0 and rec["plan"]["counts"]["recompute"] > 0
    # nothing is copied: the iteration grows by exactly the recompute kernels
    assert rec["iteration_time_s"] - none["iteration_time_s"] == pytest.approx(extra,
                                                                             rel=1e-9)
    assert rec["compute_time_s"] - none["compute_time_s"] == pytest.approx(extra, rel=1e-9)
    assert rec["peak_gpu_memory_bytes"] < none["peak_gpu_memory_bytes"]


def test_summary_reports_each_tensors_choice_and_matches_the_schema(tmp_path):
    s = simulate(*ALEX, "--policy", "offload-conv+recompute-cheap", out=tmp_path)
    assert check_summary(s) == []
    plan = s["plan"]
    assert plan["tensors"]["pool1"] == "recompute" and plan["tensors"]["conv3"] == "offload"
    assert plan["tensors"]["conv1"] == "keep"
    assert sum(plan["counts"].values()) == len(plan["tensors"])
    assert plan["bytes"]["offload"] == s["offloaded_bytes"]
    assert json.loads((tmp_path / "summary.json").read_text())["plan"] == plan
    stream = (tmp_path / "gpu0.stream").read_text()
    assert "offload conv3 layer=conv4 codec=none" in stream
    assert "compute pool1 pass=recompute" in stream


def test_console_prints_counts_bytes_and_recompute_time():
    console = io.StringIO()
    sst_cdma.run(REPO / "topologies" / "pascal_cdma.py",
                 [*ALEX, "--policy", "offload-all+recompute-cheap"], console=console,
                 record_statistics=False)
    line = next(ln for ln in console.getvalue().splitlines() if ln.startswith("tensors:"))
    assert "offload (" in line and "recompute" in line and " ms" in line
    two = io.StringIO()  # several GPUs: each has its own plan, the same one here
    sst_cdma.run(REPO / "topologies" / "pascal_cdma.py",
                 [*ALEX, "--policy", "offload-all+recompute-cheap", "--gpus", "2"], console=two,
                 record_statistics=False)
    assert f"{line} (each of 2 GPUs)" in two.getvalue().splitlines()


def test_plan_file_option_and_its_errors(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"conv2": "compress", "pool2": "recompute"}))
    s = simulate(*ALEX, "--plan", str(plan))
    assert s["policy"] == "plan"
    assert s["plan"]["tensors"]["conv2"] == "compress"
    assert s["plan"]["tensors"]["pool2"] == "recompute"
    # a run's whole summary.json is a plan file too (its plan's tensors)
    (tmp_path / "summary.json").write_text(json.dumps(s))
    again = simulate(*ALEX, "--plan", str(tmp_path / "summary.json"))
    assert again["plan"]["tensors"] == s["plan"]["tensors"]
    assert again["iteration_time_s"] == s["iteration_time_s"]
    (tmp_path / "vgg.json").write_text(json.dumps(dict(s, network="vgg16")))
    with pytest.raises(RunError, match="vgg.json: the plan of a vgg16 run, not alexnet"):
        simulate(*ALEX, "--plan", str(tmp_path / "vgg.json"))
    del s["plan"]  # as in a summary of several GPUs
    (tmp_path / "multi.json").write_text(json.dumps(s))
    with pytest.raises(RunError, match="multi.json: a summary.json without a 'plan' \\(a run "
                                       "of several GPUs has one per GPU, under 'gpus'\\)"):
        simulate(*ALEX, "--plan", str(tmp_path / "multi.json"))
    plan.write_text(json.dumps({"conv9": "keep"}))
    with pytest.raises(RunError) as err:
        simulate(*ALEX, "--plan", str(plan))
    assert f"{plan}: tensor 'conv9': no such activation tensor" in str(err.value)


def test_bad_policy_option_is_one_line():
    with pytest.raises(RunError) as err:
        simulate("--policy", "recompute-ffs")
    assert "argument --policy: 'recompute-ffs': unknown term 'recompute-ffs'" in str(err.value)


@pytest.mark.parametrize("opts,message", [
    (("--policy", "plan"), "gpu0:workload[0]: policy 'plan' needs a 'plan' file"),
    (("--policy", "recompute", "--plan", "x.json"),
     "gpu0:workload[0]: 'plan' sets the policy; it contradicts policy 'recompute'"),
    (("--policy", "auto", "--allocation", "network-wide"),
     "gpu0:workload[0]: policy auto plans liveness allocation, not 'network-wide'"),
])
def test_policy_option_contradictions_are_one_line(opts, message):
    with pytest.raises(RunError) as err:
        simulate(*ALEX, *opts)
    assert message in str(err.value) and "]: gpu0" not in str(err.value)
