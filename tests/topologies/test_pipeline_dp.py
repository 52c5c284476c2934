"""topologies/pipeline_cdma.py with --dp: each stage's weight gradients reduced over its dp
group after its last backward pass (ZeRO 0: all-reduce; 1 and 2: reduce-scatter, then the
updated weights all-gathered, each rank holding 1/dp of the optimizer states), priced on the
ranks' real placement; and the symmetry of data-parallel replicas: replica 0 simulated alone
gives byte-identical per-rank statistics, step and collective records to simulating every
replica (8, 16, 64 and 256 GPUs; from 64 on the dp groups span nodes). docs/parallel.md, "Data parallelism" and "Symmetry"."""
from __future__ import annotations

import io
import math
import re
from collections import Counter

import pytest

import sst_cdma
from components.cluster_fabric import ClusterFabricResult
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError
from sst_cdma.model.cluster_graph import build_cluster
from sst_cdma.model.collectives import group_cost
from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.tensor import shard_transformer
from workloads.parallel.transformer_stages import shard_plan, transformer_stage_stream
from workloads.parallel.zero import model_state_bytes, step_volume_bytes
from workloads.vdnn import state_name, weight_name, wgrad_name

PIPELINE = "topologies/pipeline_cdma.py"
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
OPTS = "--network gpt2_small --gpu hopper --micro-batches 2 --batch 1 --seq-len 256"


def run(opts: str):
    """The run's result and summary."""
    result = sst_cdma.run(PIPELINE, f"{OPTS} {opts}", console=io.StringIO())
    return result, result.reports["summary"]


def twin(name: str, tp: int) -> str:
    """The replica-0 twin of an element name (``gpuR-tpT-ppS-dpD...``; a node's socket host,
    ``nodeN.hostK``, is its own: the GPUs of several replicas share it)."""
    m = re.match(r"gpu(\d+)(-tp\d+)?(-pp\d+)-dp(\d+)(.*)$", name)
    if m:
        rank, d = int(m.group(1)), int(m.group(4))
        return f"gpu{rank - tp * d}{m.group(2) or ''}{m.group(3)}-dp0{m.group(5)}"
    m = re.match(r"host(\d+)$", name)
    assert m is None, "hosts are mapped with their GPU's rank in the test below"
    return name


def tp0(gpu: str) -> str:
    """The GPU of ``gpu``'s stage's tensor-parallel rank 0 in its replica, which the run of
    one replica simulates for its tp twins (``gpuR-tpT-...``: R - T, tp0)."""
    m = re.match(r"gpu(\d+)-tp(\d+)(-.*)$", gpu)
    assert m is not None
    return f"gpu{int(m.group(1)) - int(m.group(2))}-tp0{m.group(3)}"


def statistics_by_element(result, tp: int, dp: int, pp: int) -> dict[tuple, tuple]:
    """Every GPU-side statistic row (all but the fabric's) keyed by the replica-0 twin of its
    element, with its values; hosts mapped by rank."""
    out: dict[tuple, tuple] = {}
    values = [c for c in result.statistics.columns if "." in c or c == "SimTime"]
    for row in result.statistics.to_dict("records"):
        name = row["ComponentName"]
        if name == "fabric" or re.match(r"node\d+\.host\d+$", name):
            continue  # node_hosts below
        if (m := re.match(r"host(\d+)$", name)):
            rank = int(m.group(1))
            d = rank // tp % dp
            name = f"host{rank - tp * d}"
        else:
            name = twin(name, tp)
        key = (name, row["StatisticName"], row["StatisticSubId"])
        out.setdefault(key, []).append(tuple(row[c] for c in values))
    return {k: tuple(v) for k, v in out.items()}


def node_hosts(result) -> dict[tuple, tuple]:
    """The statistic rows of the nodes' socket hosts (``nodeN.hostK``), keyed by element."""
    values = [c for c in result.statistics.columns if "." in c or c == "SimTime"]
    return {(row["ComponentName"], row["StatisticName"], row["StatisticSubId"]):
            tuple(row[c] for c in values) for row in result.statistics.to_dict("records")
            if re.match(r"node\d+\.host\d+$", row["ComponentName"])}


def record_key(r):
    """A fabric record's figures."""
    return (r.group, r.index, r.seq, r.op, r.tensor, r.nbytes, r.ranks, r.first_ps, r.last_ps,
            r.end_ps, r.cost)


@pytest.mark.parametrize("tp, pp, dp, zero", [(2, 2, 2, 0), (2, 2, 4, 0), (2, 2, 16, 0),
                                              (2, 2, 4, 3),
                                              pytest.param(2, 2, 64, 0, marks=pytest.mark.slow)])
def test_one_replica_gives_every_rank_s_figures_byte_identical(tp, pp, dp, zero):
    layout = f"--tp {tp} --pp {pp} --dp {dp} --zero {zero}"
    one, s_one = run(layout)
    every, s_every = run(layout + " --simulate-every-rank")
    assert check_summary(s_one) == [] and check_summary(s_every) == []
    p_one, p_every = s_one["pipeline"], s_every["pipeline"]
    # the step and every stage's figures are the same to the byte (the stage's GPUs named
    # are replica 0's)
    assert p_one["step_time_s"] == p_every["step_time_s"]
    assert p_one["stages"] == p_every["stages"]
    assert {k: v for k, v in p_one.items() if k != "ranks"} == \
        {k: v for k, v in p_every.items() if k != "ranks"}
    # every rank reported: its coordinates, and its own GPU or its replica-0 twin
    gpus = tp * pp * dp
    assert [e["rank"] for e in p_one["ranks"]] == sorted(e["rank"] for e in p_one["ranks"]) \
        == list(range(gpus))
    for a, b in zip(p_one["ranks"], p_every["ranks"]):
        assert (a["tp"], a["pp"], a["dp"]) == (b["tp"], b["pp"], b["dp"])
        assert a["rank"] == a["tp"] + tp * a["dp"] + tp * dp * a["pp"]
        assert b["gpu"].startswith(f"gpu{b['rank']}-") and b["gpu"].endswith(f"-dp{b['dp']}")
        assert a["gpu"] == tp0(twin(b["gpu"], tp))  # its stage's tp rank 0 (rank_twins)
    # every statistic of every GPU, its HBM, DMA engine, link, ports and host: each replica's
    # equal to replica 0's, byte for byte
    stats_one = statistics_by_element(one, tp, dp, pp)
    stats_every = statistics_by_element(every, tp, dp, pp)
    assert stats_one.keys() == stats_every.keys()
    for key, rows in stats_every.items():
        assert set(rows) == set(stats_one[key]) and len(set(rows)) == 1, key
        assert len(rows) == dp
    # a node socket's host is one element for the replicas whose GPUs it holds: those the
    # run of replica 0 has, the same in both runs
    hosts_one, hosts_every = node_hosts(one), node_hosts(every)
    assert hosts_one and all(hosts_every[k] == v for k, v in hosts_one.items())
    # the GPUs' own collective records
    for name in (n for n in every.results if n.endswith(":collectives[0]")):
        assert every.results[name].collectives == one.results[twin(name, tp)].collectives
    # the fabric's: those of groups holding a replica-0 rank, the same in order and figure
    fab_one, fab_every = one.results["fabric"], every.results["fabric"]
    assert isinstance(fab_one, ClusterFabricResult)
    simulated = {tp * dp * s for s in range(pp)}  # each stage's tp rank 0 of replica 0
    kept = [record_key(r) for r in fab_every.collectives if set(r.ranks) & simulated]
    assert [record_key(r) for r in fab_one.collectives] == kept
    # each dp collective is priced over its whole group, every replica arriving at once
    dp_records = [r for r in fab_one.collectives if r.group == "dp"]
    assert dp_records and all(len(r.ranks) == dp and r.first_ps == r.last_ps
                              for r in dp_records)
    assert all(("inter" in r.tiers) == (dp * tp > 8) for r in dp_records)
    # what only the full run has: the other replicas' tp groups' collectives, the dp groups'
    # of the other tp ranks, which the fabric's statistics count once per group, and the
    # embedding groups' (gpt2_small's tied embeddings: one all-reduce a step between each
    # pipeline's first and last rank) of every pipeline but replica 0's tp rank 0 (a group of
    # twins, or of another replica's ranks: docs/parallel.md, "Symmetry")
    count = Counter(r.group for r in fab_every.collectives)
    assert any(r.group == "embedding" for r in fab_one.collectives)
    assert len(fab_every.collectives) - len(fab_one.collectives) == \
        count["tp"] * (dp - 1) // dp + count["dp"] * (tp - 1) // tp + \
        count["embedding"] * (tp * dp - 1) // (tp * dp)


def stage_stream(stage: int, zero: int, dp: int = 2, pp: int = 2):
    """Stage ``stage``'s stream under tp 2 x ``pp`` x dp ``dp`` with ZeRO ``zero``."""
    net = load_network("gpt2_small", 256)
    shard = shard_transformer(net, 2, False)
    plan = shard_plan(net, 2, 1, "float32", "none", "adam")
    layout = make_layout(SHAPE, tp=2, pp=pp, dp=dp, zero=zero, micro_batches=2)
    return transformer_stage_stream(plan, layout, stage, shard=shard, optimizer="adam")


@pytest.mark.parametrize("zero", [0, 1])
def test_the_stage_s_gradients_are_reduced_over_dp_with_zero_s_volume(zero):
    for stage in (0, 1):
        built = stage_stream(stage, zero)
        plain = stage_stream(stage, zero, dp=1)
        ops, tensors = built.stream.ops, built.stream.tensors
        dp_ops = [op for op in ops if op.group == "dp"]
        steps = [op for op in ops if op.op == "compute" and op.phase == "update"]
        layers = [op.name for op in steps]
        params = sum(tensors[weight_name(n)].bytes // 4 for n in layers)
        reduce = "all_reduce" if zero == 0 else "reduce_scatter"
        # ZeRO 2 reduce-scatters every backward pass: tests/workloads/parallel/test_zero2_grads.py
        # every gradient the step reads, reduced asynchronously in the last backward pass
        # (micro-batch 1 of 2), right after its layer's last backward kernel and its sync;
        # the step waits for each before its first kernel; at ZeRO 1-2 every weight it
        # writes all-gathered after the last
        first_step = ops.index(steps[0])
        last_step = ops.index(steps[-1])
        last_pass = built.spans[(1, 0)]
        reductions = [i for i, op in enumerate(ops) if op.group == "dp" and op.async_]
        assert sorted(ops[i].name for i in reductions) == sorted(wgrad_name(n) for n in layers)
        for i in reductions:
            op = ops[i]
            assert op.op == reduce and op.phase == "backward"
            assert last_pass.backward_start <= i < last_pass.backward_end
            layer = op.name[:-len(":dw")]
            assert (ops[i - 1].op, ops[i - 1].name) == ("sync", layer)
            assert max(k for k in range(i) if ops[k].op == "compute" and
                       ops[k].name == layer) > last_pass.backward_start
        assert [(op.op, op.name) for op in ops[first_step - len(layers):first_step]] == \
            [("collective_wait", wgrad_name(n)) for n in layers]
        assert [(op.op, op.name) for op in dp_ops if ops.index(op) > last_step] == \
            ([] if zero == 0 else [("all_gather", weight_name(n)) for n in layers])
        # ZeRO's per-rank volume (2 psi a step at stages 0-1): an all-reduce moves twice its
        # buffer, a reduce-scatter or an all-gather once
        moved = sum(tensors[op.name].bytes * (2 if op.op == "all_reduce" else 1)
                    for op in dp_ops)
        assert moved == step_volume_bytes(params, zero, "float32") > 0
        # the optimizer states: each layer's 1/dp shard from ZeRO 1 on; the step's kernel too
        for n, step in zip(layers, steps):
            p = tensors[weight_name(n)].bytes // 4
            assert tensors[state_name(n)].bytes == \
                model_state_bytes(p, 2, zero, "float32", "adam").optimizer
            before = next(op for op in plain.stream.ops
                          if op.op == "compute" and op.phase == "update" and op.name == n)
            assert step.flops == (before.flops if zero == 0 else before.flops // p * -(-p // 2))


def test_zero_1_shards_the_states_in_each_stage_s_peak_and_dp_crosses_nodes():
    _, zero0 = run("--tp 2 --pp 1 --dp 8")
    result, zero1 = run("--tp 2 --pp 1 --dp 8 --zero 1")
    a, b = zero0["pipeline"]["stages"][0], zero1["pipeline"]["stages"][0]
    states = [sum(t.bytes for t in stage_stream(0, zero, dp=8, pp=1).stream.tensors.values()
                  if t.kind == "state") for zero in (0, 1)]
    # adam's states (held the whole step) shrink to their eighth: the peak drops by as much
    assert states[1] * 8 == pytest.approx(states[0], rel=1e-3)
    assert a["peak_memory_bytes"] - b["peak_memory_bytes"] == states[0] - states[1]
    # 16 GPUs on two DGX H100s: each dp group holds 4 ranks of each node, so its collectives
    # cross the network tier, priced as the model prices that group
    fabric = result.results["fabric"]
    cluster = build_cluster("dgx_h100", 2)
    dp_records = [r for r in fabric.collectives if r.group == "dp"]
    # (tp rank 1's dp group is its twin's: tp rank 0 alone is simulated)
    assert {r.ranks for r in dp_records} == {tuple(range(0, 16, 2))}
    for r in dp_records:
        assert "inter" in r.tiers
        cost = group_cost(cluster, r.ranks, "ring", r.op, r.nbytes)
        assert r.time_ps == math.ceil(cost.time_s * 1e12)
    # the reduce-scatters overlap the last backward pass: exposed and hidden time together
    # are the group's priced collectives (one at a time over the group), both parts non-zero
    assert (b["dp_comm_time_s"] + b["dp_hidden_time_s"]) * 1e12 == pytest.approx(
        sum(r.time_ps for r in dp_records if r.ranks[0] == 0), abs=2)
    assert b["dp_comm_time_s"] > 0 and b["dp_hidden_time_s"] > 0
    assert zero1["pipeline"]["tokens_per_s"] > 0 and 0 < zero1["pipeline"]["mfu"] < 1


@pytest.mark.parametrize("opts, message", [
    ("--tp 2 --pp 2 --zero 3", "--zero 3 with --dp 1: ZeRO shards the model states over the "
     "data-parallel ranks"),
    ("--tp 2 --pp 2 --dp 1 --zero 1", "--zero 1 with --dp 1: ZeRO shards"),
    ("--tp 2 --pp 2 --dp 2 --global-batch 5",
     "--global-batch 5 is not a multiple of --batch 1 x --dp 2 = 2"),
    ("--tp 2 --pp 2 --dp 2 --global-batch 8 --micro-batches 2",
     "--global-batch 8 is --micro-batches 4 of --batch 1 x --dp 2, but --micro-batches is 2"),
    ("--dp 2 --gpu ampere", "--dp 2 puts each stage's ranks on a cluster node, but no node "
     "preset holds --gpu ampere's GPUs"),
])
def test_a_bad_dp_option_is_one_line(opts, message):
    gpu = "" if "--gpu" in opts else "--gpu hopper"
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, f"--network gpt2_small {gpu} {opts}", console=io.StringIO())
    text = str(info.value)
    assert message in text and "\n" not in text


def test_the_chain_of_identical_layers_takes_no_dp():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, "--pp 2 --dp 2 --zero 1", console=io.StringIO())
    assert "--dp, --zero need --network" in str(info.value)


def test_global_batch_derives_the_micro_batches():
    result = sst_cdma.run(PIPELINE, OPTS.replace("--micro-batches 2", "--tp 2 --pp 2 --dp 2 "
                                                 "--global-batch 8"), console=io.StringIO())
    summary = result.reports["summary"]
    assert summary["pipeline"]["micro_batches"] == 4
