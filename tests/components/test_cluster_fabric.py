"""Collectives on the cluster fabric (cdma.ClusterFabric, cdma.CollectivePort and the
all_reduce, reduce_scatter and all_gather ops): a collective takes exactly the model's
group_cost after its last member arrives, for each algorithm; a dp group across nodes pays the
network; the stream blocks on it; mismatched collectives and a member that never issues its op
are one line naming the ranks; sst-info lists the fabric's slot and ports."""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Optional

import pytest

import sst_cdma
from components.cluster_fabric import ClusterFabricResult, ranks_text
from components.collective_ops import CollectiveOpsResult
from sst_cdma.engine.runner import RunError
from sst_cdma.model.cluster_graph import build_cluster
from sst_cdma.model.collectives import group_cost
from sst_cdma.tools.cli.sst_info import main as sst_info
from workloads.stream import parse_stream
from workloads.stream_schema import statement_line

#: bytes of each block's activation (the all-reduced tensor): 2 x 4096 x 4096 fp16
ACT = 2 * 4096 * 4096 * 2
#: each kernel's time
KERNEL_PS = {"attn": 30_000_000, "mlp": 50_000_000}
ALGORITHMS = {"ring": "cdma.ClusterRing", "tree": "cdma.ClusterTree",
              "hierarchical": "cdma.ClusterHierarchical"}


def block_stream(blocks: int = 2, nbytes: int = ACT, dp_bytes: int = 0,
                 swap: Optional[tuple[int, str, int]] = None, drop: int = -1) -> str:
    """Megatron's tensor-parallel blocks written by hand: an all-reduce over tp after the
    attention's and after the MLP's row-parallel kernel in the forward pass, and after each
    one's column-parallel backward kernel (its input's gradient) in the backward pass; with
    ``dp_bytes`` a gradient all-reduce over dp at the end. ``swap`` = (k, op, bytes): the
    k-th collective is that op of that many bytes instead; ``drop``: the k-th left out."""
    lines = ["stream version=1 network=tp batch=1 dtype=float16 policy=none"]
    for b in range(blocks):
        lines += [f"tensor a{b} bytes={nbytes} kind=activation layer=attn{b}",
                  f"tensor m{b} bytes={nbytes} kind=activation layer=mlp{b}",
                  f"tensor odd{b} bytes={swap[2] if swap else 1} kind=activation layer=mlp{b}"]
    if dp_bytes:
        lines.append(f"tensor dw bytes={dp_bytes} kind=gradient layer=mlp0")
    body = []
    for b in range(blocks):
        body += [("alloc", f"a{b}"), ("compute", f"attn{b} pass=fwd writes=a{b}"),
                 ("tp", f"a{b}"), ("alloc", f"m{b}"),
                 ("compute", f"mlp{b} pass=fwd reads=a{b} writes=m{b}"), ("tp", f"m{b}")]
    lines.append("phase forward")
    backward = []
    for b in reversed(range(blocks)):
        backward += [("compute", f"mlp{b} pass=bwd reads=m{b}"), ("tp", f"m{b}"),
                     ("compute", f"attn{b} pass=bwd reads=a{b}"), ("tp", f"a{b}")]
    k = 0
    for phase, ops in (("forward", body), ("backward", backward)):
        if phase == "backward":
            lines.append("phase backward")
        for head, rest in ops:
            if head == "compute":
                layer = rest.split()[0]
                time = KERNEL_PS[layer.rstrip("0123456789")]
                lines.append(f"compute {rest} flops=0 dram=0 time={time}ps")
                continue
            if head != "tp":
                lines.append(f"{head} {rest}")
                continue
            if k == drop:
                pass
            elif swap and k == swap[0]:
                lines += [f"alloc odd{rest[1:]}", f"{swap[1]} odd{rest[1:]} group=tp",
                          f"free odd{rest[1:]}"]
            else:
                lines.append(f"all_reduce {rest} group=tp")
            k += 1
    if dp_bytes:
        lines += ["alloc dw", "all_reduce dw group=dp", "free dw"]
    lines += [f"free {t}{b}" for b in range(blocks) for t in "am"]
    return "\n".join(lines + ["end", ""])


def script(streams: list[Path], nodes: int = 1, tp: int = 8, algorithm: str = "ring",
           fabric_params: str = "", latency: str = "0ps") -> str:
    """A cluster wired by hand: one GPU per stream (rank = its index), each with its HBM and
    its port to one cdma.ClusterFabric."""
    return f"""\
import sst
fabric = sst.Component("fabric", "cdma.ClusterFabric")
fabric.addParams({{"node": "dgx_h100", "nodes": {nodes}, "tp": {tp}{fabric_params}}})
fabric.setSubComponent("collective", "{ALGORITHMS[algorithm]}")
for rank, path in enumerate({[str(p) for p in streams]!r}):
    gpu = sst.Component(f"gpu{{rank}}", "cdma.GPU")
    gpu.addParam("gpu_preset", "hopper")
    gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", path)
    gpu.setSubComponent("kernels", "cdma.RooflineKernels")
    port = gpu.setSubComponent("collectives", "cdma.CollectivePort")
    hbm = sst.Component(f"gpu{{rank}}.hbm", "cdma.HBM")
    hbm.addParams({{"bandwidth": "3.35TB/s", "capacity": "80GB"}})
    sst.Link(f"gpu{{rank}}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    sst.Link(f"gpu{{rank}}.l_fabric", "{latency}").connect((port, "fabric"), (fabric, f"gpu{{rank}}"))
"""


def run_cluster(tmp_path: Path, write_script, texts: list[str], stop_at: Optional[str] = None,
                **kw):
    """Write each rank's stream and the script, and run it."""
    paths = []
    for rank, text in enumerate(texts):
        path = tmp_path / f"rank{rank}.stream"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return sst_cdma.run(write_script(script(paths, **kw)), [], console=io.StringIO(),
                        stop_at=stop_at)


def priced_ps(cluster, ranks, algorithm: str, op: str, nbytes: int) -> int:
    """The model's time of the collective, in whole picoseconds rounded up."""
    if algorithm == "tree" and op != "all_reduce":
        algorithm = "ring"  # NCCL runs the others as rings
    return math.ceil(group_cost(cluster, ranks, algorithm, op, nbytes).time_s * 1e12)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "hierarchical"])
def test_a_tp_collective_takes_exactly_the_models_time(tmp_path, write_script, algorithm):
    result = run_cluster(tmp_path, write_script, [block_stream()] * 8, algorithm=algorithm)
    fabric = result.results["fabric"]
    assert isinstance(fabric, ClusterFabricResult) and fabric.ranks == 8
    cluster = build_cluster("dgx_h100", 1)
    # two all-reduces per block in each pass, two blocks
    assert len(fabric.collectives) == 8
    expected = priced_ps(cluster, range(8), algorithm, "all_reduce", ACT)
    assert expected > 1_000_000  # a 64 MiB all-reduce on NVLink: hundreds of microseconds
    for record in fabric.collectives:
        assert (record.group, record.index, record.op, record.nbytes) == \
            ("tp", 0, "all_reduce", ACT)
        assert record.ranks == tuple(range(8)) and record.tiers[0] == "intra"
        assert record.time_ps == expected
    assert [r.seq for r in fabric.collectives] == list(range(8))
    # the stream blocks on each: the iteration is its kernels plus its collectives
    kernels = 2 * 2 * sum(KERNEL_PS.values())
    for rank in range(8):
        gpu = result.results[f"gpu{rank}"]
        assert gpu.completed and gpu.iteration_time_ps == kernels + 8 * expected
        ops = result.results[f"gpu{rank}:collectives[0]"]
        assert isinstance(ops, CollectiveOpsResult) and ops.wait_ps == 8 * expected


def test_the_port_links_latency_is_not_added(tmp_path, write_script):
    result = run_cluster(tmp_path, write_script, [block_stream(blocks=1)] * 8, latency="1us")
    expected = priced_ps(build_cluster("dgx_h100", 1), range(8), "ring", "all_reduce", ACT)
    first = result.results["fabric"].collectives[0]
    assert (first.last_ps, first.time_ps) == (KERNEL_PS["attn"], expected)
    assert result.results["gpu0"].iteration_time_ps == 2 * sum(KERNEL_PS.values()) + 4 * expected


def test_the_algorithms_differ_and_the_tree_runs_a_reduce_scatter_as_a_ring(tmp_path,
                                                                           write_script):
    times = {}
    for algorithm in ALGORITHMS:
        text = block_stream(blocks=1, swap=(0, "reduce_scatter", ACT))
        result = run_cluster(tmp_path, write_script, [text] * 8, algorithm=algorithm)
        first, *rest = result.results["fabric"].collectives
        assert first.op == "reduce_scatter"
        times[algorithm] = [r.time_ps for r in rest]
        if algorithm == "tree":
            assert first.cost.algorithm == "ring"
    cluster = build_cluster("dgx_h100", 1)
    assert times["ring"] != times["tree"]
    assert times["tree"][0] == priced_ps(cluster, range(8), "tree", "all_reduce", ACT)


def test_a_dp_group_across_nodes_pays_the_network(tmp_path, write_script):
    # 2 nodes of 8, tp 8, dp 2: each dp group is a GPU of each node, on its own NIC
    grad = 256 << 20
    texts = [block_stream(blocks=1, dp_bytes=grad)] * 16
    result = run_cluster(tmp_path, write_script, texts, nodes=2)
    cluster = build_cluster("dgx_h100", 2)
    records = result.results["fabric"].collectives
    dp = [r for r in records if r.group == "dp"]
    tp = [r for r in records if r.group == "tp"]
    assert sorted(r.ranks for r in dp) == [(i, i + 8) for i in range(8)]
    assert sorted({r.ranks for r in tp}) == [tuple(range(8)), tuple(range(8, 16))]
    for r in dp:
        assert r.tiers == ("inter",)
        assert r.time_ps == priced_ps(cluster, r.ranks, "ring", "all_reduce", grad)
        # the same two ranks' bytes inside one node take far less
        assert r.time_ps > 5 * priced_ps(cluster, (0, 1), "ring", "all_reduce", grad)
    assert all(r.tiers == ("intra",) for r in tp)


def test_the_hierarchical_dp_all_reduce_crosses_both_tiers(tmp_path, write_script):
    # tp 4, dp 4 on 2 nodes: each dp group holds 2 GPUs of each node
    grad = 64 << 20
    texts = [block_stream(blocks=1, dp_bytes=grad)] * 16
    result = run_cluster(tmp_path, write_script, texts, nodes=2, tp=4,
                         algorithm="hierarchical")
    cluster = build_cluster("dgx_h100", 2)
    dp = [r for r in result.results["fabric"].collectives if r.group == "dp"]
    assert len(dp) == 4
    for r in dp:
        assert r.tiers == ("intra", "inter", "intra")
        assert r.time_ps == priced_ps(cluster, r.ranks, "hierarchical", "all_reduce", grad)


@pytest.mark.parametrize("swap, words", [
    ((1, "all_gather", ACT), "issued all_gather odd0"),
    ((1, "all_reduce", ACT // 2), f"({ACT // 2} bytes)"),
])
def test_a_member_issuing_another_collective_is_one_line_naming_both_ranks(
        tmp_path, write_script, swap, words):
    texts = [block_stream()] * 8
    texts[3] = block_stream(swap=swap)
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, texts)
    message = str(err.value)
    assert "\n" not in message
    assert "tp group 0 collective #1" in message and "rank 3 issued" in message
    assert "rank 0 issued all_reduce m0" in message and words in message
    assert "disagree" in message


def test_a_member_that_never_issues_its_op_is_a_deadlock_naming_the_ranks(tmp_path,
                                                                         write_script):
    texts = [block_stream()] * 8
    texts[5] = block_stream(drop=7)  # rank 5 leaves out the last all-reduce
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, texts)
    message = str(err.value)
    assert "\n" not in message
    assert (f"deadlock: rank(s) 0-4, 6-7 wait in all_reduce a0 ({ACT} bytes), collective #7 "
            "of tp group 0 (ranks 0-7), which rank(s) 5 never issued") in message


def test_a_late_member_delays_its_group_and_a_run_stopped_early_is_no_deadlock(
        tmp_path, write_script):
    texts = [block_stream()] * 8
    late = 3 * KERNEL_PS["attn"]
    texts[5] = texts[5].replace(f"time={KERNEL_PS['attn']}ps", f"time={late}ps", 1)
    # stopped while seven ranks wait for rank 5: nothing completed, no deadlock
    stopped = run_cluster(tmp_path, write_script, texts, stop_at="50us")
    assert stopped.results["fabric"].collectives == []
    first = run_cluster(tmp_path, write_script, texts).results["fabric"].collectives[0]
    assert (first.first_ps, first.last_ps) == (KERNEL_PS["attn"], late)
    assert first.end_ps == late + priced_ps(build_cluster("dgx_h100", 1), range(8), "ring",
                                            "all_reduce", ACT)


def test_a_group_of_one_rank_costs_nothing(tmp_path, write_script):
    # tp 1: every rank is its own tp group
    result = run_cluster(tmp_path, write_script, [block_stream()] * 8, tp=1)
    records = result.results["fabric"].collectives
    assert len(records) == 8 * 8 and all(r.time_ps == 0 for r in records)
    assert sorted({r.ranks for r in records}) == [(i,) for i in range(8)]
    assert result.results["gpu3"].iteration_time_ps == 2 * 2 * sum(KERNEL_PS.values())


def test_a_rank_in_no_group_of_the_kind_is_refused_before_the_run(tmp_path, write_script):
    # tp 2 x pp 4: the embedding groups hold the first and last stage's ranks (0, 1, 6, 7)
    text = block_stream(blocks=1).replace("group=tp", "group=embedding")
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, [text] * 8, tp=2, fabric_params=', "pp": 4')
    assert "gpu2 (rank 2) names group=embedding, but rank 2 is in no embedding group" in \
        str(err.value)


def test_a_group_the_layout_does_not_have_is_refused_before_the_run(tmp_path, write_script):
    text = block_stream(blocks=1).replace("group=tp", "group=tensor")
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, [text] * 8)
    assert "names group=tensor, which is none of tp, dp, pp, embedding" in str(err.value)


def test_a_layout_that_is_not_the_ranks_is_one_line(tmp_path, write_script):
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, [block_stream(blocks=1)] * 8,
                    fabric_params=', "dp": 2')
    assert "tp 8 x pp 1 x dp 2 = 16 ranks, but 8 GPUs are on its ports" in str(err.value)
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, [block_stream(blocks=1)] * 16)
    assert "16 GPUs on its ports, but nodes=1 of dgx_h100 hold 8" in str(err.value)


def test_a_gpu_without_a_fabric_port_is_told_which_slot(tmp_path, write_script):
    path = tmp_path / "one.stream"
    path.write_text(block_stream(blocks=1), encoding="utf-8")
    body = f"""\
import sst
gpu = sst.Component("gpu0", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", {str(path)!r})
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
sst.Link("gpu0.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
"""
    with pytest.raises(RunError) as err:
        sst_cdma.run(write_script(body), [], console=io.StringIO())
    assert "gpu0: op all_reduce a0 group=tp needs the GPU's collectives slot filled with " \
           "cdma.CollectivePort" in str(err.value)


def test_the_collective_ops_round_trip_and_are_checked():
    stream = parse_stream(block_stream(blocks=1, dp_bytes=8))
    ops = [op for op in stream.ops if op.group]
    assert [(op.op, op.name, op.group) for op in ops][-1] == ("all_reduce", "dw", "dp")
    assert statement_line(ops[0]) == "all_reduce a0 group=tp"
    bad = block_stream(blocks=1).replace("all_reduce a0 group=tp", "all_reduce a0")
    with pytest.raises(ValueError, match="'all_reduce': missing key.s. group"):
        parse_stream(bad)
    unallocated = block_stream(blocks=1).replace("all_reduce m0 group=tp",
                                                 "all_reduce odd0 group=tp")
    with pytest.raises(ValueError, match="'all_reduce': tensor 'odd0' is not allocated"):
        parse_stream(unallocated)


def test_ranks_text_writes_runs():
    assert ranks_text([0, 1, 2, 3, 4, 6, 7]) == "0-4, 6-7"
    assert ranks_text([0, 8]) == "0, 8"
    assert ranks_text([5]) == "5"


def test_sst_info_lists_the_fabrics_slot_and_ports(capsys):
    assert sst_info(["cdma.ClusterFabric"]) == 0
    out = capsys.readouterr().out
    assert "gpu%d: rank N's GPU" in out
    assert "collective: the algorithm a collective of a group runs with" in out
    assert "filled by: cdma.ClusterHierarchical, cdma.ClusterRing, cdma.ClusterTree" in out
    for param in ("node", "nodes", "fabric", "oversubscription", "tp", "pp", "dp"):
        assert f"         {param}: " in out
    assert sst_info(["cdma.CollectivePort"]) == 0
    assert "fabric: the link to the cluster fabric" in capsys.readouterr().out


def test_one_replica_on_the_ports_prices_each_dp_collective_for_its_whole_group(
        tmp_path, write_script):
    # tp 8, dp 2 on 2 nodes: replica 0 (ranks 0-7) alone on the ports, its dp groups priced
    # over both nodes; the same records as the 16 GPUs simulated, for the groups it is in
    grad = 256 << 20
    every = run_cluster(tmp_path, write_script, [block_stream(blocks=1, dp_bytes=grad)] * 16,
                        nodes=2).results["fabric"]
    one = run_cluster(tmp_path, write_script, [block_stream(blocks=1, dp_bytes=grad)] * 8,
                      nodes=2, fabric_params=', "dp": 2, "representative": True'
                      ).results["fabric"]
    assert one.ranks == every.ranks == 16
    dp = [r for r in one.collectives if r.group == "dp"]
    assert sorted(r.ranks for r in dp) == [(i, i + 8) for i in range(8)]
    cluster = build_cluster("dgx_h100", 2)
    for r in dp:
        assert r.tiers == ("inter",) and r.first_ps == r.last_ps
        assert r.time_ps == priced_ps(cluster, r.ranks, "ring", "all_reduce", grad)
    kept = [r for r in every.collectives if min(r.ranks) < 8]
    assert one.collectives == kept


def test_tp_rank_0_alone_on_the_ports_prices_each_tp_collective_for_its_whole_group(
        tmp_path, write_script):
    # tp 8, dp 2 on 2 nodes: rank 0 alone on the ports (one replica, one tp rank), its tp
    # collectives priced over ranks 0-7 and its dp ones over (0, 8); the same records and
    # GPU as the 16 GPUs simulated, for the groups it is in
    grad = 256 << 20
    every = run_cluster(tmp_path, write_script, [block_stream(blocks=1, dp_bytes=grad)] * 16,
                        nodes=2)
    one = run_cluster(tmp_path, write_script, [block_stream(blocks=1, dp_bytes=grad)],
                      nodes=2, fabric_params=', "tp": 8, "dp": 2, "representative": True, '
                                             '"tp_representative": True')
    fab_one, fab_every = one.results["fabric"], every.results["fabric"]
    assert fab_one.ranks == fab_every.ranks == 16
    assert {r.ranks for r in fab_one.collectives} == {tuple(range(8)), (0, 8)}
    assert all(r.first_ps == r.last_ps for r in fab_one.collectives)
    assert fab_one.collectives == [r for r in fab_every.collectives if 0 in r.ranks]
    assert one.results["gpu0"] == every.results["gpu0"]


@pytest.mark.parametrize("params, words", [
    (', "representative": True', "representative needs the layout's dp"),
    (', "tp_representative": True', "tp_representative needs the layout's dp"),
    (', "dp": 2, "tp": 4, "representative": True',
     "the ports must be replica 0's ranks (0-3), but gpu4 is connected"),
    (', "dp": 1, "tp": 4, "pp": 2, "tp_representative": True',
     "tp_representative: the ports must be tp rank 0 of each stage (0, 4), but gpu1 is "
     "connected"),
])
def test_a_representative_fabric_with_other_ports_is_one_line(tmp_path, write_script, params,
                                                              words):
    with pytest.raises(RunError) as err:
        run_cluster(tmp_path, write_script, [block_stream(blocks=1)] * 8, nodes=2,
                    fabric_params=params)
    assert words in str(err.value) and "\n" not in str(err.value)
