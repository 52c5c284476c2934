"""Identical nodes simulated once (components.node_twins): node 0's records and statistics
copied for its twins give every output a run of every node writes, byte for byte."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from components.node_twins import parse_strides, twin_name, twin_plan

REPO = Path(__file__).resolve().parents[2]
#: what a run writes of its results (config.json describes the graph, which differs)
WRITTEN = ("summary.json", "StatisticOutput.csv", "trace.json")
STRIDES = {"gpu": 8, "host": 1, "cpu": 1, "switch": 4}


def test_a_twin_advances_each_numbered_word_by_its_stride():
    assert twin_name("vdnn.gpu3.pcie", 2, STRIDES) == "vdnn.gpu19.pcie"
    assert twin_name("host0.nvme1", 5, STRIDES) == "host5.nvme1"
    assert twin_name("gpu7:workload[0]", 1, STRIDES) == "gpu15:workload[0]"
    assert twin_name("switch3", 1, STRIDES) == "switch7"
    assert twin_name("report", 3, STRIDES) == "report"
    assert twin_name("gpu3", 0, STRIDES) == "gpu3"


def test_the_plan_repeats_each_block_node_by_node():
    names = ["host0", "gpu0", "gpu1", "oracle.gpu0", "oracle.gpu1", "report"]
    plan = [twin_name(n, k, {"gpu": 2, "host": 1}) for n, k in
            twin_plan(names, 3, {"gpu": 2, "host": 1})]
    assert plan == ["host0", "gpu0", "gpu1", "host1", "gpu2", "gpu3", "host2", "gpu4", "gpu5",
                    "oracle.gpu0", "oracle.gpu1", "oracle.gpu2", "oracle.gpu3", "oracle.gpu4",
                    "oracle.gpu5", "report"]


def test_malformed_strides_are_refused_naming_the_entry():
    assert parse_strides("gpu:8,host:1") == {"gpu": 8, "host": 1}
    with pytest.raises(ValueError, match="'nic:2' is not WORD:COUNT"):
        parse_strides("gpu:8 nic:2")


def _run(script: str, options: list[str], out: Path) -> sst_cdma.RunResult:
    return sst_cdma.run(REPO / "topologies" / script, options, output_directory=out,
                        console=io.StringIO())


@pytest.mark.parametrize("script,options,nodes", [
    ("dgx1_cdma.py", ["--network", "digits_cnn", "--batch", "16", "--gpus", "32"], 4),
    ("pascal_cdma.py", ["--network", "digits_cnn", "--batch", "16", "--gpus", "4",
                        "--gpus-per-host", "2", "--nvme", "1", "--offload-to", "nvme"], 2),
    ("gb200_cdma.py", ["--network", "digits_cnn", "--batch", "16", "--gpus", "4",
                       "--optimizer", "adam", "--optimizer-states", "host"], 2),
])
def test_node_zero_alone_writes_what_every_node_writes(tmp_path, script, options, nodes):
    one = _run(script, options, tmp_path / "one")
    every = _run(script, [*options, "--simulate-every-node"], tmp_path / "every")
    gpus = int(options[options.index("--gpus") + 1])
    simulated = [n for n in one.simulation.components if n.startswith("gpu") and "." not in n]
    assert len(simulated) == gpus // nodes  # node 0's GPUs, no more
    assert len([n for n in every.simulation.components
                if n.startswith("gpu") and "." not in n]) == gpus
    assert len(one.reports["summary"]["gpus"]) == gpus
    for name in WRITTEN:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "every" / name).read_bytes()
    assert one.console_text == every.console_text
    # what makes the copies exact: each node of the full run measured what node 0 did
    stats = every.statistics.set_index(["ComponentName", "StatisticName", "StatisticSubId"])
    rows = stats.to_dict("index")
    strides = parse_strides(one.simulation.components["report"].params["node_strides"])
    node0 = [key for key in rows if key[0].startswith(("gpu0", "host0", "cpu0", "switch0",
                                                        "oracle.gpu0", "vdnn.gpu0"))]
    assert len(node0) > 20
    for component, stat, sub in node0:
        for node in range(1, nodes):
            assert rows[(twin_name(component, node, strides), stat, sub)] == \
                rows[(component, stat, sub)]


def test_nodes_joined_by_a_fabric_or_filled_unevenly_are_all_simulated():
    hgx = sst_cdma.run(REPO / "topologies" / "hgx_h100_cdma.py",
                       ["--network", "digits_cnn", "--batch", "16", "--no-baselines"],
                       console=io.StringIO(), run_mode="init")
    assert "gpu7" in hgx.graph.components  # data parallel: one NVSwitch joins the hosts
    uneven = sst_cdma.run(REPO / "topologies" / "dgx1_cdma.py",
                          ["--network", "digits_cnn", "--batch", "16", "--gpus", "12",
                           "--no-baselines"], console=io.StringIO(), run_mode="init")
    assert "gpu11" in uneven.graph.components
