"""Roles come from the graph, not from names: a hand-wired system with names of its own gives
the main job's summary, ``add_baselines`` adds the oracle and vDNN systems to any system, and
a run writes config.json with or without a Reporter."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
HAND = REPO / "topologies" / "hand_wired_p100.py"
SMALL = ["--network", "alexnet", "--batch", "32"]


def summary_of(script: Path, opts: list[str], out: Path) -> dict:
    sst_cdma.run(script, opts, output_directory=out, console=io.StringIO())
    return json.loads((out / "summary.json").read_text())


def test_the_main_job_wired_by_hand_with_other_names_gives_the_same_summary(tmp_path):
    built = summary_of(REPO / "topologies" / "pascal_cdma.py", [], tmp_path / "built")
    hand = summary_of(HAND, [], tmp_path / "hand")
    assert built.pop("gpu") == "gpu0" and hand.pop("gpu") == "P100"
    assert json.dumps(hand, sort_keys=True) == json.dumps(built, sort_keys=True)
    # the roles the summary was composed from: engine, host link, both baselines
    assert hand["algorithm"] == "zvc" and hand["host_link"]["name"] == "pcie3x16"
    assert set(hand["baselines"]) == {"oracle", "vdnn"}


def write_script(path: Path, body: str) -> Path:
    path.write_text("import sst\nfrom components.baselines import add_baselines\n" + body,
                    encoding="utf-8")
    return path


SYSTEM = """
gpu = sst.Component("a", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 32, "policy": "all"})
hbm = sst.Component("b", "cdma.HBM")
dma = sst.Component("c", "cdma.CDMAEngine")
dma.setSubComponent("codec", "cdma.RLE")
pcie = sst.Component("d", "cdma.PCIeBridge")
host = sst.Component("e", "cdma.HostMemory")
sst.Link("l1", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("l2", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("l3", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("l4", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
sst.Link("l5", "0ps").connect((pcie, "host"), (host, "pcie0"))
"""


def test_add_baselines_copies_the_system_with_the_baselines_params(tmp_path):
    script = write_script(tmp_path / "t.py", SYSTEM + "add_baselines()\n"
                          "sst.Component('r', 'cdma.Reporter')\n")
    result = sst_cdma.run(script, [], output_directory=tmp_path / "out", console=io.StringIO())
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    params = {c["name"]: c["params"] for c in config["components"]}
    workload = {name: comp.subcomponent("workload").params
                for name, comp in result.simulation.components.items()
                if comp.subcomponent("workload") is not None}
    assert set(params) == {"a", "b", "c", "d", "e", "oracle.a", "oracle.b", "vdnn.a", "vdnn.b",
                           "vdnn.c", "vdnn.d", "vdnn.e", "r"}
    assert workload["oracle.a"]["policy"] == "none" and params["oracle.b"]["unlimited"] is True
    assert workload["vdnn.a"]["policy"] == "all" and params["vdnn.c"] == params["c"]
    engines = result.simulation.components
    assert engines["c"].codec.algorithm == "rle" and engines["vdnn.c"].codec is None
    s = result.reports["summary"]
    assert s["algorithm"] == "rle" and s["baselines"]["vdnn"]["policy"] == "all"
    assert s["speedup_vs_vdnn"] == pytest.approx(
        s["baselines"]["vdnn"]["iteration_time_s"] / s["iteration_time_s"])
    assert result.results["vdnn.a"].system == "vdnn"


def test_a_main_system_that_offloads_nothing_gets_a_conv_vdnn_baseline(tmp_path):
    script = write_script(tmp_path / "t.py", SYSTEM.replace('"policy": "all"', '"policy": "none"')
                          + "add_baselines()\nsst.Component('r', 'cdma.Reporter')\n")
    result = sst_cdma.run(script, [], console=io.StringIO())
    s = result.reports["summary"]
    assert s["baselines"]["vdnn"]["policy"] == "conv"
    assert s["no_cdma_speedup"] == "nothing was offloaded (this run's policy is none)"


@pytest.mark.parametrize("body, fault", [
    ("add_baselines()\n", "no cdma.GPU component is configured yet"),
    (SYSTEM + "add_baselines()\nadd_baselines()\n", "already belongs to a baseline system"),
])
def test_add_baselines_refuses_what_it_cannot_copy(tmp_path, body, fault):
    script = write_script(tmp_path / "t.py", body)
    with pytest.raises(RunError) as err:
        sst_cdma.run(script, [])
    assert fault in str(err.value) and "t.py:" in str(err.value)


def test_a_baseline_system_whose_gpus_do_not_pair_with_the_main_ones_is_an_error(tmp_path):
    script = write_script(tmp_path / "t.py", SYSTEM + """
extra = sst.Component("x", "cdma.GPU")
extra.addParam("system", "oracle")
extra.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 32, "policy": "none"})
mem = sst.Component("y", "cdma.HBM")
sst.Link("l6", "0ps").connect((extra, "hbm"), (mem, "gpu"))
extra2 = sst.Component("x2", "cdma.GPU")
extra2.addParam("system", "oracle")
extra2.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
    {"network": "alexnet", "batch": 32, "policy": "none"})
mem2 = sst.Component("y2", "cdma.HBM")
sst.Link("l7", "0ps").connect((extra2, "hbm"), (mem2, "gpu"))
sst.Component("r", "cdma.Reporter")
""")
    with pytest.raises(RunError, match=r"the oracle system has 2 GPU\(s\) and the main system 1"):
        sst_cdma.run(script, [], console=io.StringIO())


def test_config_json_is_written_without_a_reporter(tmp_path):
    script = write_script(tmp_path / "t.py", SYSTEM)
    sst_cdma.run(script, [], output_directory=tmp_path / "out", console=io.StringIO())
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert [c["name"] for c in config["components"]] == ["a", "b", "c", "d", "e"]
    assert not (tmp_path / "out" / "summary.json").exists()


def test_the_reported_time_and_simtime_are_the_main_systems_iteration(tmp_path):
    result = sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", SMALL,
                          output_directory=tmp_path, console=io.StringIO())
    main = result.results["gpu0"].iteration_time_ps
    assert result.results["vdnn.gpu0"].iteration_time_ps > main  # the baseline ran longer
    assert result.sim_time_ps == main
    assert set(result.statistics["SimTime"]) == {main}
