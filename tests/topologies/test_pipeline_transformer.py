"""topologies/pipeline_cdma.py with --network: each stage runs a transformer's blocks, cut from
the single-GPU render and priced by the H100's fitted model. With free links the simulated
1F1B step equals the reference executor run on the per-stage forward and backward times the
simulation measured (the stages are not uniform: the end stages hold the embedding and the LM
head); each stage holds min(p - s, m) micro-batches and its peak memory falls from stage 0 on
over the uniform stages; a stage short of memory is named; bad options are one line."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from sst_in_process import run_sst

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError
from workloads.parallel import (ModelShape, in_flight, make_layout, makespan, stage_orders,
                                virtual_stage)
from workloads.parallel.transformer_stages import transformer_stage_stream
from workloads.render import iteration_stream

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
FREE = "--p2p-bandwidth 0B/s --p2p-latency 0ps"
#: gpt2_small: 12 blocks (its definition)
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)


def run(opts: str):
    """The run's result, summary and console text."""
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, opts, console=console)
    return result, result.reports["summary"], console.getvalue()


def pass_times(result, layout):
    """Each virtual stage's simulated forward and backward time of one (micro-batch) pass:
    the sum of its kernels' times on its GPU's timeline (each kernel's event holds its
    launch), the same for every micro-batch (checked)."""
    plan = iteration_stream("gpt2_small", layout.micro_batch_size, "float16", "none",
                            optimizer="none", seq_len=128).plan
    times: dict[tuple[str, int], set[int]] = {}
    for s in range(layout.pp):
        built = transformer_stage_stream(plan, layout, s)
        kernels = iter([end - start for kind, _, start, end in result.results[f"gpu{s}"].timeline
                        if kind == "compute"])
        for step in built.steps[1:-1]:
            count = sum(1 for op in built.stream.ops[step.start:step.end] if op.op == "compute")
            k = virtual_stage(layout.pp, s, step.chunk)
            times.setdefault((step.phase, k), set()).add(sum(next(kernels) for _ in range(count)))
    assert all(len(v) == 1 for v in times.values()), times
    count = layout.virtual_stages
    return ([times[("forward", k)].pop() for k in range(count)],
            [times[("backward", k)].pop() for k in range(count)])


@pytest.mark.parametrize("schedule, pp, m, vpp", [("1f1b", 2, 3, 1), ("1f1b", 4, 6, 1),
                                                  ("gpipe", 3, 4, 1), ("interleaved", 2, 4, 2)])
def test_the_step_is_the_reference_executor_s_on_the_simulated_stage_times(schedule, pp, m,
                                                                          vpp):
    result, summary, _ = run(f"--network gpt2_small --pp {pp} --micro-batches {m} --batch 1 "
                             f"--seq-len 128 --dtype float16 --optimizer none --schedule "
                             f"{schedule} --vpp {vpp} {FREE}")
    assert check_summary(summary) == []
    layout = make_layout(SHAPE, pp=pp, vpp=vpp, schedule=schedule, micro_batches=m)
    forward, backward = pass_times(result, layout)
    # the end stages differ from the middle ones: the embedding, the LM head and the loss
    assert forward[0] != forward[1] and forward[-1] > forward[-2]
    if len(forward) > 3:
        assert forward[1] == forward[2] and backward[1] == backward[2]
    reference = makespan(stage_orders(layout), forward, backward)
    ends = [result.results[f"gpu{s}"].iteration_time_ps for s in range(pp)]
    assert max(ends) == reference.step_time
    assert ends == [line[-1][2] for line in reference.timeline]
    # never faster than the busiest stage's m passes
    busiest = max(sum(forward[k] + backward[k] for k in range(s, len(forward), pp))
                  for s in range(pp))
    assert reference.step_time >= m * busiest
    pipe = summary["pipeline"]
    assert round(pipe["step_time_s"] * 1e12) == reference.step_time
    assert [s["in_flight_max"] for s in pipe["stages"]] == list(in_flight(stage_orders(layout)))


def test_peak_memory_falls_from_the_first_stage_over_the_uniform_ones():
    # 6 stages of 2 blocks: stage s holds min(6 - s, m) micro-batches' activations; stages
    # 1-4 hold the same weights, so each holds one micro-batch's activations more than the
    # next
    _, summary, _ = run("--network gpt2_small --pp 6 --micro-batches 8 --batch 1 "
                        f"--seq-len 128 --dtype float16 {FREE}")
    stages = summary["pipeline"]["stages"]
    peaks = [s["peak_memory_bytes"] for s in stages]
    assert [s["in_flight_max"] for s in stages] == [6, 5, 4, 3, 2, 1]
    assert peaks[0] > peaks[1] > peaks[2] > peaks[3] > peaks[4]
    steps = {peaks[s] - peaks[s + 1] for s in range(1, 4)}
    assert len(steps) == 1 and steps.pop() > 0
    assert all(s["fits_in_memory"] for s in stages)


def test_each_stage_offloads_its_own_chunk_s_tensors():
    # a per-tensor policy applies per chunk: each stage's engine offloads its blocks' FFN
    # tensors of each micro-batch it runs, and the first stage, holding the most micro-batches,
    # holds less at its peak than without
    opts = ("--network gpt2_small --pp 4 --micro-batches 4 --batch 1 --seq-len 128 "
            f"--dtype float16 --algorithm none {FREE}")
    _, kept, _ = run(opts + " --policy none")
    result, moved, _ = run(opts + " --policy offload-ffn")
    plan = iteration_stream("gpt2_small", 1, "float16", "offload-ffn", optimizer="adam",
                            seq_len=128).plan
    layout = make_layout(SHAPE, pp=4, micro_batches=4)
    for s in range(4):
        stream = transformer_stage_stream(plan, layout, s).stream
        offloads = [op.name for op in stream.ops if op.op == "offload"]
        assert offloads and all("/fc1" in t or "/act" in t or "/fc2" in t for t in offloads)
        assert result.results[f"gpu{s}"].offloaded_bytes == \
            sum(stream.tensors[t].bytes for t in offloads)
    peak = [[st["peak_memory_bytes"] for st in r["pipeline"]["stages"]] for r in (kept, moved)]
    assert peak[1][0] < peak[0][0]


def test_the_stage_that_runs_out_of_memory_first_is_named():
    # naive attention at 1024 tokens: each block keeps the scores and the probabilities, 12
    # heads x 1024^2 x 4 bytes each a sample; stage 0 holds 4 micro-batches of 10 samples and
    # runs out of a P100's 16 GiB in its forward passes, the others (3, 2, 1 held) fit
    _, summary, console = run("--network gpt2_small --pp 4 --micro-batches 4 --batch 10 "
                              f"--seq-len 1024 --gpu pascal {FREE}")
    pipe = summary["pipeline"]
    assert [s["fits_in_memory"] for s in pipe["stages"]] == [False, True, True, True]
    oom = pipe["out_of_memory"]
    assert (oom["stage"], oom["gpu"]) == (0, "gpu0")
    assert oom["layer"].startswith("blk")
    assert "out of memory first on stage 0 (gpu0)" in console


def test_a_tensor_parallel_stage_runs_the_shard_and_its_collectives():
    # tests/topologies/test_pipeline_tp.py checks the collectives themselves
    opts = f"--network gpt2_small --pp 2 --micro-batches 2 --seq-len 128 --dtype float16 {FREE}"
    _, plain, _ = run(opts)
    _, shard, console = run(opts + " --tp 2")
    assert "each tp 2 on 2 H100 SXM5s (rank = tp + 2 x pp)" in console
    # half the heads and half the FFN a rank: less compute and fewer weights on every stage
    for a, b in zip(plain["pipeline"]["stages"], shard["pipeline"]["stages"]):
        assert b["tp_comm_time_s"] > 0 and "tp_comm_time_s" not in a
        assert b["busy_time_s"] < a["busy_time_s"]
        assert b["peak_memory_bytes"] < a["peak_memory_bytes"]
        assert b["sent_bytes"] == a["sent_bytes"]   # the whole residual stream either way


def test_the_command_of_the_docs_runs_and_prints_a_line_per_stage():
    out = run_sst(PIPELINE, "--", "--network", "gpt2_small", "--pp", "4", "--micro-batches",
                  "8", "--batch", "1", "--seq-len", "512", cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "4 pipeline stages of gpt2_small's blocks" in out.stdout
    lines = [line for line in out.stdout.splitlines() if line.startswith("  stage ")]
    assert len(lines) == 4
    assert "at most 4 micro-batch(es) in flight" in lines[0]
    assert "at most 1 micro-batch(es) in flight" in lines[3]


@pytest.mark.parametrize("opts, message", [
    ("--network gpt2_small --pp 5", "--network gpt2_small: the model's layers 12 do not split "
                                    "evenly over --pp 5 x --vpp 1 = 5 virtual stages: give "
                                    "--stage-split"),
    ("--network gpt2_small --pp 2 --stage-split 5,6", "--network gpt2_small: --stage-split "
                                                      "[5, 6] sums to 11, but the model has "
                                                      "layers 12"),
    ("--network gpt2_small --pp 2 --stage-split 6,x", "--stage-split '6,x': expected layer "
                                                      "counts separated by commas"),
    ("--network gpt2_small --layers 12", "--layers sets the chain of identical layers; "
                                         "--network gpt2_small gives the layers"),
    ("--network gpt2_small --tp 5", "--network gpt2_small: --tp 5 does not divide"),
    ("--tp 2", "--tp need --network"),
    ("--network alexnet", "--network alexnet: not a transformer whose blocks the stages "
                          "split: "),
])
def test_a_bad_option_is_one_line_naming_it(opts, message):
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, opts, console=io.StringIO())
    text = str(info.value)
    assert f"model option error: {message}" in text
    assert "\n" not in text


def test_a_policy_that_crosses_a_seam_is_refused_in_one_line():
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, "--network gpt2_small --pp 2 --micro-batches 2 --policy "
                     "recompute-residual", console=io.StringIO())
    text = str(info.value)
    assert "moves it across the seam between pipeline stages" in text
    assert "\n" not in text
