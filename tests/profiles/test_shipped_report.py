"""``python -m sst_cdma.tools.capture.shipped_report``: the tables docs/profiles.md shows of the
shipped digits_cnn and model-state profiles (tests/docs/test_doc_tables.py compares them with
the page); here, that their cells are the files' figures and what a profile without them gets."""
from __future__ import annotations

import pytest

from sst_cdma.profiles import DensityProfile, ProfileError, load_profile
from sst_cdma.profiles.model_states import load_model_states
from sst_cdma.tools.capture.shipped_report import (accuracy_by_progress, digits_tables, main,
                                                   states_table)


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_the_accuracy_is_the_provenance_notes():
    accuracy = accuracy_by_progress(load_profile("digits_cnn"))
    assert list(accuracy)[0] == 0.0 and list(accuracy)[-1] == 1.0
    assert all(0.0 <= a <= 1.0 for a in accuracy.values()) and accuracy[1.0] > accuracy[0.0]


def test_a_profile_without_accuracy_notes_is_refused():
    doc = load_profile("digits_cnn").to_dict()
    doc["provenance"]["notes"] = "no accuracy here"
    with pytest.raises(ProfileError, match="no held-out accuracy"):
        accuracy_by_progress(DensityProfile.from_dict(doc))


def test_the_ratio_rows_are_each_tensors_sparsest_and_last_points():
    profile = load_profile("digits_cnn")
    density, ratios = digits_tables().split("\n\n")
    rows = _rows(ratios)
    for name, tensor in profile.tensors.items():
        sparsest = min(tensor.points, key=lambda p: p.density)
        mine = [r for r in rows if r[0] == f"`{name}`"]
        assert [r[1] for r in mine] == [f"{sparsest.progress:g} (sparsest)", "1"]
        assert mine[1][2] == f"{tensor.points[-1].ratios['zvc']:.2f}"
    assert len(_rows(density)) == len(profile.tensors) + 1


def test_the_states_table_is_the_last_point_of_each_role_and_dtype():
    profile = load_model_states()
    rows = _rows(states_table(profile))
    assert len(rows) == sum(len(d) for d in profile.points.values())
    last = profile.points["exp_avg_sq"]["float32"][-1]
    [row] = [r for r in rows if r[0] == "`exp_avg_sq`"]
    assert row[2] == f"{last.density:.3f}" and row[3] == f"{last.ratios['zvc']:.2f}"


def test_a_missing_profile_is_one_line(capsys):
    assert main(["states", "no_such_profile"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no_such_profile" in err and err.count("\n") == 1
