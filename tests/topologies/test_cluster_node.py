"""Each cluster GPU's network card behind the PCIe switch it shares with the GPU
(sst_cdma/builder/cluster_node.py): the same DGX H100 run with offload on and off. Off, the
cards carry the sends across nodes at exactly the ports' rate and lose nothing; on, the
sends across nodes and the offload copies lose time to each other and the step grows, while
collectives that stay inside a node never touch a card. The summary and the console report
both losses per stage; one replica simulated gives every replica's losses."""
from __future__ import annotations

import io
import math

import pytest

import sst_cdma
from components.nic import NICResult
from components.summary_schema import check_summary
from sst_cdma.model.collectives import system_tiers

H100 = "topologies/dgx_h100_cluster.py"
#: tp 4 x dp 2 fills a node: the two stages sit on two nodes and send over their cards; the
#: tp and dp groups stay inside a node (the embedding groups, one rank of each stage, do not)
OPTS = "--network gpt2_small --tp 4 --dp 2 --pp 2 --micro-batches 2 --batch 1 --seq-len 512"


def run(policy: str):
    console = io.StringIO()
    result = sst_cdma.run(H100, f"{OPTS} --policy {policy}", console=console)
    return result, result.reports["summary"], console.getvalue()


@pytest.fixture(scope="module")
def off():
    return run("none")


@pytest.fixture(scope="module")
def on():
    return run("all")


def test_without_offloads_the_cards_carry_the_sends_at_the_ports_rate(off):
    result, summary, text = off
    assert check_summary(summary) == []
    bandwidth = system_tiers("dgx_h100").inter.line("simple").busbw_Bps
    tied = [r for r in result.results["fabric"].collectives if r.group == "embedding"]
    for rank, name in ((0, "gpu0-tp0-pp0-dp0"), (8, "gpu8-tp0-pp1-dp0")):
        nic = result.results[f"{name}.nic"]
        assert isinstance(nic, NICResult) and nic.gpu_link == f"{name}.pcie"
        # one send a micro-batch, and the network phase of the tied embeddings' all-reduce
        assert nic.flows == 2 + 1 and nic.pcie_lost_ps == 0
        ports = result.results[f"{name}:p2p[0]"]
        sends = [m for m in ports.messages if m.direction == "send"]
        # a ring all-reduce of two ranks sends 2(n - 1)/n = 1 buffer from each
        (mine,) = [r for r in tied if rank in r.ranks]
        assert len(sends) == 2 and nic.sent_bytes == pytest.approx(
            sum(m.nbytes for m in sends) + mine.nbytes)
        for m in sends:
            assert m.end_ps - m.start_ps == math.ceil(m.nbytes * 1e12 / float(
                f"{bandwidth:.0f}"))
    for s in summary["pipeline"]["stages"]:
        assert s["network_lost_time_s"] == 0 and s["copies_lost_time_s"] == 0
    assert all(r.network_delay_ps == 0 for r in result.results["fabric"].collectives)
    assert "at its PCIe switch the network lost 0.000 ms to offload copies" in text


def test_offloads_and_sends_across_nodes_lose_time_to_each_other(off, on):
    result, summary, text = on
    assert check_summary(summary) == []
    stages = summary["pipeline"]["stages"]
    # stage 1 sends its gradients back while it offloads: both lose at its GPU's link
    assert stages[1]["network_lost_time_s"] > 0 and stages[1]["copies_lost_time_s"] > 0
    assert summary["pipeline"]["step_time_s"] > off[1]["pipeline"]["step_time_s"]
    slowed = [m for m in result.results["gpu8-tp0-pp1-dp0:p2p[0]"].messages
              if m.direction == "send"]
    alone = [m for m in off[0].results["gpu8-tp0-pp1-dp0:p2p[0]"].messages
             if m.direction == "send"]
    assert max(m.end_ps - m.start_ps for m in slowed) > max(m.end_ps - m.start_ps
                                                          for m in alone)
    # the tp and dp groups stay inside a node: no card carries them, nothing slows them
    records = result.results["fabric"].collectives
    assert all(r.network_delay_ps == 0 and r.tiers == ("intra",)
               for r in records if r.group in ("tp", "dp"))
    # the tied embeddings' all-reduce pairs each first-stage rank with its last-stage twin,
    # on the other node: it crosses the network (replica 0's four groups simulated)
    tied = [r for r in records if r.group == "embedding"]
    assert len(tied) == 4 and all("inter" in r.tiers for r in tied)
    line = next(x for x in text.splitlines() if x.startswith("  stage 1 "))
    assert (f"the network lost {stages[1]['network_lost_time_s'] * 1e3:.3f} ms to offload "
            f"copies, the copies {stages[1]['copies_lost_time_s'] * 1e3:.3f} ms") in line


def test_a_run_without_a_cluster_has_no_cards():
    result = sst_cdma.run("topologies/pipeline_cdma.py",
                          "--network gpt2_small --pp 2 --micro-batches 2 --batch 1 "
                          "--seq-len 512 --policy all", console=io.StringIO())
    assert not [r for r in result.results.values() if isinstance(r, NICResult)]
    assert all("network_lost_time_s" not in s
               for s in result.reports["summary"]["pipeline"]["stages"])


def test_one_replica_simulated_gives_every_replicas_losses():
    # tp 2 x dp 8: each stage spans two nodes and its dp groups cross the network, the
    # offloads on each GPU's link beside them; the twins' links are their own (section 11)
    opts = ("--network gpt2_small --tp 2 --dp 8 --pp 2 --micro-batches 2 --batch 1 "
            "--seq-len 512 --policy all")
    one = sst_cdma.run(H100, opts, console=io.StringIO())
    every = sst_cdma.run(H100, f"{opts} --simulate-every-rank", console=io.StringIO())
    assert one.reports["summary"]["pipeline"]["stages"] == \
        every.reports["summary"]["pipeline"]["stages"]

    def dp(result):
        return sorted((r.index, r.seq, r.end_ps, r.network_delay_ps)
                      for r in result.results["fabric"].collectives if r.group == "dp")

    assert dp(one) == dp(every)
    assert any(delay for *_, delay in dp(one))  # some dp all-reduce was slowed
