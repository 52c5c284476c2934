"""Bad inputs of issue #12: each is refused with one line naming the option (or file) and the
fault, and ``sst`` exits non-zero."""
from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from sst_in_process import run_sst

import sst_cdma
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"


def run(*opts: str, topology: Path = PASCAL, **kwargs):
    """Run a topology in-process, its console captured."""
    console = io.StringIO()
    return sst_cdma.run(topology, list(opts), console=console, **kwargs), console.getvalue()


def refused(*opts: str, topology: Path = PASCAL, **kwargs) -> str:
    """The one-line refusal of a run (the RunError as the ``sst`` command prints it)."""
    with pytest.raises(RunError) as err:
        run(*opts, topology=topology, **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def sst(*args: object, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The ``sst`` command (its console script's main, in this process)."""
    return run_sst(*args, cwd=cwd)


# -- 17: NaN and infinity ----------------------------------------------------------------------
@pytest.mark.parametrize("opts,message", [
    (["--progress", "nan"], "argument --progress: 'nan' is not a finite number"),
    (["--progress", "inf"], "argument --progress: 'inf' is not a finite number"),
    (["--compute-efficiency", "nan"],
     "argument --compute-efficiency: 'nan' is not a finite number"),
    (["--compute-efficiency=-inf"],
     "argument --compute-efficiency: '-inf' is not a finite number"),
    (["--codec-unit-throughput", "nan"], "argument --codec-unit-throughput: 'nan' is not a number"),
    (["--codec-unit-throughput", "1e400GB/s"],
     "argument --codec-unit-throughput: '1e400GB/s' is too large"),
])
def test_nan_and_infinity_are_refused_in_model_options(opts, message):
    assert message in refused("--no-baselines", "--network", "alexnet", *opts)


def test_nan_in_an_element_param_override_is_refused():
    text = refused("--no-baselines", "--network", "alexnet", "--kernel-model", "roofline",
                   overrides={"gpu0": {"peak_flops": "nan"}})
    assert "'peak_flops'" in text and "'nan' is not a finite number" in text


# -- 5 and 12: switches, buffers, bursts, links, the PHOLD torus -------------------------------
@pytest.mark.parametrize("opts,message", [
    (["--gpus-per-switch", "-1"], "--gpus-per-switch must be >= 0 (0: no switch), got -1"),
    (["--mode", "chunk", "--burst", "2MiB", "--buffer", "1MiB"],
     "--buffer 1MiB is smaller than one --burst (2MiB)"),
    (["--mode", "chunk", "--burst", "8MiB"], "--buffer 4MiB is smaller than one --burst (8MiB)"),
    (["--mode", "chunk", "--burst", "1B"], "argument --burst: '1B' must be >= 4096 B"),
    (["--mode", "chunk", "--burst", "4095B", "--buffer", "1MiB"],
     "argument --burst: '4095B' must be >= 4096 B"),
    (["--burst", "1MiB"], "--burst contradicts --mode flow"),
    (["--buffer", "8MiB"], "--buffer contradicts --mode flow"),
    (["--burst", "lots"], "--burst: "),
    (["--buffer", "-1MiB"], "--buffer: "),
    (["--link", "nvlink2x3", "--pcie-gen", "4"],
     "--pcie-gen 4 contradicts --link nvlink2x3: the generation applies to a PCIe host link"),
    (["--gpu", "volta", "--pcie-gen", "3"],
     "--pcie-gen 3 contradicts --link nvlink2x3"),
    (["--link", "pcie4x16", "--pcie-gen", "5"],
     "--pcie-gen 5 contradicts --link pcie4x16 (PCIe gen 4 x16): give one of them (--link "
     "pcie5x16 is gen 5 x16)"),
    (["--link", "nvlink2x3", "--gpus", "2", "--gpus-per-switch", "2"],
     "--gpus-per-switch 2 contradicts --link nvlink2x3"),
    (["--compute-efficiency", "0.5"], "--compute-efficiency contradicts --kernel-model fitted"),
    (["--functional"], "--functional needs --tensors"),
    (["--network", "nothere.yaml"], "model option error: --network nothere.yaml: no such file"),
    (["--network", "vgg61"], "unknown network 'vgg61' (did you mean 'vgg16'?) (one of "),
    (["--netwrok", "vgg16", "--bacth", "3"], "unrecognized arguments: --netwrok vgg16 --bacth 3 "
     "(--netwrok: did you mean --network?; --bacth: did you mean --batch?)"),
])
def test_inconsistent_system_options_are_refused(opts, message):
    text = refused("--no-baselines", "--network", "alexnet", *opts)
    assert message in text and "pascal_cdma.py" in text


def test_the_smallest_burst_and_a_one_burst_buffer_run():
    result, _ = run("--no-baselines", "--network", "digits_cnn", "--batch", "64", "--policy",
                    "all", "--mode", "chunk", "--burst", "4KiB", "--buffer", "4KiB")
    assert result.reports["summary"]["iteration_time_s"] > 0


@pytest.mark.parametrize("params,message", [
    ({"burst": "1KiB"}, "'burst': '1KiB' must be >= 4096"),
    # the engine's own rule, met where its params are checked: the overrides are named as
    # the params they set, not as the flags the user did not type
    ({"burst": "64KiB", "buffer": "32KiB"}, "gpu0.dma (cdma.CDMAEngine): buffer=32KiB is "
                                            "smaller than one burst (64KiB): the staging "
                                            "buffer must hold a burst"),
])
def test_the_engine_params_refuse_the_same_bursts(params, message):
    text = refused("--no-baselines", "--network", "alexnet", overrides={"gpu0.dma": params})
    assert message in text


def test_nvlink_alone_and_pcie_generations_still_run():
    run("--no-baselines", "--network", "digits_cnn", "--link", "nvlink2x3")
    run("--no-baselines", "--network", "digits_cnn", "--pcie-gen", "5")
    # the generation of the link given: nothing contradicts
    run("--no-baselines", "--network", "digits_cnn", "--link", "pcie3x16", "--pcie-gen", "3")


@pytest.mark.parametrize("opts,message", [
    (["--size", "0"], "--size must be >= 1 (the torus side), got 0"),
    (["--size", "-3"], "--size must be >= 1 (the torus side), got -3"),
    (["--events", "-1"], "'initial_events': '-1' must be >= 0"),   # the element's bound
    (["--size", "x"], "argument --size: invalid int value: 'x'"),
])
def test_phold_refuses_an_empty_torus(opts, message):
    text = refused(*opts, topology=REPO / "topologies" / "phold_torus.py")
    assert message in text and "phold_torus.py" in text


def test_sst_prints_one_line_and_exits_non_zero():
    proc = sst("topologies/phold_torus.py", "--", "--size", "0")
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "--size must be >= 1" in proc.stderr
    proc = sst("topologies/pascal_cdma.py", "--", "--mode", "chunk", "--burst", "1B")
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "argument --burst: '1B'" in proc.stderr


# -- 1: baselines of a --workload stream -------------------------------------------------------
@pytest.fixture(scope="module")
def digits_stream(tmp_path_factory) -> Path:
    """A digits_cnn stream as ``python -m sst_cdma.tools.workloads render`` writes it."""
    from workloads import render_stream

    path = tmp_path_factory.mktemp("stream") / "digits.stream"
    path.write_text(render_stream("digits_cnn", 64, "float32", "all"), encoding="utf-8")
    return path


def test_a_workload_stream_refuses_baselines_of_another_network(digits_stream):
    text = refused("--workload", str(digits_stream))
    assert "--workload needs --no-baselines" in text and "pascal_cdma.py" in text
    proc = sst("topologies/pascal_cdma.py", "--", "--workload", digits_stream)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "--no-baselines" in proc.stderr


def test_a_workload_stream_runs_without_baselines_and_claims_no_speed_up(digits_stream):
    result, console = run("--workload", str(digits_stream), "--no-baselines")
    summary = result.reports["summary"]
    assert summary["network"] == "digits_cnn" and summary["allocation"] == "stream"
    assert "baselines" not in summary
    assert "speedup_vs_vdnn" not in summary and "slowdown_vs_oracle" not in summary
    assert "speed-up" not in console and "oracle" not in console


@pytest.mark.parametrize("opts,message", [
    (["--engines", "2"], "(--engines is now --codec-units)"),
    (["--engine-throughput=4GB/s"], "(--engine-throughput is now --codec-unit-throughput)"),
])
def test_a_renamed_model_option_says_its_new_name(opts, message):
    assert message in refused("--no-baselines", *opts)


def test_a_huge_batch_is_named_as_given_and_refused():
    text = refused("--no-baselines", "--network", "alexnet", "--batch", "1e15")
    assert "at batch 1000000000000000, more than the GPU memory" in text
    assert "implausibly" not in text


@pytest.mark.parametrize("batch", ["1e23", "1e400", str(2**53 + 1)])
def test_a_batch_past_what_float64_counts_is_refused_at_the_option(batch):
    # the attack: a batch the kernel model cannot turn into a float (1e400 overflowed there)
    text = refused("--no-baselines", "--network", "alexnet", "--batch", batch)
    assert f"argument --batch: '{batch}' must be <= {2**53} (a batch is a count the model " \
           "multiplies in float64, which holds whole numbers exactly only up to 2**53)" in text
