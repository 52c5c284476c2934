"""Fitting the kernel model to DeepBench (sst_cdma/model/calibration.py, ``sst-cdma calibrate``):
the shipped measurements load, bad input is one line naming file:line (the path under the data
folder as given) and field, the fit is deterministic and is what kernel_params.json holds (never
with a NaN), and the error figures are what they say."""
from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.model import calibration as cal
from sst_cdma.model.fitted import PARAMS_PATH
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.kernel_model import ALGORITHMS, KernelParams


@pytest.fixture(scope="module")
def sets():
    return cal.load()


@pytest.fixture(scope="module")
def committed():
    return json.loads(PARAMS_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def fits(sets):
    """P100's and TitanX's own fits (a second each)."""
    return {name: cal.fit(sets[name]) for name in ("P100", "TitanX")}


@pytest.fixture(scope="module")
def p100_fit(fits):
    return fits["P100"]


def _copy(tmp_path: Path, gpus: tuple[str, ...] = (), conv_rows: int = 0,
          gemm_rows: int = 0) -> Path:
    """The shipped data in tmp_path/data, optionally only ``gpus`` and their first rows."""
    out = tmp_path / "data"
    shutil.copytree(cal.DATA_DIR, out, ignore=shutil.ignore_patterns("__*"))
    if gpus:
        for name, limit in ((cal.GPUS_FILE, 0), (cal.CONV_FILE, conv_rows),
                            (cal.GEMM_FILE, gemm_rows)):
            with open(out / name, newline="") as f:
                rows = list(csv.reader(f))
            kept, counts = [rows[0]], dict.fromkeys(gpus, 0)
            for row in rows[1:]:
                if row[0] in gpus and (not limit or counts[row[0]] < limit):
                    counts[row[0]] += 1
                    kept.append(row)
            with open(out / name, "w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(kept)
    return out


def _drop(folder: Path, name: str, gpu: str) -> None:
    """Remove every row of ``gpu`` from ``name``."""
    with open(folder / name, newline="") as f:
        rows = list(csv.reader(f))
    with open(folder / name, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(r for r in rows if r[0] != gpu)


def _edit(folder: Path, name: str, line: int, column: str, value: str) -> None:
    """Set ``column`` of file line ``line`` (1 = the header) to ``value``."""
    with open(folder / name, newline="") as f:
        rows = list(csv.reader(f))
    rows[line - 1][rows[0].index(column)] = value
    with open(folder / name, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


# -- loading ---------------------------------------------------------------------------------

def test_the_shipped_measurements_load(sets):
    assert list(sets) == ["P100", "TitanX", "TitanX_Pascal", "TitanXp", "M40", "GTX1080Ti",
                          "T4"]
    assert [sets[g].gpu.architecture for g in sets] == ["Pascal", "Maxwell", "Pascal", "Pascal",
                                                         "Maxwell", "Pascal", "Turing"]
    for name, cset in sets.items():
        assert cset.rows("fwd") == cset.rows("bwd_filter") == 94
        assert cset.rows("gemm") == 160
        spec = GPUS[cset.gpu.preset]
        assert spec.calibration == name
        assert cset.gpu.hardware.sms == spec.sms
        assert cset.gpu.hardware.dram_bandwidth == spec.dram_bandwidth_Bps
    # an empty bwd_data_ms is no measurement (first layers of the cuDNN 5 sets)
    assert [sets[g].rows("bwd_data") for g in sets] == [94, 84, 85, 94, 84, 94, 84]
    # the T4 sheet's two truncated algorithm cells read as the algorithm they name
    assert sets["T4"].fwd_algorithm[58] == "IMPLICIT_PRECOMP_GEMM"
    assert sets["P100"].seconds["fwd"][0] == pytest.approx(0.142e-3)
    assert sets["P100"].fwd_algorithm[0] == "IMPLICIT_PRECOMP_GEMM"


def test_the_shipped_copy_is_the_one_converted_from_deepbench():
    # SHA-256 of the CSVs as converted from DeepBench's sheets (copied unchanged)
    expected = {
        "conv_train_fp32.csv": "4cd4ca17cbd6074b5036d120894f84709fa289a57305e3e0934daa3db74ce6b3",
        "gemm_train_fp32.csv": "ec86cd2bb47031e7a991124320b72a157a163bfabd0aaad229e1d58fed76539e",
        "gpus.csv": "beb22a8ccf34056a0a5aff58771399f8a839f954d06bc73c9b14c184ac929e32",
        "conv_train_fp16_tensor_op.csv":
            "5da0ead24da48243744d7a95e46cf0bcdae94183f891c898bb30bf4549712ee7",
        "gemm_train_fp16_tensor_op.csv":
            "4c420fe58f5bcfae59061d9dc64f769dd8bca16217a4d84edcb23168816373b0",
    }
    for name, digest in expected.items():
        assert hashlib.sha256((cal.DATA_DIR / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name, line, column, value, message", [
    (cal.CONV_FILE, 17, "fwd_ms", "-1",
     "conv_train_fp32.csv:17: fwd_ms: must be a positive number, got '-1'"),
    (cal.CONV_FILE, 3, "bwd_filter_ms", "fast",
     "conv_train_fp32.csv:3: bwd_filter_ms: must be a positive number, got 'fast'"),
    (cal.CONV_FILE, 5, "bwd_data_ms", "0",
     "conv_train_fp32.csv:5: bwd_data_ms: must be a positive number, got '0'"),
    (cal.CONV_FILE, 5, "fwd_ms", "",
     "conv_train_fp32.csv:5: fwd_ms: must be a positive number, got ''"),
    (cal.CONV_FILE, 9, "fwd_algorithm", "DIRECT",
     "conv_train_fp32.csv:9: fwd_algorithm: unknown algorithm 'DIRECT' (one of "
     "IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, WINOGRAD, WINOGRAD_NONFUSED, FFT, FFT_TILING, "
     "GEMM, DEPTHWISE)"),
    (cal.CONV_FILE, 40, "gpu", "V100",
     "conv_train_fp32.csv:40: gpu: unknown GPU 'V100' (not in gpus.csv)"),
    (cal.CONV_FILE, 2, "K", "2.5",
     "conv_train_fp32.csv:2: K: must be a whole number >= 1, got '2.5'"),
    (cal.CONV_FILE, 2, "R", "200",
     "conv_train_fp32.csv:2: R, S: a 200x20 filter (dilation 1x1) is larger than its padded "
     "161x700 input"),
    (cal.GEMM_FILE, 12, "time_ms", "nan",
     "gemm_train_fp32.csv:12: time_ms: must be a positive number, got 'nan'"),
    (cal.GEMM_FILE, 7, "gpu", "K80",
     "gemm_train_fp32.csv:7: gpu: unknown GPU 'K80' (not in gpus.csv)"),
    (cal.GEMM_FILE, 4, "b_transpose", "X",
     "gemm_train_fp32.csv:4: b_transpose: must be N or T, got 'X'"),
    (cal.GPUS_FILE, 3, "gpu", "K80",
     "gpus.csv:3: gpu: no GPU preset has calibration 'K80' (sst_cdma/model/gpus.py)"),
    # implausible times: not finite, or longer than an hour for one kernel
    (cal.CONV_FILE, 6, "fwd_ms", "1e300",
     "conv_train_fp32.csv:6: fwd_ms: longer than an hour (3600000 ms) for one kernel, got "
     "'1e300'"),
    (cal.CONV_FILE, 8, "bwd_data_ms", "3600000.5",
     "conv_train_fp32.csv:8: bwd_data_ms: longer than an hour (3600000 ms) for one kernel, "
     "got '3600000.5'"),
    (cal.GEMM_FILE, 9, "time_ms", "inf",
     "gemm_train_fp32.csv:9: time_ms: must be a positive number, got 'inf'"),
    # impossible shapes: faster than 100x the GPU's peak (the shipped rows reach 2.3x)
    (cal.CONV_FILE, 2, "W", "100000000000000000000", "conv_train_fp32.csv:2: fwd_ms: "),
    (cal.GEMM_FILE, 3, "M", "10000000000000", "gemm_train_fp32.csv:3: time_ms: "),
])
def test_bad_input_is_one_line_naming_file_line_and_field(tmp_path, name, line, column, value,
                                                         message):
    folder = _copy(tmp_path)
    _edit(folder, name, line, column, value)
    with pytest.raises(cal.CalibrationError) as info:
        cal.load(folder)
    # the file is named by its path under the folder as given
    if message.endswith(": "):
        assert str(info.value).startswith(os.path.join(str(folder), message))
        assert str(info.value).endswith("NVIDIA Tesla P100's peak (1.06e+13 FLOP/s): an impossible shape or time"), \
            str(info.value)
    else:
        assert str(info.value) == os.path.join(str(folder), message)


def test_an_hour_is_the_longest_time_accepted(tmp_path):
    folder = _copy(tmp_path, ("P100",))
    _edit(folder, cal.CONV_FILE, 2, "bwd_filter_ms", "3600000")
    assert cal.load(folder)["P100"].seconds["bwd_filter"][0] == 3600.0


@pytest.mark.parametrize("empty, message", [
    ("conv", "conv_train_fp32.csv: no rows for GPU 'P100' (listed in gpus.csv)"),
    ("gemm", "gemm_train_fp32.csv: no rows for GPU 'P100' (listed in gpus.csv)"),
    ("conv TitanX", "conv_train_fp32.csv: no rows for GPU 'TitanX' (listed in gpus.csv)"),
    ("gemm TitanX", "gemm_train_fp32.csv: no rows for GPU 'TitanX' (listed in gpus.csv)"),
    ("bwd_data", "conv_train_fp32.csv: bwd_data_ms: no value for GPU 'P100' (every row "
                 "empty)"),
])
def test_every_gpu_needs_convolutions_and_gemms(tmp_path, empty, message):
    # without them their parameters would be arbitrary and the fit error NaN
    folder = _copy(tmp_path, ("P100", "TitanX"), conv_rows=3, gemm_rows=3)
    if empty in ("conv", "gemm"):  # the header only
        path = folder / (cal.CONV_FILE if empty == "conv" else cal.GEMM_FILE)
        path.write_text(path.read_text().splitlines()[0] + "\n")
    elif empty == "bwd_data":
        for line in (2, 3, 4):
            _edit(folder, cal.CONV_FILE, line, "bwd_data_ms", "")
    else:
        kind, gpu = empty.split()
        _drop(folder, cal.CONV_FILE if kind == "conv" else cal.GEMM_FILE, gpu)
    with pytest.raises(cal.CalibrationError) as info:
        cal.load(folder)
    assert str(info.value) == os.path.join(str(folder), message)


def test_a_byte_order_mark_is_skipped(tmp_path):
    folder = _copy(tmp_path, ("P100",))
    for name in (cal.CONV_FILE, cal.GEMM_FILE, cal.GPUS_FILE):  # as Excel saves CSV
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    cset = cal.load(folder)["P100"]
    assert (cset.rows("fwd"), cset.rows("gemm")) == (94, 160)


def test_a_missing_column_is_named(tmp_path):
    folder = _copy(tmp_path)
    path = folder / cal.CONV_FILE
    path.write_text(path.read_text().replace(",fwd_ms,", ",fwd_time,", 1))
    with pytest.raises(cal.CalibrationError) as info:
        cal.load(folder)
    assert str(info.value) == f"{folder / cal.CONV_FILE}:1: fwd_ms: missing column"


def test_an_empty_bwd_data_is_allowed(tmp_path):
    folder = _copy(tmp_path, ("P100",))
    _edit(folder, cal.CONV_FILE, 2, "bwd_data_ms", "")
    assert cal.load(folder)["P100"].rows("bwd_data") == 93


def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(cal.CalibrationError, match="not a folder of calibration data"):
        cal.load(tmp_path / "nowhere")


# -- error figures and the roofline ----------------------------------------------------------

def test_fit_error_figures():
    e = cal.fit_error(np.array([1.0, 1.1, 0.8, 2.0, np.nan]))
    assert e.rows == 4
    assert e.median_ratio == pytest.approx(1.05)
    # exp(mean(log|r-1|)), the exact zero counted as 1e-4
    assert e.geomean_abs_error == pytest.approx(math.exp(np.mean(np.log([1e-4, 0.1, 0.2, 1.0]))))
    assert e.within_25pct == 0.75


def test_the_roofline_is_the_old_model(sets):
    cset = sets["P100"]
    hw = cset.gpu.hardware
    roof = cal.roofline(cset)
    # first row: W 700, H 161, C 1, N 4, K 32, 5x20 filter, stride 2, no padding
    p, q = (161 - 5) // 2 + 1, (700 - 20) // 2 + 1
    flops = 2 * 4 * 32 * p * q * 1 * 5 * 20
    nbytes = 4 * (4 * 1 * 161 * 700 + 32 * 5 * 20 + 4 * 32 * p * q)
    expected = max(flops / (hw.peak_flops * 0.6), nbytes / (hw.dram_bandwidth * 0.85))
    for pass_ in ("fwd", "bwd_data", "bwd_filter"):
        assert roof[pass_][0] == pytest.approx(expected, rel=1e-12)
    m, n, k = 1760, 16, 1760
    assert roof["gemm"][0] == pytest.approx(max(2 * m * n * k / (hw.peak_flops * 0.6),
                                                4 * (m * k + k * n + m * n) /
                                                (hw.dram_bandwidth * 0.85)))


# -- the fit ---------------------------------------------------------------------------------

@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_the_committed_parameters_are_the_fit(sets, committed, fits):
    for name, kp in fits.items():
        family = committed["families"][name]
        assert family["preset"] == sets[name].gpu.preset
        assert family["device"] == sets[name].gpu.model
        for param, value in kp.as_dict().items():
            assert family["params"][param] == pytest.approx(value, rel=1e-3), (name, param)


@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_the_committed_fit_error_is_the_in_sample_error(sets, committed, p100_fit):
    family = committed["families"]["P100"]
    kp = KernelParams(**family["params"])
    figures = cal.ratios(cal.predict(sets["P100"], kp), sets["P100"])
    for kind, ratio in figures.items():
        assert family["provenance"]["fit_error"][kind] == cal.fit_error(ratio).as_dict()
        assert family["provenance"]["rows"][kind] == ratio.size
    refit = cal.fit_error(cal.ratios(cal.predict(sets["P100"], p100_fit), sets["P100"])["fwd"])
    assert refit.geomean_abs_error <= 0.15
    assert refit.geomean_abs_error <= family["provenance"]["fit_error"]["fwd"][
        "geomean_abs_error"] + 1e-3


@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_the_fit_respects_its_bounds_and_is_deterministic(sets, p100_fit):
    assert cal.fit(sets["P100"]) == p100_fit
    for name, value in p100_fit.as_dict().items():
        lo, hi = cal.BOUNDS[name]
        assert lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9), name

    def error(kp: KernelParams) -> float:
        ratio = cal.ratios(cal.predict(sets["P100"], kp), sets["P100"])
        return cal.fit_error(np.concatenate(list(ratio.values()))).geomean_abs_error
    assert error(p100_fit) < 0.7 * error(KernelParams())  # better than where it started
    with pytest.raises(cal.CalibrationError, match="no calibration sets"):
        cal.fit([])


@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_cross_gpu_prediction_is_measured_times_the_model_ratio(sets, fits):
    two = {name: sets[name] for name in fits}
    ev = cal.evaluate(two, own=fits)
    a, b = two["P100"], two["TitanX"]
    assert ev.own == fits
    assert ev.logo["TitanX"] == fits["P100"]  # leaving TitanX out leaves P100's rows alone
    model_a = cal.predict(a, ev.own["P100"])
    model_b = cal.predict(b, ev.logo["TitanX"])
    for kind in cal.KINDS:  # both sets list the same conv layers; TitanX lacks some GEMMs
        index_b = {key: i for i, key in enumerate(b.keys(kind))}
        pairs = [(i, index_b[key]) for i, key in enumerate(a.keys(kind)) if key in index_b]
        ia, ib = (np.array(x) for x in zip(*pairs))
        expected = a.seconds[kind][ia] * model_b[kind][ib] / model_a[kind][ia] / \
            b.seconds[kind][ib]
        expected = expected[~np.isnan(expected)]
        assert expected.size >= 40
        np.testing.assert_allclose(ev.cross[("P100", "TitanX")][kind], expected, rtol=1e-12)
    assert ev.cross[("P100", "TitanX")]["bwd_data"].size == 84  # TitanX lacks 10 of them
    np.testing.assert_allclose(ev.leave_one_out["TitanX"]["fwd"],
                               model_b["fwd"] / b.seconds["fwd"], rtol=1e-12)
    assert set(ev.cross_by_target()) == {"P100", "TitanX"}


# -- kernel_params.json and sst-cdma calibrate -----------------------------------------------

@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_calibrate_check_passes_on_the_committed_file(capsys):
    assert main(["calibrate", "--check"]) == 0
    out = capsys.readouterr().out
    assert "matches the refit" in out and "TitanX_Pascal  bwd_filter" in out


@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_calibrate_writes_and_checks_a_file(tmp_path, capsys):
    data = _copy(tmp_path, ("P100",))
    out = tmp_path / "params.json"
    assert main(["calibrate", "--data", str(data), "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["families"]) == ["P100"]
    assert doc["families"]["P100"]["provenance"]["rows"] == {
        "fwd": 94, "bwd_data": 94, "bwd_filter": 94, "gemm": 160}
    assert doc["families"]["P100"]["provenance"]["cudnn"] == "6.0.21"
    assert all(v == cal.significant(v) for v in doc["families"]["P100"]["params"].values())
    assert main(["calibrate", "--data", str(data), "--output", str(out), "--check"]) == 0
    capsys.readouterr()
    doc["families"]["P100"]["params"]["tile_reuse"] *= 1.001
    out.write_text(json.dumps(doc))
    assert main(["calibrate", "--data", str(data), "--output", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("sst-cdma: params.json: P100: tile_reuse: committed ")
    # the advice repeats the user's own arguments (a bare refit would rewrite the shipped file)
    assert err.endswith(f"; run 'sst-cdma calibrate --data {data} --output {out}' to refit "
                        "it\n")


@pytest.mark.slow  # refits on 160 GEMMs per GPU: seconds to minutes
def test_the_provenance_names_the_files_read(tmp_path, monkeypatch, sets, fits, committed):
    data = _copy(tmp_path, ("P100",))
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--data", "data", "--output", "params.json"]) == 0
    source = json.loads((tmp_path / "params.json").read_text())["families"]["P100"][
        "provenance"]["source"]
    assert source[1:] == [os.path.join("data", name)
                          for name in (cal.CONV_FILE, cal.GEMM_FILE, cal.GPUS_FILE)]
    assert (data / cal.CONV_FILE).exists()
    # the shipped copy keeps its own names, however its folder is given
    for shipped in (sets, cal.load(str(cal.DATA_DIR) + os.sep)):
        doc = cal.params_document({"P100": shipped["P100"]}, fits)
        assert doc["families"]["P100"]["provenance"]["source"] == \
            committed["families"]["P100"]["provenance"]["source"]
    assert committed["families"]["P100"]["provenance"]["source"][1] == \
        "sst_cdma/model/calibration_data/deepbench/conv_train_fp32.csv"


def test_calibrate_reports_bad_data_in_one_line(tmp_path, capsys, monkeypatch):
    data = _copy(tmp_path, ("P100",))
    _edit(data, cal.CONV_FILE, 4, "fwd_ms", "-1")
    assert main(["calibrate", "--data", str(data), "--output", str(tmp_path / "x.json")]) == 1
    assert capsys.readouterr().err == (f"sst-cdma: {data / cal.CONV_FILE}:4: fwd_ms: must be a "
                                       "positive number, got '-1'\n")
    assert not (tmp_path / "x.json").exists()
    monkeypatch.chdir(tmp_path)  # a relative --data is named as given
    assert main(["calibrate", "--data", "./data/", "--output", "x.json"]) == 1
    assert capsys.readouterr().err == ("sst-cdma: ./data/conv_train_fp32.csv:4: fwd_ms: must "
                                       "be a positive number, got '-1'\n")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("check", [False, True])
def test_calibrate_leaves_an_existing_file_alone_on_bad_data(tmp_path, capsys, check):
    data = _copy(tmp_path, ("P100",))
    path = data / cal.GEMM_FILE
    path.write_text(path.read_text().splitlines()[0] + "\n")  # the header only
    out = tmp_path / "params.json"
    out.write_text("{}\n")
    argv = ["calibrate", "--data", str(data), "--output", str(out)] + (["--check"] if check
                                                                        else [])
    assert main(argv) == 1
    assert capsys.readouterr() == ("", f"sst-cdma: {path}: no rows for GPU 'P100' (listed in "
                                       "gpus.csv)\n")
    assert out.read_text() == "{}\n"


def test_a_nan_is_never_written(tmp_path, capsys, monkeypatch):
    doc = {"format": "x", "families": {"P100": {"params": {"tile_reuse": 1.0},
                                                "provenance": {"source": ["a"],
                                                               "fit_error": {"fwd": {
                                                                   "median_ratio": math.nan}}}}}}
    with pytest.raises(cal.CalibrationError) as info:
        cal.params_text("out.json", doc)
    assert str(info.value) == ("out.json: families.P100.provenance.fit_error.fwd.median_ratio: "
                               "not a finite number (nan), which JSON cannot hold")
    doc["families"]["P100"]["provenance"]["fit_error"]["fwd"]["median_ratio"] = 1.0
    doc["families"]["P100"]["params"]["tile_reuse"] = math.inf
    assert json.loads(cal.params_text("out.json", {"a": 1.5})) == {"a": 1.5}
    # sst-cdma calibrate, with and without --check, refuses such a document
    data = _copy(tmp_path, ("P100",), conv_rows=3, gemm_rows=3)
    monkeypatch.setattr(cal, "params_document", lambda sets, fits=None: doc)
    out = tmp_path / "params.json"
    out.write_text("{}\n")
    for check in ([], ["--check"]):
        assert main(["calibrate", "--data", str(data), "--output", str(out)] + check) == 1
        assert capsys.readouterr() == ("", f"sst-cdma: {out}: families.P100.params.tile_reuse: "
                                           "not a finite number (inf), which JSON cannot hold\n")
        assert out.read_text() == "{}\n"


def test_calibrate_writes_into_the_package_only_when_asked(capsys):
    from sst_cdma.model.fitted import PARAMS_PATH

    before = PARAMS_PATH.read_bytes()
    assert main(["calibrate"]) == 1
    assert capsys.readouterr().err == (
        "sst-cdma: calibrate: --output FILE is required: writing the package's own "
        "kernel_params.json, which every later run uses, takes --into-package\n")
    assert main(["calibrate", "--into-package", "--output", "x.json"]) == 1
    assert "not both" in capsys.readouterr().err
    assert PARAMS_PATH.read_bytes() == before


# -- the fit's arithmetic: the same numbers, in less time ----------------------------------------

def _random_params(seed: int) -> KernelParams:
    rng = np.random.default_rng(seed)
    return KernelParams(**{n: float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
                           for n, (lo, hi) in cal.BOUNDS.items()})


def test_pruned_candidates_and_kept_families_give_the_same_numbers(sets):
    from sst_cdma.model.kernel_model import ALGORITHM_FAMILIES, conv_times, gemm_times
    for seed in range(3):
        kp, other = _random_params(seed), _random_params(seed + 10)
        for cset in sets.values():
            hw, g = cset.gpu.hardware, cset.gemm
            assert gemm_times(g["m"], g["n"], g["k"], hw, kp, prune=True).tobytes() == \
                gemm_times(g["m"], g["n"], g["k"], hw, kp).tobytes()
            for pass_ in ("fwd", "bwd_data", "bwd_filter"):
                whole = conv_times(cset.conv, pass_, hw, kp)
                pruned = conv_times(cset.conv, pass_, hw, kp, prune=True)
                for key in ("seconds", "algorithm", "workspace", "by_algorithm", "work"):
                    assert pruned[key].tobytes() == whole[key].tobytes(), (cset.name, key)
                # FFT priced again at other constants, the rest kept from kp: as whole, where
                # the others' constants are kp's
                mixed = KernelParams(**{**kp.as_dict(), "fft_efficiency": other.fft_efficiency})
                keep = {a: pruned["work"][:, ALGORITHMS.index(a)]
                        for f in ("gemm", "winograd") for a in ALGORITHM_FAMILIES[f]}
                again = conv_times(cset.conv, pass_, hw, mixed, prune=True, keep=keep)
                assert again["seconds"].tobytes() == \
                    conv_times(cset.conv, pass_, hw, mixed)["seconds"].tobytes()


def test_the_finite_differences_by_parts_are_whole_evaluations(sets):
    pair = [sets["P100"], sets["M40"]]
    names = KernelParams.names()
    for seed in range(2):
        x = np.log([getattr(_random_params(seed), n) for n in names])
        by_parts = cal._Residuals(pair)
        base = by_parts(x)
        steps = 1.49e-8 * np.maximum(1.0, np.abs(x)) * (1 if seed else -1)
        points = [x + np.eye(len(x))[i] * steps[i] for i in range(len(x))]
        whole = cal._Residuals(pair)
        expected = [whole(p) for p in points]
        calls: list[np.ndarray] = []

        def fun(p: np.ndarray) -> np.ndarray:
            calls.append(p)
            return whole(p)
        got = by_parts.differences(fun, iter(points))
        assert not calls  # every point by parts
        for i, (a, b) in enumerate(zip(got, expected)):
            assert a.tobytes() == b.tobytes(), names[i]
            assert not (i == names.index("gemm_efficiency") and (a == base).all())
        # a point that is not one step from the last point evaluated: evaluated whole
        far = [x + 0.1] + points[1:]
        assert by_parts.differences(fun, far)[0].tobytes() == whole(x + 0.1).tobytes()
        assert len(calls) == 1


def test_the_fit_by_parts_is_the_plain_least_squares_fit(tmp_path):
    from scipy.optimize import least_squares
    data = _copy(tmp_path, ("P100",), conv_rows=30, gemm_rows=40)
    small = cal.load(data)["P100"]
    names = KernelParams.names()
    lo, hi = cal._bounds()
    span = hi - lo
    x0 = np.clip(np.log([getattr(KernelParams(), n) for n in names]), lo + 0.01 * span,
                 hi - 0.01 * span)

    def residuals(x: np.ndarray) -> np.ndarray:  # the fit as it was: whole evaluations
        kp = KernelParams(**dict(zip(names, np.exp(x))))
        pred = cal.predict(small, kp)
        return np.concatenate([np.log(pred[k][ok] / small.seconds[k][ok]) for k in cal.KINDS
                               for ok in [~np.isnan(small.seconds[k])]])
    plain = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.2,
                          x_scale=1.0, method="trf")
    assert cal.fit(small) == KernelParams(**dict(zip(names, (float(v) for v in
                                                              np.exp(plain.x)))))


@pytest.mark.slow  # a refit of every GPU: seconds
def test_check_finds_a_changed_constant_the_measurements_leave_free(tmp_path, capsys):
    # no P100 kernel is launch-bound at its fit: a gradient or fit-error check could not tell
    # 3.84377 us from 3.84761 us; the refit can
    doc = json.loads(PARAMS_PATH.read_text(encoding="utf-8"))
    params = doc["families"]["P100"]["params"]
    params["launch_s"] = cal.significant(params["launch_s"] * 1.001)
    out = tmp_path / "kernel_params.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["calibrate", "--check", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sst-cdma: kernel_params.json: P100: launch_s: committed 3.84761e-06, "
                          "refit 3.84377e-06; run ")
