"""Every stage plans its memory, simulated: ``topologies/pipeline_cdma.py --policy auto``
(docs/parallel.md, "Every stage plans its memory")."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
#: gpt2_small on 16 GiB P100s, 8 micro-batches of 16 x 1024 tokens: stage 0 (4 in flight)
#: overflows with every activation kept, the last stage (1 in flight) too (its logits)
TIGHT = "--network gpt2_small --gpu p100 --pp 4 --micro-batches 8 --batch 16 --seq-len 1024"


def run(opts: str):
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, opts, console=console)
    return result.reports["summary"], console.getvalue()


def test_each_stage_plans_for_its_pressure_and_runs_what_it_planned():
    summary, text = run(TIGHT + " --policy auto")
    assert check_summary(summary) == []
    stages = summary["pipeline"]["stages"]
    assert summary["pipeline"]["out_of_memory"] is None
    for s in stages:
        plan = s["planner"]
        assert plan["in_flight"] == s["in_flight_max"] == 4 - s["stage"]
        assert plan["waiting"] == plan["in_flight"] - 1
        # the simulated GPU's peak is the plan's stream's allocations replayed
        assert s["peak_memory_bytes"] == plan["peak_bytes"] <= plan["capacity_bytes"]
        assert s["fits_in_memory"] and plan["fits"] and plan["bytes_short"] == 0
        assert sum(plan["choices"].values()) > 30
    moved = [sum(s["planner"]["choices"][c] for c in ("offload", "compress", "recompute"))
             for s in stages]
    assert moved[0] > moved[1] >= moved[2] and moved[2] == 0
    assert stages[2]["planner"]["rounds"] == 0  # it fits keeping all: not planned
    lines = [line for line in text.splitlines() if " plan: " in line]
    assert len(lines) == 4
    assert lines[0].startswith("    stage 0 plan: 4 in flight (3 waiting), model states ")
    assert "keeps all 36 activations" in lines[2] and lines[2].endswith("fits")
    assert "recompute" in lines[0] and "(zvc)" in lines[0]


def test_without_auto_the_same_layout_runs_out_of_memory():
    summary, _ = run(TIGHT)
    assert summary["pipeline"]["out_of_memory"] is not None
    assert all("planner" not in s for s in summary["pipeline"]["stages"])


def test_a_stage_no_plan_fits_is_named():
    summary, text = run("--network gpt2_small --gpu p100 --pp 2 --micro-batches 4 --batch 64 "
                        "--seq-len 1024 --policy auto")
    short = [s for s in summary["pipeline"]["stages"] if not s["planner"]["fits"]]
    assert short and all(s["planner"]["bytes_short"] > 0 for s in short)
    assert summary["pipeline"]["out_of_memory"] is not None
    worst = max(short, key=lambda s: s["planner"]["bytes_short"])
    assert f"stage {worst['stage']} is the most short" in text
    assert "no plan fits:" in text


def test_policy_plan_is_refused_for_stages_in_one_line():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, "--network gpt2_small --pp 2 --policy plan",
                     console=io.StringIO())
    text = str(info.value)
    assert "policy 'plan' reads one plan file for one GPU" in text
    assert "\n" not in text


def test_interleaved_tensor_and_data_parallel_stages_run_what_they_planned():
    """gpt2_medium, tp 2 x pp 2 x dp 2 with ZeRO 1, sequence parallelism and two chunks a
    stage, 4 micro-batches of 48 x 1024 tokens on H100s: each stage plans for the
    (micro-batch, chunk) passes it holds (5 on stage 0, 3 on stage 1); the collectives'
    buffers and the shard's tensors are in its replayed peak, which its GPUs reach exactly."""
    summary, text = run("--network gpt2_medium --pp 2 --vpp 2 --schedule interleaved --tp 2 "
                        "--dp 2 --zero 1 --micro-batches 4 --batch 48 --seq-len 1024 "
                        "--sequence-parallel --policy auto")
    assert check_summary(summary) == []
    for s, held in zip(summary["pipeline"]["stages"], (5, 3)):
        plan = s["planner"]
        assert plan["in_flight"] == s["in_flight_max"] == held
        assert plan["waiting"] == held - 1
        assert s["peak_memory_bytes"] == plan["peak_bytes"] <= plan["capacity_bytes"]
        assert plan["fits"] and s["fits_in_memory"]
        assert plan["choices"]["keep"] < sum(plan["choices"].values())
    assert summary["pipeline"]["out_of_memory"] is None
    assert text.count(" plan: ") == 2


#: gpt2_small over 2 P100 stages, 4 micro-batches of 39 x 1024 tokens: no plan of the last
#: stage (its logits) fits with its optimizer states on the GPU; with them on its host it does
SHORT_STATES = ("--network gpt2_small --gpu p100 --pp 2 --micro-batches 4 --batch 39 "
                "--seq-len 1024 --policy auto")


def test_a_stage_short_with_its_states_on_the_gpu_moves_them_to_its_host():
    summary, text = run(SHORT_STATES + " --optimizer-states auto")
    assert check_summary(summary) == []
    p = summary["pipeline"]
    assert p["out_of_memory"] is None
    first, last = p["stages"]
    # the first stage fits with them on the GPU and keeps them there, with no host step
    assert first["planner"]["optimizer_states"]["placement"] == "gpu" and "host" not in first
    # the last does not: on its host its plan fits, and the simulated GPU holds that plan
    plan = last["planner"]
    assert plan["optimizer_states"]["placement"] == "host" and plan["fits"]
    assert plan["optimizer_states"]["reason"].endswith("on the host it fits")
    assert last["peak_memory_bytes"] == plan["peak_bytes"] <= plan["capacity_bytes"]
    assert last["host"]["gradients_to_host_bytes"] > 0
    assert plan["model_state_bytes"] < first["planner"]["model_state_bytes"]
    assert "optimizer states on the host (with them on the GPU no plan fits" in text
    # the same layout with the states kept on the GPU: the last stage is short and runs out
    on_gpu, _ = run(SHORT_STATES)
    assert on_gpu["pipeline"]["out_of_memory"]["stage"] == 1
    assert not on_gpu["pipeline"]["stages"][1]["planner"]["fits"]
    assert "optimizer_states" not in on_gpu["pipeline"]["stages"][1]["planner"]


def test_optimizer_states_auto_needs_policy_auto_in_one_line():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, "--network gpt2_small --pp 2 --optimizer-states auto",
                     console=io.StringIO())
    text = str(info.value)
    assert "--optimizer-states auto lets each stage's planner move them to the host: it " \
        "needs --policy auto, not none" in text and "\n" not in text
