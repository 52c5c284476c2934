"""The small transformers: every saved tensor captured under the convention's names, float32
and bfloat16 ratios, a few training steps, and ``sst-cdma capture --checkpoint`` agreeing with
the in-process capture. (The shipped runs are far longer: not run here.)"""
from __future__ import annotations

import json
import shlex

import pytest

torch = pytest.importorskip("torch")

from sst_cdma import codecs  # noqa: E402
from sst_cdma.tools.capture import CaptureError, capture_activations  # noqa: E402
from sst_cdma.tools.capture.cli import main as capture_main  # noqa: E402
from sst_cdma.tools.capture.text_data import load_corpus  # noqa: E402
from sst_cdma.tools.capture.text_model import TextConfig, TextTransformer, text_model  # noqa: E402
from sst_cdma.tools.capture.text_train import (TrainOptions, capture_command,  # noqa: E402
                                         train_and_profile)
from sst_cdma.codecs.registry import algorithm_names  # noqa: E402
from sst_cdma.codecs.sampling import bfloat16_words  # noqa: E402
from sst_cdma.profiles import DensityProfile  # noqa: E402

TINY = dict(blocks=2, hidden=16, heads=2, ffn=32, seq=16)
ROLES = ["ln1", "qkv", "scores", "probs", "context", "proj", "res1", "ln2"]


def tokens(n: int = 2, seq: int = 16) -> torch.Tensor:
    return torch.randint(0, 256, (n, seq), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_capture_names_follow_the_convention(activation):
    ffn = ["fc1", "fc2", "res2"] if activation == "relu" else ["fc1", "act", "fc2", "res2"]
    expected = ["embed", *(f"blk{i}/{r}" for i in range(2) for r in ROLES + ffn), "ln_f",
                "lm_head"]
    torch.manual_seed(0)
    model = text_model(activation, **TINY)
    assert list(model.capture_names().values()) == expected
    result = capture_activations(model, tokens(), algorithms=("zvc",))
    assert list(result.layers) == expected  # the model's own names by default, forward order
    shapes = {n: layer.sample_shape for n, layer in result.layers.items()}
    assert shapes["blk0/scores"] == shapes["blk1/probs"] == (2, 16, 16)
    assert shapes["blk0/qkv"] == (16, 48) and shapes["blk1/fc1"] == (16, 32)
    assert shapes["lm_head"] == (16, 256)


def test_relu_fc1_is_post_relu_and_probs_are_causal():
    torch.manual_seed(0)
    model = text_model("relu", **TINY)
    x = tokens()
    pre = {}
    handle = model.blocks[0].fc1.register_forward_hook(
        lambda m, a, out: pre.update(fc1=out.detach().clone()))
    result = capture_activations(model, x, algorithms=("zvc",))
    handle.remove()
    expected = float((pre["fc1"] > 0).float().mean())
    assert result.layers["blk0/fc1"].density == pytest.approx(expected)
    assert result.layers["blk0/fc1"].density < 0.75
    # softmax of masked scores: the upper triangle is exactly zero
    s = 16
    assert result.layers["blk0/probs"].density <= (s + 1) / (2 * s) + 1e-12
    assert result.layers["blk0/scores"].density == 1.0  # -inf is not a zero


def test_bfloat16_ratios_are_the_codecs_on_rounded_words():
    torch.manual_seed(0)
    model = text_model("gelu", **TINY)
    x = tokens()
    seen = {}
    handle = model.blocks[1].act.register_forward_hook(
        lambda m, a, out: seen.update(act=out.detach().numpy().copy()))
    result = capture_activations(model, x, also_dtypes=("bfloat16",))
    handle.remove()
    layer = result.layers["blk1/act"]
    words = bfloat16_words(seen["act"])
    for algorithm in algorithm_names():
        size = codecs.compressed_size(words, algorithm, element_type="bfloat16")
        assert layer.ratios_in("bfloat16")[algorithm] == pytest.approx(words.nbytes / size)
        assert layer.ratio(algorithm) == pytest.approx(
            seen["act"].nbytes / codecs.compressed_size(seen["act"], algorithm))
    point = result.points(0.5)["blk1/act"]
    assert set(point.ratios_by_dtype) == {"bfloat16"}
    with pytest.raises(CaptureError, match="not measured in float16"):
        layer.ratios_in("float16")


def test_also_dtypes_refuses_what_it_cannot_convert():
    model = text_model("gelu", **TINY)
    with pytest.raises(CaptureError, match="also_dtypes: cannot measure in 'int8'"):
        capture_activations(model, tokens(), also_dtypes=("int8",))
    with pytest.raises(CaptureError, match="only float32 tensors can also be measured"):
        capture_activations(model.to(torch.bfloat16), tokens(), also_dtypes=("bfloat16",))


def test_the_corpus_is_the_stdlib_split_by_file():
    corpus = load_corpus()
    assert "standard library" in corpus.description and len(corpus.train) > 1_000_000
    a, _ = corpus.held_out(4, 64)
    b, _ = corpus.held_out(4, 64)
    assert torch.equal(a, b)
    x, y = corpus.batch(torch.Generator().manual_seed(0), 3, 64)
    assert x.shape == y.shape == (3, 64) and torch.equal(x[:, 1:], y[:, :-1])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    save = tmp_path_factory.mktemp("ckpt")
    options = TrainOptions(config=TextConfig(**TINY), batch=2, capture_windows=2,
                           valid_windows=4, threads=1)
    profile = train_and_profile("relu", 4, (0.0, 0.5, 1.0), seed=3, options=options,
                                save_dir=save)
    return profile, save


def test_a_few_steps_make_a_complete_measured_profile(tiny_run):
    profile, _ = tiny_run
    profile = DensityProfile.from_dict(json.loads(profile.to_json()))  # validates
    assert profile.network == "text_relu" and profile.dtype == "float32"
    prov = profile.provenance
    assert prov.kind == "measured" and prov.steps == 4 and prov.seed == 3
    assert "text_model" in prov.model and "activation relu" in prov.model
    assert "standard library" in prov.data
    assert prov.command.startswith("python -m sst_cdma.tools.capture.text_train --activation relu")
    assert "bits per byte" in prov.notes
    assert {"torch", "numpy", "sst-cdma", "python"} <= set(prov.software)
    for name, tensor in profile.tensors.items():
        assert [p.progress for p in tensor.points] == [0.0, 0.5, 1.0]
        for point in tensor.points:
            assert set(point.ratios) == set(algorithm_names()), name
            assert set(point.ratios_by_dtype["bfloat16"]) == set(algorithm_names()), name


def test_sst_cdma_capture_with_checkpoints_measures_the_same_profile(tiny_run, tmp_path, capsys):
    profile, save = tiny_run
    command = capture_command("relu", str(save), (0.0, 0.5, 1.0), 4, 3)
    argv = shlex.split(command)[2:]
    kwargs = json.loads(argv[argv.index("--model-kwargs") + 1])
    argv[argv.index("--model-kwargs") + 1] = json.dumps({**kwargs, **TINY})
    out = tmp_path / "again.json"
    assert capture_main([*argv, "--output", str(out), "--quiet"]) == 0
    again = DensityProfile.load(out)
    assert again.network == "text_relu" and again.provenance.steps == 4
    assert "progress 0.5 weights" in again.provenance.model
    assert {n: t.points for n, t in again.tensors.items()} == \
        {n: t.points for n, t in profile.tensors.items()}


@pytest.mark.parametrize("extra,message", [
    (["--checkpoint", "2=x.pt"], "--checkpoint: '2=x.pt' is not P=FILE with P in [0, 1]"),
    (["--checkpoint", "0=a.pt", "--checkpoint", "0.0=b.pt"], "progress 0.0 is given twice"),
    (["--checkpoint", "0=a.pt", "--progress", "0.5"], "--checkpoint replaces --weights"),
    (["--checkpoint", "0=missing.pt"], "--checkpoint: cannot load 'missing.pt'"),
    (["--also-dtypes", "int8"], "--also-dtypes: cannot measure in 'int8'"),
])
def test_bad_checkpoint_options_are_one_line(extra, message, capsys):
    argv = ["--model", "sst_cdma.tools.capture.text_model:text_model", "--model-kwargs",
            json.dumps(TINY), "--input-shape", "1,3", "--fill", "zeros", *extra]
    assert capture_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_text_model_refuses_bad_sizes():
    with pytest.raises(ValueError, match="heads: 3 does not divide hidden 16"):
        TextTransformer(TextConfig(hidden=16, heads=3))
    with pytest.raises(ValueError, match="activation: expected one of relu, gelu"):
        TextConfig(activation="swish")
