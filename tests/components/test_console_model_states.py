"""The console of runs that move model states (ZeRO-Offload, several GPUs, the planner) and of
runs whose policy offloads though everything fits: the heading says what moved, the GPU's time
splits into compute, the stall on copies and the wait for the host CPU (which is not called a
stall), several GPUs print their model-state lines per GPU, each figure has one name, and a
run that offloads needlessly is told what --policy none would give."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import sst_cdma
from components.console import console_summary
from components.model_state_driver import idle_overlap

REPO = Path(__file__).resolve().parents[2]
ZERO = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--optimizer", "adam",
        "--optimizer-states", "host"]


def run(*opts: str, **kwargs):
    console = io.StringIO()
    result = sst_cdma.run(REPO / "topologies" / "pascal_cdma.py", list(opts), console=console,
                          **kwargs)
    return result.reports["summary"], console.getvalue()


def line(console: str, label: str) -> str:
    found = [ln for ln in console.splitlines() if ln.startswith(label)]
    assert len(found) == 1, (label, console)
    return found[0]


def ms(text: str, word: str) -> float:
    """The milliseconds that follow ``word`` in ``text``."""
    return float(re.search(rf"{word} (\d+\.\d+) ms", text).group(1))


def test_idle_overlap_counts_the_wait_outside_the_kernels():
    # kernels 0-10 and 30-40; a step at the CPU from 5 to 35: the GPU idled 10-30 of it
    assert idle_overlap([(0, 10), (30, 40)], [(5, 35)], 100) == 20
    # overlapping waits count once; a wait past the end counts up to the end
    assert idle_overlap([(0, 10)], [(20, 50), (40, 60), (90, 200)], 100) == 40 + 10
    assert idle_overlap([(0, 100)], [(10, 20)], 100) == 0


def test_a_zero_offload_run_says_what_moved_and_does_not_call_the_host_step_a_stall():
    s, console = run(*ZERO)
    m = s["model_states"]
    heading = console.splitlines()[0]
    assert "optimizer states on host (host CPU step)" in heading
    assert "activations: vDNN policy conv" in heading
    # one bucket, the GPU idle all through its step: the wait is the CPU's step exactly
    assert m["host_cpu_wait_s"] == pytest.approx(m["cpu_step_time_s"], abs=1e-12)
    split = line(console, "GPU time:")
    assert "compute / stall" not in console
    compute, copies, host = (ms(split, w) for w in ("compute", "stalled on copies",
                                                    "waiting for the host CPU"))
    assert compute == pytest.approx(s["compute_time_s"] * 1e3, abs=5e-4)
    assert host == pytest.approx(m["host_cpu_wait_s"] * 1e3, abs=5e-4)
    assert compute + copies + host == pytest.approx(s["iteration_time_s"] * 1e3, abs=2e-3)
    assert copies > 0 and s["stall_time_s"] * 1e3 > copies  # summary.json's stall: both waits
    assert "adam update on the host" in line(console, "iteration:")


def test_gradients_accumulated_on_the_host_print_what_came_back():
    s, console = run(*ZERO, "--policy", "none", "--gradients", "host", "--bucket-size", "8MiB",
                     "--grad-accum", "3", "--no-baselines")
    m = s["model_states"]
    host = line(console, "host CPU step:")
    assert f"{m['gradients_to_gpu_bytes'] / 1e9:.2f} GB of accumulated gradients back" in host
    assert m["gradients_to_gpu_bytes"] == 2 * sum(m["bucket_bytes"])
    _, plain = run(*ZERO, "--policy", "none", "--no-baselines")
    assert "accumulated" not in line(plain, "host CPU step:")


def test_a_zero_offload_run_that_offloads_no_activation_says_so_and_names_no_codec():
    _, console = run("--network", "gpt2_small", "--batch", "1", "--dtype", "float16",
                     "--optimizer", "adam", "--optimizer-states", "host")
    heading = console.splitlines()[0]
    assert "activations: vDNN policy conv offloaded none" in heading
    assert "cDMA plain copies (no codec used)" in heading and "cDMA zvc" not in heading


def test_several_gpus_print_each_gpus_host_step_and_wait():
    s, console = run(*ZERO, "--gpus", "4")
    assert "model_states" not in s and all("model_states" in g for g in s["gpus"])
    assert line(console, "model states:").endswith("(each of 4 GPUs)")
    waits = [g["model_states"]["host_cpu_wait_s"] for g in s["gpus"]]
    assert waits == sorted(waits) and waits[-1] > 3 * waits[0]  # they queue at one CPU
    for g in s["gpus"]:
        step = line(console, f"host CPU step ({g['gpu']}):")
        assert ms(step, ":") == pytest.approx(g["model_states"]["cpu_step_time_s"] * 1e3,
                                              abs=5e-4)
        mine = line(console, f"  {g['gpu']}:")
        assert ms(mine, "waiting for the host CPU") == pytest.approx(
            g["model_states"]["host_cpu_wait_s"] * 1e3, abs=5e-4)
        assert "stall" not in mine.replace("stalled on copies", "")
    slowest = max(s["gpus"], key=lambda g: g["iteration_time_s"])
    assert ms(line(console, "GPU time (slowest of 4 GPUs):"), "waiting for the host CPU") == \
        pytest.approx(slowest["model_states"]["host_cpu_wait_s"] * 1e3, abs=5e-4)
    assert line(console, "gpu tier (largest of 4 GPUs):") and line(console, "host tier:")


def test_the_planner_names_its_two_predictions_apart():
    _, console = run(*ZERO[:-2], "--policy", "auto", "--no-baselines",
                     overrides={"gpu0.hbm": {"capacity": "700MiB"}})
    tensors, placement = line(console, "tensors:"), line(console, "state placement:")
    assert "planner's predicted passes" in tensors and "predicted step" not in tensors
    assert "predicted step" in placement and "predicted passes" not in placement
    assert ms(tensors, "predicted passes") < ms(placement, "predicted step")


def test_a_policy_none_run_names_its_own_policy_beside_the_baselines():
    _, console = run("--network", "digits_cnn", "--policy", "none")
    vdnn = line(console, "vDNN (no comp., policy conv):")
    assert "this run's policy is none" in vdnn and "vDNN policy none" not in vdnn


def test_a_run_that_offloads_though_everything_fits_is_told_what_policy_none_gives():
    s, console = run("--network", "digits_cnn", "--policy", "all")
    oracle = s["baselines"]["oracle"]
    assert s["fits_in_memory"] and oracle["fits_in_memory"] and s["offloaded_bytes"]
    hint = line(console, "hint:")
    assert "policy all offloads though the oracle fits" in hint
    assert f"the oracle's {oracle['iteration_time_s'] * 1e3:.3f} ms" in hint
    assert f"{s['slowdown_vs_oracle']:.2f}x faster" in hint
    # what the hint promises: --policy none (and auto) take the oracle's time
    for policy in ("none", "auto"):
        other, text = run("--network", "digits_cnn", "--policy", policy)
        assert other["iteration_time_s"] == oracle["iteration_time_s"]
        assert "hint:" not in text


def test_no_fits_hint_where_the_oracle_does_not_fit_or_states_are_off_the_gpu():
    s, console = run("--network", "digits_cnn", "--policy", "all",
                     overrides={"gpu0.hbm": {"capacity": "2MiB"},
                                "oracle.gpu0.hbm": {"capacity": "2MiB"}})
    assert not s["baselines"]["oracle"]["fits_in_memory"]
    assert "though the oracle fits" not in console
    s, console = run(*ZERO, "--policy", "all")
    assert s["offloaded_bytes"] and s["slowdown_vs_oracle"] > 1.01
    assert "though the oracle fits" not in console  # the oracle keeps the states on the GPU
    text = console_summary({**s, "policy": "none"})
    assert "though the oracle fits" not in text
