"""Real data end to end: the digits CNN's activations, captured from PyTorch on scikit-learn's
digits, move through the cDMA engine as real compressed bytes and come back bit-exact."""
from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

import sst_cdma  # noqa: E402
from sst_cdma import codecs  # noqa: E402
from sst_cdma.tools.capture import capture_activations  # noqa: E402
from sst_cdma.tools.capture.digits_cnn import PROFILE_TENSORS as TENSORS  # noqa: E402
from sst_cdma.tools.capture.digits_cnn import DigitsCNN  # noqa: E402
from sst_cdma.tools.capture.digits_data import load_digits_split  # noqa: E402
from sst_cdma.profiles import load_samples  # noqa: E402



@pytest.fixture
def samples(tmp_path):
    torch.manual_seed(0)
    model = DigitsCNN()
    split = load_digits_split()
    images = split.held_x[:64]  # a held-out batch of 64
    capture_activations(model, images, names=TENSORS, sample_dir=tmp_path / "samples")
    return tmp_path / "samples"


def test_captured_activations_run_functionally_through_the_engine(repo, samples):
    real = load_samples(samples)
    assert set(real) == set(TENSORS.values())
    result = sst_cdma.run(repo / "topologies/pascal_cdma.py",
                          ["--network", "digits_cnn", "--batch", "64", "--policy", "all",
                           "--algorithm", "zvc", "--tensors", str(samples), "--functional"],
                          console=io.StringIO())
    engine = result.simulation.components["gpu0.dma"]
    host = result.simulation.components["host"]
    for name, array in real.items():
        assert engine.wire[name] == len(codecs.compress(array, "zvc"))
    prefetched = {t for d, t, *_ in engine.transfers if d == "prefetch"}
    assert prefetched & set(real)              # real tensors came back through the decompressor
    assert not host.payloads                   # and every one of them was checked and released
    summary = result.reports["summary"]
    assert summary["compression_ratio"] > 1.0



def _run_digits(repo, samples, *opts):
    return sst_cdma.run(repo / "topologies/pascal_cdma.py",
                        ["--policy", "all", "--algorithm", "zvc", "--tensors", str(samples),
                         "--functional", "--no-baselines", *opts], console=io.StringIO())


def test_samples_captured_at_batch_64_are_refused_at_batch_32(repo, samples):
    from sst_cdma.engine.runner import RunError

    with pytest.raises(RunError) as err:
        _run_digits(repo, samples, "--network", "digits_cnn", "--batch", "32")
    text = str(err.value)
    assert "\n" not in text
    assert f"{samples / 'conv1.npz'}: tensor 'conv1': shape [64, 16, 8, 8] does not match " \
           f"the simulated tensor's [32, 16, 8, 8] (batch 64, not 32)" in text, text


def test_digits_samples_recorded_with_their_network_are_refused_on_alexnet(repo, tmp_path):
    from sst_cdma.engine.runner import RunError

    torch.manual_seed(0)
    images = load_digits_split().held_x[:64]
    capture_activations(DigitsCNN(), images, names=TENSORS, sample_dir=tmp_path / "s",
                        network="digits_cnn")
    with pytest.raises(RunError) as err:
        _run_digits(repo, tmp_path / "s", "--network", "alexnet", "--batch", "64")
    assert f"{tmp_path / 's' / 'index.json'}: network: samples captured for 'digits_cnn', " \
           f"not 'alexnet'" in str(err.value)
    result = _run_digits(repo, tmp_path / "s", "--network", "digits_cnn", "--batch", "64")
    assert not result.simulation.components["host"].payloads
