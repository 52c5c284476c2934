"""parse_profile's quick reading of a plain point gives what its full check gives, and leaves
anything else to the full check."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.profiles import schema
from sst_cdma.profiles.errors import ProfileError

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "workloads" / "profiles").glob("*.json"))


def _plain(point, previous=None, dtype="float32"):
    known = algorithm_names()
    return schema._plain_point(point, previous, dtype, known, frozenset(known))


def _checked(point, previous=None, dtype="float32"):
    return schema._checked_point(schema._Checker("t"), point, "p", previous, dtype)


@pytest.mark.parametrize("path", SHIPPED[:4], ids=lambda p: p.stem)
def test_every_shipped_point_reads_alike_both_ways(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    for entry in data["tensors"].values():
        previous = None
        for point in entry["points"]:
            quick = _plain(point, previous, data["dtype"])
            assert quick is not None and quick == _checked(point, previous, data["dtype"])
            assert list(quick) == list(_checked(point, previous, data["dtype"]))
            previous = quick["progress"]


@pytest.mark.parametrize("point, previous", [
    ({"progress": True, "density": 0.5}, None),  # a boolean is not a number
    ({"progress": 0.5, "density": float("nan")}, None),
    ({"progress": 0.5, "density": 0.5}, 0.5),  # not increasing
    ({"progress": 0.5, "density": 0.5, "extra": 1}, None),
    ({"progress": 0.5}, None),
    ({"progress": 0.1, "density": 0.5, "ratios": {"zvc": 0}}, None),
    ({"progress": 0.1, "density": 0.5, "ratios": {"zvc": 1e9}}, None),  # past ZVC's ceiling
    ({"progress": 0.1, "density": 0.5, "ratios": {"lz4": 255.5}}, None),  # past any LZ4's
    ({"progress": 0.1, "density": 0.5,
      "ratios_by_dtype": {"bfloat16": {"zlib": 1033}}}, None),  # past DEFLATE's 1032:1
    ({"progress": 0.1, "density": 0.5, "ratios": {"zvc": 32 / 17 * 1.0011}}, None),
    ({"progress": 0.1, "density": 0.5, "ratios": {"nosuch": 2.0}}, None),
    ({"progress": 0.1, "density": 0.5, "ratios_by_dtype": {"float32": {"zvc": 1.5}}}, None),
])
def test_a_point_with_a_fault_is_left_to_the_full_check(point, previous):
    assert _plain(point, previous) is None
    with pytest.raises(ProfileError, match="^t: p"):
        _checked(point, previous)


def test_whole_numbers_read_as_floats_either_way():
    point = {"progress": 0, "density": 0, "ratios": {"zvc": 1},
             "ratios_by_dtype": {"bfloat16": {"rle": 2}}}
    quick = _plain(point)
    assert quick == _checked(point)
    assert type(quick["progress"]) is float and type(quick["ratios"]["zvc"]) is float


def test_ratios_at_their_ceilings_read_either_way():
    """Within ZVC's tolerance above its ceiling (32 / 17 for float32 at density 0.5) and at a
    byte codec's ceiling, the quick reading and the full check agree."""
    point = {"progress": 0.1, "density": 0.5,
             "ratios": {"zvc": 32 / 17 * 1.0009, "lz4": 255, "zlib": 1032.0},
             "ratios_by_dtype": {"bfloat16": {"zvc": 16.0, "rle": 65535 * 2 / 4}}}
    quick = _plain(point)
    assert quick is not None and quick == _checked(point)
