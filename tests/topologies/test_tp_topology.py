"""topologies/tp_cdma.py: Megatron-style blocks on one or two DGX H100 nodes, their tensor- and
data-parallel all-reduces priced on the cluster fabric; each GPU's iteration is its kernels
plus its collectives, and bad options are one line."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.runner import RunError
from sst_cdma.model.cluster_graph import build_cluster
from sst_cdma.model.collectives import group_cost

TP = Path(__file__).resolve().parents[2] / "topologies" / "tp_cdma.py"
MIB = 1 << 20


def run(*opts: str):
    return sst_cdma.run(TP, list(opts), console=io.StringIO())


def priced_ps(cluster, ranks, algorithm: str, nbytes: int) -> int:
    return math.ceil(group_cost(cluster, ranks, algorithm, "all_reduce", nbytes).time_s * 1e12)


def test_one_node_runs_two_tp_all_reduces_per_block_in_each_pass():
    result = run("--tp", "8", "--blocks", "3", "--activation", "16MiB")
    records = result.results["fabric"].collectives
    assert len(records) == 3 * 4 and {r.group for r in records} == {"tp"}
    each = priced_ps(build_cluster("dgx_h100", 1), range(8), "ring", 16 * MIB)
    assert all(r.time_ps == each for r in records)
    # kernels: 1 ms attention, 2 ms MLP forward, twice that backward, per block
    kernels = 3 * (1 + 2) * 3 * 10**9
    for rank in range(8):
        gpu = result.results[f"gpu{rank}"]
        assert gpu.completed and gpu.iteration_time_ps == kernels + 12 * each
    summary = result.reports["summary"]
    assert not check_summary(summary)
    assert summary["iteration_time_s"] == pytest.approx((kernels + 12 * each) * 1e-12)


@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
def test_two_nodes_add_a_dp_all_reduce_across_the_network(algorithm):
    result = run("--nodes", "2", "--tp", "4", "--blocks", "1", "--algorithm", algorithm,
                 "--gradients", "128MiB")
    cluster = build_cluster("dgx_h100", 2)
    dp = [r for r in result.results["fabric"].collectives if r.group == "dp"]
    # tp 4 on 16 GPUs: dp 4, each dp group two GPUs of each node
    assert sorted(r.ranks for r in dp) == [(i, i + 4, i + 8, i + 12) for i in range(4)]
    for r in dp:
        assert "inter" in r.tiers
        assert r.time_ps == priced_ps(cluster, r.ranks, algorithm, 128 * MIB)


@pytest.mark.parametrize("opts, words", [
    (["--tp", "3"], "--tp 3 does not divide the 8 GPUs of --nodes 1"),
    (["--nodes", "0"], "--nodes 0 must be >= 1"),
    (["--activation", "lots"], "--activation lots: "),
    (["--algorithm", "mesh"], "argument --algorithm: invalid choice: 'mesh'"),
])
def test_bad_options_are_one_line(opts, words):
    with pytest.raises(RunError) as err:
        run(*opts)
    assert words in str(err.value) and "\n" not in str(err.value)
