"""The fitted kernel-model parameters of each measured GPU family, as ``sst-cdma calibrate``
wrote them into ``kernel_params.json`` beside this module, with their provenance (source files,
rows, fit error), and the :class:`KernelModel` of a GPU preset built from them.

File format::

    {"format": "sst-cdma-kernel-params", "version": 1, "calibrated_by": "...",
     "families": {"P100": {"device": "NVIDIA Tesla P100", "preset": "pascal",
                           "params": {"gemm_efficiency": 0.83, ...},
                           "provenance": {"source": [...], "rows": {...},
                                          "fit_error": {...}}}, ...}}
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .gpus import GPUS, GPUSpec
from .kernel_model import HALF_DTYPES, TENSOR_CORE, Hardware, KernelParams, ModelError

__all__ = ["PARAMS_PATH", "FORMAT", "VERSION", "Family", "KernelModel", "load_families",
           "kernel_model_for"]

#: Where the committed fit lives.
PARAMS_PATH = Path(__file__).with_name("kernel_params.json")
FORMAT = "sst-cdma-kernel-params"
VERSION = 1


@dataclass(frozen=True)
class Family:
    """One measured GPU family's fitted parameters and where they came from."""

    name: str
    device: str
    params: KernelParams
    provenance: dict[str, Any]


@dataclass(frozen=True)
class KernelModel:
    """The kernel model of one GPU: its hardware, the fitted parameters it uses, and a line
    saying where they came from (``kernel_times`` in summary.json)."""

    hardware: Hardware
    params: KernelParams
    family: str
    preset: str
    measured: bool

    @property
    def description(self) -> str:
        """Where this GPU's fp32 kernel times come from, for the summary."""
        if self.measured:
            return f"model fitted on {self.family} (DeepBench kernel measurements)"
        return (f"model fitted on {self.family} (DeepBench), scaled to {self.preset}'s SMs, "
                f"SM width ({self.hardware.sm_fp32_lanes} fp32 lanes), peak FLOP/s and DRAM "
                f"bandwidth (no measurements of this GPU)")

    def describe(self, dtype: str = "float32") -> str:
        """Where this GPU's kernel times in ``dtype`` come from, for the summary's
        ``kernel_times``: :attr:`description`, and for a 16-bit type how its GEMMs and fused
        attention are priced (on tensor cores from the dense peak at assumed efficiencies, not
        fitted to measurements; or at the fp32 model's rate)."""
        if dtype not in HALF_DTYPES:
            return self.description
        hw = self.hardware
        if hw.on_tensor_cores(dtype):
            how = (f"{dtype} GEMMs and attention on tensor cores: dense peak "
                   f"{hw.tensor_flops / 1e12:g} TFLOP/s at an assumed "
                   f"{TENSOR_CORE.gemm_efficiency:g} for large GEMMs (published figures, "
                   f"docs/kernel_model.md), not fitted to measurements of tensor-core kernels")
        elif dtype == "float16" and hw.fp16_flops > 0:
            how = (f"no tensor cores: float16 GEMMs and attention at the fp32 model's "
                   f"efficiencies on the {hw.fp16_flops / 1e12:g} TFLOP/s half2 rate")
        else:
            how = f"no {dtype} tensor cores: {dtype} GEMMs and attention at the fp32 rate"
        return f"{self.description}; {how}; convolutions at the fp32 rate"


def _parse(doc: Any, where: str) -> dict[str, Family]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelError(f"{where}: not a kernel-parameters file (format must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise ModelError(f"{where}: unsupported version {doc.get('version')!r}")
    families = doc.get("families")
    if not isinstance(families, dict) or not families:
        raise ModelError(f"{where}: 'families' must map family names to fitted parameters")
    out = {}
    for name, entry in families.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
            raise ModelError(f"{where}: family {name!r} needs a 'params' mapping")
        out[name] = Family(name, str(entry.get("device", name)),
                           KernelParams.from_mapping(entry["params"], f"{where}: {name}"),
                           dict(entry.get("provenance", {})))
    return out


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> dict[str, Family]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: cannot read kernel parameters: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    return _parse(doc, path)


def load_families(path: Optional[os.PathLike[str] | str] = None) -> dict[str, Family]:
    """The fitted families of ``path`` (default: the committed ``kernel_params.json``)."""
    p = os.fspath(path or PARAMS_PATH)
    try:
        mtime = os.stat(p).st_mtime_ns
    except OSError as exc:
        raise ModelError(f"{p}: cannot read kernel parameters: {exc.strerror}") from None
    return _load(p, mtime)


def kernel_model_for(preset: str, spec: Optional[GPUSpec] = None) -> KernelModel:
    """The kernel model of GPU preset ``preset`` (or of ``spec``, named ``preset``)."""
    spec = spec or GPUS[preset]
    families = load_families()
    if spec.kernel_family not in families:
        raise ModelError(f"GPU preset {preset!r}: no fitted kernel parameters for family "
                         f"{spec.kernel_family!r} in {PARAMS_PATH}")
    return KernelModel(Hardware(spec.sms, spec.peak_flops, spec.dram_bandwidth_Bps,
                                spec.tensor_flops, spec.tensor_dtypes, spec.fp16_flops,
                                spec.sm_fp32_lanes),
                       families[spec.kernel_family].params, spec.kernel_family, preset,
                       spec.measured)
