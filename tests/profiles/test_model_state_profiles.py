"""Model-state profiles: the ratio a schedule asks for is the measured one (interpolated in the
compressed fraction, clamped), the shipped profile loads, and a bad file is one line naming
the file and the field."""
from __future__ import annotations

import copy
import json

import pytest

from sst_cdma.profiles import ProfileError
from sst_cdma.profiles.model_states import (DEFAULT_MODEL_STATES, FORMAT, MODEL_STATE_ROLES,
                                            ROLE_DTYPES, load_model_states, model_state_ratio,
                                            shipped_model_states)

PROVENANCE = {"kind": "measured", "model": "m", "data": "d", "steps": 10,
              "command": "sst-cdma capture-states --output x.json", "date": "2026-12-02"}


def _doc():
    def point(progress, step, zstd):
        return {"progress": progress, "step": step,
                "dtypes": {"bfloat16": {"density": 1.0, "ratios": {"zstd": zstd, "zvc": 0.94}},
                           "float32": {"density": 0.5, "ratios": {"zstd": 1.1}}}}
    return {"format": FORMAT, "version": 1, "model": "m", "parameters": 100,
            "provenance": dict(PROVENANCE),
            "roles": {"weights": {"points": [point(0.0, 0, 1.25), point(1.0, 10, 2.5)]},
                      "exp_avg": {"points": [{"progress": 0.5, "step": 5, "dtypes": {
                          "float32": {"density": 0.9, "ratios": {"bplane_zstd": 1.5}}}}]}}}


def _write(tmp_path, doc):
    path = tmp_path / "states.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_ratio_is_interpolated_in_the_compressed_fraction(tmp_path):
    profile = load_model_states(_write(tmp_path, _doc()))
    assert profile.model == "m" and profile.parameters == 100
    assert profile.ratio("weights", "zstd", "bfloat16", 0.0) == pytest.approx(1.25)
    assert profile.ratio("weights", "zstd", "bfloat16", 1.0) == pytest.approx(2.5)
    # halfway between 1/1.25 = 0.8 and 1/2.5 = 0.4 is 0.6: 1/0.6
    assert profile.ratio("weights", "zstd", "bfloat16", 0.5) == pytest.approx(1 / 0.6)
    assert profile.ratio("weights", "zstd", "bfloat16", 2.0) == pytest.approx(2.5)  # clamped
    assert profile.ratio("exp_avg", "bplane_zstd", "float32") == pytest.approx(1.5)
    assert profile.ratio("weights", "none", "float32") == 1.0
    assert profile.density("weights", "float32") == 0.5
    path = _write(tmp_path, _doc())
    assert model_state_ratio("weights", "zvc", "bfloat16", profile=str(path)) == \
        pytest.approx(0.94)


@pytest.mark.parametrize("role,codec,dtype,message", [
    ("gradients", "zstd", "bfloat16", "role 'gradients' was not measured (measured: weights, "
                                      "exp_avg)"),
    ("weights", "zstd", "float16", "weights was not measured in 'float16' (measured: "
                                   "bfloat16, float32)"),
    ("weights", "lz4", "float32", "codec 'lz4' was not measured on weights in float32 "
                                  "(measured: zstd)"),
])
def test_what_was_not_measured_is_refused(tmp_path, role, codec, dtype, message):
    path = _write(tmp_path, _doc())
    with pytest.raises(ProfileError) as info:
        model_state_ratio(role, codec, dtype, profile=path)
    assert str(info.value) == f"{path}: {message}"


def test_the_shipped_profile_covers_every_role_dtype_and_codec():
    from sst_cdma.codecs.registry import algorithm_names

    assert DEFAULT_MODEL_STATES in shipped_model_states()
    profile = load_model_states()
    assert set(profile.points) == set(MODEL_STATE_ROLES)
    assert profile.provenance.kind == "measured"
    assert profile.provenance.command.startswith("sst-cdma capture-states")
    for role in MODEL_STATE_ROLES:
        assert set(profile.points[role]) == set(ROLE_DTYPES[role])
        for dtype in ROLE_DTYPES[role]:
            for codec in algorithm_names():
                assert model_state_ratio(role, codec, dtype) > 0
    # the fp32 weights are the master weights: measured twice, the same numbers
    assert profile.points["weights"]["float32"] == profile.points["master_weights"]["float32"]
    # the optimizer has not stepped at progress 0: the moments start later
    assert profile.points["exp_avg"]["float32"][0].progress > 0


def _broken(change):
    doc = _doc()
    change(doc)
    return doc


BAD = {
    "another format": (lambda d: d.update(format="sst-cdma-density-profile"),
                       "format: expected \"sst-cdma-model-state-profile\", got "
                       "\"sst-cdma-density-profile\""),
    "another version": (lambda d: d.update(version=3), "version: 3 is not supported"),
    "missing roles": (lambda d: d.pop("roles"), "(top level): missing field \"roles\""),
    "unknown role": (lambda d: d["roles"].update(activations={"points": []}),
                     "roles: unknown role \"activations\""),
    "moments in float16": (lambda d: d["roles"]["exp_avg"]["points"][0]["dtypes"].update(
        float16={"density": 1.0, "ratios": {}}),
        "roles.exp_avg.points[0].dtypes.float16: exp_avg is measured in float32, not "
        "\"float16\""),
    "unknown codec": (lambda d: d["roles"]["weights"]["points"][0]["dtypes"]["float32"][
        "ratios"].update(brotli=2.0), "unknown codec \"brotli\""),
    "zero ratio": (lambda d: d["roles"]["weights"]["points"][0]["dtypes"]["float32"][
        "ratios"].update(zstd=0), "roles.weights.points[0].dtypes.float32.ratios.zstd: 0 is "
                                  "not positive"),
    "density above 1": (lambda d: d["roles"]["weights"]["points"][1]["dtypes"]["float32"]
                        .update(density=1.5), "points[1].dtypes.float32.density: 1.5 is not "
                                              "in [0, 1]"),
    "progress backwards": (lambda d: d["roles"]["weights"]["points"][1].update(progress=0.0),
                           "roles.weights.points[1].progress: 0.0 is not greater than"),
    "no command": (lambda d: d["provenance"].pop("command"),
                   "provenance: missing field \"command\""),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_naming_the_file_and_field(tmp_path, case):
    change, message = BAD[case]
    path = _write(tmp_path, _broken(change))
    with pytest.raises(ProfileError) as info:
        load_model_states(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_unknown_names_and_unreadable_files_are_one_line(tmp_path):
    with pytest.raises(ProfileError, match="no shipped model-state profile 'gpt9'"):
        load_model_states("gpt9")
    with pytest.raises(ProfileError, match="nothing.json: cannot read"):
        load_model_states(tmp_path / "nothing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ProfileError, match="bad.json: not a JSON file"):
        load_model_states(tmp_path / "bad.json")


def test_a_changed_file_is_read_again(tmp_path):
    doc = _doc()
    path = _write(tmp_path, doc)
    assert load_model_states(path).parameters == 100
    changed = copy.deepcopy(doc)
    changed["parameters"] = 12345
    path.write_text(json.dumps(changed))
    assert load_model_states(path).parameters == 12345


@pytest.mark.parametrize("dtype, density, ratio, message", [
    # the attack: a ratio the density makes impossible (ZVC keeps every non-zero element whole)
    ("bfloat16", 1.0, 50, "exceeds 0.9412, the most ZVC reaches on bfloat16 at the point's "
                          "density 1"),
    ("float32", 0.5, 2.0, "exceeds 1.882, the most ZVC reaches on float32 at the point's "
                          "density 0.5"),
    ("float32", 0.0, 40.0, "exceeds 32, the most ZVC reaches on float32 (one mask bit"),
])
def test_a_zvc_ratio_past_what_its_density_allows_is_refused(tmp_path, dtype, density, ratio,
                                                             message):
    doc = _doc()
    entry = doc["roles"]["weights"]["points"][0]["dtypes"][dtype]
    entry.update(density=density, ratios={"zvc": ratio})
    path = _write(tmp_path, doc)
    with pytest.raises(ProfileError) as info:
        load_model_states(path)
    text = str(info.value)
    assert f"roles.weights.points[0].dtypes.{dtype}.ratios.zvc: {ratio}" in text
    assert message in text and "\n" not in text
