"""components/rank_twins.py: each pipeline stage's tensor-parallel rank 0 simulated, its tp
twins' records and statistics copied; checked against a run of every rank
(``--simulate-every-rank``): tp 2, 4 and 8 x pp 2 at dp 1 and 2, with ZeRO 3, on the cluster
topology (each GPU's NIC on the fabric and its pipeline ports), and the fall-back to every tp
rank where a stage's ranks load the host socket they share (docs/parallel.md, "Symmetry")."""
from __future__ import annotations

import dataclasses
import io
import re

import pytest

import sst_cdma
from components.cluster_fabric import ClusterFabricResult
from components.rank_twins import TpTwin, parse_tp_twins, tp_twin_results, twin_plan
from components.summary_schema import check_summary

PIPELINE = "topologies/pipeline_cdma.py"
CLUSTER = "topologies/dgx_h100_cluster.py"
GPT2 = "--network gpt2_small --gpu hopper --micro-batches 2 --batch 1 --seq-len 256"
LLAMA = "--network llama3_8b --micro-batches 2 --batch 1 --seq-len 256"


def run(topology: str, opts: str):
    """The run's result and its console."""
    console = io.StringIO()
    result = sst_cdma.run(topology, opts, console=console)
    return result, console.getvalue()


def replica0(name: str) -> bool:
    """Whether element ``name`` is data-parallel replica 0's (or of no replica)."""
    m = re.search(r"-dp(\d+)", name)
    return m is None or m.group(1) == "0"


def own(record):
    """A record as its GPU's own run publishes it (a twin's copy names its simulated GPU)."""
    if dataclasses.is_dataclass(record) and any(f.name == "twin_of"
                                                for f in dataclasses.fields(record)):
        return dataclasses.replace(record, twin_of="")
    return record


def statistic_rows(result, hosts: bool = True) -> list[tuple]:
    """Every statistic row of replica 0's elements but the fabric's, in the output's order
    (and the nodes' socket hosts', which GPUs of several replicas share, unless ``hosts`` is
    false)."""
    values = [c for c in result.statistics.columns if "." in c or c == "SimTime"]
    return [(row["ComponentName"], row["StatisticName"], row["StatisticSubId"],
             tuple(row[c] for c in values)) for row in result.statistics.to_dict("records")
            if row["ComponentName"] != "fabric" and replica0(row["ComponentName"])
            and (hosts or not re.match(r"node\d+\.host\d+$", row["ComponentName"]))]


def record_key(r):
    """A fabric record's figures."""
    return (r.group, r.index, r.seq, r.op, r.tensor, r.nbytes, r.ranks, r.first_ps, r.last_ps,
            r.end_ps, r.cost, r.network_delay_ps)


CASES = [(PIPELINE, f"{GPT2} --tp 2 --pp 2"), (PIPELINE, f"{GPT2} --tp 4 --pp 2"),
         (PIPELINE, f"{GPT2} --tp 2 --pp 2 --dp 2"), (PIPELINE, f"{GPT2} --tp 4 --pp 2 --dp 2"),
         (PIPELINE, f"{GPT2} --tp 4 --pp 2 --dp 2 --zero 3"),
         (CLUSTER, f"{LLAMA} --tp 8 --pp 2"),
         pytest.param(CLUSTER, f"{LLAMA} --tp 8 --pp 2 --dp 2", marks=pytest.mark.slow)]


@pytest.mark.parametrize("topology, opts", CASES)
def test_tp_rank_0_gives_every_tp_rank_s_figures_byte_identical(topology, opts):
    one, console_one = run(topology, opts)
    every, _ = run(topology, f"{opts} --simulate-every-rank")
    s_one, s_every = one.reports["summary"], every.reports["summary"]
    tp = int(re.search(r"--tp (\d+)", opts).group(1))
    dp = int(m.group(1)) if (m := re.search(r"--dp (\d+)", opts)) else 1
    assert check_summary(s_one) == []
    assert f"tp rank 0 of each stage simulated, its {tp - 1} twins copied" in s_one["system"]
    assert "every tp rank simulated" in s_every["system"]
    # the pipeline, every stage's figures, every GPU's entry: the same as a run of every tp
    # rank (replica 0's, which test_pipeline_dp.py shows equal to every replica's)
    p_one, p_every = s_one["pipeline"], s_every["pipeline"]
    assert {k: v for k, v in p_one.items() if k != "ranks"} == \
        {k: v for k, v in p_every.items() if k != "ranks"}
    assert s_one["gpus"] == [g for g in s_every["gpus"] if replica0(g["gpu"])]
    if dp == 1:
        assert {k: v for k, v in s_one.items() if k != "system"} == \
            {k: v for k, v in s_every.items() if k != "system"}
    # every record of every GPU-side element, in the order a run of every rank publishes it
    names = [n for n in every.results if n != "fabric" and replica0(n)]
    assert [n for n in one.results if n != "fabric"] == names
    assert all(own(one.results[n]) == every.results[n] for n in names)
    # every statistic of every element (GPU, HBM, DMA engine, codec, host link, NIC, ports,
    # collective port, the sockets' hosts), in the output's order, byte for byte
    if dp == 1:
        assert statistic_rows(one) == statistic_rows(every)
    else:  # the sockets of replica 1's GPUs are not in the run of replica 0
        assert statistic_rows(one, hosts=False) == statistic_rows(every, hosts=False)
        assert set(statistic_rows(one)) <= set(statistic_rows(every))
    # the simulated GPUs: tp rank 0 of each stage; the ranks name it for its twins
    sim = {r.gpu for r in one.results.values() if hasattr(r, "twin_of") and not r.twin_of}
    assert sim and all("-tp0-" in g for g in sim) and len(sim) == 2  # pp 2, one replica
    if dp > 1:
        assert {e["gpu"] for e in p_one["ranks"]} == sim
        assert "tp rank 0 of each stage of one data-parallel replica" in console_one
    # the fabric: the collectives of the groups with a simulated rank, the same in order and
    # figure (each tp collective priced over its whole group, its one member arriving)
    ranks = {int(g[3:].split("-")[0]) for g in sim}
    fab_one, fab_every = one.results["fabric"], every.results["fabric"]
    assert isinstance(fab_one, ClusterFabricResult)
    assert [record_key(r) for r in fab_one.collectives] == \
        [record_key(r) for r in fab_every.collectives if set(r.ranks) & ranks]
    tp_records = [r for r in fab_one.collectives if r.group == "tp"]
    assert tp_records and all(len(r.ranks) == tp and r.first_ps == r.last_ps
                              for r in tp_records)


@pytest.mark.parametrize("extra", ["--zero 1 --optimizer-states host", "--policy all"])
def test_a_stage_s_ranks_on_one_socket_s_host_are_all_simulated(extra):
    one, _ = run(PIPELINE, f"{GPT2} --tp 2 --pp 2 --dp 2 {extra}")
    system = one.reports["summary"]["system"]
    assert "every tp rank simulated (a stage's ranks share their node socket's host memory " \
           "or CPU)" in system
    stages = [r for r in one.results.values() if hasattr(r, "twin_of")]
    assert {r.tp_rank for r in stages} == {0, 1} and not any(r.twin_of for r in stages)


def test_the_twins_are_named_and_placed_as_a_run_of_every_rank_declares_them():
    twins = parse_tp_twins("g0-tp0 g1-tp1 1 n0.h0 n0.h0; g0-tp0 g4-tp4 4 n0.h0 n0.h1;"
                           "g8-tp0 g9-tp1 1")
    assert twins["g0-tp0"][1] == TpTwin("g0-tp0", "g4-tp4", 4, (("n0.h0", "n0.h1"),))
    assert twins["g0-tp0"][1].rename("g0-tp0.dma:codec[0]") == "g4-tp4.dma:codec[0]"
    assert twins["g0-tp0"][1].rename("n0.h0") == "n0.h1"
    assert twins["g0-tp0"][1].rename("g0-tp00") is None
    # the twin's socket, declared after its rank 0's elements, stands where the twin is its
    # socket's first GPU; its rank 0's socket is not repeated for the twin that shares it
    names = ["fabric", "g0-tp0:p2p[0]", "g0-tp0", "n0.h0", "g0-tp0.dma", "n0.h1", "g8-tp0"]
    plan = [(name, twin.name if twin else None) for name, twin in twin_plan(names, twins)]
    assert plan == [("fabric", None), ("g0-tp0:p2p[0]", None), ("g0-tp0", None),
                    ("n0.h0", None), ("g0-tp0.dma", None),
                    ("g0-tp0:p2p[0]", "g1-tp1"), ("g0-tp0", "g1-tp1"), ("g0-tp0.dma", "g1-tp1"),
                    ("g0-tp0:p2p[0]", "g4-tp4"), ("g0-tp0", "g4-tp4"), ("n0.h1", None),
                    ("g0-tp0.dma", "g4-tp4"), ("g8-tp0", None), ("g8-tp0", "g9-tp1")]


@dataclasses.dataclass(frozen=True)
class Record:
    """A record naming its GPU, its path and its host, with a tp rank."""

    gpu: str
    path: tuple[str, ...]
    host: str
    tp_rank: int = 0
    note: str = "g0-tp0"


def test_a_twin_s_record_names_the_twin_s_elements_and_tp_rank():
    twins = parse_tp_twins("g0-tp0 g4-tp4 4 n0.h0 n0.h1")
    results = {"g0-tp0.dma": Record("g0-tp0", ("g0-tp0.pcie",), "n0.h0")}
    out = tp_twin_results(results, twins, ["g0-tp0", "g0-tp0.dma", "g0-tp0.pcie", "n0.h0"])
    assert list(out) == ["g0-tp0.dma", "g4-tp4.dma"]
    assert out["g4-tp4.dma"] == Record("g4-tp4", ("g4-tp4.pcie",), "n0.h1", 4, "g4-tp4")
    assert out["g0-tp0.dma"] is results["g0-tp0.dma"]


@pytest.mark.parametrize("text", ["g0 g1", "g0 g1 x", "g0 g1 1 n0.h0"])
def test_a_malformed_twin_is_one_line(text):
    with pytest.raises(ValueError, match="is not 'SIM TWIN T \\[SIMHOST TWINHOST\\]'"):
        parse_tp_twins(text)


def test_the_output_files_are_a_run_of_every_rank_s_but_the_system_line(tmp_path):
    opts = f"{GPT2} --tp 4 --pp 2"
    consoles = []
    for name, extra in (("one", ""), ("every", " --simulate-every-rank")):
        console = io.StringIO()
        sst_cdma.run(PIPELINE, opts + extra, output_directory=tmp_path / name, console=console)
        consoles.append(console.getvalue().splitlines())
    one, every = tmp_path / "one", tmp_path / "every"
    assert (one / "trace.json").read_bytes() == (every / "trace.json").read_bytes()
    lines = [(d / "summary.json").read_text(encoding="utf-8").splitlines() for d in (one, every)]
    differ = [(a, b) for a, b in zip(*lines) if a != b]
    assert len(lines[0]) == len(lines[1]) and len(differ) == 1
    assert differ[0][0].strip().startswith('"system": ') and "twins copied" in differ[0][0]
    assert [a for a, b in zip(*consoles) if a != b] == [consoles[0][1]]
    assert consoles[0][1].startswith("system:") and len(consoles[0]) == len(consoles[1])
