"""topologies/pipeline_cdma.py: --pp H100s, each a pipeline stage, stage to stage over
point-to-point links; its summary's step and per-stage bubble and micro-batches in flight, as
the schedules' closed forms give them with free links; bad layouts refused in one line."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from sst_in_process import run_sst

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.errors import RunError
from workloads.parallel import ModelShape, make_layout, makespan, stage_orders

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
#: free links: the closed forms hold to the picosecond
FREE = "--p2p-bandwidth 0B/s --p2p-latency 0ps"


def run(opts: str) -> tuple[dict, str]:
    """The run's summary and console text."""
    console = io.StringIO()
    result = sst_cdma.run(PIPELINE, opts, console=console)
    return result.reports["summary"], console.getvalue()


@pytest.mark.parametrize("schedule, p, m, v", [("1f1b", 4, 8, 1), ("gpipe", 3, 5, 1),
                                               ("interleaved", 4, 8, 2)])
def test_the_step_and_each_stage_s_bubble_are_the_closed_form(schedule, p, m, v):
    summary, console = run(f"--pp {p} --micro-batches {m} --schedule {schedule} --vpp {v} "
                           f"--forward-time 1ms --backward-time 2ms {FREE}")
    assert check_summary(summary) == []
    pipe = summary["pipeline"]
    # 2 layers a chunk, 1 + 2 ms each: a stage-time of 6 v ms, the step (m v + p - 1) 6 ms
    assert (pipe["pp"], pipe["vpp"], pipe["schedule"], pipe["micro_batches"]) == \
        (p, v, schedule, m)
    assert round(pipe["step_time_s"] * 1e12) == (m * v + p - 1) * 6 * 10**9
    assert summary["iteration_time_s"] == pipe["step_time_s"]
    for stage in pipe["stages"]:
        assert round(stage["busy_time_s"] * 1e12) == m * v * 6 * 10**9
        assert stage["bubble_share"] == (p - 1) / (m * v + p - 1)
        # each chunk sends its output on but from the last virtual stage, and its input's
        # gradient back but from virtual stage 0: 16 MiB a micro-batch each
        ks = [c * p + stage["stage"] for c in range(v)]
        sends = sum((k != p * v - 1) + (k != 0) for k in ks)
        assert stage["sent_bytes"] == sends * m * 16 * 2**20
        assert f"  stage {stage['stage']} (gpu{stage['stage']}): busy" in console
    # stage 0 ends last: its idle time is all waiting in recv for the others
    first = pipe["stages"][0]
    assert round(first["recv_wait_time_s"] * 1e12) == round(first["idle_time_s"] * 1e12)
    held = [s["in_flight_max"] for s in pipe["stages"]]
    if schedule == "1f1b":
        assert held == [min(p - s, m) for s in range(p)]
    elif schedule == "gpipe":
        assert held == [m] * p
    else:  # Megatron's warm-up, 2 (p - s - 1) + (v - 1) p, plus the pass in hand
        assert held == [2 * (p - s - 1) + (v - 1) * p + 1 for s in range(p)]


def test_the_stage_that_runs_out_of_memory_first_is_reported():
    # 1F1B: stage s holds at most h = min(p - s, m) micro-batches' 2 layer inputs, and in a
    # backward the output's gradient and the next one besides: 2 (h + 1) activations. At
    # 8.5 GiB each on 80 GiB H100s the first stage (85 GiB) runs out, in its first backward
    # (when the last stage's gradient has come back), the others fit
    act = 8704 * 2**20
    summary, console = run(f"--pp 4 --micro-batches 8 --activation 8704MiB {FREE}")
    assert check_summary(summary) == []
    pipe = summary["pipeline"]
    assert [s["peak_memory_bytes"] for s in pipe["stages"]] == \
        [2 * (min(4 - s, 8) + 1) * act for s in range(4)]
    assert [s["fits_in_memory"] for s in pipe["stages"]] == [False, True, True, True]
    oom = pipe["out_of_memory"]
    assert (oom["stage"], oom["gpu"], oom["layer"]) == (0, "gpu0", "L1")
    assert oom["bytes_short"] == 10 * act - 80 * 2**30
    shape = ModelShape(layers=8, heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
    reference = makespan(stage_orders(make_layout(shape, pp=4, micro_batches=8)),
                         2 * 10**9, 4 * 10**9)
    first_backward = next(start for work, start, _ in reference.timeline[0]
                          if work.phase == "backward")
    assert round(oom["time_s"] * 1e12) == first_backward
    assert "out of memory first on stage 0 (gpu0)" in console
    assert "--policy" not in console


def test_the_command_of_the_docs_runs_and_prints_a_line_per_stage():
    out = run_sst(PIPELINE, "--", "--pp", "4", "--micro-batches", "8", "--schedule", "1f1b",
                  cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("  stage ")]
    assert len(lines) == 4
    assert "at most 4 micro-batch(es) in flight" in lines[0]
    assert "at most 1 micro-batch(es) in flight" in lines[3]


@pytest.mark.parametrize("opts, message", [
    ("--schedule interleaved", "--schedule 'interleaved' needs --vpp >= 2 model chunks per "
                               "stage, but --vpp is 1"),
    ("--schedule interleaved --vpp 2 --micro-batches 6",
     "--schedule 'interleaved' needs --micro-batches a multiple of --pp 4, but "
     "--micro-batches is 6"),
    ("--vpp 2", "--vpp 2 needs --schedule 'interleaved', but --schedule is '1f1b'"),
    ("--layers 10", "--layers 10 do not split evenly over --pp 4 x --vpp 1 = 4 virtual stages"),
    ("--pp 9 --layers 8", "--layers 8 do not split evenly over --pp 9 x --vpp 1"),
    ("--schedule foo", "argument --schedule: 'foo' is not one of gpipe, 1f1b, interleaved"),
])
def test_a_bad_layout_is_one_line_naming_the_options(opts, message):
    with pytest.raises(RunError) as info:
        sst_cdma.run(PIPELINE, opts, console=io.StringIO())
    text = str(info.value)
    assert f"model option error: {message}" in text
    assert "\n" not in text
