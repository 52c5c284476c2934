"""The chunked (burst) model agrees with the flow model within 1% on every network: bursts add
only the pipeline fill and drain of each transfer."""
from __future__ import annotations

import io

import pytest

import sst_cdma
from workloads import CNNS


def iteration(repo, network, mode, policy):
    opts = ["--network", network, "--batch", "16", "--policy", policy, "--algorithm", "none",
            "--mode", mode, "--no-baselines"]
    r = sst_cdma.run(repo / "topologies/pascal_cdma.py", opts, console=io.StringIO())
    return r.results["gpu0"].iteration_time_ps, r.events


# CNNs: the transformers' iterations at batch 16 and their full sequence lengths outgrow this
# topology's pinned host memory; tests/workloads/test_transformers.py runs this check on
# gpt2_small at a short sequence
@pytest.mark.parametrize("network", CNNS)
def test_chunk_and_flow_modes_agree_within_one_percent(repo, network):
    flow, flow_events = iteration(repo, network, "flow", "all")
    chunk, chunk_events = iteration(repo, network, "chunk", "all")
    assert abs(chunk / flow - 1) < 0.01
    assert chunk >= flow             # bursts can only add fill/drain time
    assert chunk_events > flow_events  # and they cost events: that is what the flow model saves
