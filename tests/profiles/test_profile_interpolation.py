"""Density and ratio interpolation between points, clamped outside them."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sst_cdma.profiles import DensityProfile, ProfileError, interpolate


def test_density_at_points_between_and_outside(document):
    p = DensityProfile.from_dict(document)
    assert p.density("conv1", 0.0) == 0.5
    assert p.density("conv1", 0.5) == 0.3
    assert p.density("conv1", 0.25) == pytest.approx(0.4)
    assert p.density("conv1", 0.75) == pytest.approx(0.25)
    assert p.density("conv3", 0.625) == pytest.approx(0.5)
    assert p.density("conv1", -1.0) == 0.5  # clamped
    assert p.density("conv1", 2.0) == 0.2  # clamped


def test_single_point_is_constant(document):
    document["tensors"]["conv3"]["points"] = [{"progress": 0.4, "density": 0.7}]
    p = DensityProfile.from_dict(document)
    assert [p.density("conv3", x) for x in (0.0, 0.4, 1.0)] == [0.7, 0.7, 0.7]


def test_ratio_interpolates_compressed_fraction(document):
    p = DensityProfile.from_dict(document)
    # zvc measured at progress 0 (1.88x) and 1 (4.3x) only; point 0.5 has none and is skipped.
    assert p.ratio("conv1", "zvc", 0.0) == pytest.approx(1.88)
    assert p.ratio("conv1", "zvc", 1.0) == pytest.approx(4.3)
    mid = p.ratio("conv1", "zvc", 0.5)
    assert mid == pytest.approx(1 / ((1 / 1.88 + 1 / 4.3) / 2))
    assert p.ratio("conv1", "rle", 0.9) == pytest.approx(1.5)  # one point: clamped
    assert p.ratio("conv3", "zvc", 0.5) is None  # nothing measured


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8, unique=True),
       st.lists(st.floats(0, 1), min_size=8, max_size=8), st.floats(-1, 2))
def test_interpolate_stays_within_neighbours(xs, ys, x):
    xs = sorted(xs)
    ys = ys[:len(xs)]
    y = interpolate(xs, ys, x)
    assert min(ys) - 1e-12 <= y <= max(ys) + 1e-12
    if x <= xs[0]:
        assert y == ys[0]
    elif x >= xs[-1]:
        assert y == ys[-1]
    else:
        i = next(k for k in range(1, len(xs)) if xs[k] > x)
        lo, hi = sorted((ys[i - 1], ys[i]))
        assert lo - 1e-12 <= y <= hi + 1e-12


def test_ratio_measured_in_another_dtype_is_not_returned(document):
    p = DensityProfile.from_dict(document, source="p.json")
    assert p.ratio("conv1", "zvc", 0.0, dtype="float32") == pytest.approx(1.88)
    for dtype in ("float16", "bfloat16", "float64"):
        assert p.ratio("conv1", "zvc", 0.0, dtype=dtype) is None
        assert p.ratio("conv1", "rle", 0.9, dtype=dtype) is None
    with pytest.raises(ProfileError, match="no such tensor"):
        p.ratio("conv9", "zvc", 0.0, dtype="float16")   # a wrong name is still an error
