"""Today's machines (issue #13, item 5): the H100 PCIe card on PCIe gen5 and the GH200 Grace
Hopper superchip, whose GPU reaches the Grace CPU's LPDDR5X over NVLink-C2C."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.model.gpus import GPUS
from sst_cdma.engine.runner import RunError
from sst_cdma.engine.units import parse_bytes

REPO = Path(__file__).resolve().parents[2]
GH200 = REPO / "topologies" / "gh200_cdma.py"
H100_PCIE = REPO / "topologies" / "hopper_pcie5_cdma.py"


def run(topology: Path, *opts: str, **kwargs):
    """Run a topology in-process, its console captured."""
    return sst_cdma.run(topology, list(opts), console=io.StringIO(), **kwargs)


def summary(topology: Path, *opts: str, **kwargs) -> dict:
    """The run's summary."""
    return run(topology, *opts, **kwargs).reports["summary"]


@pytest.mark.parametrize("preset,cores_per_sm,boost_hz", [
    ("h100_pcie", 128, 1755e6),   # H100 PCIe: 114 SMs, boost 1755 MHz
    ("gh200", 128, 1980e6),       # GH200's H100: 132 SMs, boost about 1980 MHz
])
def test_fp32_peak_is_cores_times_two_times_the_boost_clock(preset, cores_per_sm, boost_hz):
    spec = GPUS[preset]
    assert spec.peak_flops == pytest.approx(spec.sms * cores_per_sm * 2 * boost_hz, rel=0.01)


def test_h100_pcie_is_the_pcie_card_not_the_sxm_module():
    card, sxm = GPUS["h100_pcie"], GPUS["hopper"]
    assert (card.sms, card.peak_flops, card.dram_bandwidth_Bps) == (114, 51e12, 2e12)
    assert card.sms < sxm.sms and card.dram_bandwidth_Bps < sxm.dram_bandwidth_Bps
    s = summary(H100_PCIE, "--network", "alexnet", "--batch", "16", "--no-baselines")
    assert s["gpu_preset"] == "h100_pcie" and s["system"].startswith("H100 PCIe, pcie5x16")
    assert s["gpu_memory_capacity_bytes"] == 80 * 2**30
    assert s["host_link"]["generation"] == 5 and s["host_link"]["lanes"] == 16


def test_gh200_host_link_is_nvlink_c2c_at_its_cited_rate():
    s = summary(GH200, "--network", "alexnet", "--batch", "16", "--no-baselines")
    assert s["host_link"] == {"name": "nvlink_c2c450GB/s", "protocol": "nvlink_c2c",
                              "bandwidth_Bps": pytest.approx(405e9), "c2c_rate_Bps": 450e9}
    assert s["pcie_bandwidth_Bps"] == pytest.approx(0.9 * 450e9)
    assert s["system"] == "GH200 (H100 96GB HBM3), nvlink_c2c450GB/s, 1 GPU(s)"
    assert s["gpu_memory_capacity_bytes"] == 96 * 2**30


def test_c2c_rate_and_efficiency_set_the_link_and_its_name():
    s = summary(GH200, "--network", "alexnet", "--batch", "16", "--no-baselines",
                overrides={"gpu0.pcie": {"c2c_rate": "225GB/s", "c2c_efficiency": 0.8}})
    assert s["host_link"]["name"] == "nvlink_c2c225GB/s"
    assert s["host_link"]["bandwidth_Bps"] == pytest.approx(180e9)


def test_gh200_host_memory_is_grace_lpddr5x_in_every_system():
    result = run(GH200, "--network", "alexnet", "--batch", "16")
    for name in ("host", "vdnn.host"):
        params = result.simulation.components[name].params
        assert params["bandwidth"] == 500e9 and params["pinned_capacity"] == parse_bytes("480GB")
    # the other presets' hosts are their topology's platform: the H100 PCIe card's is the
    # default (a DDR4 socket), unless --cpu names a DDR5 server (docs/host_cpu.md)
    other = run(H100_PCIE, "--network", "alexnet", "--batch", "16", "--no-baselines")
    assert other.simulation.components["host"].params["bandwidth"] == 76.8e9
    ddr5 = run(H100_PCIE, "--network", "alexnet", "--batch", "16", "--no-baselines",
               "--cpu", "epyc-9654")
    assert ddr5.simulation.components["host"].params["bandwidth"] == 12 * 4800e6 * 8


def test_each_gh200_superchip_has_its_own_grace_memory():
    """Four superchips offload into four LPDDR5X memories, not one: their offloads stall no
    more than one superchip's alone."""
    opts = ("--network", "vgg16", "--batch", "32", "--policy", "all", "--algorithm", "none",
            "--no-baselines")
    four = run(GH200, *opts, "--gpus", "4", "--simulate-every-node")
    assert sorted(n for n, c in four.graph.components.items()
                  if c.type == "cdma.HostMemory") == ["host0", "host1", "host2", "host3"]
    one = summary(GH200, *opts)
    assert four.reports["summary"]["stall_time_s"] == pytest.approx(one["stall_time_s"],
                                                                     rel=1e-9)
    shared = summary(GH200, *opts, "--gpus", "4", "--gpus-per-host", "4")
    assert shared["stall_time_s"] > 1.5 * one["stall_time_s"]


def test_gh200_host_memory_bandwidth_limits_its_offloads():
    opts = ("--network", "vgg16", "--batch", "32", "--policy", "all", "--algorithm", "none",
            "--no-baselines")
    lpddr = summary(GH200, *opts)
    slow = summary(GH200, *opts, overrides={"host": {"bandwidth": "50GB/s"}})
    assert slow["stall_time_s"] > 5 * lpddr["stall_time_s"]


def test_offload_over_c2c_is_much_faster_than_over_pcie_gen5():
    opts = ("--network", "vgg16", "--batch", "32", "--policy", "all", "--algorithm", "none",
            "--no-baselines")
    c2c = summary(GH200, *opts)
    pcie = summary(GH200, *opts, "--link", "pcie5x16")
    assert c2c["offloaded_bytes"] == pcie["offloaded_bytes"] > 0
    assert c2c["stall_time_s"] < pcie["stall_time_s"] / 10
    assert c2c["iteration_time_s"] < pcie["iteration_time_s"] / 2


def test_on_c2c_the_codec_not_the_link_limits_cdma():
    # 8 codec units of 32 GB/s compress 256 GB/s, less than C2C's 405 GB/s of payload:
    # compressing slows offload down until the engine gets more units
    opts = ("--network", "vgg16", "--batch", "32", "--policy", "all")
    assert summary(GH200, *opts)["speedup_vs_vdnn"] < 1.0
    assert summary(GH200, *opts, "--codec-units", "32")["speedup_vs_vdnn"] > 1.0
    assert summary(GH200, *opts, "--link", "pcie5x16")["speedup_vs_vdnn"] > 1.3


@pytest.mark.parametrize("opts,overrides,message", [
    ((), {"gpu0.pcie": {"c2c_rate": "0GB/s"}}, "parameter 'c2c_rate': '0GB/s' must be > 0"),
    ((), {"gpu0.pcie": {"c2c_efficiency": 1.5}}, "parameter 'c2c_efficiency': 1.5 must be <= 1"),
    ((), {"gpu0.pcie": {"c2c_efficiency": 0}}, "parameter 'c2c_efficiency': 0 must be >= 0.0001"),
    ((), {"gpu0.pcie": {"protocol": "cxl"}},
     "parameter 'protocol': 'cxl' is not one of pcie, nvlink, nvlink_c2c"),
    ((), {"host": {"bandwidth": "-500GB/s"}}, "parameter 'bandwidth'"),
    (("--pcie-gen", "5"), None, "--pcie-gen 5 contradicts --link nvlink_c2c"),
    (("--gpus", "2", "--gpus-per-switch", "2"), None,
     "--gpus-per-switch 2 contradicts --link nvlink_c2c"),
    (("--link", "nvlink_c2c9"), None, "argument --link: invalid choice: 'nvlink_c2c9'"),
])
def test_bad_gh200_params_are_one_clear_error(opts, overrides, message):
    with pytest.raises(RunError) as err:
        run(GH200, "--network", "alexnet", "--batch", "8", "--no-baselines", *opts,
            overrides=overrides)
    assert message in str(err.value) and "\n" not in str(err.value)
