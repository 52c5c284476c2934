"""Compressed model-state copies (``--state-compression``): the gradient and weight copies of
the host CPU's step cross the link at the model-state profile's ratio, through the engine's
codec (``engine``), and with ``host`` the host CPU's codec also decompresses the gradients and
compresses the weights. Where the link bounds the step compression shortens it; where the CPU
does, the CPU's codec lengthens it; the closed form matches the simulation to the picosecond
in every mode where nothing interferes."""
from __future__ import annotations

import io
import json
import math

import pytest

import sst_cdma
from components.summary_schema import check_summary
from sst_cdma.model.zero_offload import from_simulation
from sst_cdma.profiles.model_states import model_state_ratio
from sst_cdma.engine.runner import RunError

TOPOLOGY = "topologies/pascal_cdma.py"
CODEC = "bplane_zstd"
BASE = ["--network", "alexnet", "--batch", "16", "--dtype", "bfloat16", "--policy", "none",
        "--optimizer", "adam", "--optimizer-states", "host", "--bucket-size", "8MiB",
        "--no-contention"]
#: a slow CPU Adam (per core, 32 cores) whose DRAM traffic leaves the host DRAM unsaturated:
#: the CPU's steps bound the step
CPU_BOUND = ("--cpu-adam-throughput", "1e7")
#: a fast CPU Adam with host DRAM to feed it (faster than any platform's: the override below,
#: which the host CPU's step reads too): the gradient and weight copies bound the step
LINK_BOUND = ("--cpu-adam-throughput", "1e9")
FAST_DRAM = {"host": {"bandwidth": "2TB/s"}}


def simulate(repo, mode, cpu, *extra, baselines=False):
    opts = [*BASE, *cpu, "--algorithm", "none" if mode == "none" else CODEC,
            "--state-compression", mode, *extra, *([] if baselines else ["--no-baselines"])]
    return sst_cdma.run(repo / TOPOLOGY, opts, console=io.StringIO(),
                        overrides=FAST_DRAM if cpu == LINK_BOUND else None)


@pytest.mark.parametrize("mode", ["engine", "host"])
def test_the_copies_cross_the_link_at_the_profiles_ratio(repo, mode):
    states = simulate(repo, mode, CPU_BOUND).results["gpu0"].model_states
    ratios = {role: model_state_ratio(role, CODEC, "bfloat16") for role in ("gradients",
                                                                             "weights")}
    assert states["state_compression"] == {"mode": mode, "codec": CODEC, "dtype": "bfloat16",
                                           "gradients_ratio": ratios["gradients"],
                                           "weights_ratio": ratios["weights"]}
    buckets = states["bucket_bytes"]
    assert states["gradients_wire_bytes"] == sum(math.ceil(b / ratios["gradients"])
                                                 for b in buckets)
    assert states["weights_wire_bytes"] == sum(math.ceil(b / ratios["weights"]) for b in buckets)
    # the raw bytes the host receives are the same
    assert states["gradients_to_host_bytes"] == sum(buckets)


@pytest.mark.parametrize("cpu", [CPU_BOUND, LINK_BOUND], ids=["cpu-bound", "link-bound"])
@pytest.mark.parametrize("mode, extra", [
    ("none", ()), ("engine", ()), ("host", ()), ("engine", ("--delayed-update",)),
    ("host", ("--delayed-update",)), ("host", ("--weights", "host", "--gradients", "host")),
], ids=lambda v: v if isinstance(v, str) else " ".join(v) or "-")
def test_step_equals_closed_form(repo, mode, extra, cpu):
    result = simulate(repo, mode, cpu, *extra)
    gpu = result.results["gpu0"]
    assert gpu.completed
    assert gpu.iteration_time_ps == from_simulation(result.simulation, "gpu0").step_ps


def step(repo, mode, cpu):
    return simulate(repo, mode, cpu).results["gpu0"].iteration_time_ps


def test_where_the_link_bounds_the_step_the_engine_shortens_it(repo):
    none, engine = step(repo, "none", LINK_BOUND), step(repo, "engine", LINK_BOUND)
    ratio = model_state_ratio("gradients", CODEC, "bfloat16")
    assert engine < none
    # no more than the bytes saved: the kernels are the same
    assert engine > none / ratio


def test_where_the_cpu_bounds_the_step_the_cpu_codec_lengthens_it(repo):
    none, engine, host = (step(repo, mode, CPU_BOUND) for mode in ("none", "engine", "host"))
    states = simulate(repo, "host", CPU_BOUND).results["gpu0"].model_states
    assert engine <= none < host
    # the CPU's codec time is on the critical path (the step runs after the backward pass,
    # alone): against the engine's codec, the same bytes on the link, the step grows by all
    # of it
    assert host - engine == states["cpu_codec_time_ps"] > 0


def test_the_engine_mode_costs_the_cpu_nothing_and_host_mode_its_codec(repo):
    engine = simulate(repo, "engine", CPU_BOUND).results["gpu0"].model_states
    host = simulate(repo, "host", CPU_BOUND).results["gpu0"].model_states
    assert engine["cpu_codec_time_ps"] == 0
    assert host["cpu_step_alone_ps"] - engine["cpu_step_alone_ps"] == host["cpu_codec_time_ps"]


def test_the_summary_and_console_report_it_and_the_baselines_run_raw(repo, tmp_path):
    out = io.StringIO()
    result = sst_cdma.run(repo / TOPOLOGY, [*BASE, *CPU_BOUND, "--algorithm", CODEC,
                                            "--state-compression", "host"],
                          console=out, output_directory=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert check_summary(summary) == []
    states = summary["model_states"]
    assert states["state_compression"]["mode"] == "host"
    assert states["cpu_codec_time_s"] > 0
    assert "state compression:" in out.getvalue()
    # vDNN's engines have no codec: its model-state copies are raw
    vdnn = result.results["vdnn.gpu0"].model_states
    assert "state_compression" not in vdnn
    assert vdnn["gradients_to_host_bytes"] == states["gradients_to_host_bytes"]


def test_none_leaves_the_result_as_it_was(repo):
    plain = sst_cdma.run(repo / TOPOLOGY, [*BASE, *CPU_BOUND, "--algorithm", CODEC,
                                           "--no-baselines"], console=io.StringIO())
    none = simulate(repo, "none", CPU_BOUND, "--algorithm", CODEC)
    assert plain.results["gpu0"].iteration_time_ps == none.results["gpu0"].iteration_time_ps
    assert "state_compression" not in none.results["gpu0"].model_states


@pytest.mark.parametrize("options, words", [
    (["--state-compression", "engine", "--algorithm", "none"],
     "--state-compression engine: the copies go through the cDMA engine's codec, and the "
     "engine's codec slot is empty (a plain copy engine)"),
    (["--state-compression", "host", "--algorithm", CODEC],
     "--state-compression host compresses the gradient and weight copies of the host CPU's "
     "step: it needs --optimizer-states host"),
    (["--state-compression", "cpu"], "--state-compression"),
], ids=["no codec", "states on the gpu", "unknown mode"])
def test_a_bad_option_is_one_line_naming_it(repo, options, words):
    # the states on the GPU unless the case's options move them
    base = BASE[:BASE.index("--optimizer-states")] if "host" in options else BASE
    with pytest.raises(RunError) as err:
        sst_cdma.run(repo / TOPOLOGY, [*base, *options, "--no-baselines"],
                     console=io.StringIO())
    assert words in str(err.value) and "\n" not in str(err.value)
