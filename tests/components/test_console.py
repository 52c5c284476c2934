"""The console's lines for the engine (codec units, how busy, what bounded the copies), for where
the densities came from, the hint where nothing moved and the run does not fit, and its units:
memory in binary units (a 16 GiB GPU reads "16 GiB"), each size the same on every line."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import sst_cdma
from components.console import binary_size, console_summary

REPO = Path(__file__).resolve().parents[2]
DIGITS = ["--network", "digits_cnn", "--policy", "all", "--no-baselines"]


def run(*opts: str):
    console = io.StringIO()
    result = sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", list(opts), console=console)
    return result.reports["summary"], console.getvalue()


def line(console: str, label: str) -> str:
    found = [ln for ln in console.splitlines() if ln.startswith(label)]
    assert len(found) == 1, (label, console)
    return found[0]


def test_the_engine_line_names_units_throughput_busy_share_and_the_bound():
    s, console = run(*DIGITS)
    engine = line(console, "cDMA engine:")
    assert "8 zvc units x 32.00 GB/s = 256.00 GB/s" in engine
    assert re.search(r"busy \d+\.\d% of the iteration", engine)
    # 12.4 GB/s of PCIe against 256 GB/s of codec units: the link holds every copy back
    assert s["copy_bounds"]["link"] == pytest.approx(1.0)
    assert "copies bound by link 100.0% of their time" in engine
    assert "more would change nothing" in engine
    assert 0 < s["engine_busy"] < 0.1


def test_doubling_the_codec_units_changes_nothing_and_the_line_says_why():
    one, _ = run(*DIGITS)
    two, console = run(*DIGITS, "--codec-units", "16")
    assert two["iteration_time_s"] == one["iteration_time_s"]
    assert "16 zvc units" in console and "more would change nothing" in console
    assert two["engine_busy"] == pytest.approx(one["engine_busy"] / 2)


def test_slow_codec_units_bound_the_copies_and_the_line_says_so():
    fast, _ = run(*DIGITS)
    slow, console = run(*DIGITS, "--codec-unit-throughput", "0.25GB/s")
    assert slow["iteration_time_s"] > fast["iteration_time_s"]
    assert slow["copy_bounds"]["engine"] > 0.5
    assert "copies bound by engine" in line(console, "cDMA engine:")
    assert "change nothing" not in console
    assert sum(slow["copy_bounds"].values()) == pytest.approx(1.0)


def test_a_plain_copy_engine_prints_no_ratio_by_algorithm_nor_densities():
    s, console = run(*DIGITS, "--algorithm", "none")
    assert "compression_ratio_by_algorithm" in s  # summary.json keeps it for reports
    assert "ratio by algo" not in console and "densities:" not in console
    assert "plain copy engine (no codec)" in line(console, "cDMA engine:")
    _, compressed = run(*DIGITS)
    assert "ratio by algo:" in compressed


def test_the_density_line_says_an_imagenet_profile_is_an_estimate():
    s, console = run("--network", "alexnet", "--batch", "4", "--no-baselines")
    assert s["density_provenance"]["kind"] == "estimated"
    assert s["density_provenance"]["source"].startswith("Estimate, not a measurement.")
    assert line(console, "densities:") == (
        "densities:       profile alexnet at progress 0.5, ESTIMATED, not measured: rests on "
        "what the cDMA paper reports qualitatively")


def test_the_density_line_says_a_measured_profile_is_measured():
    s, console = run(*DIGITS)
    assert s["density_provenance"]["kind"] == "measured"
    densities = line(console, "densities:")
    assert "profile digits_cnn at progress 0.5, measured: " in densities
    assert "scikit-learn load_digits" in densities


def test_a_transformer_that_moves_nothing_and_does_not_fit_gets_a_hint():
    s, console = run("--network", "gpt2_small", "--batch", "16", "--no-baselines")
    assert not s["fits_in_memory"] and s["offloaded_bytes"] == 0
    hint = line(console, "hint:")
    assert "policy conv (it offloads convolutions' inputs only) moved nothing" in hint
    assert "--policy auto" in hint and "--policy all" in hint
    _, fits = run(*DIGITS)
    assert "hint:" not in fits


def test_capacities_are_binary_and_a_size_reads_the_same_on_every_line():
    s, console = run("--network", "digits_cnn", "--policy", "all")
    assert s["gpu_memory_capacity_bytes"] == 16 * 2**30
    memory = line(console, "peak GPU memory:")
    assert " of 16 GiB (fits)" in memory
    assert "17.18 GB" not in console and not re.search(r"\b0\.00\d", console)
    oracle = s["baselines"]["oracle"]["peak_gpu_memory_bytes"]
    assert f"needs {binary_size(oracle)} " in line(console, "oracle:")
    # bytes moved stay decimal, one unit per line
    for text in console.splitlines():
        assert len(set(re.findall(r"\d (GB|MB|kB)\b", text))) <= 1, text


@pytest.mark.parametrize("size, text", [(16 * 2**30, "16 GiB"), (80 * 2**30, "80 GiB"),
                                        (3_090_000, "2.95 MiB"), (4500, "4.39 KiB"),
                                        (512, "512 B"), (0, "0 B"),
                                        (7_310_000_000, "6.81 GiB")])
def test_binary_sizes(size, text):
    assert binary_size(size) == text


def test_an_old_summary_without_the_new_keys_still_prints():
    s, _ = run(*DIGITS)
    old = {k: v for k, v in s.items()
           if k not in ("copy_bounds", "engine_busy", "density_provenance")}
    text = console_summary(old)
    assert "cDMA engine:" in text and "densities:" not in text


@pytest.mark.parametrize("scaling, scale, said", [
    ("given", 1.0, "each, 1.00 G/s"),
    ("as measured", 1.0, "each (deepspeed, as measured),"),
    ("vector width and clock", 1.633, "each (deepspeed measured x1.633),"),
    ("recorded vector width and clock", 0.769,
     "each (deepspeed measured x0.769, by its recorded width and clock),"),
    ("unscaled", 1.0, "each (deepspeed measured on another CPU, unscaled),"),
])
def test_the_host_cpu_line_says_which_measurement_and_how_it_was_scaled(scaling, scale, said):
    from components.console import host_cpu_line

    cpu = {"platform": "dgx-h100", "cores": 2, "adam_per_core_params_per_s": 5e8,
           "adam_scale": scale, "adam_scaling": scaling, "adam_implementation": "deepspeed",
           "adam_params_per_s": 1e9, "dram_bandwidth_Bps": 307.2e9, "dram_bound": False}
    line = host_cpu_line(cpu)
    assert "dgx-h100: 2 cores at 500 M Adam parameters/s " + said in line, line
