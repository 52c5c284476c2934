"""--policy auto places the model states, end to end: on the GPU while they fit, on the host
(ZeRO-Offload) once they do not, its predicted step against the simulated one, the verdicts
in the summary and on the console, a placement the options pin, and none that fits."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "pascal_cdma.py"
AUTO = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--optimizer", "adam",
        "--policy", "auto", "--no-baselines"]


def run(options, gpu_memory: str = "16GiB", host_memory: str = ""):
    out = io.StringIO()
    overrides = {"gpu0.hbm": {"capacity": gpu_memory}}
    if host_memory:
        overrides["host"] = {"pinned_capacity": host_memory}
    result = sst_cdma.run(TOPOLOGY, options, console=out, overrides=overrides)
    return result, out.getvalue()


def planner(result):
    return result.reports["summary"]["plan"]["planner"]


def test_states_stay_on_the_gpu_while_they_fit():
    result, console = run(AUTO)
    verdicts = planner(result)["model_states"]
    assert verdicts[0] == {**verdicts[0], "placement": "every model state on the GPU",
                           "chosen": True, "reason": "the fastest that fits"}
    assert "model_states" not in result.reports["summary"]  # nothing moved off the GPU
    assert "state placement: chose every model state on the GPU" in console
    check_summary(result.reports["summary"])


def test_states_go_to_the_host_when_the_gpu_cannot_hold_them_and_the_step_is_as_predicted():
    """AlexNet's 61M parameters need about 1 GiB of model states on the GPU (fp16 weights and
    gradients, fp32 master weights and moments): in 700 MiB they cannot stay, so the planner
    puts the optimizer states on the host, and its predicted step is the simulated one
    (nothing else competes for the link here)."""
    result, console = run(AUTO, gpu_memory="700MiB")
    summary = result.reports["summary"]
    verdicts = planner(result)["model_states"]
    chosen = [v for v in verdicts if v["chosen"]]
    assert len(chosen) == 1 and chosen[0]["placement"] == "optimizer-states host"
    assert verdicts[0]["predicted_step_s"] is None
    assert verdicts[0]["reason"].startswith("does not fit the GPU: ")
    assert summary["model_states"]["placement"]["optimizer_states"] == "host"
    assert summary["fits_in_memory"]
    assert chosen[0]["predicted_step_s"] == summary["iteration_time_s"]
    assert "state placement: chose optimizer-states host" in console
    assert "every model state on the GPU: does not fit the GPU" in console
    check_summary(summary)


def test_gradients_accumulated_on_the_host_are_weighed_at_the_simulated_step():
    """With two micro-batches the planner weighs the gradients on the host too, accumulating
    there, and prices it at the step the simulation of that placement takes (nothing else
    competes for the link here)."""
    result, _ = run([*AUTO, "--grad-accum", "2"], gpu_memory="700MiB")
    verdicts = {v["placement"]: v for v in planner(result)["model_states"]}
    weighed = verdicts["optimizer-states host, gradients host"]["predicted_step_s"]
    pinned, _ = run([*AUTO, "--grad-accum", "2", "--optimizer-states", "host", "--gradients",
                     "host"], gpu_memory="700MiB")
    summary = pinned.reports["summary"]
    assert summary["model_states"]["gradients_to_gpu_bytes"] > 0
    assert weighed == summary["iteration_time_s"]
    # the copies of the accumulation cost more than the gradients kept on the GPU
    assert weighed > verdicts["optimizer-states host"]["predicted_step_s"]


def test_a_placement_the_options_give_is_kept_and_its_activations_planned():
    result, _ = run([*AUTO, "--optimizer-states", "host"], gpu_memory="700MiB")
    summary = result.reports["summary"]
    assert "model_states" not in planner(result)  # nothing weighed: the options chose
    assert summary["model_states"]["placement"]["optimizer_states"] == "host"
    assert summary["fits_in_memory"]


def test_no_placement_that_fits_is_one_line_naming_each():
    with pytest.raises(RunError) as err:
        run(AUTO, gpu_memory="200MiB", host_memory="100MiB")
    message = str(err.value)
    assert "\n" not in message
    assert "no placement of the model states fits" in message
    assert "every model state on the GPU: does not fit the GPU" in message
    assert "does not fit the host's pinned memory" in message
