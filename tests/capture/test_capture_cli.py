"""``sst-cdma capture`` (cli.main) on tiny models: profile written, errors one line."""
from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

pytest.importorskip("torch")

from sst_cdma.tools.capture.cli import main  # noqa: E402
from sst_cdma.profiles import DensityProfile, ProfileError, load_samples  # noqa: E402

MODEL_FILE = textwrap.dedent("""
    import torch
    from torch import nn

    def build(width=4):
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(inplace=True),
                             nn.Flatten(), nn.Linear(width * 4 * 4, 5), nn.ReLU())

    NOT_A_MODEL = 42
""")


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(MODEL_FILE)
    return path


def test_a_samples_index_naming_a_missing_file_says_what_to_do(model_file, tmp_path):
    argv = ["--model", f"{model_file}:build", "--input-shape", "2,3,6,6", "--quiet",
            "--samples", str(tmp_path / "s")]
    assert main(argv) == 0
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    (tmp_path / "s" / index["tensors"]["1"]["file"]).unlink()  # a folder copied in part
    with pytest.raises(ProfileError) as info:
        load_samples(tmp_path / "s")
    text = str(info.value)
    assert "index.json: tensors['1'].file:" in text and "is not in" in text
    assert "capture the samples again with 'sst-cdma capture ... --samples DIR'" in text


def test_capture_writes_profile_and_samples(model_file, tmp_path, capsys):
    out = tmp_path / "tiny.json"
    argv = ["--model", f"{model_file}:build", "--model-kwargs", '{"width": 6}',
            "--input-shape", "2,3,6,6", "--batches", "2", "--seed", "4", "--network", "tiny",
            "--progress", "0.5", "--steps", "10", "--output", str(out),
            "--samples", str(tmp_path / "s")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert "density" in lines[0] and lines[1].startswith("1 ") and lines[2].startswith("4 ")
    profile = DensityProfile.load(out)
    assert profile.network == "tiny"
    assert list(profile.tensors) == ["1", "4"]
    assert profile.tensors["1"].sample_shape == (6, 4, 4)
    point = profile.tensors["1"].points[0]
    assert point.progress == 0.5 and 0.0 < point.density < 1.0
    assert set(point.ratios) == {"zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd"}
    prov = profile.provenance
    assert prov.kind == "measured" and prov.steps == 10 and prov.seed == 4
    assert prov.command.startswith("sst-cdma capture --model ")
    assert "--progress 0.5" in prov.command
    samples = load_samples(tmp_path / "s")
    assert samples["1"].shape == (2, 6, 4, 4)
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    assert index["network"] == "tiny"   # --network: a run of another network refuses them
    assert index["tensors"]["1"]["element_type"] == "float32"
    # the saved sample is a real ReLU output of the first batch: non-negative, part zero
    sample = samples["1"]
    assert (sample >= 0).all() and 0 < np.count_nonzero(sample) < sample.size


def test_capture_from_npz_with_import_path(tmp_path, capsys):
    rng = np.random.default_rng(0)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, images=rng.random((10, 1, 8, 8)).astype(np.float32))
    out = tmp_path / "d.json"
    assert main(["--model", "sst_cdma.tools.capture.digits_cnn:DigitsCNN", "--inputs", str(inputs),
                 "--batch-size", "4", "--output", str(out), "--algorithms", "zvc", "-q"]) == 0
    assert capsys.readouterr().out == ""
    profile = DensityProfile.load(out)
    assert profile.network == "DigitsCNN"
    assert list(profile.tensors) == ["relu1", "relu2", "relu3"]
    assert set(profile.tensors["relu2"].points[0].ratios) == {"zvc"}
    assert "10 samples, 3 batch(es)" in profile.provenance.data


@pytest.mark.parametrize("argv, message", [
    (["--input-shape", "1,3"], "the following arguments are required: --model"),
    (["--model", "nocolon", "--input-shape", "1"], "expected MODULE:CALLABLE"),
    (["--model", "no_such_module_xyz:f", "--input-shape", "1"], "cannot import module"),
    (["--model", "{file}:missing", "--input-shape", "1"], "has no attribute 'missing'"),
    (["--model", "{file}:NOT_A_MODEL", "--input-shape", "1"], "neither an nn.Module nor callable"),
    (["--model", "{file}:build", "--input-shape", "2,three"], "--input-shape: expected"),
    (["--model", "{file}:build", "--input-shape", "2,0,3"], "every dimension must be a positive integer"),
    (["--model", "{file}:build"], "one of the arguments --input-shape --inputs is required"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--progress", "1.5"],
     "--progress: 1.5 is not in [0, 1]"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--model-kwargs", "[1]"],
     "--model-kwargs: expected a JSON object"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--model-kwargs", '{"depth": 2}'],
     "calling"),
    (["--model", "{file}:build", "--inputs", "{dir}/two.npz"], "holds 2 arrays (a, b)"),
    (["--model", "{file}:build", "--inputs", "{dir}/absent.npz"], "--inputs: no such file"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--algorithms", "zvc,brotli"],
     "--algorithms: unknown algorithm 'brotli' (registered: zvc, rle, zlib, lz4, zstd, "
     "bplane_zstd)"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--algorithms", ""],
     "--algorithms: names no codec"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--algorithms", " , "],
     "--algorithms: names no codec"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--names", "relu1=bad:name"],
     "--names: 'relu1=bad:name': tensor name 'bad:name' is not a network layer name"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--names", "relu1=../x"],
     "tensor name '../x' is not a network layer name"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--batches", "0"],
     "--batches: must be at least 1"),
    (["--model", "{file}:build", "--input-shape", "2,1,6,6"],
     "inputs[0]: the model cannot take input of shape 2x1x6x6: "),
    (["--model", "{file}:build", "--input-shape", "2,3,9,9"],
     "inputs[0]: the model cannot take input of shape 2x3x9x9: "),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--samples", "{dir}/two.npz"],
     "--samples: {dir}/two.npz exists and is not a folder: the samples go into a folder"),
    (["--model", "{file}:build", "--inputs", "{dir}/pipe.npz"],
     "--inputs: {dir}/pipe.npz: is a FIFO (named pipe), not a regular file"),
    (["--model", "{file}:build", "--input-shape", "1,3,6,6", "--weights", "{dir}/pipe.npz"],
     "--weights: cannot load '{dir}/pipe.npz': is a FIFO (named pipe), not a regular file"),
])
def test_bad_input_is_one_line_error(model_file, tmp_path, capsys, argv, message):
    np.savez(tmp_path / "two.npz", a=np.zeros((1, 3, 6, 6)), b=np.zeros(1))
    os.mkfifo(tmp_path / "pipe.npz")  # the attack: a FIFO no one writes to blocked forever
    message = message.replace("{dir}", str(tmp_path))
    argv = [a.replace("{file}", str(model_file)).replace("{dir}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("sst-cdma capture: error: ")
    assert message in err, err


def test_input_shape_the_model_cannot_take_exits_2_from_the_sst_cdma_command(capsys):
    from sst_cdma.tools.cli.sst_cdma_main import main as sst_cdma

    status = sst_cdma(["capture", "--model", "sst_cdma.tools.capture.digits_cnn:DigitsCNN",
                       "--input-shape", "4,3,8,8", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("sst-cdma capture: error: inputs[0]: "
                                                     "the model cannot take input of shape "
                                                     "4x3x8x8: "), err


def test_help_returns_zero(capsys):
    assert main(["--help"]) == 0
    assert "--input-shape" in capsys.readouterr().out


def test_seed_makes_runs_identical(tmp_path):
    outs = []
    for run in range(2):
        out = tmp_path / f"r{run}.json"
        assert main(["--model", "sst_cdma.tools.capture.digits_cnn:DigitsCNN", "--input-shape",
                     "8,1,8,8", "--seed", "3", "--algorithms", "zvc", "-q", "-o", str(out)]) == 0
        outs.append(DensityProfile.load(out).tensors)
    assert outs[0] == outs[1]


def test_weights_are_loaded(tmp_path, capsys):
    import torch

    from sst_cdma.tools.capture.digits_cnn import DigitsCNN

    model = DigitsCNN()
    with torch.no_grad():
        model.conv1.bias.fill_(-100.0)  # relu1 all zeros once these weights are loaded
    weights = tmp_path / "w.pt"
    torch.save(model.state_dict(), weights)
    out = tmp_path / "w.json"
    base = ["--model", "sst_cdma.tools.capture.digits_cnn:DigitsCNN", "--input-shape", "4,1,8,8",
            "--fill", "rand", "-q"]
    assert main([*base, "--weights", str(weights), "-o", str(out)]) == 0
    profile = DensityProfile.load(out)
    assert profile.density("relu1", 0.0) == 0.0
    assert profile.ratio("relu1", "zvc", 0.0) > 20
    assert f"with weights {weights}" in profile.provenance.model
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert main([*base, "--weights", str(tmp_path / "bad.pt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sst-cdma capture: error: --weights: cannot load") and err.count("\n") == 1


def test_names_capture_any_module_under_the_network_definitions_tensor_names(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["--model", "sst_cdma.tools.capture.digits_cnn:DigitsCNN", "--input-shape", "4,1,8,8",
            "--names", "relu1=conv1,pool,relu3=fc1", "--network", "digits_cnn",
            "--output", str(out), "--quiet"]
    assert main(argv) == 0
    profile = DensityProfile.load(out)
    assert list(profile.tensors) == ["conv1", "pool", "fc1"]
    assert main([*argv[:4], "--names", "relu1=", "--quiet"]) == 2
    assert "--names: 'relu1=' is not MODULE=TENSOR" in capsys.readouterr().err
