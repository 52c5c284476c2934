"""The reporter on a run stopped before its iteration ended (stop_at): the console and
summary.json say so (``complete``) and claim no speed-up or slowdown; a whole run is
``complete: true`` with its figures."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import sst_cdma
from components.console import console_summary

REPO = Path(__file__).resolve().parents[2]
DIGITS = ["--network", "digits_cnn", "--policy", "all"]  # 0.265 ms; oracle 0.244, vDNN 0.315


def run(*opts: str, stop_at=None, out=None):
    console = io.StringIO()
    result = sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", list(opts), stop_at=stop_at,
                          output_directory=out, console=console)
    return result, console.getvalue()


def test_a_whole_run_is_complete(tmp_path):
    result, console = run(*DIGITS, out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] is True and "stopped_at_s" not in summary
    assert all(b["complete"] is True for b in summary["baselines"].values())
    assert "slowdown_vs_oracle" in summary and "speedup_vs_vdnn" in summary
    assert "STOPPED" not in console and "cDMA speed-up" in console


def test_a_run_stopped_mid_iteration_says_so_and_compares_nothing(tmp_path):
    result, console = run(*DIGITS, stop_at="100us", out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] is False and summary["stopped_at_s"] == pytest.approx(100e-6, abs=1e-15)
    assert "slowdown_vs_oracle" not in summary and "speedup_vs_vdnn" not in summary
    assert all(b["complete"] is False for b in summary["baselines"].values())
    assert "the run was stopped at 0.100 ms (its stop-at time) before the iteration ended" in console
    assert "% stalled" not in console and "cDMA speed-up" not in console
    assert "x the oracle" not in console


def test_times_are_the_exact_decimal_of_their_picoseconds(tmp_path):
    # 10**8 ps * 1e-12 is 9.999999999999999e-05; the summary divides the integer instead
    result, _ = run(*DIGITS, stop_at="100us", out=tmp_path)
    text = (tmp_path / "summary.json").read_text()
    assert '"stopped_at_s": 0.0001,' in text
    gpu = result.results["gpu0"]
    summary = json.loads(text)
    assert summary["iteration_time_s"] == gpu.iteration_time_ps / 10**12


def test_a_baseline_cut_off_is_not_compared():
    # the run and the oracle end by 0.29 ms, the vDNN baseline does not
    result, console = run(*DIGITS, stop_at="0.29ms")
    summary = result.reports["summary"]
    assert summary["complete"] is True
    assert summary["baselines"]["oracle"]["complete"] is True
    assert summary["baselines"]["vdnn"]["complete"] is False
    assert "slowdown_vs_oracle" in summary and "speedup_vs_vdnn" not in summary
    assert "vDNN baseline:   stopped (the run's stop-at time) before its iteration ended" in console
    assert "cDMA speed-up" not in console and "x the oracle" in console


def test_several_gpus_are_complete_only_together():
    result, console = run("--network", "digits_cnn", "--gpus", "2", stop_at="100us")
    summary = result.reports["summary"]
    assert summary["complete"] is False and all(not g["complete"] for g in summary["gpus"])
    assert "STOPPED" in console
    result, _ = run("--network", "digits_cnn", "--gpus", "2")
    assert result.reports["summary"]["complete"] is True


def test_the_console_summary_of_an_old_summary_without_the_key_is_whole():
    result, _ = run(*DIGITS)
    summary = dict(result.reports["summary"])
    del summary["complete"]
    assert console_summary(summary) == console_summary(result.reports["summary"])


def test_a_run_that_compresses_nothing_claims_no_cdma_speedup_and_says_why():
    result, console = run(*DIGITS, "--algorithm", "none")
    assert "cDMA speed-up" not in console.replace("no cDMA speed-up", "")
    assert "no cDMA speed-up: nothing was compressed (cDMA algorithm none)" in console
    assert result.reports["summary"]["no_cdma_speedup"].startswith("nothing was compressed")
    _, console = run(*DIGITS)
    assert "; cDMA speed-up 1." in console and "no cDMA speed-up" not in console


def test_the_vdnn_baselines_policy_is_printed():
    _, console = run("--network", "digits_cnn", "--policy", "conv")
    assert "vDNN (no comp., policy conv):" in console


def test_every_console_line_uses_one_size_unit():
    for opts in (DIGITS, ("--network", "alexnet", "--batch", "32")):
        _, console = run(*opts)
        for line in console.splitlines():
            units = set(re.findall(r"\d (GB|MB|kB)\b", line))
            assert len(units) <= 1, line


def test_a_multi_gpu_summary_labels_its_totals_and_per_gpu_figures():
    result, console = run("--network", "digits_cnn", "--policy", "all", "--gpus", "2")
    assert "iteration (slowest of 2 GPUs):" in console
    assert "offloaded (total of 2 GPUs):" in console
    assert "peak GPU memory (largest GPU):" in console
    s = result.reports["summary"]
    assert s["aggregation"]["offloaded_bytes"] == "sum"
    assert s["aggregation"]["iteration_time_s"] == "max"
    assert s["offloaded_bytes"] == sum(g["offloaded_bytes"] for g in s["gpus"])


def test_the_console_says_where_kernel_times_come_from():
    _, fitted = run(*DIGITS)
    assert "kernel times:    model fitted on P100 (DeepBench kernel measurements)" in fitted
    _, roofline = run(*DIGITS, "--kernel-model", "roofline")
    assert "kernel times:    roofline (peak FLOP/s x the GPU's compute_efficiency" in roofline
    result, _ = run(*DIGITS)
    summary = dict(result.reports["summary"])
    del summary["kernel_times"]  # a summary written before the key existed: no line
    assert "kernel times:" not in console_summary(summary)
