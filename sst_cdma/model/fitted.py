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
import os
from pathlib import Path
from typing import Any, Optional

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.dtypes import NO_TF32, TF32_MODES
from sst_cdma.model.element_params import fitted_word, network_word
from sst_cdma.model.gpus import GPUS, GPUSpec
from sst_cdma.model.stacks import DEFAULT_STACK, describe_stack
from sst_cdma.model.kernel_model import (ATTENTION_KERNELS, HALF_DTYPES, AttentionParams, Hardware,
                           KernelParams, ModelError, TensorCores)

__all__ = ["PARAMS_PATH", "TENSOR_PARAMS_PATH", "FORMAT", "VERSION", "TF32_MODES", "Family",
           "KernelModel", "load_families", "load_tensor_families", "kernel_model_for"]

#: Where the committed fit lives.
PARAMS_PATH = Path(__file__).with_name("kernel_params.json")
#: Where the committed tensor-core fit lives (``python -m sst_cdma.tools.tensor_fit``).
TENSOR_PARAMS_PATH = Path(__file__).with_name("tensor_core_params.json")
TENSOR_FORMAT = "sst-cdma-tensor-core-params"
FORMAT = "sst-cdma-kernel-params"
#: a fitted kernel-parameter file: parameters per family and device (the shipped are 13 KiB)
PARAMS_FILE = FileKind("a kernel-parameter file", 16 * MIB)
VERSION = 1
#: the tensor-core families FlashAttention-2 runs on: "Ampere, Ada, or Hopper GPUs" (the
#: FlashAttention README, Dao-AILab/flash-attention, "Installation and features"; Turing
#: "is coming soon", FlashAttention 1.x there) and Blackwell after them
FLASH2_FAMILIES = ("Ampere", "Hopper", "Blackwell")


@frozen_record
class Family(FrozenRecord):
    """One measured GPU family's fitted parameters and where they came from."""

    name: str
    device: str
    params: KernelParams
    provenance: dict[str, Any]


@frozen_record
class KernelModel(FrozenRecord):
    """The kernel model of one GPU: its hardware, the fitted parameters it uses, its
    tensor-core path (None: no tensor cores), the TF32 mode asked, and a line saying where
    they came from (``kernel_times`` in summary.json)."""

    hardware: Hardware
    params: KernelParams
    family: str
    preset: str
    measured: bool
    tensor: Optional[TensorCores] = None
    #: the TF32 mode as asked, the fitted kernels' ``tf32`` (:data:`TF32_MODES`; '': PyTorch's
    #: default, :meth:`tf32_mode`)
    tf32: str = ""
    #: the training stack whose memory-bound kernels a transformer launches
    #: (:mod:`sst_cdma.model.stacks`; ``fused``: the simulator's own set)
    stack: str = DEFAULT_STACK

    @property
    def description(self) -> str:
        """Where this GPU's fp32 kernel times come from, for the summary."""
        if self.measured:
            return f"model fitted on {self.family} (DeepBench kernel measurements)"
        return (f"model fitted on {self.family} (DeepBench), scaled to {self.preset}'s SMs, "
                f"SM width ({self.hardware.sm_fp32_lanes} fp32 lanes), peak FLOP/s and DRAM "
                f"bandwidth (no measurements of this GPU)")

    def tf32_mode(self, asked: str = "") -> str:
        """The TF32 mode a run uses: ``asked`` (one of :data:`TF32_MODES`), or with none asked
        PyTorch's default (``conv`` where the GPU has TF32, else ``none``). TF32 asked of a
        GPU without it is a :class:`ModelError`."""
        has = self.hardware.tf32_flops > 0
        if not asked:
            return "conv" if has else NO_TF32
        if asked not in TF32_MODES:
            raise ModelError(f"{fitted_word('tf32', asked)}: unknown mode (one of "
                             f"{', '.join(TF32_MODES)})")
        if asked != NO_TF32 and not has:
            raise ModelError(f"{fitted_word('tf32', asked)}: GPU preset {self.preset!r} has "
                             "no TF32 (tensor "
                             "cores with TF32 came with Ampere)")
        return asked

    def attention_kernel(self, asked: str = "fused") -> str:
        """The fused attention kernel ``asked`` (``flash2``, ``flash3``, or ``fused``: the
        best this GPU runs) resolves to here; one it cannot run is a :class:`ModelError`."""
        runs = tuple(k for k in ATTENTION_KERNELS if self.tensor and k in self.tensor.attention)
        if asked == "fused":
            return runs[-1] if runs else "flash2"
        if asked == "flash3" and asked not in runs:
            raise ModelError(f"{network_word('attention', 'flash3')}: GPU preset "
                             f"{self.preset!r} does not run "
                             "FlashAttention-3 (a Hopper kernel)")
        family = GPUS[self.preset].tensor_family if self.preset in GPUS else ""
        if asked == "flash2" and family not in FLASH2_FAMILIES:
            raise ModelError(f"{network_word('attention', 'flash2')}: GPU preset "
                             f"{self.preset!r} does not run FlashAttention-2 (it needs an "
                             "Ampere or newer GPU, the FlashAttention README says; "
                             f"{network_word('attention', 'fused')} prices this GPU's fused "
                             "kernel)")
        return asked

    def describe(self, dtype: str = "float32", attention: str = "") -> str:
        """Where this GPU's kernel times come from, for the summary's ``kernel_times``:
        :attr:`description`; the TF32 mode (GPUs with TF32); for a 16-bit type how its
        convolutions and GEMMs are priced (on tensor cores, with what the constants were
        fitted on, or at the fp32 model's rate); and, given ``attention`` (a fused kind), the
        attention kernel and what it was fitted on."""
        parts = [self.description]
        tc, hw = self.tensor, self.hardware
        if hw.tf32_flops > 0 and dtype == "float32":
            mode = self.tf32_mode(self.tf32)
            what = ("no TF32" if mode == NO_TF32 else "TF32 convolutions (PyTorch's default: "
                    "cudnn.allow_tf32), fp32 matmuls" if mode == "conv" else
                    "TF32 convolutions and matmuls")
            parts.append(f"{fitted_word('tf32', mode)}: {what}" + (
                "" if mode == NO_TF32 or tc is None else
                f" at {hw.tf32_flops / 1e12:g} TFLOP/s dense (no TF32 measurement: the "
                f"{tc.family} tensor-core constants at the TF32 peak)"))
        if dtype in HALF_DTYPES:
            if hw.on_tensor_cores(dtype) and tc is not None:
                parts.append(f"{dtype} convolutions and GEMMs on {tc.family} tensor cores "
                             f"({hw.tensor_flops / 1e12:g} TFLOP/s dense), constants: "
                             f"{tc.fitted_on}")
            elif dtype == "float16" and hw.fp16_flops > 0:
                parts.append(f"no tensor cores: float16 GEMMs and attention at the fp32 "
                             f"model's efficiencies on the {hw.fp16_flops / 1e12:g} TFLOP/s "
                             "half2 rate; convolutions at the fp32 rate")
            else:
                parts.append(f"no {dtype} tensor cores: {dtype} GEMMs, attention and "
                             "convolutions at the fp32 rate")
        if attention and attention != "naive":
            kernel = self.attention_kernel(attention)
            a = tc.attention.get(kernel) if tc else None
            parts.append(f"attention {kernel}: " + (a.fitted_on if a else
                                                    "no tensor cores: the fp32 GEMM rate, "
                                                    "no measurement"))
        if self.stack != DEFAULT_STACK:  # the default's line is unchanged
            parts.append(describe_stack(self.stack, self.hardware.dram_bandwidth))
        return "; ".join(parts)


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


def _mtime_ns(path: str, what: str) -> int:
    """The modification time of ``path`` (what a loaded file is cached by); a missing file is
    one ModelError naming it and ``what`` it should hold."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError as exc:
        raise ModelError(f"{path}: cannot read {what}: {exc.strerror}") from None


def _read_json(path: str, what: str) -> Any:
    """The JSON document at ``path``; a file that cannot be read or parsed is one ModelError
    naming the file and ``what`` it should hold."""
    try:
        return load_json(path, PARAMS_FILE)
    except FileReadError as exc:
        raise ModelError(f"{path}: {exc}" if exc.parsing else
                         f"{path}: cannot read {what}: {exc}") from None


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> dict[str, Family]:
    return _parse(_read_json(path, "kernel parameters"), path)


def load_families(path: Optional[os.PathLike[str] | str] = None) -> dict[str, Family]:
    """The fitted families of ``path`` (default: the committed ``kernel_params.json``)."""
    p = os.fspath(path or PARAMS_PATH)
    return _load(p, _mtime_ns(p, "kernel parameters"))


def _tensor_family(name: str, entry: Any, where: str) -> TensorCores:
    if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict) \
            or not isinstance(entry.get("attention"), dict):
        raise ModelError(f"{where}: family {name!r} needs 'params' and 'attention' mappings")
    attention = {}
    for kernel, a in entry["attention"].items():
        if kernel not in ATTENTION_KERNELS or not isinstance(a, dict):
            raise ModelError(f"{where}: family {name!r}: unknown attention kernel {kernel!r}")
        try:
            attention[kernel] = AttentionParams(float(a["efficiency"]),
                                                float(a["head_dim_half"]),
                                                str(a.get("fitted_on", "")))
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{where}: family {name!r}: attention {kernel!r} needs numbers "
                             "'efficiency' and 'head_dim_half'") from None
    return TensorCores(name, KernelParams.from_mapping(entry["params"], f"{where}: {name}"),
                       attention, str(entry.get("fitted_on", "")))


@functools.lru_cache(maxsize=4)
def _load_tensor(path: str, mtime_ns: int) -> dict[str, TensorCores]:
    doc = _read_json(path, "tensor-core parameters")
    if not isinstance(doc, dict) or doc.get("format") != TENSOR_FORMAT:
        raise ModelError(f"{path}: not a tensor-core parameters file (format must be "
                         f"{TENSOR_FORMAT!r})")
    families = doc.get("families")
    if not isinstance(families, dict) or not families:
        raise ModelError(f"{path}: 'families' must map family names to fitted parameters")
    return {name: _tensor_family(name, entry, path) for name, entry in families.items()}


def load_tensor_families(path: Optional[os.PathLike[str] | str] = None
                         ) -> dict[str, TensorCores]:
    """The tensor-core families of ``path`` (default: the committed
    ``tensor_core_params.json``)."""
    p = os.fspath(path or TENSOR_PARAMS_PATH)
    return _load_tensor(p, _mtime_ns(p, "tensor-core parameters"))


def _tensor_cores(preset: str, spec: GPUSpec) -> Optional[TensorCores]:
    """The tensor-core path of ``spec``: its family's, None without tensor cores; a family
    without a tensor peak, or a peak without a family, is a :class:`ModelError`."""
    if not spec.tensor_family and not spec.tensor_flops:
        return None
    if not spec.tensor_flops:
        raise ModelError(f"GPU preset {preset!r}: tensor family {spec.tensor_family!r} but no "
                         "tensor peak (tensor_flops) to price 16-bit kernels with")
    families = load_tensor_families()
    if spec.tensor_family not in families:
        raise ModelError(f"GPU preset {preset!r}: no tensor-core family "
                         f"{spec.tensor_family!r} in {TENSOR_PARAMS_PATH} (one of "
                         f"{', '.join(families)})")
    return families[spec.tensor_family]


def kernel_model_for(preset: str, spec: Optional[GPUSpec] = None) -> KernelModel:
    """The kernel model of GPU preset ``preset`` (or of ``spec``, named ``preset``)."""
    spec = spec or GPUS[preset]
    families = load_families()
    if spec.kernel_family not in families:
        raise ModelError(f"GPU preset {preset!r}: no fitted kernel parameters for family "
                         f"{spec.kernel_family!r} in {PARAMS_PATH}")
    return KernelModel(Hardware(spec.sms, spec.peak_flops, spec.dram_bandwidth_Bps,
                                spec.tensor_flops, spec.tensor_dtypes, spec.fp16_flops,
                                spec.sm_fp32_lanes, spec.tf32_flops),
                       families[spec.kernel_family].params, spec.kernel_family, preset,
                       spec.measured, _tensor_cores(preset, spec))
