"""Fitting the kernel model's tensor-core path to measured tensor-core kernels, and measuring
how well it fits and carries.

Three sets of measurements (``calibration_data/``, each folder's README gives its source):

* the T4's DeepBench tensor-core sheet (``deepbench/conv_train_fp16_tensor_op.csv``,
  ``gemm_train_fp16_tensor_op.csv``: fp16 inputs, fp32 accumulate), the same 94 convolutions
  as the fp32 sheet (:func:`load_tensor_sheet` checks the rows match its layers) and 160 GEMMs.
  The tensor-core path's :class:`~sst_cdma.model.kernel_model.KernelParams` are fitted to it
  (``Turing``), as the fp32 path's are to the fp32 sheets (the same soft-L1 least squares on
  log(predicted / measured), :data:`BOUNDS`);
* the best achievable bf16 GEMM of A100 SXM, A100 PCIe, H100 SXM and GH200
  (``attention/gemm_bf16_peak.csv``, back to back, launches hidden): the cuBLAS factor
  ``blas_efficiency`` refitted per family (``Ampere``, ``Hopper``), the T4's other constants
  kept;
* FlashAttention-2 forward + backward on an A100 and an H100 (``attention/attention_fwd_bwd.csv``):
  each family's :class:`~sst_cdma.model.kernel_model.AttentionParams` of ``flash2``.

What has no measurement is carried and says so: Volta from Turing, Blackwell from Hopper,
FlashAttention-2 on Turing and Volta from Ampere; FlashAttention-3 (Hopper only) is Hopper's
FlashAttention-2 at :data:`FLASH3_SPEEDUP` x its efficiency, the lower bound of the speedup
its paper reports. :func:`tensor_params_document` gives ``tensor_core_params.json``
(:mod:`sst_cdma.model.fitted` reads it); ``python -m sst_cdma.model.tensor_fit`` rewrites it.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.model.calibration import (BOUNDS, CONV_FILE, DATA_DIR, GEMM_FILE, CalibrationError, FitError,
                          _read, _time, _whole, fit_error, significant)
from sst_cdma.model.kernel_model import (PASSES, AttentionParams, Hardware, KernelParams, TensorCores,
                           conv_times, gemm_times, price_attention)

__all__ = ["TC_CONV_FILE", "TC_GEMM_FILE", "ATTENTION_DIR", "FLASH3_SPEEDUP",
           "MEASURED_HARDWARE", "FIXED", "TensorSheet", "load_tensor_sheet", "predict_sheet",
           "fit_sheet", "gemm_peak_rows", "attention_rows", "fit_blas", "fit_attention",
           "predict_attention", "tensor_params_document", "write_tensor_params",
           "TENSOR_PARAMS_PATH"]

TC_CONV_FILE = "conv_train_fp16_tensor_op.csv"
TC_GEMM_FILE = "gemm_train_fp16_tensor_op.csv"
ATTENTION_DIR = DATA_DIR.parent / "attention"
TENSOR_PARAMS_PATH = Path(__file__).with_name("tensor_core_params.json")
#: FlashAttention-3 against FlashAttention-2 on the H100: "1.5-2.0x" (Shah et al.,
#: "FlashAttention-3", 2024, abstract); the lower bound, no measurement shipped.
FLASH3_SPEEDUP = 1.5
#: Parameters the tensor-core path does not use (no Winograd or FFT on tensor cores): held at
#: 1, not fitted.
FIXED = ("winograd_efficiency", "fft_efficiency")

#: The measured devices' hardware (datasheets; docs/gpus.md): SMs, fp32 peak, DRAM bandwidth,
#: dense fp16/bf16 tensor peak, fp32 lanes per SM, TF32 peak.
MEASURED_HARDWARE: dict[str, Hardware] = {
    "T4": Hardware(40, 8.1e12, 320e9, 65e12, sm_fp32_lanes=64),
    "A100 SXM": Hardware(108, 19.5e12, 2.039e12, 312e12, sm_fp32_lanes=64, tf32_flops=156e12),
    "A100 PCIe": Hardware(108, 19.5e12, 1.935e12, 312e12, sm_fp32_lanes=64,
                          tf32_flops=156e12),
    "H100 SXM": Hardware(132, 67e12, 3.35e12, 989.4e12, tf32_flops=494.5e12),
    "GH200": Hardware(132, 67e12, 4.9e12, 989.4e12, tf32_flops=494.5e12),
}
#: Which measured device a row's ``gpu`` names, and its family.
_DEVICES = {"T4": ("T4", "Turing"), "NVIDIA A100 SXM": ("A100 SXM", "Ampere"),
            "A100 80GB SXM4": ("A100 SXM", "Ampere"), "NVIDIA A100 PCIe": ("A100 PCIe", "Ampere"),
            "NVIDIA H100 SXM": ("H100 SXM", "Hopper"), "H100 80GB SXM5": ("H100 SXM", "Hopper"),
            "NVIDIA GH200 SXM": ("GH200", "Hopper")}
_CONV_SHAPE = ("W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")
_CONV_COLUMNS = ("gpu",) + _CONV_SHAPE + ("fwd_ms", "bwd_data_ms", "bwd_filter_ms")
_GEMM_COLUMNS = ("gpu", "M", "N", "K", "time_ms")
_ATTENTION_COLUMNS = ("gpu", "model", "batch", "seq", "attention", "value")


@dataclass(frozen=True)
class TensorSheet:
    """The T4's tensor-core kernels: convolution shapes as arrays (the keys ``conv_times``
    takes), GEMM M, N, K, and the measured seconds per kind (``fwd``, ``bwd_data``,
    ``bwd_filter``, ``gemm``; NaN: not measured)."""

    conv: dict[str, np.ndarray]
    gemm: dict[str, np.ndarray]
    seconds: dict[str, np.ndarray]
    hardware: Hardware


def _fp32_layers(folder: str) -> list[tuple[int, ...]]:
    """The convolution layers of the fp32 sheet: the shapes of its first GPU, in order."""
    path = os.path.join(folder, CONV_FILE)
    rows = _read(path, ("gpu",) + _CONV_SHAPE)
    first = rows[0][1]["gpu"] if rows else ""
    return [tuple(int(r[c]) for c in _CONV_SHAPE) for _, r in rows if r["gpu"] == first]


def _fp32_gemms(folder: str) -> list[tuple[int, ...]]:
    path = os.path.join(folder, GEMM_FILE)
    rows = _read(path, ("gpu", "M", "N", "K"))
    first = rows[0][1]["gpu"] if rows else ""
    return [tuple(int(r[c]) for c in "MNK") for _, r in rows if r["gpu"] == first]


def _check_gpu(value: str, where: str) -> None:
    if value not in _DEVICES or _DEVICES[value][1] != "Turing":
        raise CalibrationError(f"{where}: gpu: the tensor-core sheet is the T4's, got {value!r}")


def load_tensor_sheet(data_dir: Optional[os.PathLike[str] | str] = None) -> TensorSheet:
    """The tensor-core sheet of ``data_dir`` (default: the shipped DeepBench copy). Its rows
    must be the fp32 sheet's layers, in order (and its GEMMs begin with the fp32 sheet's): a
    row that is not is a :class:`CalibrationError` naming the file and line."""
    folder = os.fspath(data_dir if data_dir is not None else DATA_DIR)
    conv_path, gemm_path = (os.path.join(folder, f) for f in (TC_CONV_FILE, TC_GEMM_FILE))
    layers, gemms = _fp32_layers(folder), _fp32_gemms(folder)
    conv_rows = _read(conv_path, _CONV_COLUMNS)
    if len(conv_rows) != len(layers):
        raise CalibrationError(f"{conv_path}: {len(conv_rows)} convolutions, the fp32 sheet "
                               f"({CONV_FILE}) has {len(layers)} layers")
    shapes, times = [], []
    for (line, row), layer in zip(conv_rows, layers):
        where = f"{conv_path}:{line}"
        _check_gpu(row["gpu"], where)
        shape = tuple(_whole(row[c], where, c, 0 if c.startswith("pad") else 1)
                      for c in _CONV_SHAPE)
        if shape != layer:
            raise CalibrationError(f"{where}: layer {shape} does not match the fp32 sheet's "
                                   f"layer {layer} ({CONV_FILE})")
        shapes.append(shape)
        times.append(tuple(_time(row[c + "_ms"], where, c + "_ms", optional=p != "fwd")
                           for p, c in zip(PASSES, PASSES)))
    gemm_rows = _read(gemm_path, _GEMM_COLUMNS)
    mnk, gtimes = [], []
    for i, (line, row) in enumerate(gemm_rows):
        where = f"{gemm_path}:{line}"
        _check_gpu(row["gpu"], where)
        g = tuple(_whole(row[c], where, c, 1) for c in "MNK")
        if i < len(gemms) and g != gemms[i]:
            raise CalibrationError(f"{where}: GEMM {g} does not match the fp32 sheet's "
                                   f"{gemms[i]} ({GEMM_FILE})")
        mnk.append(g)
        gtimes.append(_time(row["time_ms"], where, "time_ms"))
    cols = list(zip(*shapes))
    conv = {k: np.array(cols[i], dtype=float) for i, k in enumerate(
        ("w", "h", "c", "n", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w"))}
    seconds = {p: np.array([t[i] for t in times]) for i, p in enumerate(PASSES)}
    seconds["gemm"] = np.array(gtimes)
    gemm = {x: np.array([g[i] for g in mnk], dtype=float) for i, x in enumerate("mnk")}
    return TensorSheet(conv, gemm, seconds, MEASURED_HARDWARE["T4"])


def _tc(kp: KernelParams, family: str = "Turing") -> TensorCores:
    return TensorCores(family, kp, {})


def predict_sheet(sheet: TensorSheet, kp: KernelParams,
                  hw: Optional[Hardware] = None) -> dict[str, np.ndarray]:
    """Modelled seconds of every row of ``sheet`` on tensor cores at ``kp``, on ``hw``
    (default the T4)."""
    hw = hw or sheet.hardware
    out = {p: conv_times(sheet.conv, p, hw, kp, tensor_peak=hw.tensor_flops, element=2)
           ["seconds"] for p in PASSES}
    g = sheet.gemm
    out["gemm"] = gemm_times(g["m"], g["n"], g["k"], hw, kp, dtype="float16", tc=_tc(kp))
    return out


def _least_squares(residuals: Any, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Any:
    from scipy.optimize import least_squares

    return least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.2,
                         x_scale=1.0, method="trf").x


def fit_sheet(sheet: TensorSheet) -> KernelParams:
    """The tensor-core path's parameters fitted to ``sheet`` (every measured kernel, the
    fp32 fit's loss and bounds; :data:`FIXED` held at 1). Deterministic."""
    names = [n for n in KernelParams.names() if n not in FIXED]
    lo = np.log([BOUNDS[n][0] for n in names])
    hi = np.log([BOUNDS[n][1] for n in names])
    x0 = np.clip(np.log([getattr(KernelParams(), n) for n in names]),
                 lo + 0.01 * (hi - lo), hi - 0.01 * (hi - lo))
    fixed = dict.fromkeys(FIXED, 1.0)

    def residuals(x: np.ndarray) -> np.ndarray:
        kp = KernelParams(**dict(zip(names, np.exp(x))), **fixed)
        pred = predict_sheet(sheet, kp)
        return np.concatenate([np.log(pred[k][ok] / sheet.seconds[k][ok])
                               for k in pred for ok in [~np.isnan(sheet.seconds[k])]])

    x = _least_squares(residuals, x0, lo, hi)
    return KernelParams(**dict(zip(names, (float(v) for v in np.exp(x)))), **fixed)


def _rows(path: Path) -> list[tuple[str, dict[str, str]]]:
    return [(f"{path}:{line}", row) for line, row in _read(os.fspath(path), _ATTENTION_COLUMNS)]


def _device(value: str, where: str) -> tuple[str, str]:
    if value not in _DEVICES:
        raise CalibrationError(f"{where}: gpu: unknown GPU {value!r} (one of "
                               f"{', '.join(_DEVICES)})")
    return _DEVICES[value]


def gemm_peak_rows(folder: Path = ATTENTION_DIR) -> list[dict[str, Any]]:
    """The best bf16 GEMM of each device: ``device``, ``family``, ``mnk``, ``seconds``."""
    out = []
    for where, row in _rows(folder / "gemm_bf16_peak.csv"):
        device, family = _device(row["gpu"], where)
        shape = row["model"].rsplit(" ", 1)[-1].split("x")
        m, n, k = (_whole(x, where, "model", 1) for x in shape)
        tflops = float(row["value"])
        out.append({"device": device, "family": family, "mnk": (m, n, k),
                    "seconds": 2.0 * m * n * k / (tflops * 1e12)})
    return out


def attention_rows(folder: Path = ATTENTION_DIR, kernel: str = "FlashAttention-2"
                   ) -> list[dict[str, Any]]:
    """The attention measurements of ``kernel``: ``device``, ``family``, ``batch``, ``seq``,
    ``heads``, ``head_dim``, ``causal`` and ``seconds`` (fwd + bwd, from the source's FLOP
    count: 3.5 x 4 x batch x seq^2 x hidden, halved when causal; hidden 2048)."""
    out = []
    for where, row in _rows(folder / "attention_fwd_bwd.csv"):
        if row["attention"] != kernel:
            continue
        device, family = _device(row["gpu"], where)
        d = _whole(row["model"].rsplit("head dim", 1)[-1].strip(), where, "model", 1)
        causal = "non-causal" not in row["model"]
        b, s = _whole(row["batch"], where, "batch", 1), _whole(row["seq"], where, "seq", 1)
        flops = 3.5 * 4 * b * s * s * 2048 / (2 if causal else 1)
        out.append({"device": device, "family": family, "batch": b, "seq": s,
                    "heads": 2048 // d, "head_dim": d, "causal": causal,
                    "seconds": flops / (float(row["value"]) * 1e12)})
    return out


def _gemm_busy_s(row: Mapping[str, Any], kp: KernelParams, family: str) -> float:
    hw = MEASURED_HARDWARE[row["device"]]
    m, n, k = row["mnk"]
    return float(gemm_times([m], [n], [k], hw, kp, dtype="bfloat16",
                            tc=_tc(kp, family))[0]) - kp.launch_s


def fit_blas(kp: KernelParams, rows: Sequence[Mapping[str, Any]]) -> KernelParams:
    """``kp`` with ``blas_efficiency`` refitted to the best-GEMM ``rows`` of one family
    (launch-free: the measurements hide it)."""
    lo, hi = (np.log([BOUNDS["blas_efficiency"][i]]) for i in (0, 1))

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = replace(kp, blas_efficiency=float(np.exp(x[0])))
        return np.array([math.log(_gemm_busy_s(r, trial, "") / r["seconds"]) for r in rows])

    x = _least_squares(residuals, np.log([kp.blas_efficiency]), lo, hi)
    return replace(kp, blas_efficiency=float(np.exp(x[0])))


def predict_attention(row: Mapping[str, Any], tc: TensorCores, kernel: str = "flash2") -> float:
    """Modelled seconds of an attention measurement's forward + backward."""
    hw = MEASURED_HARDWARE[row["device"]]
    return sum(price_attention(row["batch"], row["heads"], row["seq"], row["seq"],
                               row["head_dim"], p, hw, tc.params, causal=row["causal"],
                               dtype="float16", tc=tc, kernel=kernel).seconds
               for p in ("fwd", "bwd"))


def fit_attention(tc: TensorCores, rows: Sequence[Mapping[str, Any]]) -> AttentionParams:
    """FlashAttention-2's constants of one family fitted to its ``rows``."""
    lo, hi = np.log([0.05, 1.0]), np.log([1.0, 1000.0])

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = replace(tc, attention={"flash2": AttentionParams(*np.exp(x))})
        return np.array([math.log(predict_attention(r, trial) / r["seconds"]) for r in rows])

    x = _least_squares(residuals, np.log([0.5, 32.0]), lo, hi)
    return AttentionParams(*(float(v) for v in np.exp(x)))  # type: ignore[arg-type]


def _error(ratios: Sequence[float]) -> dict[str, Any]:
    err: FitError = fit_error(np.array(ratios, dtype=float))
    return err.as_dict()


def _rounded(kp: KernelParams) -> KernelParams:
    return KernelParams(**{k: significant(v) for k, v in kp.as_dict().items()})


def _attention_entry(a: AttentionParams, fitted_on: str) -> dict[str, Any]:
    return {"efficiency": significant(a.efficiency),
            "head_dim_half": significant(a.head_dim_half), "fitted_on": fitted_on}


def tensor_params_document() -> dict[str, Any]:
    """The ``tensor_core_params.json`` document: every family's tensor-core constants, what
    they were fitted on (or carried from), and the fit errors (in sample, and the T4 fit
    carried to the A100/H100 best GEMMs before their refit)."""
    sheet = load_tensor_sheet()
    turing = _rounded(fit_sheet(sheet))
    pred = predict_sheet(sheet, turing)
    errors: dict[str, Any] = {
        "t4_sheet": {k: _error(pred[k][ok] / sheet.seconds[k][ok])
                     for k in pred for ok in [~np.isnan(sheet.seconds[k])]}}
    peaks, attn = gemm_peak_rows(), attention_rows()
    errors["best_gemm_carried_from_t4"] = {
        r["device"]: round(_gemm_busy_s(r, turing, "") / r["seconds"], 4) for r in peaks}
    params = {"Turing": turing}
    att: dict[str, dict[str, Any]] = {}
    sheet_text = ("fitted on the T4's DeepBench tensor-core sheet (94 convolutions x 3 passes, 160 "
                  "GEMMs)")
    fitted_on = {"Turing": sheet_text, "Volta": f"carried from Turing ({sheet_text}): no "
                 "measurement of Volta tensor cores"}
    for family in ("Ampere", "Hopper"):
        mine = [r for r in peaks if r["family"] == family]
        params[family] = _rounded(fit_blas(turing, mine))
        fitted_on[family] = (f"{sheet_text}, its cuBLAS factor refitted to the best bf16 GEMM of "
                             f"{' and '.join(r['device'] for r in mine)} (ml-engineering "
                             "mamf-finder)")
        errors[f"best_gemm_{family}"] = {
            r["device"]: round(_gemm_busy_s(r, params[family], family) / r["seconds"], 4)
            for r in mine}
        rows = [r for r in attn if r["family"] == family]
        a = fit_attention(TensorCores(family, params[family], {}), rows)
        a = AttentionParams(significant(a.efficiency), significant(a.head_dim_half))
        devices = sorted({r["device"] for r in rows})
        att[family] = {"flash2": _attention_entry(
            a, f"FlashAttention-2 fwd+bwd on {', '.join(devices)} ({len(rows)} rows, "
               "Dao-AILab/flash-attention benchmark)")}
        tc = TensorCores(family, params[family], {"flash2": a})
        errors[f"flash2_{family}"] = _error([predict_attention(r, tc) / r["seconds"]
                                             for r in rows])
    params["Volta"] = turing
    params["Blackwell"] = params["Hopper"]
    fitted_on["Blackwell"] = f"carried from Hopper ({fitted_on['Hopper']}): no measurement " \
                             "of Blackwell tensor cores"
    hopper2 = att["Hopper"]["flash2"]
    att["Hopper"]["flash3"] = {
        "efficiency": significant(hopper2["efficiency"] * FLASH3_SPEEDUP),
        "head_dim_half": hopper2["head_dim_half"],
        "fitted_on": f"no measurement: Hopper's FlashAttention-2 fit x {FLASH3_SPEEDUP} "
                     "(FlashAttention-3 paper: 1.5-2.0x FlashAttention-2 on H100)"}
    ampere2 = att["Ampere"]["flash2"]
    for family in ("Turing", "Volta"):
        att[family] = {"flash2": {**ampere2, "fitted_on": "no measurement on this family: "
                                  "carried from Ampere's FlashAttention-2 fit"}}
    att["Blackwell"] = {"flash2": {**hopper2, "fitted_on": "no measurement on Blackwell: "
                                   "carried from Hopper's FlashAttention-2 fit"}}
    families = {f: {"params": params[f].as_dict(), "fitted_on": fitted_on[f],
                    "attention": att[f]} for f in ("Turing", "Volta", "Ampere", "Hopper",
                                                  "Blackwell")}
    return {"format": "sst-cdma-tensor-core-params", "version": 1,
            "calibrated_by": "python -m sst_cdma.tools.tensor_fit",
            "families": families, "fit_error": errors}


def write_tensor_params() -> dict[str, Any]:
    """Refit the tensor-core path and rewrite ``tensor_core_params.json``; the document
    written (its ``fit_error`` says how well each kind fits)."""
    doc = tensor_params_document()
    write_text_whole(TENSOR_PARAMS_PATH, json.dumps(doc, indent=1) + "\n")
    return doc
