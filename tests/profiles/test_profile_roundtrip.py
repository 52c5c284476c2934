"""Profiles survive save/load and dict round trips unchanged."""
from __future__ import annotations

import json

from sst_cdma.profiles import (DensityProfile, EstimatedProvenance, MeasuredProvenance,
                               ProfilePoint, TensorProfile)


def test_file_round_trip_is_identity(document, write, tmp_path):
    profile = DensityProfile.load(write(document))
    out = tmp_path / "again.json"
    profile.save(out)
    again = DensityProfile.load(out)
    assert again == profile
    assert json.loads(out.read_text()) == document
    assert out.read_text().endswith("\n")


def test_to_dict_from_dict_round_trip(document):
    profile = DensityProfile.from_dict(document)
    assert profile.to_dict() == document
    assert list(profile.tensors) == ["conv1", "conv3"]
    assert profile.tensors["conv1"].sample_shape == (4, 2, 2)
    assert profile.tensors["conv3"].sample_shape is None


def test_provenance_objects(document):
    profile = DensityProfile.from_dict(document)
    prov = profile.provenance
    assert isinstance(prov, MeasuredProvenance)
    assert (prov.kind, prov.steps, prov.command) == ("measured", 100, "make it")
    document["provenance"] = {"kind": "estimated", "source": "paper figure 3"}
    est = DensityProfile.from_dict(document).provenance
    assert isinstance(est, EstimatedProvenance) and est.source == "paper figure 3"


def test_programmatic_construction_round_trips(tmp_path):
    tensors = {"a.b": TensorProfile((ProfilePoint(0.0, 0.25, {"zlib": 3.5}),
                                     ProfilePoint(1.0, 0.125)), (3,))}
    prov = MeasuredProvenance(model="m", data="d", steps=None, command="c", date="2024-01-02",
                              seed=7, notes="n", software={"torch": "2.3"})
    profile = DensityProfile("net", "float16", prov, tensors)
    path = tmp_path / "p.json"
    profile.save(path)
    again = DensityProfile.load(path)
    assert again == profile
    assert again.provenance == prov
    assert again.ratio("a.b", "zlib", 0.0) == 3.5
