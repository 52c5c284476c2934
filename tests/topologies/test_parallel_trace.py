"""The Chrome trace of a parallel run (components/trace.py): one process per simulated rank,
named with its rank and (tp, pp, dp) coordinates and sorted by rank; each send joined to the
recv that took it by a flow arrow; each collective one event per member with its group and
bytes. gpt2_small over tp 2 x pp 2 (the command of docs/parallel.md, section 8) and a chain
of layers over an interleaved 2-stage ring; a single-GPU run's trace is what it was."""
from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

import sst_cdma
from components.cluster_fabric import ClusterFabricResult
from components.pipeline_p2p import P2PResult
from components.summary import SystemResults
from components.trace import TRACK_OF, ParallelRecords, chrome_trace, parallel_records
from workloads.parallel.layout import ParallelLayout
from workloads.parallel.ranks import process_groups

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
TP_OPTS = ("--network gpt2_small --gpu hopper --pp 2 --tp 2 --micro-batches 4 --batch 1 "
           "--seq-len 512")
#: the GPUs of tp 2 x pp 2 and their (rank, tp, pp) in Megatron's order: rank = tp + 2 x pp
RANKS = {"gpu0-tp0-pp0": (0, 0, 0), "gpu1-tp1-pp0": (1, 1, 0), "gpu2-tp0-pp1": (2, 0, 1),
         "gpu3-tp1-pp1": (3, 1, 1)}


def _run(topology: Path, opts: str, out: Path) -> tuple[object, list[dict]]:
    """The run's result and the events of the trace.json it wrote into ``out``."""
    result = sst_cdma.run(topology, opts, output_directory=out, console=io.StringIO())
    return result, json.loads((out / "trace.json").read_text(encoding="utf-8"))["traceEvents"]


@pytest.fixture(scope="module")
def tp_run(tmp_path_factory):
    """tp 2 x pp 2 of gpt2_small: its result and its trace's events."""
    return _run(PIPELINE, TP_OPTS, tmp_path_factory.mktemp("tp"))


@pytest.fixture(scope="module")
def ring_run(tmp_path_factory):
    """A chain of layers over 2 stages of 2 chunks each (interleaved: the last chunk's
    messages go round the ring to the first stage)."""
    return _run(PIPELINE, "--pp 2 --vpp 2 --schedule interleaved --micro-batches 4",
                tmp_path_factory.mktemp("ring"))


def _processes(events: list[dict]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}


def test_one_process_per_rank_named_with_its_coordinates_in_rank_order(tp_run):
    _, events = tp_run
    names = _processes(events)
    assert [names[pid] for pid in sorted(names)] == [
        f"{gpu}: rank {r} (tp {t}, pp {p}, dp 0)" for gpu, (r, t, p) in RANKS.items()]
    sort = {e["pid"]: e["args"]["sort_index"] for e in events
            if e["name"] == "process_sort_index"}
    assert sort == {pid: RANKS[names[pid].split(":")[0]][0] for pid in names}


@pytest.mark.parametrize("case", ["tp_run", "ring_run"])
def test_every_send_has_a_flow_to_the_recv_that_took_it(case, request):
    result, events = request.getfixturevalue(case)
    ports = [r for r in result.results.values() if isinstance(r, P2PResult)]
    sends = sum(p.sends for p in ports)
    assert sends and sends == sum(p.recvs for p in ports)
    names = {pid: name.split(":")[0] for pid, name in _processes(events).items()}
    slices = [e for e in events if e["ph"] == "X" and e["cat"] in ("send", "recv")]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == sends == sum(1 for e in slices if e["cat"] == "send")
    assert set(starts) == set(ends)
    stage = {p.gpu: p.stage for p in ports}
    tp_of = {gpu: gpu.split("-tp")[1].split("-")[0] if "-tp" in gpu else "0" for gpu in stage}
    for flow, s in starts.items():
        f = ends[flow]
        assert (s["tid"], f["tid"], f["bp"]) == (TRACK_OF["send"], TRACK_OF["recv"], "e")
        send = next(e for e in slices if e["pid"] == s["pid"] and e["cat"] == "send"
                    and e["ts"] == s["ts"])
        recv = next(e for e in slices if e["pid"] == f["pid"] and e["cat"] == "recv"
                    and e["ts"] <= f["ts"] <= e["ts"] + e["dur"])
        sender, receiver = names[s["pid"]], names[f["pid"]]
        # the message went to the sender's tp coordinate on the stage it names
        assert stage[receiver] == send["args"]["to_stage"] and tp_of[receiver] == tp_of[sender]
        assert stage[sender] == recv["args"]["from_stage"]
        for key in ("tensor", "bytes", "phase", "seq", "from_stage", "to_stage"):
            assert send["args"][key] == recv["args"][key], key
        assert f["ts"] >= s["ts"]


def test_the_ring_sends_both_ways_between_the_two_stages(ring_run):
    _, events = ring_run
    phases = Counter((e["args"]["from_stage"], e["args"]["phase"]) for e in events
                     if e["ph"] == "X" and e["cat"] == "send")
    # each stage sends forward (stage 1's last chunk round the ring to stage 0) and back
    assert set(phases) == {(0, "forward"), (1, "forward"), (0, "backward"), (1, "backward")}


def test_each_collective_is_one_event_per_member_with_its_group_and_bytes(tp_run):
    result, events = tp_run
    fabric = next(r for r in result.results.values() if isinstance(r, ClusterFabricResult))
    assert fabric.collectives
    names = {pid: name.split(":")[0] for pid, name in _processes(events).items()}
    drawn = [e for e in events if e["ph"] == "X" and e["cat"] == "collective"]
    assert all(e["tid"] == TRACK_OF["collective"] for e in drawn)
    by_member = Counter((names[e["pid"]], e["args"]["group"], e["args"]["seq"]) for e in drawn)
    gpu_of = {r: gpu for gpu, (r, _, _) in RANKS.items()}
    # each event names its group as the layout's tables number it, its members each once
    tables = process_groups(ParallelLayout(tp=2, pp=2, dp=1))
    assert all(getattr(tables, e["args"]["group"])[e["args"]["group_index"]] ==
               tuple(e["args"]["ranks"]) for e in drawn)
    groups = Counter((e["args"]["group"], e["args"]["seq"], tuple(e["args"]["ranks"]))
                     for e in drawn)
    assert all(n == len(ranks) for (_, _, ranks), n in groups.items())
    # the fabric's groups, and tp rank 1's embedding group (ranks 1, 3): a group of twins
    # only, which the fabric does not price (docs/parallel.md, "Symmetry")
    recorded = {(c.group, c.seq, c.ranks) for c in fabric.collectives}
    twins_only = {("embedding", seq, (1, 3)) for g, seq, _ in recorded if g == "embedding"}
    assert twins_only and set(groups) == recorded | twins_only
    for record in fabric.collectives:
        members = [gpu_of[r] for r in record.ranks]
        assert all(by_member[(gpu, record.group, record.seq)] == 1 for gpu in members)
        for e in drawn:
            if names[e["pid"]] in members and \
                    (e["args"]["group"], e["args"]["seq"]) == (record.group, record.seq):
                assert e["args"]["bytes"] == record.nbytes
                assert e["args"]["op"] == record.op
                assert e["args"]["ranks"] == list(record.ranks)
                assert e["args"]["gpus"] == members
                assert e["ts"] + e["dur"] == pytest.approx(record.end_ps / 1e6)


def test_a_short_trace_keeps_the_ranks_and_counters_and_leaves_out_the_events(tp_run):
    result, events = tp_run
    runs = SystemResults(result.results)
    short = chrome_trace(runs.gpus, False, parallel_records(result.results))["traceEvents"]
    assert {e["ph"] for e in short} == {"M", "C"}
    assert _processes(short) == _processes(events)


def test_a_single_gpu_run_draws_no_parallel_part(tmp_path):
    result, events = _run(REPO / "topologies" / "pascal_cdma.py",
                          "--network alexnet --batch 8 --no-baselines", tmp_path)
    records = parallel_records(result.results)
    assert records == ParallelRecords()
    runs = SystemResults(result.results)
    assert chrome_trace(runs.gpus, True, records) == chrome_trace(runs.gpus, True)
    assert chrome_trace(runs.gpus, True)["traceEvents"] == events
    assert {e["ph"] for e in events} <= {"M", "X", "C"}
    assert _processes(events) == {1: "gpu0"}


def test_every_data_parallel_replica_has_its_megatron_rank_when_all_are_simulated(tmp_path):
    _, events = _run(PIPELINE, "--network gpt2_small --gpu hopper --pp 2 --dp 2 "
                               "--simulate-every-rank --micro-batches 2 --batch 1 --seq-len 128",
                     tmp_path)
    names = _processes(events)
    # rank = tp + TP (dp + DP pp) with TP 1, DP 2: replica d of stage s is rank d + 2 s
    got = sorted(name.split(": ", 1)[1] for name in names.values())
    assert got == sorted(f"rank {d + 2 * s} (tp 0, pp {s}, dp {d})"
                         for s in range(2) for d in range(2))
