"""topologies/dgx_h100_cluster.py and dgx_a100_cluster.py: a transformer over tp x pp x dp
ranks of DGX nodes, one data-parallel replica simulated. The console prints each stage's time
in TP and DP collectives, tokens/s and MFU as docs/parallel.md defines them; the stages'
messages cross the NICs where neighbouring stages sit on different nodes; each dp group's
collectives cross the network; bad options are one line."""
from __future__ import annotations

import io

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError
from sst_cdma.model.collectives import system_tiers
from sst_cdma.model.gpus import GPUS
from workloads import load_network

H100 = "topologies/dgx_h100_cluster.py"
A100 = "topologies/dgx_a100_cluster.py"
OPTS = ("--network llama3_8b --tp 8 --pp 2 --dp 4 --micro-batches 2 --batch 1 --seq-len 512 "
        "--dtype bfloat16")


@pytest.fixture(scope="module")
def h100():
    """The 64-GPU run on DGX H100s."""
    console = io.StringIO()
    result = sst_cdma.run(H100, OPTS, console=console)
    return result, result.reports["summary"], console.getvalue()


def test_tokens_per_second_and_mfu_follow_their_formulas(h100):
    result, summary, text = h100
    assert check_summary(summary) == []
    p = summary["pipeline"]
    assert (p["pp"], p["tp"], p["dp"]) == (2, 8, 4) and len(p["ranks"]) == 64
    tokens = 2 * 1 * 512 * 4  # micro-batches x batch x sequence x dp: the global batch's
    assert p["tokens_per_s"] == pytest.approx(tokens / p["step_time_s"], rel=1e-12)
    params = load_network("llama3_8b", 512).param_count()
    peak = GPUS["hopper"].tensor_flops
    assert p["mfu"] == pytest.approx(6 * params * p["tokens_per_s"] / (64 * peak), rel=1e-12)
    assert 0 < p["mfu"] < 1
    assert f"{p['tokens_per_s']:,.0f} tokens/s, MFU {p['mfu']:.1%}" in text
    assert "64 ranks, 2 simulated (tp rank 0 of each stage of one data-parallel replica" in text
    lines = [line for line in text.splitlines() if line.startswith("  stage ")]
    assert len(lines) == 2
    assert all(" ms in TP collectives, " in line and " ms in DP collectives (" in line
               and " ms more hidden), " in line for line in lines)
    for s in p["stages"]:
        assert s["tp_comm_time_s"] > 0 and s["dp_comm_time_s"] > 0
        assert s["busy_time_s"] + s["tp_comm_time_s"] + s["dp_comm_time_s"] + \
            s["idle_time_s"] == pytest.approx(p["step_time_s"], rel=1e-12)


def test_stages_on_other_nodes_send_over_the_nic_and_dp_crosses_the_network(h100):
    result, summary, _ = h100
    fabric = result.results["fabric"]
    assert (fabric.node, fabric.nodes, fabric.fabric, fabric.ranks) == \
        ("dgx_h100", 8, "rail_ndr", 64)
    # tp 8 fills a node: each dp group holds one GPU of 4 nodes, inter-node alone
    dp = [r for r in fabric.collectives if r.group == "dp"]
    assert dp and all(r.tiers == ("inter",) and len(r.ranks) == 4 for r in dp)
    assert all(r.tiers == ("intra",) for r in fabric.collectives if r.group == "tp")
    # the stages' ports carry the NIC's large-message line of the collective model
    line = system_tiers("dgx_h100").inter.line("simple")
    gpus = [e["gpu"] for e in summary["pipeline"]["ranks"] if e["dp"] == 0]
    assert len(gpus) == 16
    for name in gpus:
        ports = [sub for sub in result.graph.component(name).subcomponents
                 if sub.slot == "p2p"]
        assert len(ports) == 1
        assert ports[0].params["bandwidth"] == f"{line.busbw_Bps:.0f}B/s"
        assert ports[0].params["latency"] == f"{round(line.step_latency_s * 1e12)}ps"


def test_an_a100_cluster_runs_on_hdr():
    result = sst_cdma.run(A100, OPTS.replace("--dp 4", "--dp 2"), console=io.StringIO())
    fabric = result.results["fabric"]
    assert (fabric.node, fabric.fabric, fabric.ranks) == ("dgx_a100", "rail_hdr", 32)
    p = result.reports["summary"]["pipeline"]
    peak = GPUS["a100_80gb"].tensor_flops
    params = load_network("llama3_8b", 512).param_count()
    assert p["mfu"] == pytest.approx(6 * params * p["tokens_per_s"] / (32 * peak), rel=1e-12)


@pytest.mark.parametrize("opts, message", [
    ("--tp 8 --pp 2", "a cluster's stages run a transformer: give --network"),
    ("--network llama3_8b --tp 8 --pp 2 --gpu ampere",
     "--gpu ampere: the cluster's GPUs are its DGX H100 nodes' (hopper)"),
])
def test_a_bad_cluster_option_is_one_line(opts, message):
    with pytest.raises(RunError) as info:
        sst_cdma.run(H100, opts, console=io.StringIO())
    text = str(info.value)
    assert message in text and "\n" not in text
