"""topologies/pipeline_cdma.py with --zero 3 (and the overlapped reductions of --zero 0-2):
the issue's command runs, each rank's dp traffic (its port's record of what it issued on the
fabric) is ZeRO's 3Ψ a micro-batch at stage 3, 2Ψ a step at stage 1 and (m + 1)Ψ at stage 2
(its gradients reduce-scattered every micro-batch), the dp time splits into exposed and hidden, the shards lower each stage's peak, and one replica stands for all.
docs/parallel.md, "ZeRO-3 and the overlap"."""
from __future__ import annotations

import io
from functools import lru_cache

import pytest

import sst_cdma
from components.collective_ops import CollectiveOpsResult
from components.summary_schema import check_summary
from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.transformer_stages import tied_head, transformer_stage_stream
from workloads.render import iteration_stream
from workloads.vdnn import weight_name, wgrad_name

PIPELINE = "topologies/pipeline_cdma.py"
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
#: the issue's command (docs/parallel.md)
COMMAND = ("--network gpt2_small --gpu hopper --pp 2 --dp 2 --zero {zero} --micro-batches 4 "
           "--batch 1 --seq-len 512")
MICRO = 4


@lru_cache(maxsize=None)
def run(zero: int, extra: str = ""):
    """The command's run at ZeRO ``zero``: its result, summary and console."""
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, COMMAND.format(zero=zero) + extra, console=console)
    return result, result.reports["summary"], console.getvalue()


@lru_cache(maxsize=None)
def stage_params(stage: int) -> int:
    """Ψ of the stage: the parameters of the layers its step updates (float32 weights of the
    unsharded render, the tied head's copy on the last stage included)."""
    plan = iteration_stream("gpt2_small", 1, "float32", "none", None, "adam", 0, "liveness",
                            None, None, None, seq_len=512).plan
    layout = make_layout(SHAPE, pp=2, micro_batches=1)
    built = transformer_stage_stream(plan, layout, stage,
                                     tied=tied_head(load_network("gpt2_small", 512), "adam"),
                                     optimizer="adam").stream
    return sum(built.tensors[weight_name(op.name)].bytes // 4 for op in built.ops
               if op.op == "compute" and op.phase == "update")


def dp_records(result, gpu: str):
    """The dp collectives rank ``gpu`` issued on the fabric, from its port's record."""
    port = result.results[f"{gpu}:collectives[0]"]
    assert isinstance(port, CollectiveOpsResult)
    return [c for c in port.collectives if c[1] == "dp"], port


@pytest.mark.parametrize("zero, psis", [(3, 3 * MICRO), (2, MICRO + 1), (1, 2)])
def test_each_rank_moves_zero_s_volume(zero, psis):
    result, summary, _ = run(zero)
    assert check_summary(summary) == []
    for entry in summary["pipeline"]["stages"]:
        mine, _ = dp_records(result, entry["gpu"])
        # what the rank put on the fabric: an all-gather's output, a reduce-scatter's input
        # (each Ψ of its own bytes), an all-reduce twice
        moved = sum(nbytes * (2 if op == "all_reduce" else 1)
                    for op, _, _, _, nbytes, _, _ in mine)
        assert moved == psis * stage_params(entry["stage"]) * 4 > 0
        assert {c[0] for c in mine} == {"all_gather", "reduce_scatter"}


def test_the_issue_s_command_reports_exposed_and_hidden_dp_time():
    result, summary, console = run(3)
    p = summary["pipeline"]
    assert p["dp"] == 2 and len(p["ranks"]) == 4
    for entry in p["stages"]:
        mine, port = dp_records(result, entry["gpu"])
        in_flight = sum(end - start for *_, start, end in mine)
        # exposed (the stream's waits) and hidden (beside its kernels) make up the time the
        # rank's dp collectives ran, one at a time over the group
        assert entry["dp_comm_time_s"] * 1e12 == pytest.approx(port.waited["dp"], abs=1)
        assert (entry["dp_comm_time_s"] + entry["dp_hidden_time_s"]) * 1e12 == \
            pytest.approx(in_flight, abs=2)
        assert entry["dp_hidden_time_s"] > 0 and entry["dp_comm_time_s"] > 0
        assert all(b[5] >= a[6] for a, b in zip(mine, mine[1:]))
        assert f"{entry['dp_hidden_time_s'] * 1e3:.3f} ms more hidden" in console
    # the stage's busy, tp, exposed dp and idle time make up the step
    for entry in p["stages"]:
        assert entry["busy_time_s"] + entry["dp_comm_time_s"] + entry["idle_time_s"] == \
            pytest.approx(p["step_time_s"], rel=1e-12)


def test_the_shards_lower_each_stage_s_peak():
    peaks = {z: [s["peak_memory_bytes"] for s in run(z)[1]["pipeline"]["stages"]]
             for z in (0, 2, 3)}
    for s in range(2):
        assert peaks[3][s] < peaks[2][s] < peaks[0][s]


def test_one_replica_stands_for_every_rank_at_zero_3():
    _, one, _ = run(3)
    _, every, _ = run(3, " --simulate-every-rank")
    a, b = one["pipeline"], every["pipeline"]
    assert a["step_time_s"] == b["step_time_s"] and a["stages"] == b["stages"]


def test_zero_0_all_reduces_beside_the_last_backward_pass():
    result, summary, _ = run(0)
    for entry in summary["pipeline"]["stages"]:
        mine, port = dp_records(result, entry["gpu"])
        assert {c[0] for c in mine} == {"all_reduce"}
        assert entry["dp_hidden_time_s"] > 0
        assert sum(end - start for *_, start, end in mine) > port.waited["dp"]


def allocated_peak(stage: int, zero: int) -> int:
    """The most bytes stage ``stage``'s stream holds at once under ZeRO ``zero``, walking its
    allocations and frees in the order its schedule runs them."""
    plan = iteration_stream("gpt2_small", 1, "float32", "none", None, "adam", 0, "liveness",
                            None, None, None, seq_len=512).plan
    layout = make_layout(SHAPE, pp=2, dp=2, zero=zero, micro_batches=MICRO)
    built = transformer_stage_stream(plan, layout, stage, optimizer="adam",
                                     tied=tied_head(load_network("gpt2_small", 512), "adam",
                                                    all_reduce=True))
    live: dict[str, int] = {}
    most = 0
    for step in built.steps:
        for op in built.stream.ops[step.start:step.end]:
            if op.op == "alloc":
                live[op.name] = built.stream.tensors[op.name].bytes
            elif op.op == "free":
                live.pop(op.name)
            most = max(most, sum(live.values()))
    return most


def test_zero_2_s_sharded_gradients_lower_each_stage_s_peak_below_zero_1_s():
    plan = iteration_stream("gpt2_small", 1, "float32", "none", None, "adam", 0, "liveness",
                            None, None, None, seq_len=512).plan
    peaks = {z: [s["peak_memory_bytes"] for s in run(z)[1]["pipeline"]["stages"]]
             for z in (1, 2)}
    for stage in (0, 1):
        layout = make_layout(SHAPE, pp=2, micro_batches=1)
        built = transformer_stage_stream(plan, layout, stage, optimizer="adam",
                                         tied=tied_head(load_network("gpt2_small", 512),
                                                        "adam")).stream
        layers = [op.name for op in built.ops if op.op == "compute" and op.phase == "update"]
        whole = {n: built.tensors[wgrad_name(n)].bytes for n in layers}
        # each whole gradient (float32) kept as its half: what the stage no longer holds
        saved = sum(whole[n] - -(-whole[n] // 8) * 4 for n in layers)
        drop = peaks[1][stage] - peaks[2][stage]
        # the drop is what the stream's own allocations say, and at most the shards' saving:
        # at ZeRO 2's peak the stage may hold one block layer's whole gradient (its buffer
        # before its reduce-scatter ends)
        assert drop == allocated_peak(stage, 1) - allocated_peak(stage, 2)
        biggest = max(whole[n] for n in layers if n.startswith("blk"))
        assert saved - biggest <= drop <= saved
    # the last stage's peak falls where no whole gradient is held: it drops by all of it
    assert peaks[1][1] - peaks[2][1] == saved
