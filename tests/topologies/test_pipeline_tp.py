"""topologies/pipeline_cdma.py with --tp: tp x pp GPUs in Megatron's rank order, each stage's tp
GPUs running the same shard stream with its tensor-parallel collectives, priced on one DGX
H100's fabric. gpt2_small over tp 2 x pp 2 with 4 micro-batches: every rank runs its stream's
collectives and its tp pair meets each (no mismatch, no deadlock), each collective takes the
model's group_cost for its bytes, the step is shorter than tp 1's but longer than half of it;
with --sequence-parallel the collectives are all-gathers and reduce-scatters and each stage's
peak memory drops by at least the activations tensor.py's accounting saves; the console names
each stage's GPUs and its time in TP collectives; the Chrome trace draws sends and
collectives; bad options are one line."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from sst_in_process import run_sst

import sst_cdma
from components.cluster_fabric import ClusterFabricResult
from components.collective_ops import CollectiveOpsResult
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError
from sst_cdma.model.cluster_graph import build_cluster
from sst_cdma.model.collectives import group_cost
from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.tensor import saved_activations, shard_transformer
from workloads.parallel.transformer_stages import (chunk_cuts, shard_plan, tied_head,
                                                   transformer_stage_stream)
from workloads.stream_schema import COLLECTIVES
from workloads.transformer import split_name

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
OPTS = "--network gpt2_small --gpu hopper --pp 2 --micro-batches 4 --batch 1 --seq-len 512"
#: the GPUs of tp 2 x pp 2: rank = tp + 2 x pp
NAMES = ["gpu0-tp0-pp0", "gpu1-tp1-pp0", "gpu2-tp0-pp1", "gpu3-tp1-pp1"]


def run(opts: str, output_directory=None):
    """The run's result, summary and console text."""
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, opts, output_directory=output_directory, console=console)
    return result, result.reports["summary"], console.getvalue()


@pytest.fixture(scope="module")
def runs():
    """tp 1, tp 2 and tp 2 with sequence parallelism, the same pipeline otherwise."""
    return {"tp1": run(OPTS), "tp2": run(OPTS + " --tp 2"),
            "sp": run(OPTS + " --tp 2 --sequence-parallel")}


def stage_streams(sp: bool, policy: str = "none"):
    """Each stage's shard stream and schedule as the GPUs run them (the collectives do not
    depend on the kernels' prices)."""
    net = load_network("gpt2_small", 512)
    shard = shard_transformer(net, 2, sp)
    plan = shard_plan(net, 2, 1, "float32", policy, "adam", sequence_parallel=sp)
    layout = make_layout(SHAPE, tp=2, pp=2, micro_batches=4, sequence_parallel=sp)
    tied = tied_head(shard.network, "adam", all_reduce=True)
    return [transformer_stage_stream(plan, layout, s, tied=tied, shard=shard) for s in range(2)]


def priced_ps(ranks, op: str, nbytes: int) -> int:
    """The ring's time of the collective on one DGX H100, whole picoseconds rounded up."""
    cost = group_cost(build_cluster("dgx_h100", 1), ranks, "ring", op, nbytes)
    return math.ceil(cost.time_s * 1e12)


@pytest.mark.parametrize("case", ["tp2", "sp"])
def test_every_rank_runs_its_stream_s_collectives_and_its_pair_meets_each(runs, case):
    result, summary, _ = runs[case]
    assert check_summary(summary) == []
    assert sorted(n for n in result.results if n.startswith("gpu") and ":" not in n
                  and "." not in n) == NAMES
    streams = stage_streams(case == "sp")
    by_rank = {}
    for rank, name in enumerate(NAMES):
        gpu = result.results[name]
        assert gpu.completed
        ops = result.results[f"{name}:collectives[0]"]
        assert isinstance(ops, CollectiveOpsResult)
        stage = streams[rank // 2]
        ops_run = [op for step in stage.steps for op in stage.stream.ops[step.start:step.end]]
        expected = [(op.op, stage.stream.tensors[op.name].bytes) for op in ops_run
                    if op.op in COLLECTIVES]
        assert len(expected) == sum(op.op in COLLECTIVES for op in stage.stream.ops)
        assert [(op, nbytes) for op, _, _, _, nbytes, _, _ in ops.collectives] == expected
        by_rank[rank] = [entry[:5] for entry in ops.collectives]
    # the ranks of a stage issue the same collectives; the stages differ (their layers)
    assert by_rank[0] == by_rank[1] and by_rank[2] == by_rank[3]
    assert by_rank[0] != by_rank[2]
    kinds = {op for op, *_ in by_rank[0] + by_rank[2]}
    assert kinds == ({"all_reduce", "all_gather", "reduce_scatter"} if case == "sp"
                     else {"all_reduce"})


@pytest.mark.parametrize("case", ["tp2", "sp"])
def test_each_collective_takes_the_model_s_time_on_the_fabric(runs, case):
    result, summary, _ = runs[case]
    fabric = result.results["fabric"]
    assert isinstance(fabric, ClusterFabricResult)
    assert (fabric.node, fabric.nodes, fabric.ranks) == ("dgx_h100", 1, 4)
    records = fabric.collectives
    # the tp pairs, and the tied word embeddings' all-reduce between each pipeline's first and
    # last rank (one a step, of the vocabulary shard x hidden in float32): tp rank 0's; tp
    # rank 1's group (1, 3) holds twins only and is not priced (docs/parallel.md, "Symmetry")
    assert {(r.group, r.ranks) for r in records} == {("tp", (0, 1)), ("tp", (2, 3)),
                                                     ("embedding", (0, 2))}
    tied = tied_head(shard_transformer(load_network("gpt2_small", 512), 2).network)
    assert tied is not None
    assert [(r.op, r.nbytes) for r in records if r.group == "embedding"] == \
        [("all_reduce", tied.params * 4)]
    for r in records:
        assert r.time_ps == priced_ps(r.ranks, r.op, r.nbytes) > 0
        assert r.tiers == ("intra",)
        # the pair runs the same stream: both arrive at once
        assert r.first_ps == r.last_ps or r.group == "embedding"
    # each stage's time in TP collectives is its group's collectives' priced time
    for entry, ranks in zip(summary["pipeline"]["stages"], ((0, 1), (2, 3))):
        total = sum(r.time_ps for r in records if r.ranks == ranks and r.group == "tp")
        assert round(entry["tp_comm_time_s"] * 1e12) == total
        assert entry["tp_gpus"] == [NAMES[ranks[0]], NAMES[ranks[1]]]
        for rank in ranks:
            port = result.results[f"{NAMES[rank]}:collectives[0]"]
            assert port.waited["tp"] == total
            # the embedding all-reduce: from the rank's arrival to the group's answer (tp
            # rank 1's a copy of tp rank 0's)
            mine = [r for r in records if r.group == "embedding" and ranks[0] in r.ranks]
            assert port.waited["embedding"] >= mine[0].time_ps
            assert port.wait_ps == total + port.waited["embedding"]


def test_full_recomputation_reruns_the_recomputed_kernels_collectives(runs):
    result, summary, _ = run(OPTS + " --tp 2 --policy recompute")
    assert check_summary(summary) == []
    plain = runs["tp2"][1]["pipeline"]["stages"]
    for s, stage in enumerate(stage_streams(False, "recompute")):
        ops_run = [op for step in stage.steps for op in stage.stream.ops[step.start:step.end]]
        expected = [(op.op, stage.stream.tensors[op.name].bytes) for op in ops_run
                    if op.op in COLLECTIVES]
        # the all-reduces after the recompute kernels of proj: one a block and micro-batch
        again = sum(1 for i, op in enumerate(ops_run) if op.op in COLLECTIVES
                    and op.phase == "backward" and ops_run[i - 1].pass_ == "recompute")
        assert again == 4 * 6
        for name in NAMES[2 * s:2 * s + 2]:
            assert result.results[name].completed
            ran = result.results[f"{name}:collectives[0]"].collectives
            assert [(op, nbytes) for op, _, _, _, nbytes, _, _ in ran] == expected
        # the stage spends longer in TP collectives than without recomputation
        assert summary["pipeline"]["stages"][s]["tp_comm_time_s"] > plain[s]["tp_comm_time_s"]


def test_the_step_with_tp_2_is_shorter_than_tp_1_s_but_longer_than_half(runs):
    one = runs["tp1"][1]["pipeline"]
    two = runs["tp2"][1]["pipeline"]
    assert one["step_time_s"] / 2 < two["step_time_s"] < one["step_time_s"]
    assert "tp" not in one and two["tp"] == 2
    for a, b in zip(one["stages"], two["stages"]):
        # half the heads and FFN a rank: less compute, but the collectives cost something
        assert b["busy_time_s"] < a["busy_time_s"]
        assert b["tp_comm_time_s"] > 0
        assert b["peak_memory_bytes"] < a["peak_memory_bytes"]
        assert b["sent_bytes"] == a["sent_bytes"]   # the whole residual stream either way
        # busy, TP collectives and bubble make up the step
        assert b["busy_time_s"] + b["tp_comm_time_s"] + b["idle_time_s"] == \
            pytest.approx(two["step_time_s"], rel=1e-12)


def test_sequence_parallelism_lowers_each_stage_s_peak_as_the_accounting_says(runs):
    net = load_network("gpt2_small", 512)
    layout = make_layout(SHAPE, tp=2, pp=2, micro_batches=4)
    plan = shard_plan(net, 2, 1, "float32", "none", "adam")
    kept = [saved_activations(shard_transformer(net, 2, sp).network, 1, "float32")
            for sp in (False, True)]
    plain, sp = (runs[c][1]["pipeline"]["stages"] for c in ("tp2", "sp"))
    for s, (a, b) in enumerate(zip(plain, sp)):
        blocks = {split_name(n)[0] for cut in chunk_cuts(plan, layout)
                  if cut.chunk.virtual_stage == s for n in cut.layers} - {None}
        # what one micro-batch's blocks of the stage keep for the backward pass, less
        saved = sum(sum(kept[0][k].values()) - sum(kept[1][k].values()) for k in blocks)
        assert saved > 0
        assert a["in_flight_max"] == b["in_flight_max"] == 2 - s
        drop = a["peak_memory_bytes"] - b["peak_memory_bytes"]
        assert drop >= b["in_flight_max"] * saved
        # the boundary message is the sequence shard
        assert b["sent_bytes"] * 2 == a["sent_bytes"]


def test_the_command_prints_a_line_per_stage_with_its_tp_time_and_draws_a_trace(tmp_path):
    out = run_sst("--output-directory", tmp_path, PIPELINE, "--", *OPTS.split(), "--tp", "2",
                  cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "2 pipeline stages of gpt2_small's blocks, each tp 2 on 2 H100 SXM5s" in out.stdout
    assert "pipeline:        2 stages x tp 2, 1f1b, 4 micro-batches" in out.stdout
    lines = [line for line in out.stdout.splitlines() if line.startswith("  stage ")]
    assert [line.split(":")[0] for line in lines] == \
        [f"  stage 0 ({NAMES[0]}, {NAMES[1]})", f"  stage 1 ({NAMES[2]}, {NAMES[3]})"]
    assert all(" ms in TP collectives, " in line for line in lines)
    trace = json.loads((tmp_path / "trace.json").read_text(encoding="utf-8"))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert [names[pid].split(":")[0] for pid in sorted(names)] == NAMES
    for pid in names:
        threads = {e["args"]["name"] for e in trace
                   if e["name"] == "thread_name" and e["pid"] == pid}
        assert {"sends to other stages", "recvs from other stages", "collectives"} <= threads
        kinds = {e["cat"] for e in trace if e["ph"] == "X" and e["pid"] == pid}
        assert {"compute", "send", "recv", "collective"} <= kinds


@pytest.mark.parametrize("opts, message", [
    ("--network gpt2_small --pp 2 --tp 2 --gpu ampere",
     "--tp 2 puts each stage's ranks on a cluster node, but no node preset holds --gpu "
     "ampere's GPUs (those that do: a100_80gb (dgx_a100), hopper (dgx_h100))"),
    ("--network gpt2_small --pp 2 --sequence-parallel",
     "--network gpt2_small: --sequence-parallel needs --tp > 1, but --tp is 1"),
    ("--network gpt2_small --pp 2 --tp 2 --seq-len 511 --sequence-parallel",
     "--tp 2 does not divide the 511 tokens of the sequence (sequence parallelism)"),
    ("--pp 2 --sequence-parallel", "--sequence-parallel need --network"),
])
def test_a_bad_option_is_one_line_naming_it(opts, message):
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, opts, console=io.StringIO())
    text = str(info.value)
    assert "model option error: " in text and message in text
    assert "\n" not in text


def test_an_a100_80gb_pipeline_runs_on_dgx_a100_nodes():
    result, summary, _ = run("--network gpt2_small --gpu a100_80gb --pp 2 --tp 4 "
                             "--micro-batches 2 --seq-len 128")
    fabric = result.results["fabric"]
    assert (fabric.node, fabric.nodes, fabric.ranks) == ("dgx_a100", 1, 8)
    assert {r.ranks for r in fabric.collectives if r.group == "tp"} == \
        {(0, 1, 2, 3), (4, 5, 6, 7)}
    # tp rank 0's embedding group; the others' hold twins only (not priced)
    assert {r.ranks for r in fabric.collectives if r.group == "embedding"} == {(0, 4)}
    assert [s["tp_gpus"][0] for s in summary["pipeline"]["stages"]] == \
        ["gpu0-tp0-pp0", "gpu4-tp0-pp1"]


def test_interleaved_chunks_go_round_each_tp_rank_s_ring():
    # vpp 2: stage 1's last chunk feeds stage 0's next one, between GPUs of one tp rank
    result, summary, _ = run("--network gpt2_small --pp 2 --tp 2 --micro-batches 4 "
                             "--schedule interleaved --vpp 2 --seq-len 128")
    assert check_summary(summary) == []
    assert all(result.results[name].completed for name in NAMES)
    records = result.results["fabric"].collectives
    issued = sum(len(result.results[f"{name}:collectives[0]"].collectives) for name in NAMES)
    # each priced collective's pair, and the twins' (tp rank 1's) unpriced embedding group's
    embedding = sum(1 for r in records if r.group == "embedding")
    assert records and embedding and len(records) * 2 + embedding * 2 == issued
    assert [s["in_flight_max"] for s in summary["pipeline"]["stages"]] == [5, 3]
