"""The files a validation run writes besides the layer-times and CPU Adam files: the kernels
and bandwidths in the calibration data's formats (``sst_cdma/model/calibration_data/``, whose
READMEs give the columns), each step's per-layer timeline, every figure in one
``measurements.json``, and ``provenance.json``.

``calibration/`` holds ``gpus.csv``, ``conv_train_fp32.csv`` and ``gemm_train_fp32.csv`` in
DeepBench's columns (what ``sst-cdma calibrate --data`` reads), the 16-bit kernels as
``conv_train_<bf16|fp16>_tensor_op.csv`` and ``gemm_train_<...>_tensor_op.csv`` (the columns
of the T4's tensor-op sheets), and ``bandwidth.csv`` in the row format of
``calibration_data/attention/`` (one figure a row, ``metric`` and ``value``). The calibration
set is named after the device (``gpu`` column); ``sst-cdma calibrate --data`` fits it once a
GPU preset names that set as its ``calibration`` (sst_cdma/model/gpus.py).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.model.calibration import (_CONV_COLUMNS, _GEMM_COLUMNS, _GPUS_COLUMNS, CONV_FILE,
                                        GEMM_FILE, GPUS_FILE)
from sst_cdma.tools.validate.bandwidth import BandwidthFigure
from sst_cdma.tools.validate.kernels import ConvKernel, GemmKernel
from sst_cdma.tools.validate.provenance import DeviceFacts
from sst_cdma.tools.validate.training import StepTiming

__all__ = ["ROW_COLUMNS", "PLACEHOLDER_ALGORITHM", "BANDWIDTH_FILE", "calibration_name",
           "write_calibration",
           "write_timeline", "write_json", "csv_text"]

#: the columns of calibration_data/attention/*.csv: one measured figure a row
ROW_COLUMNS = ("source", "gpu", "model", "batch", "seq", "dtype", "attention", "metric",
               "value", "notes")
BANDWIDTH_FILE = "bandwidth.csv"
#: PyTorch does not say which algorithm cuDNN picked: the column (which the loader requires and
#: the fit does not read) holds this placeholder, as the docs say
PLACEHOLDER_ALGORITHM = "IMPLICIT_PRECOMP_GEMM"
#: DeepBench's spelling of a 16-bit type in its sheet names
_SHEET_DTYPE = {"float16": "fp16", "bfloat16": "bf16"}


def calibration_name(device: str) -> str:
    """The calibration set's name for a device: its name with every run of other characters
    than letters and digits as one underscore ("NVIDIA H100 PCIe" -> "NVIDIA_H100_PCIe")."""
    return re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_") or "device"


def csv_text(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text of ``rows`` (dicts by column) under ``columns``."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _ms(seconds: float) -> str:
    return "" if math.isnan(seconds) else f"{seconds * 1e3:.6g}"


def _conv_rows(gpu: str, kernels: Sequence[ConvKernel]) -> list[dict[str, Any]]:
    return [{"gpu": gpu, **k.shape, "fwd_ms": _ms(k.fwd_s), "bwd_data_ms": _ms(k.bwd_data_s),
             "bwd_filter_ms": _ms(k.bwd_filter_s),
             "fwd_algorithm": PLACEHOLDER_ALGORITHM} for k in kernels]


def _gemm_rows(gpu: str, kernels: Sequence[GemmKernel]) -> list[dict[str, Any]]:
    return [{"gpu": gpu, "M": k.m, "N": k.n, "K": k.k, "a_transpose": "N", "b_transpose": "N",
             "time_ms": _ms(k.seconds)} for k in kernels]


def _bandwidth_rows(gpu: str, figures: Sequence[BandwidthFigure]) -> list[dict[str, Any]]:
    return [{"source": "sst-cdma validate (this folder's provenance.json)", "gpu": gpu,
             "model": f"{f.what} {f.size} bytes", "batch": 1, "seq": "",
             "dtype": "float32" if f.what == "add kernel" else "uint8", "attention": "",
             "metric": "GB/s (bytes moved over the median time)",
             "value": f"{f.bytes_per_s / 1e9:.6g}",
             "notes": f"{f.traffic} bytes moved in {f.seconds * 1e3:.6g} ms"} for f in figures]


def write_calibration(folder: Path, gpu: str, facts: DeviceFacts,
                      convs: Sequence[ConvKernel], gemms: Sequence[GemmKernel],
                      figures: Sequence[BandwidthFigure]) -> list[Path]:
    """Write ``folder``'s calibration files; ``facts`` is the provenance's device record.
    Returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    gpus = [{"gpu": gpu, "model": facts["name"], "cudnn": facts["cudnn"] or "none",
             "cuda": facts["cuda"] or "none", "source_file": "sst-cdma validate"}]
    texts = {GPUS_FILE: csv_text(_GPUS_COLUMNS, gpus),
             BANDWIDTH_FILE: csv_text(ROW_COLUMNS, _bandwidth_rows(gpu, figures))}
    for dtype in sorted({k.dtype for k in convs} | {k.dtype for k in gemms}):
        conv_name, gemm_name = CONV_FILE, GEMM_FILE
        if dtype != "float32":
            sheet = f"{_SHEET_DTYPE[dtype]}_tensor_op"
            conv_name, gemm_name = (f.replace("fp32", sheet) for f in (CONV_FILE, GEMM_FILE))
        texts[conv_name] = csv_text(_CONV_COLUMNS, _conv_rows(
            gpu, [k for k in convs if k.dtype == dtype]))
        texts[gemm_name] = csv_text(_GEMM_COLUMNS, _gemm_rows(
            gpu, [k for k in gemms if k.dtype == dtype]))
    for name, text in texts.items():
        write_text_whole(folder / name, text)
        written.append(folder / name)
    return written


def write_timeline(path: Path, step: StepTiming) -> None:
    """One step's per-layer timeline as CSV: layer, phase, start and end in ms."""
    rows = [{"layer": s.layer, "phase": s.phase, "start_ms": f"{s.start_s * 1e3:.6g}",
             "end_ms": f"{s.end_s * 1e3:.6g}"} for s in step.spans]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_whole(path, csv_text(("layer", "phase", "start_ms", "end_ms"), rows))


def write_json(path: Path, doc: Any, root: Optional[Path] = None) -> None:
    """``doc`` as indented JSON (dataclasses as dicts, NaN as null); paths and path strings
    inside ``root`` are written relative to it (the run writes into a staging folder that
    becomes the output folder)."""
    prefix = f"{root}{os.sep}" if root is not None else None

    def plain(value: Any) -> Any:
        if hasattr(value, "__dataclass_fields__"):
            return plain(asdict(value))
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, Path):
            return plain(str(value))
        if isinstance(value, str) and prefix and value.startswith(prefix):
            return value[len(prefix):]
        return value
    write_text_whole(path, json.dumps(plain(doc), indent=1) + "\n")
