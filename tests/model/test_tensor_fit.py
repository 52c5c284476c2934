"""The tensor-core path's fit (sst_cdma/model/tensor_fit.py): the committed constants are what
the shipped measurements give, the fit errors stay where docs/kernel_model.md reports them, and
a tensor-core sheet that does not match the fp32 sheet's layers is one line naming the file."""
from __future__ import annotations

import json
import shutil

import pytest

from sst_cdma.model.calibration import CalibrationError
from sst_cdma.model.fitted import load_tensor_families
from sst_cdma.model.tensor_fit import (DATA_DIR, TENSOR_PARAMS_PATH, TC_CONV_FILE,
                                       load_tensor_sheet, tensor_params_document)


@pytest.fixture(scope="module")
def doc():
    return tensor_params_document()


#: how far a fitted number may move between floating-point contexts: the least-squares optimum
#: (finite-difference Jacobian, SciPy's default tolerances) moves in its fifth to seventh digit
#: with summation order: the same code fits the Turing plane_elements at 5.70425 alone and
#: committed 5.70421 from another environment, bwd_filter_efficiency at 0.576235 alone and
#: 0.576234 inside the suite (7e-6 and 1.7e-6 relative). Kernel times move by less than this
#: share.
FIT_RELATIVE = 1e-5


def _differences(committed, fitted, path=""):
    """Where ``fitted`` differs from ``committed``: text, keys and integers exactly, numbers
    beyond :data:`FIT_RELATIVE`."""
    if isinstance(committed, dict) and isinstance(fitted, dict):
        if set(committed) != set(fitted):
            return [f"{path}: keys {sorted(set(committed) ^ set(fitted))}"]
        return [d for k in committed for d in _differences(committed[k], fitted[k],
                                                           f"{path}.{k}")]
    if isinstance(committed, float) and isinstance(fitted, (int, float)):
        ok = abs(committed - fitted) <= FIT_RELATIVE * abs(committed)
        return [] if ok else [f"{path}: committed {committed}, fitted {fitted}"]
    return [] if committed == fitted else [f"{path}: committed {committed!r}, fitted {fitted!r}"]


def test_the_committed_constants_are_the_fit_of_the_shipped_measurements(doc):
    committed = json.loads(TENSOR_PARAMS_PATH.read_text(encoding="utf-8"))
    assert _differences(committed, json.loads(json.dumps(doc))) == []


def test_a_constant_beyond_the_fits_precision_is_a_difference():
    assert _differences({"a": 5.70421}, {"a": 5.70425}) == []
    assert _differences({"a": 5.70421}, {"a": 5.7044}) == [".a: committed 5.70421, fitted 5.7044"]
    assert _differences({"a": "fitted on T4"}, {"a": "fitted on A100"}) != []
    assert _differences({"a": 1}, {"b": 1}) == [": keys ['a', 'b']"]


def test_the_fit_errors_are_those_the_docs_report(doc):
    err = doc["fit_error"]
    assert err["t4_sheet"]["gemm"]["geomean_abs_error"] <= 0.05
    assert err["t4_sheet"]["fwd"]["geomean_abs_error"] <= 0.15
    assert err["t4_sheet"]["bwd_filter"]["geomean_abs_error"] <= 0.24
    for family in ("Ampere", "Hopper"):
        assert err[f"flash2_{family}"]["geomean_abs_error"] <= 0.075
        assert all(0.9 < r < 1.1 for r in err[f"best_gemm_{family}"].values())
    # the T4 constants alone carry to the A100/H100 best GEMMs 18-37% slow
    assert all(1.15 < r < 1.4 for r in err["best_gemm_carried_from_t4"].values())


def test_every_family_says_what_it_was_fitted_on_or_carried_from():
    families = load_tensor_families()
    assert set(families) == {"Turing", "Volta", "Ampere", "Hopper", "Blackwell"}
    assert families["Turing"].fitted_on.startswith("fitted on the T4's")
    assert "no measurement of Volta" in families["Volta"].fitted_on
    assert "no measurement" in families["Hopper"].attention["flash3"].fitted_on
    assert "flash3" not in families["Ampere"].attention
    assert "no measurement" in families["Turing"].attention["flash2"].fitted_on


def _copy(tmp_path):
    for f in DATA_DIR.iterdir():
        if f.suffix == ".csv":
            shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_a_tensor_core_row_that_is_not_the_fp32_sheets_layer_is_one_line(tmp_path):
    folder = _copy(tmp_path)
    path = folder / TC_CONV_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace("T4,700,161,1,16,", "T4,700,161,1,17,")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match=rf"{TC_CONV_FILE}:4: layer \(700, 161, 1, 17, "
                                               r".*does not match the fp32 sheet's layer"):
        load_tensor_sheet(folder)


def test_a_tensor_core_sheet_missing_layers_or_of_another_gpu_is_one_line(tmp_path):
    folder = _copy(tmp_path)
    path = folder / TC_CONV_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match=r"93 convolutions, the fp32 sheet .* has 94"):
        load_tensor_sheet(folder)
    lines[1] = lines[1].replace("T4,", "P100,", 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match=r":2: gpu: the tensor-core sheet is the T4's"):
        load_tensor_sheet(folder)
