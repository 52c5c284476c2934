"""The shipped measured digits_cnn profile: provenance, codec consistency, what it shows."""
from __future__ import annotations

import math

import pytest

from sst_cdma.codecs import header_size
from sst_cdma.profiles import MeasuredProvenance, load_profile

HELD_OUT = 297  # images in the fixed held-out batch the densities are measured on


@pytest.fixture(scope="module")
def digits():
    return load_profile("digits_cnn")


def test_provenance_is_measured_and_reproducible(digits):
    prov = digits.provenance
    assert isinstance(prov, MeasuredProvenance)
    assert prov.steps == 3000 and prov.seed == 0
    assert prov.command == ("python -m sst_cdma.capture.digits_train "
                            "--output workloads/profiles/digits_cnn.json")
    assert "DigitsCNN" in prov.model and "load_digits" in prov.data
    assert list(digits.tensors) == ["relu1", "relu2", "relu3"]
    assert [t.sample_shape for t in digits.tensors.values()] == [(16, 8, 8), (32, 8, 8), (64,)]


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


def test_zlib_wins_on_relu1_and_zvc_on_relu3(digits):
    for p in digits.tensors["relu1"].points:
        assert p.ratios["zlib"] > p.ratios["zvc"]
    for p in digits.tensors["relu3"].points[2:]:  # from progress 0.02; before, zlib by <2%
        assert p.ratios["zvc"] > p.ratios["zlib"]


def test_density_trend_over_training(digits):
    """relu2/relu3: a sharp early drop, then a slow rise; relu1 densifies."""
    for name in ("relu2", "relu3"):
        points = digits.tensors[name].points
        early = min(points[:5], key=lambda p: p.density)  # up to progress 0.1
        assert early.density < points[0].density - 0.1, name
        late = [p.density for p in points if p.progress >= early.progress]
        assert late == sorted(late), name  # rises monotonically after the dip
        assert points[-1].density < points[0].density, name
    relu1 = [p.density for p in digits.tensors["relu1"].points]
    assert relu1[-1] > relu1[0] + 0.1
