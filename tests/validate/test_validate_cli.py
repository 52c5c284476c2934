"""``sst-cdma validate``: the reduced run on the CPU end to end (the same code as on a GPU), the
files it writes read back by the simulator's own readers, and the one-line refusals."""
from __future__ import annotations

import json
import math
import sys
import types

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

import sst_cdma  # noqa: E402
from sst_cdma.model.cpu_adam import load_cpu_adam  # noqa: E402
from sst_cdma.tools.cli.sst_cdma_main import main  # noqa: E402
from sst_cdma.tools.cli.topology_list import path_of  # noqa: E402
from sst_cdma.tools.validate import cli  # noqa: E402
from sst_cdma.tools.validate.device import probe_for  # noqa: E402
from sst_cdma.tools.validate.plan import Progress  # noqa: E402
from workloads.layer_times import load_layer_times  # noqa: E402
from workloads.loader import load_network  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One reduced run, compared with the pascal preset (the CPU maps to no preset)."""
    out = tmp_path_factory.mktemp("v") / "out"
    assert main(["validate", "--cpu", "--gpu", "pascal", "--quiet", "-o", str(out)]) == 0
    return out


def test_the_reduced_run_writes_every_file(run):
    names = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()}
    assert {"provenance.json", "measurements.json", "cpu_adam.json", "comparison.csv",
            "comparison.md", "calibration/gpus.csv", "calibration/conv_train_fp32.csv",
            "calibration/gemm_train_fp32.csv", "calibration/bandwidth.csv",
            "calibration/conv_train_bf16_tensor_op.csv", "networks/tiny_gpt_block.yaml",
            "steps/digits_cnn_offload.csv", "steps/tiny_gpt_block_no_offload.csv",
            "layer_times/digits_cnn_float32.json",
            "layer_times/tiny_gpt_block_bfloat16.json"} <= names
    record = json.loads((run / "provenance.json").read_text())
    assert record["mode"] == "cpu (reduced)" and record["preset"] == "pascal"
    assert record["preset_from"] == "--gpu" and record["device"]["name"].startswith("CPU ")
    assert record["software"]["torch"] == torch.__version__
    assert "validate --cpu" in record["command"]
    from sst_cdma.tools.validate.plan import GPU_SHARES
    parts = json.loads((run / "measurements.json").read_text())["part_seconds"]
    assert set(parts) == set(GPU_SHARES)  # every part ran, under the name its share has
    # the run wrote into a staging folder: no path in its files names it
    assert ".partial-" not in (run / "measurements.json").read_text()
    assert not list(run.parent.glob("out.partial-*"))


@pytest.mark.parametrize("network,batch,dtype", [("digits_cnn", 4, "float32"),
                                                 ("tiny_gpt_block", 2, "bfloat16")])
def test_the_layer_times_files_run_in_the_simulator(run, network, batch, dtype):
    path = run / "layer_times" / f"{network}_{dtype}.json"
    times = load_layer_times(path)
    definition = network if network == "digits_cnn" else str(run / "networks" / f"{network}.yaml")
    times.check(load_network(definition), batch, dtype)
    assert times.gpu == ""  # measured on the CPU: no preset is the measured device
    result = sst_cdma.run(path_of("pascal_cdma"), ["--network", definition, "--batch",
                                                   str(batch), "--dtype", dtype, "--policy",
                                                   "none", "--no-baselines", "--layer-times",
                                                   str(path)])
    kernels = {(e["layer"], e["phase"]): e["kernel_ps"]
               for e in result.reports["summary"]["layers"]}
    assert kernels[(next(iter(times.times_ps)), "forward")] == \
        next(iter(times.times_ps.values()))["fwd"]


def test_the_cpu_adam_file_is_one_the_simulator_reads(run):
    profile = load_cpu_adam(run / "cpu_adam.json")
    assert profile.params_per_s_per_core > 0 and profile.size_params == 64 * 1024


def test_the_comparison_has_each_layer_and_step_measured_and_simulated(run):
    table = pd.read_csv(run / "comparison.csv")
    layers = table[table["part"] == "layers"]
    configs = set(layers["config"])
    assert configs == {"digits_cnn batch 4 bfloat16", "digits_cnn batch 4 float32",
                       "tiny_gpt_block batch 2 bfloat16", "tiny_gpt_block batch 2 float32"}
    cnn = layers[layers["config"] == "digits_cnn batch 4 float32"]
    assert len(cnn) == 2 * 9 + 2  # nine layers, forward and backward, and the totals
    total = cnn[cnn["layer"] == "(all)"].set_index("what")
    each = cnn[cnn["layer"] != "(all)"].groupby("what")[["measured", "simulated"]].sum()
    assert ((total[["measured", "simulated"]] - each).abs() < 1e-9).all().all()
    assert (layers["measured"] > 0).all() and (layers["simulated"] > 0).all()
    steps = table[(table["part"] == "step") & (table["what"] == "step")]
    assert len(steps) == 4 and (steps["simulated"] > 0).all()
    ratio = steps["simulated"] / steps["measured"]
    assert ((ratio - steps["simulated_over_measured"]).abs() < 1e-9).all()
    assert len(table[table["part"] == "timeline"]) > 0
    offloaded = table[(table["part"] == "step") & (table["what"] == "offloaded")]
    assert len(offloaded) == 2 and (offloaded["measured"] > 0).all()
    assert offloaded["config"].str.endswith("activations offloaded").all()
    text = (run / "comparison.md").read_text()
    assert "## Layers" in text and "## Training steps" in text
    assert "the reduced run on the CPU" in text


def test_without_a_gpu_and_without_cpu_it_is_one_line_and_writes_nothing(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["validate", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sst-cdma validate: error: no CUDA GPU")
    assert "--cpu" in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,says", [
    (["--cpu", "--budget-s", "5"], "--budget-s: must be 30 to 3600 seconds, got 5"),
    (["--cpu", "--gpu", "h900"], "--gpu"),
    (["--cpu", "-o", "/no/such/folder/out"], "--output: folder '/no/such/folder' does not exist"),
    (["--cpu", "--device", "cuda:1"], "--device cuda:1: not with --cpu"),
    (["--cpu", "-o", "FILE"], "FILE: is a file, not a folder"),
])
def test_a_bad_option_is_one_line(tmp_path, capsys, argv, says, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("mine")
    if "-o" not in argv:
        argv = argv + ["-o", str(tmp_path / "out")]
    assert main(["validate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_validate_is_registered_beside_the_other_pytorch_tools(monkeypatch):
    seen = []
    fake = types.ModuleType("sst_cdma.tools.validate.cli")
    fake.main = lambda argv: seen.append(argv) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sst_cdma.tools.validate.cli", fake)
    assert main(["validate", "--cpu", "-o", "x"]) == 7
    assert seen == [["--cpu", "-o", "x"]]


def test_without_a_preset_the_run_says_so_and_simulates_nothing(tmp_path):
    progress = Progress(60.0, None)
    text = cli._compare(None, probe_for(True), "CPU x", cli.Measured(), tmp_path, progress)
    assert "no GPU preset matches 'CPU x': give --gpu PRESET" in text
    table = pd.read_csv(tmp_path / "comparison.csv")
    assert table["simulated"].map(lambda v: math.isnan(v)).all()


def _page() -> str:
    from pathlib import Path
    return (Path(__file__).resolve().parents[2] / "docs" / "validate.md").read_text()


def test_the_no_gpu_line_docs_validate_md_quotes_is_what_validate_prints(tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["validate", "-o", str(tmp_path / "out")]) == 2
    line = capsys.readouterr().err.strip()
    assert f"```\n{line}\n```" in _page()


def test_docs_validate_md_gives_the_plans_budget_and_shares():
    from sst_cdma.tools.validate.plan import DEFAULT_BUDGET_S, GPU_SHARES, MIN_BUDGET_S
    page = " ".join(_page().split())
    assert math.isclose(sum(GPU_SHARES.values()), 1.0)
    shares = ", ".join(f"{part.replace('-', ' ')} {round(share * 100)}%"
                       for part, share in GPU_SHARES.items())
    assert shares == ("layers 30%, kernels 10%, bandwidth 4%, copies 6%, training 15%, "
                      "cpu adam 15%, simulation 20%")
    assert (f"`--budget-s` ({MIN_BUDGET_S:g} to {cli.MAX_BUDGET_S:g} s, default "
            f"{DEFAULT_BUDGET_S:g}") in page
    assert ("layers 30%, kernels one by one 10%, device bandwidth 4%, host copies 6%, "
            "training steps 15%, CPU Adam 15%, simulation 20%") in page


def test_the_reduced_runs_calibration_folder_loads_in_the_calibration_loader(run, monkeypatch):
    from dataclasses import replace
    from sst_cdma.model import calibration
    from sst_cdma.model.gpus import GPUS
    name = (run / "calibration" / "gpus.csv").read_text().splitlines()[1].split(",")[0]
    assert name.startswith("CPU_")
    monkeypatch.setitem(calibration.GPUS, "measured_here",
                        replace(GPUS["pascal"], calibration=name, architecture="Pascal"))
    sets = calibration.load(run / "calibration")
    assert sets[name].rows("fwd") == 2 and sets[name].rows("bwd_data") == 1  # conv1: no dx
    assert sets[name].rows("gemm") == 5  # the tiny block's distinct linear shapes


def test_a_stopped_run_leaves_no_files_and_no_staging_folder(tmp_path, capsys, monkeypatch):
    def stop(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_compare", stop)  # after every measurement, before the end
    assert main(["validate", "--cpu", "-q", "-o", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err == "sst-cdma validate: interrupted\n"
    assert list(tmp_path.iterdir()) == []
