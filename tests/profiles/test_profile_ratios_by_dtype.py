"""Ratios measured in another element type (``ratios_by_dtype``) and derived provenance."""
from __future__ import annotations

import copy

import pytest

from sst_cdma.profiles import (DensityProfile, DerivedProvenance, ProfileError, ProfilePoint,
                               TensorProfile)

DOC = {
    "format": "sst-cdma-density-profile", "version": 1, "network": "net", "dtype": "float32",
    "provenance": {"kind": "derived", "source": "measured profile 'text_gelu'",
                   "method": "same role, same relative depth", "command": "python -m x",
                   "date": "2026-12-01"},
    "tensors": {"blk0/act": {"points": [
        {"progress": 0.0, "density": 1.0, "ratios": {"zstd": 1.1},
         "ratios_by_dtype": {"bfloat16": {"zstd": 1.4, "lz4": 1.0}}},
        {"progress": 1.0, "density": 0.9, "ratios": {"zstd": 1.2},
         "ratios_by_dtype": {"bfloat16": {"zstd": 2.0}}}]}},
}


def test_ratio_in_another_dtype_comes_from_ratios_by_dtype():
    profile = DensityProfile.from_dict(DOC)
    assert profile.ratio("blk0/act", "zstd", 0.0) == pytest.approx(1.1)
    assert profile.ratio("blk0/act", "zstd", 0.0, dtype="float32") == pytest.approx(1.1)
    assert profile.ratio("blk0/act", "zstd", 0.0, dtype="bfloat16") == pytest.approx(1.4)
    # interpolated in 1/ratio between the bfloat16 points
    assert profile.ratio("blk0/act", "zstd", 0.5, dtype="bfloat16") == pytest.approx(
        1 / ((1 / 1.4 + 1 / 2.0) / 2))
    # lz4 was measured in bfloat16 at progress 0 only: clamped
    assert profile.ratio("blk0/act", "lz4", 1.0, dtype="bfloat16") == pytest.approx(1.0)
    assert profile.ratio("blk0/act", "lz4", 1.0) is None
    assert profile.ratio("blk0/act", "zstd", 1.0, dtype="float16") is None


def test_ratios_by_dtype_round_trip(tmp_path):
    profile = DensityProfile.from_dict(DOC)
    path = tmp_path / "p.json"
    profile.save(path)
    again = DensityProfile.load(path)
    assert again == profile
    assert again.to_dict()["tensors"]["blk0/act"]["points"][0]["ratios_by_dtype"] == {
        "bfloat16": {"lz4": 1.0, "zstd": 1.4}}
    assert isinstance(again.provenance, DerivedProvenance)
    assert again.provenance.method == "same role, same relative depth"


def test_built_points_keep_ratios_by_dtype():
    point = ProfilePoint(0.5, 0.4, {"zvc": 2.0}, {"bfloat16": {"zvc": 1.8}})
    profile = DensityProfile("net", "float32", DerivedProvenance("s", "m", "c", "2026-12-01"),
                             {"t": TensorProfile((point,))})
    assert profile.ratio("t", "zvc", 0.5, dtype="bfloat16") == pytest.approx(1.8)


def _bad(path, value):
    doc = copy.deepcopy(DOC)
    point = doc["tensors"]["blk0/act"]["points"][0]
    if path == "provenance":
        doc["provenance"] = value
    else:
        point["ratios_by_dtype"] = value
    return doc


@pytest.mark.parametrize("path,value,message", [
    ("point", {"float32": {"zstd": 1.0}}, 'ratios_by_dtype: "float32" is not another element '
                                          'type than the profile\'s float32'),
    ("point", {"int8": {"zstd": 1.0}}, 'ratios_by_dtype: "int8" is not another element type'),
    ("point", {"bfloat16": {"zstd": 0}}, "ratios_by_dtype.bfloat16.zstd: 0 is not a positive"),
    ("point", {"bfloat16": {"lzma": 2.0}}, 'ratios_by_dtype.bfloat16: unknown algorithm "lzma"'),
    ("point", [1], "ratios_by_dtype: expected an object, got array"),
    ("provenance", {"kind": "derived", "source": "s", "method": "m", "date": "2026-12-01"},
     'provenance: missing field "command"'),
    ("provenance", {"kind": "derived", "source": "s", "method": "m", "command": "c",
                    "date": "soon"}, 'provenance.date: "soon" is not an ISO 8601 date'),
])
def test_bad_ratios_by_dtype_and_derived_provenance_are_named(path, value, message):
    with pytest.raises(ProfileError) as err:
        DensityProfile.from_dict(_bad(path, value), source="p.json")
    assert str(err.value).startswith("p.json: ")
    assert message in str(err.value)
