"""topologies/hgx_h100_cdma.py: eight H100 SXM5 on NVSwitch, two per PCIe gen5 switch, one host
per socket, data parallel by default; against one GPU on the same workload."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary

REPO = Path(__file__).resolve().parents[2]
HGX = REPO / "topologies" / "hgx_h100_cdma.py"


def summary(opts: str) -> dict:
    return sst_cdma.run(HGX, opts, console=io.StringIO()).reports["summary"]


def test_the_node_is_eight_h100s_two_per_switch_data_parallel():
    result = sst_cdma.run(HGX, "--network alexnet --batch 32", run_mode="init")
    comps = {c.name: c for c in result.graph.components.values()}
    assert sum(c.type == "cdma.GPU" and c.params.get("system", "main") == "main"
               for c in comps.values()) == 8
    assert all(comps[f"gpu{i}"].params["gpu_preset"] == "hopper" for i in range(8))
    assert comps["nvswitch"].type == "cdma.NVSwitch"
    assert {"oracle.nvswitch", "vdnn.nvswitch"} <= set(comps)
    assert sorted(n for n, c in comps.items() if c.type == "cdma.PCIeSwitch"
                  and "." not in n) == ["switch0", "switch1", "switch2", "switch3"]
    assert sorted(n for n, c in comps.items() if c.type == "cdma.HostMemory"
                  and "." not in n) == ["host0", "host1"]
    assert comps["host0"].params["bandwidth"] == "307.2GB/s"


def test_eight_gpus_against_one_on_the_same_workload():
    one = summary("--network alexnet --batch 32 --policy none --gpus 1 --no-data-parallel")
    eight = summary("--network alexnet --batch 32 --policy none")
    assert not check_summary(eight) and not check_summary(one)
    assert (one["gpu_count"], eight["gpu_count"]) == (1, 8)
    assert eight["system"] == "HGX H100 8-GPU, NVLink4/NVSwitch, PCIe gen5 x16, 2 per switch"
    assert one["system"] == f"{eight['system']}, run with 1 of its 8 GPUs"
    assert "allreduce" not in one
    a = eight["allreduce"]
    assert a["gpus"] == 8
    assert a["bytes_per_gpu"] == round(2 * 7 / 8 * a["gradient_bytes"])
    assert a["time_s"] == pytest.approx(a["overlap_s"] + a["exposed_s"])
    assert 0 < a["exposed_s"] < a["overlap_s"]  # mostly hidden behind the backward pass
    # nothing offloaded: each replica waits only for the exposed all-reduce, and its kernels
    # take a little longer because the ring shares their HBM
    assert eight["compute_time_s"] > one["compute_time_s"]
    assert eight["iteration_time_s"] == pytest.approx(
        one["iteration_time_s"] + (eight["compute_time_s"] - one["compute_time_s"])
        + a["exposed_s"], abs=2e-12)
    # the oracle all-reduces too: it is no faster than one GPU's oracle
    assert eight["baselines"]["oracle"]["iteration_time_s"] > \
        one["baselines"]["oracle"]["iteration_time_s"]


def test_offloads_share_the_switches_and_the_summary_says_so():
    s = summary("--network alexnet --batch 32 --policy all")
    assert s["gpus_per_switch"] == 2 and s["hosts"] == 2
    assert s["allreduce"]["buckets"] == 4
    assert "slowed_by_offloads_s" in s["allreduce"]
    assert s["speedup_vs_vdnn"] > 1


def test_a_switch_that_splits_the_default_host_names_the_default():
    from sst_cdma.engine.runner import RunError

    with pytest.raises(RunError, match=r"--gpus-per-host 4 \(this topology's default\) is not "
                                       r"a multiple of --gpus-per-switch 3"):
        sst_cdma.run(HGX, "--network alexnet --batch 32 --gpus-per-switch 3", run_mode="init")
