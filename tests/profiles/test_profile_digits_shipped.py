"""The shipped measured digits_cnn profile: provenance, codec consistency, what it shows."""
from __future__ import annotations

import io
import math

import pytest

import sst_cdma
from sst_cdma.codecs import header_size
from sst_cdma.profiles import MeasuredProvenance, load_profile

HELD_OUT = 297  # images in the fixed held-out batch the densities are measured on
DIGITS_TENSORS = ("conv1", "conv2", "pool", "fc1")  # the offloaded tensors that a ReLU feeds


@pytest.fixture(scope="module")
def digits():
    return load_profile("digits_cnn")


def test_provenance_is_measured_and_reproducible(digits):
    prov = digits.provenance
    assert isinstance(prov, MeasuredProvenance)
    assert prov.steps == 3000 and prov.seed == 0
    assert prov.command == ("python -m sst_cdma.tools.capture.digits_train "
                            "--output workloads/profiles/digits_cnn.json")
    assert "DigitsCNN" in prov.model and "load_digits" in prov.data
    # named as the digits_cnn network definition names them, so the simulator takes it as is
    assert list(digits.tensors) == list(DIGITS_TENSORS)
    assert [t.sample_shape for t in digits.tensors.values()] == [(16, 8, 8), (32, 8, 8),
                                                                 (32, 4, 4), (64,)]


def test_zvc_ratio_is_the_codec_size_at_the_recorded_density(digits):
    for tensor in digits.tensors.values():
        n = HELD_OUT * math.prod(tensor.sample_shape)
        ndim = 1 + len(tensor.sample_shape)
        for p in tensor.points:
            nnz = round(p.density * n)
            size = header_size(ndim) + 4 * math.ceil(n / 32) + 4 * nnz
            assert p.ratios["zvc"] == pytest.approx(4 * n / size, abs=1e-4)
            assert p.ratios["zvc"] == pytest.approx(32 / (1 + 32 * p.density), rel=0.01)


def test_rle_is_the_weakest_codec_on_these_activations(digits):
    for name, tensor in digits.tensors.items():
        for p in tensor.points:
            assert p.ratios["rle"] < min(p.ratios["zvc"], p.ratios["zlib"]), (name, p.progress)


def test_zlib_wins_on_conv1_and_zvc_on_fc1(digits):
    for p in digits.tensors["conv1"].points:
        assert p.ratios["zlib"] > p.ratios["zvc"]
    for p in digits.tensors["fc1"].points[2:]:  # from progress 0.02; before, zlib by <2%
        assert p.ratios["zvc"] > p.ratios["zlib"]


def test_density_trend_over_training(digits):
    """conv2/fc1 (relu2/relu3 outputs): a sharp early drop, then a slow rise; conv1 densifies."""
    for name in ("conv2", "fc1"):
        points = digits.tensors[name].points
        early = min(points[:5], key=lambda p: p.density)  # up to progress 0.1
        assert early.density < points[0].density - 0.1, name
        late = [p.density for p in points if p.progress >= early.progress]
        assert late == sorted(late), name  # rises monotonically after the dip
        assert points[-1].density < points[0].density, name
    conv1 = [p.density for p in digits.tensors["conv1"].points]
    assert conv1[-1] > conv1[0] + 0.1


def test_max_pooling_never_makes_a_relu_output_sparser(digits):
    """A 2x2 max over non-negative values is non-zero when any of its four is: at least a
    quarter of the windows' elements, so the pooled density is at least the input's."""
    for before, after in zip(digits.tensors["conv2"].points, digits.tensors["pool"].points):
        assert after.progress == before.progress
        assert after.density >= before.density


def test_the_shipped_measured_profile_drives_the_digits_network(repo):
    """No --profile: the engine takes digits_cnn.json, keyed by the network's tensor names."""
    result = sst_cdma.run(repo / "topologies/pascal_cdma.py",
                          ["--network", "digits_cnn", "--batch", "64", "--policy", "all",
                           "--progress", "1.0", "--no-baselines"], console=io.StringIO())
    engine = result.simulation.components["gpu0.dma"]
    profile = load_profile("digits_cnn")
    assert set(engine.plan.densities) >= set(DIGITS_TENSORS)
    for tensor in DIGITS_TENSORS:
        assert engine.plan.densities[tensor] == profile.density(tensor, 1.0)
        assert engine.plan.ratios[tensor]["zvc"] == profile.ratio(tensor, "zvc", 1.0)
    assert result.reports["summary"]["compression_ratio"] > 1.5
