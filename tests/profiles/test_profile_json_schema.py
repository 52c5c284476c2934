"""The density-profile format's JSON Schema, generated from the field lists the loader checks
with, is shipped as generated, validates every shipped profile, and refuses what the loader
refuses for the reasons JSON Schema can express."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from network_tiers import LARGEST

from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.json_schema import JSON_SCHEMA_PATH, json_schema_text
from sst_cdma.profiles.schema import parse_profile

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "workloads" / "profiles").glob("*.json"))


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(JSON_SCHEMA_PATH.read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_the_generated_one():
    assert JSON_SCHEMA_PATH.read_text("utf-8") == json_schema_text(), \
        "regenerate it: python -m sst_cdma.profiles.json_schema"


#: profiles of this many bytes and more (the transformers of 7B parameters and up, GPT-2 Large
#: and XL: each a few seconds to walk with jsonschema) are validated in the slow tier; the
#: default tier validates the smaller ones of the same families and generator (GPT-2 small
#: and medium, the OPTs) and tests/profiles/test_profile_lookup.py loads every shipped
#: profile, whose loader checks what the schema says
SCHEMA_WALK_BYTES = 600_000


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=[pytest.mark.slow]
                 if p.stem in LARGEST or p.stat().st_size >= SCHEMA_WALK_BYTES else [])
    for p in SHIPPED])
def test_every_shipped_profile_validates(validator, path):
    data = json.loads(path.read_text("utf-8"))
    parse_profile(data, path.name)
    assert [e.message for e in validator.iter_errors(data)] == []


def _first_tensor(doc):
    return next(iter(doc["tensors"].values()))


@pytest.mark.parametrize("break_it", [
    lambda d: d.update(version=2),
    lambda d: d.update(format="other"),
    lambda d: d.update(dtype="int7"),
    lambda d: d.pop("provenance"),
    lambda d: d["provenance"].update(kind="guessed"),
    lambda d: d["provenance"].update(surprise="x"),
    lambda d: d.update(tensors={}),
    lambda d: _first_tensor(d).update(points=[]),
    lambda d: _first_tensor(d)["points"][0].update(density=1.5),
    lambda d: _first_tensor(d)["points"][0].update(ratios={"nosuch": 2.0}),
    lambda d: _first_tensor(d)["points"][0].update(ratios={"zlib": -1.0}),
    lambda d: _first_tensor(d).update(sample_shape=[0, 3]),
    lambda d: _first_tensor(d).update(extra=1),
])
def test_the_schema_and_the_loader_refuse_the_same_documents(validator, break_it):
    doc = json.loads((REPO / "workloads" / "profiles" / "digits_cnn.json").read_text("utf-8"))
    broken = copy.deepcopy(doc)
    break_it(broken)
    assert list(validator.iter_errors(broken)), "the schema accepted it"
    with pytest.raises(ProfileError):
        parse_profile(broken, "broken.json")
