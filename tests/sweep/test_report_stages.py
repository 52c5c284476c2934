"""sst-cdma report's pipeline plots (sst_cdma/tools/sweep/stage_plots.py): peak memory per
stage against the GPU's capacity and the step's breakdown per stage, for one run's output
folder and for each point of a sweep over --pp and --schedule. The tables the bars are drawn
from are checked against the summaries they come from."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.tools.sweep.report import ReportError, is_run_folder, write_report
from sst_cdma.tools.sweep.stage_plots import (StagePlotError, stage_breakdown, stage_memory,
                                              stage_table)

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "topologies" / "pipeline_cdma.py"
TP_OPTS = ("--network gpt2_small --gpu hopper --pp 2 --tp 2 --micro-batches 4 --batch 1 "
           "--seq-len 512")
#: 8.5 GiB activations on 80 GiB H100s: the first stage runs out first, the last fits
#: (docs/parallel.md, section 7)
OOM_OPTS = "--pp 4 --micro-batches 8 --activation 8704MiB"


def _run(opts: str, out: Path) -> dict:
    sst_cdma.run(PIPELINE, opts, output_directory=out, console=io.StringIO())
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tp_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tp")
    return out, _run(TP_OPTS, out)


@pytest.fixture(scope="module")
def oom_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("oom")
    return out, _run(OOM_OPTS, out)


def test_the_memory_table_is_each_stage_s_peak_against_the_capacity(tp_folder):
    _, summary = tp_folder
    rows = stage_memory(summary, "summary.json")
    stages = summary["pipeline"]["stages"]
    assert [m.stage for m in rows] == [0, 1]
    assert [m.gpus for m in rows] == [("gpu0-tp0-pp0", "gpu1-tp1-pp0"),
                                      ("gpu2-tp0-pp1", "gpu3-tp1-pp1")]
    assert [m.peak_bytes for m in rows] == [s["peak_memory_bytes"] for s in stages]
    assert {m.capacity_bytes for m in rows} == {summary["gpu_memory_capacity_bytes"]}
    assert all(m.fits and not m.runs_out_first for m in rows)


def test_the_breakdown_is_busy_tp_and_idle_shares_of_the_step(tp_folder):
    _, summary = tp_folder
    step = summary["pipeline"]["step_time_s"]
    rows = stage_breakdown(summary, "summary.json")
    for row, stage in zip(rows, summary["pipeline"]["stages"]):
        assert row.compute == pytest.approx(stage["busy_time_s"] / step, rel=1e-12)
        assert row.tp_comm == pytest.approx(stage["tp_comm_time_s"] / step, rel=1e-12)
        assert row.tp_comm > 0
        assert row.idle == pytest.approx(stage["bubble_share"], rel=1e-12)
        assert row.compute + row.tp_comm + row.idle == pytest.approx(1.0, abs=1e-9)
    # the first stage of a 1F1B pipeline waits longest: its idle share is the larger
    assert rows[0].idle > rows[1].idle


def test_the_stage_that_runs_out_first_is_marked(oom_folder):
    _, summary = oom_folder
    rows = stage_memory(summary, "summary.json")
    assert summary["pipeline"]["out_of_memory"]["stage"] == 0
    assert [m.runs_out_first for m in rows] == [True, False, False, False]
    assert [m.fits for m in rows] == [s["fits_in_memory"] for s in summary["pipeline"]["stages"]]
    assert not rows[0].fits and rows[-1].fits
    assert rows[0].peak_bytes > rows[0].capacity_bytes > rows[-1].peak_bytes
    table = stage_table(rows, stage_breakdown(summary, "summary.json")).splitlines()
    assert len(table) == 2 + 4 and "(runs out first)" in table[2] and "| 0 | gpu0 |" in table[2]


def test_a_run_folder_s_report_draws_both_stage_plots_and_its_memory(oom_folder):
    folder, summary = oom_folder
    assert is_run_folder(folder)
    report = write_report(folder)
    names = [p.name for p in report.plots]
    assert names == ["stage_memory.png", "stage_breakdown.png", "memory.png"]
    for path in report.plots:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    text = report.markdown.read_text(encoding="utf-8")
    assert "## Peak memory per pipeline stage" in text and "## The step per pipeline stage" in text
    peaks = [f"{s['peak_memory_bytes'] / 1e9:.3f}" for s in summary["pipeline"]["stages"]]
    assert all(peak in text for peak in peaks)


def test_a_single_gpu_run_s_report_has_no_stage_plots(tmp_path):
    sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", "--network alexnet --batch 4",
                 output_directory=tmp_path, console=io.StringIO())
    names = [p.name for p in write_report(tmp_path).plots]
    assert "memory.png" in names and not any(n.startswith("stage_") for n in names)


def test_a_run_folder_refuses_sweep_options(tp_folder):
    folder, _ = tp_folder
    with pytest.raises(ReportError, match=r"--timeline 2: .* is one run's output folder"):
        write_report(folder, output=folder / "r2", timeline=2)


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(pipeline=[1]), "'pipeline' is not an object with a list of 'stages'"),
    (lambda s: s["pipeline"]["stages"][1].update(peak_memory_bytes="big"),
     "pipeline.stages[1].peak_memory_bytes is 'big', not a finite number"),
    (lambda s: s["pipeline"]["stages"][0].update(fits_in_memory=None),
     "pipeline.stages[0].fits_in_memory is None, not true or false"),
    (lambda s: s["pipeline"].update(step_time_s=0), "pipeline.step_time_s is 0.0: no step"),
])
def test_a_malformed_pipeline_is_one_line_naming_the_file_and_field(tp_folder, tmp_path,
                                                                    change, message):
    _, summary = tp_folder
    bad = json.loads(json.dumps(summary))
    change(bad)
    (tmp_path / "summary.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ReportError) as info:
        write_report(tmp_path)
    assert message in str(info.value) and "summary.json" in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(StagePlotError):
        stage_memory(bad, "x") if "step" not in message else stage_breakdown(bad, "x")


@pytest.mark.slow  # runs a four-point sweep
def test_a_sweep_over_pp_and_schedule_gets_a_stage_panel_per_point(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "sst_cdma.tools.cli.sst_cdma_main", "sweep",
                           str(REPO / "sweeps" / "pipeline.yaml"), "-o", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    report = write_report(out)
    assert {"stage_memory.png", "stage_breakdown.png"} <= {p.name for p in report.plots}
    text = report.markdown.read_text(encoding="utf-8")
    titles = ["point 0: pp=2, schedule=gpipe", "point 1: pp=2, schedule=1f1b",
              "point 2: pp=4, schedule=gpipe", "point 3: pp=4, schedule=1f1b"]
    assert f"One panel per point: {'; '.join(titles)}." in text
    pp = {}
    for point in (out / "points").iterdir():
        summary = json.loads((point / "summary.json").read_text(encoding="utf-8"))
        rows = stage_memory(summary, "s")
        pp[(summary["pipeline"]["pp"], summary["pipeline"]["schedule"])] = rows
        assert [m.stage for m in rows] == list(range(summary["pipeline"]["pp"]))
    assert set(pp) == {(2, "gpipe"), (2, "1f1b"), (4, "gpipe"), (4, "1f1b")}
    # GPipe holds every micro-batch on every stage, 1F1B at most pp - s: its first stage's
    # peak is below GPipe's
    assert pp[(4, "1f1b")][0].peak_bytes < pp[(4, "gpipe")][0].peak_bytes
