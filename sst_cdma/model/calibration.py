"""Fitting the kernel model (:mod:`sst_cdma.model.kernel_model`) to measured training kernels,
and measuring how well it predicts them.

The measurements are Baidu DeepBench's cuDNN/cuBLAS fp32 training kernels on four NVIDIA GPUs
(github.com/baidu-research/DeepBench, ``results/train``, Apache-2.0), shipped as CSV in
``calibration_data/deepbench/`` (its README gives the columns). :func:`load` reads and
validates them; every bad input is a :class:`CalibrationError` of one line naming the file (its
path under the folder as given), the line and the field
(``data/conv_train_fp32.csv:17: fwd_ms: must be a positive number, got '-1'``).

:func:`fit` fits :class:`~sst_cdma.model.kernel_model.KernelParams` to one or several GPU sets
(pooled) by least squares on log(predicted / measured) over every measured kernel (forward,
backward-data, backward-filter and GEMM rows alike), in log-parameter space within the physical
bounds of :data:`BOUNDS`, with a soft-L1 loss (scale 0.2, so a few kernels the model cannot
explain do not drag the rest). It starts from fixed values and uses no randomness: the same data
give the same parameters.

:func:`evaluate` measures the model four ways, each against the roofline the simulator used
before (:func:`roofline`): in sample (each GPU's own fit), leave one GPU out (fit on the other
three, predict the fourth with its own SMs, peak FLOP/s and bandwidth), and "measured on one GPU,
predicted on another" (a kernel's time measured on GPU A, scaled by the model's ratio of B to A).
:func:`write_params` writes the fits to ``kernel_params.json`` (:mod:`sst_cdma.model.fitted`
reads it); ``sst-cdma calibrate`` runs it.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json, read_text
from sst_cdma.model.fitted import PARAMS_FILE
from sst_cdma.model.gpus import GPUS
from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.model.kernel_gradient import GEMM_USES, conv_uses
from sst_cdma.model.kernel_model import (ALGORITHM_FAMILIES, ALGORITHMS, PASSES, ConvProblem, Hardware, KernelParams, ModelError,
                           conv_times, gemm_times)

__all__ = ["POOLED", "DATA_DIR", "CONV_FILE", "GEMM_FILE", "GPUS_FILE", "KINDS", "BOUNDS",
           "ERROR_FLOOR", "MAX_TIME_MS", "CalibrationError", "CalibrationGPU",
           "CalibrationSet", "FitError", "Evaluation", "RatioTable", "load", "predict",
           "roofline", "fit", "fit_error", "ratios", "pooled", "architectures", "evaluate",
           "params_document",
           "params_text", "write_params", "check_params", "format_fit_errors", "significant"]

#: The family of kernel_params.json fitted on every measured GPU pooled.
POOLED = "Pooled"
#: The shipped measurements.
DATA_DIR = Path(__file__).with_name("calibration_data") / "deepbench"
CONV_FILE = "conv_train_fp32.csv"
GEMM_FILE = "gemm_train_fp32.csv"
GPUS_FILE = "gpus.csv"
#: a measurements CSV: a row per timed kernel (DeepBench's are hundreds of KiB)
MEASUREMENTS_FILE = FileKind("a measurements file", 256 * MIB)
#: The kinds of kernel measured: the three convolution passes and cuBLAS GEMMs.
KINDS = PASSES + ("gemm",)
#: Exact zeros of |predicted / measured - 1| count as this much in the geometric mean.
ERROR_FLOOR = 1e-4
#: Share of a bound the fit starts from when a default lies outside it.
_INSIDE = 0.01
#: The longest measured kernel accepted, in ms (an hour).
MAX_TIME_MS = 3.6e6
#: A sanity bound, not a model constant: a row whose direct-method FLOPs over its time exceed
#: this many times its GPU's peak is refused (an impossible shape or a mistyped time). Fast
#: algorithms (Winograd, FFT) beat the direct count: the shipped DeepBench rows reach 2.3x.
MAX_PEAK_MULTIPLE = 100
#: How the provenance of ``kernel_params.json`` names the shipped files.
_SHIPPED_SOURCE = "sst_cdma/model/calibration_data/deepbench"

#: Physical bounds of each parameter for the fit: shares of peak at most 1 (the backward and
#: cuBLAS factors multiply ``gemm_efficiency`` and may exceed 1), DRAM at 50-95% of its peak,
#: a kernel launch of 2-30 us.
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_efficiency": (0.05, 1.0),
    "tile_reuse": (0.1, 200.0),
    "tile_fill_k": (0.1, 2000.0),
    "winograd_efficiency": (0.05, 3.0),
    "fft_efficiency": (0.01, 3.0),
    "bwd_data_efficiency": (0.1, 3.0),
    "strided_dgrad_efficiency": (0.05, 3.0),
    "bwd_filter_efficiency": (0.1, 3.0),
    "blas_efficiency": (0.2, 3.0),
    "memory_efficiency": (0.5, 0.95),
    "launch_s": (2e-6, 30e-6),
    "plane_elements": (0.01, 5000.0),
}

# The simulator's roofline before the kernel model (components/kernel_times.py ``roofline_ps``
# with the kernels elements' default compute_efficiency; DRAM at 85% of its peak).
_ROOFLINE_COMPUTE = 0.6
_ROOFLINE_MEMORY = 0.85
_ELEMENT = 4

_CONV_SHAPE = ("W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")
_CONV_TIMES = {"fwd": "fwd_ms", "bwd_data": "bwd_data_ms", "bwd_filter": "bwd_filter_ms"}
_CONV_COLUMNS = ("gpu",) + _CONV_SHAPE + tuple(_CONV_TIMES.values()) + ("fwd_algorithm",)
_GEMM_COLUMNS = ("gpu", "M", "N", "K", "a_transpose", "b_transpose", "time_ms")
_GPUS_COLUMNS = ("gpu", "model", "cudnn", "cuda", "source_file")
#: Algorithm names as the source sheets misspell them: the T4 sheet truncates two cells of
#: IMPLICIT_PRECOMP_GEMM (the CSV keeps the cells as published).
_ALGORITHM_SPELLINGS = {"LICIT_PRECOMP_GEMM": "IMPLICIT_PRECOMP_GEMM"}


class CalibrationError(ValueError):
    """Bad calibration input or output: one line naming the file, line and field."""


@dataclass(frozen=True)
class CalibrationGPU:
    """One measured GPU: its set name (``gpu`` column), model, cuDNN and CUDA versions, the
    source sheet, and the GPU preset whose ``calibration`` names it (which gives its
    :class:`Hardware`)."""

    name: str
    model: str
    cudnn: str
    cuda: str
    source_sheet: str
    preset: str
    hardware: Hardware
    architecture: str = ""


@dataclass(frozen=True)
class CalibrationSet:
    """The measured kernels of one GPU. ``conv`` holds the convolution shapes as arrays (the
    keys :func:`~sst_cdma.model.kernel_model.conv_times` takes), ``seconds`` the measured time
    of each kind in :data:`KINDS` (NaN: not measured), ``conv_keys``/``gemm_keys`` a key per row
    that is the same for the same kernel on every GPU (shape plus occurrence number)."""

    gpu: CalibrationGPU
    conv: dict[str, np.ndarray]
    gemm: dict[str, np.ndarray]
    seconds: dict[str, np.ndarray]
    fwd_algorithm: tuple[str, ...]
    conv_keys: tuple[tuple[Any, ...], ...]
    gemm_keys: tuple[tuple[Any, ...], ...]
    #: The files read (conv, GEMM, GPUs), as the provenance of ``kernel_params.json`` names
    #: them: ``sst_cdma/model/calibration_data/deepbench/...`` for the shipped copy, else the
    #: path under the data folder as it was given.
    files: tuple[str, ...]

    @property
    def name(self) -> str:
        """The set's name (the ``gpu`` column)."""
        return self.gpu.name

    def rows(self, kind: str) -> int:
        """Measured rows of ``kind`` (a pass or ``gemm``)."""
        return int(np.count_nonzero(~np.isnan(self.seconds[kind])))

    def keys(self, kind: str) -> tuple[tuple[Any, ...], ...]:
        """The row keys of ``kind``."""
        return self.gemm_keys if kind == "gemm" else self.conv_keys


# -- loading ---------------------------------------------------------------------------------

def _read(path: str, columns: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a CSV file with their line numbers, after checking the header has ``columns``
    (a UTF-8 byte-order mark, as spreadsheets write, is skipped). Errors name ``path``."""
    name = path
    try:
        text = read_text(path, MEASUREMENTS_FILE).removeprefix("\ufeff")
    except FileReadError as exc:
        raise CalibrationError(f"{path}: cannot read: {exc}") from None
    try:
        with io.StringIO(text, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise CalibrationError(f"{name}:1: empty file (expected a header with "
                                       f"{', '.join(columns)})")
            header = [h.strip() for h in header]
            for col in columns:
                if col not in header:
                    raise CalibrationError(f"{name}:1: {col}: missing column")
            rows = []
            for fields in reader:
                line = reader.line_num
                if not any(x.strip() for x in fields):
                    continue
                if len(fields) != len(header):
                    raise CalibrationError(f"{name}:{line}: {len(fields)} fields, the header "
                                           f"has {len(header)}")
                rows.append((line, {h: x.strip() for h, x in zip(header, fields)}))
    except csv.Error as exc:
        raise CalibrationError(f"{name}: malformed CSV: {exc}") from None
    return rows


def _whole(value: str, where: str, field: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise CalibrationError(f"{where}: {field}: must be a whole number >= {minimum}, "
                               f"got {value!r}")
    return number


def _time(value: str, where: str, field: str, optional: bool = False) -> float:
    """A measured time in ms as seconds (NaN for an empty optional one)."""
    if optional and value == "":
        return math.nan
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise CalibrationError(f"{where}: {field}: must be a positive number, got {value!r}")
    if number > MAX_TIME_MS:
        raise CalibrationError(f"{where}: {field}: longer than an hour ({MAX_TIME_MS:.0f} ms) "
                               f"for one kernel, got {value!r}")
    return number * 1e-3


def _plausible(where: str, field: str, flops: int, seconds: float, gpu: CalibrationGPU) -> None:
    """Refuse a row that would run faster than :data:`MAX_PEAK_MULTIPLE` times its GPU's peak."""
    limit = MAX_PEAK_MULTIPLE * gpu.hardware.peak_flops
    if not math.isnan(seconds) and flops > limit * seconds:
        raise CalibrationError(f"{where}: {field}: {flops:.3g} FLOPs in {seconds * 1e3:g} ms is "
                               f"{flops / seconds:.3g} FLOP/s, more than {MAX_PEAK_MULTIPLE}x "
                               f"the {gpu.model}'s peak ({gpu.hardware.peak_flops:.3g} "
                               f"FLOP/s): an impossible shape or time")


def _gpus(path: str) -> dict[str, CalibrationGPU]:
    presets = {spec.calibration: name for name, spec in GPUS.items() if spec.calibration}
    out: dict[str, CalibrationGPU] = {}
    for line, row in _read(path, _GPUS_COLUMNS):
        where = f"{path}:{line}"
        name = row["gpu"]
        if not name:
            raise CalibrationError(f"{where}: gpu: missing value")
        if name in out:
            raise CalibrationError(f"{where}: gpu: {name!r} listed twice")
        if name not in presets:
            raise CalibrationError(f"{where}: gpu: no GPU preset has calibration {name!r} "
                                   f"(sst_cdma/model/gpus.py)")
        for col in ("model", "cudnn", "cuda"):
            if not row[col]:
                raise CalibrationError(f"{where}: {col}: missing value")
        spec = GPUS[presets[name]]
        if not spec.architecture:
            raise CalibrationError(f"{where}: gpu: GPU preset {presets[name]!r} of {name!r} "
                                   f"names no architecture (sst_cdma/model/gpus.py)")
        out[name] = CalibrationGPU(name, row["model"], row["cudnn"], row["cuda"],
                                   row["source_file"], presets[name],
                                   Hardware(spec.sms, spec.peak_flops, spec.dram_bandwidth_Bps,
                                            sm_fp32_lanes=spec.sm_fp32_lanes),
                                   spec.architecture)
    if not out:
        raise CalibrationError(f"{path}: no GPUs listed")
    return out


def _known_gpu(value: str, where: str, gpus: Mapping[str, CalibrationGPU]) -> str:
    if value not in gpus:
        raise CalibrationError(f"{where}: gpu: unknown GPU {value!r} (not in {GPUS_FILE})")
    return value


def _source_names(folder: Path, paths: Sequence[str]) -> tuple[str, ...]:
    """How the provenance names the files read: the shipped copy by its place in the source
    tree (however the folder was given), other folders as given."""
    try:
        shipped = folder.samefile(DATA_DIR)
    except OSError:
        shipped = False
    if shipped:
        return tuple(f"{_SHIPPED_SOURCE}/{Path(p).name}" for p in paths)
    return tuple(paths)


def load(data_dir: Optional[Union[str, os.PathLike[str]]] = None) -> dict[str, CalibrationSet]:
    """The measured sets in ``data_dir`` (default: the shipped DeepBench copy, :data:`DATA_DIR`),
    one per GPU of ``gpus.csv``, in its order. Raises :class:`CalibrationError` on bad input."""
    given = os.fspath(data_dir) if data_dir is not None else os.fspath(DATA_DIR)
    folder = Path(given)
    if not folder.is_dir():
        raise CalibrationError(f"{given}: not a folder of calibration data")
    # paths as under the folder the user gave, for messages and provenance
    conv_path, gemm_path, gpus_path = (os.path.join(given, f)
                                       for f in (CONV_FILE, GEMM_FILE, GPUS_FILE))
    gpus = _gpus(gpus_path)
    conv: dict[str, list[tuple[Any, ...]]] = {g: [] for g in gpus}
    seen: dict[tuple[Any, ...], int] = {}
    for line, row in _read(conv_path, _CONV_COLUMNS):
        where = f"{conv_path}:{line}"
        gpu = _known_gpu(row["gpu"], where, gpus)
        shape = tuple(_whole(row[c], where, c, 0 if c.startswith("pad") else 1)
                      for c in _CONV_SHAPE)
        w, h, c, n, k, r, s, ph, pw, sh, sw = shape
        problem = ConvProblem(n, c, h, w, k, r, s, ph, pw, sh, sw)
        try:
            problem.check()
        except ModelError as exc:
            raise CalibrationError(f"{where}: R, S: {exc}") from None
        times = tuple(_time(row[col], where, col, optional=(p == "bwd_data"))
                      for p, col in _CONV_TIMES.items())
        for col, time_s in zip(_CONV_TIMES.values(), times):
            _plausible(where, col, 2 * n * k * c * r * s * problem.p * problem.q, time_s,
                       gpus[gpu])
        algo = _ALGORITHM_SPELLINGS.get(row["fwd_algorithm"], row["fwd_algorithm"])
        if algo not in ALGORITHMS:
            raise CalibrationError(f"{where}: fwd_algorithm: unknown algorithm {algo!r} (one of "
                                   f"{', '.join(ALGORITHMS)})")
        occurrence = seen.get((gpu,) + shape, 0)
        seen[(gpu,) + shape] = occurrence + 1
        conv[gpu].append(shape + times + (algo, occurrence))
    gemm: dict[str, list[tuple[Any, ...]]] = {g: [] for g in gpus}
    seen = {}
    for line, row in _read(gemm_path, _GEMM_COLUMNS):
        where = f"{gemm_path}:{line}"
        gpu = _known_gpu(row["gpu"], where, gpus)
        mnk = tuple(_whole(row[c], where, c, 1) for c in ("M", "N", "K"))
        for col in ("a_transpose", "b_transpose"):
            if row[col] not in ("N", "T"):
                raise CalibrationError(f"{where}: {col}: must be N or T, got {row[col]!r}")
        key = mnk + (row["a_transpose"], row["b_transpose"])
        occurrence = seen.get((gpu,) + key, 0)
        seen[(gpu,) + key] = occurrence + 1
        time_s = _time(row["time_ms"], where, "time_ms")
        _plausible(where, "time_ms", 2 * mnk[0] * mnk[1] * mnk[2], time_s, gpus[gpu])
        gemm[gpu].append(key + (time_s, occurrence))
    # a GPU without convolutions (or GEMMs, or any backward-data time) would leave those
    # parameters unconstrained and its fit error NaN
    for name in gpus:
        for path, rows in ((conv_path, conv[name]), (gemm_path, gemm[name])):
            if not rows:
                raise CalibrationError(f"{path}: no rows for GPU {name!r} (listed in "
                                       f"{GPUS_FILE})")
        if all(math.isnan(row[12]) for row in conv[name]):
            raise CalibrationError(f"{conv_path}: bwd_data_ms: no value for GPU {name!r} "
                                   f"(every row empty)")
    files = _source_names(folder, (conv_path, gemm_path, gpus_path))
    sets = {}
    for name, gpu in gpus.items():  # type: ignore[assignment]
        cols = list(zip(*conv[name]))
        problems = {key: np.array(cols[i], dtype=float) for i, key in enumerate(
            ("w", "h", "c", "n", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w"))}
        gcols = list(zip(*gemm[name]))
        seconds = {p: np.array(cols[11 + i], dtype=float) for i, p in enumerate(PASSES)}
        seconds["gemm"] = np.array(gcols[5], dtype=float)
        sets[name] = CalibrationSet(
            gpu, problems, {x: np.array(gcols[i], dtype=float) for i, x in enumerate("mnk")},  # type: ignore[arg-type]
            seconds, tuple(cols[14]), tuple(row[:11] + row[15:] for row in conv[name]),
            tuple(row[:5] + row[6:] for row in gemm[name]), files)
    return sets


# -- prediction ------------------------------------------------------------------------------

def predict(cset: CalibrationSet, kp: KernelParams,
            hw: Optional[Hardware] = None) -> dict[str, np.ndarray]:
    """Modelled seconds of every row of ``cset`` per kind, on ``hw`` (default: the set's own
    GPU)."""
    hw = hw or cset.gpu.hardware
    out = {p: conv_times(cset.conv, p, hw, kp, prune=True)["seconds"] for p in PASSES}
    g = cset.gemm
    out["gemm"] = gemm_times(g["m"], g["n"], g["k"], hw, kp, prune=True)
    return out


def roofline(cset: CalibrationSet, hw: Optional[Hardware] = None) -> dict[str, np.ndarray]:
    """The simulator's former roofline for every row of ``cset``: max(FLOPs / (peak x 0.6),
    bytes / (bandwidth x 0.85)), FLOPs = 2 N K P Q C R S for each convolution pass (2 M N K for
    a GEMM) and bytes = the operands once."""
    hw = hw or cset.gpu.hardware
    f = cset.conv
    p = np.floor((f["h"] + 2 * f["pad_h"] - f["r"]) / f["stride_h"]) + 1
    q = np.floor((f["w"] + 2 * f["pad_w"] - f["s"]) / f["stride_w"]) + 1
    flops = 2 * f["n"] * f["k"] * p * q * f["c"] * f["r"] * f["s"]
    nbytes = (f["n"] * f["c"] * f["h"] * f["w"] + f["k"] * f["c"] * f["r"] * f["s"] +
              f["n"] * f["k"] * p * q) * _ELEMENT
    conv = np.maximum(flops / (hw.peak_flops * _ROOFLINE_COMPUTE),
                      nbytes / (hw.dram_bandwidth * _ROOFLINE_MEMORY))
    out = {pass_: conv for pass_ in PASSES}
    m, n, k = (cset.gemm[x] for x in "mnk")
    out["gemm"] = np.maximum(2 * m * n * k / (hw.peak_flops * _ROOFLINE_COMPUTE),
                             (m * k + k * n + m * n) * _ELEMENT /
                             (hw.dram_bandwidth * _ROOFLINE_MEMORY))
    return out


# -- fitting ---------------------------------------------------------------------------------

def _as_sets(sets: Union[CalibrationSet, Iterable[CalibrationSet]]) -> list[CalibrationSet]:
    out = [sets] if isinstance(sets, CalibrationSet) else list(sets)
    if not out:
        raise CalibrationError("fit: no calibration sets given")
    return out


def _bounds() -> tuple[np.ndarray, np.ndarray]:
    names = KernelParams.names()
    missing = [n for n in names if n not in BOUNDS]
    if missing:
        raise CalibrationError(f"fit: no bounds for kernel parameter {missing[0]!r}")
    return (np.log([BOUNDS[n][0] for n in names]), np.log([BOUNDS[n][1] for n in names]))


def fit(sets: Union[CalibrationSet, Iterable[CalibrationSet]]) -> KernelParams:
    """Kernel parameters fitted to one set or several pooled (each on its own hardware), by
    least squares on log(predicted / measured) with a soft-L1 loss, in log-parameter space
    within :data:`BOUNDS`, from the defaults of :class:`KernelParams`. Deterministic.

    The Jacobian is SciPy's forward differences (``approx_derivative``), each column one
    constant moved by its step; their residuals are computed by parts (:class:`_Residuals`),
    the same numbers, to the bit, as a whole evaluation gives."""
    from scipy.optimize import least_squares

    sets = _as_sets(sets)
    names = KernelParams.names()
    lo, hi = _bounds()
    default = np.log([getattr(KernelParams(), n) for n in names])
    span = hi - lo
    x0 = np.clip(default, lo + _INSIDE * span, hi - _INSIDE * span)
    residuals = _Residuals(sets)
    by_parts = {"workers": residuals.differences} if _takes_workers(least_squares) else {}
    with _one_blas_thread():
        result = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.2,
                               x_scale=1.0, method="trf", **by_parts)
    return KernelParams(**dict(zip(names, (float(v) for v in np.exp(result.x)))))


def _takes_workers(least_squares: Callable[..., Any]) -> bool:
    """Whether SciPy's ``least_squares`` takes the map its finite differences run on
    (``workers``, SciPy 1.16 and later)."""
    import inspect

    return "workers" in inspect.signature(least_squares).parameters


def _one_blas_thread() -> ContextManager[Any]:
    """One BLAS thread while fitting, where threadpoolctl is installed: the fit's matrices
    (a few thousand kernels x 12 constants) gain nothing from more, and on a busy machine the
    idle threads' spinning costs more CPU time than the whole SVD (the results are the same)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


#: A convolution algorithm or launch within this share of a kernel's time of the fastest one
#: may take over when a constant moves by a finite-difference step (at most 1e-6 in
#: log-constant, so at most a share of 1e-6 of any time: no time's logarithm changes faster than
#: the constants'): the pieces of the residuals it could change are computed again.
_MARGIN = 1e-5
#: The largest step of a log-constant :meth:`_Residuals.differences` takes by parts (SciPy's
#: are sqrt(machine epsilon) x max(1, |x|), at most 2e-7 within :data:`BOUNDS`).
_STEP = 1e-6


class _Residuals:
    """The residuals of a fit, log(predicted / measured) of every measured kernel of ``sets``
    at the log-constants ``x`` (calling it), by parts: one per set and kind of kernel. The
    finite differences of them (:meth:`differences`) compute again only the parts a constant's
    step can change; the others are the same to the bit, so the Jacobian is too."""

    def __init__(self, sets: Sequence[CalibrationSet]) -> None:
        self.names = KernelParams.names()
        self.parts = [(cset, kind, ~np.isnan(cset.seconds[kind])) for cset in sets
                      for kind in KINDS]
        self.uses = {p: conv_uses(p) for p in PASSES}
        #: the last point evaluated: x, each part's residuals and details, the constants
        self._last: Optional[tuple[np.ndarray, list[np.ndarray], list[Any], KernelParams]] = None

    def params(self, x: np.ndarray) -> KernelParams:
        """The constants at log-constants ``x``."""
        return KernelParams(**dict(zip(self.names, np.exp(x))))

    def _part(self, q: int, kp: KernelParams,
              keep: Optional[Mapping[str, np.ndarray]] = None) -> tuple[np.ndarray, Any]:
        """Part ``q``'s residuals at ``kp``, and what :meth:`_moving` needs of it (the GEMMs'
        seconds, or the convolutions' :func:`conv_times` result). ``keep``: algorithms' times
        to take as they are, as :func:`conv_times` takes them."""
        cset, kind, ok = self.parts[q]
        hw = cset.gpu.hardware
        if kind == "gemm":
            g = cset.gemm
            detail: Any = gemm_times(g["m"], g["n"], g["k"], hw, kp, prune=True)
            seconds = detail
        else:
            detail = conv_times(cset.conv, kind, hw, kp, prune=True, keep=keep)
            seconds = detail["seconds"]
        return np.log(seconds[ok] / cset.seconds[kind][ok]), detail

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The residuals at log-constants ``x``, every part computed (and kept as the last
        point evaluated)."""
        kp = self.params(x)
        done = [self._part(q, kp) for q in range(len(self.parts))]
        self._last = (np.array(x, dtype=float), [d[0] for d in done], [d[1] for d in done], kp)
        return np.concatenate(self._last[1])

    def _kept(self, q: int, j: int, detail: Any) -> Optional[dict[str, np.ndarray]]:
        """The algorithms' times of part ``q`` (``detail``: at the last point) that moving
        log-constant ``j`` leaves as they were: those of the families
        (:data:`~sst_cdma.model.kernel_model.ALGORITHM_FAMILIES`) none of whose algorithms
        uses it (``launch_s`` changes the host's issue alone)."""
        kind = self.parts[q][1]
        if kind == "gemm":
            return None
        uses = self.uses[kind][:, j] & (self.names[j] != "launch_s")
        work = detail["work"]
        out = {}
        for family in ALGORITHM_FAMILIES.values():
            index = [ALGORITHMS.index(a) for a in family]
            if not uses[index].any():
                out.update({a: work[..., i] for a, i in zip(family, index)})
        return out

    def _moving(self, q: int, detail: Any, kp: KernelParams) -> np.ndarray:
        """Which log-constants can change part ``q``'s residuals by moving at most
        :data:`_STEP` from ``kp`` (``detail``: the part there), one bool per constant."""
        cset, kind, _ = self.parts[q]
        launch = self.names.index("launch_s")
        if kind == "gemm":
            out = np.array([name in GEMM_USES for name in self.names])
            out[launch] = bool(np.any(detail <= kp.launch_s * (1 + _MARGIN)))
            return out
        by_algo, best = detail["by_algorithm"], detail["seconds"][..., None]
        # the algorithms that are, or may become, the fastest
        near = by_algo <= best * (1 + _MARGIN)
        uses = self.uses[kind]
        out = np.any(near[..., None] & uses, axis=tuple(range(near.ndim)))
        strided = (cset.conv["stride_h"] > 1) | (cset.conv["stride_w"] > 1)
        sde = self.names.index("strided_dgrad_efficiency")
        out[sde] = bool(np.any(near[strided] & uses[:, sde]))
        calls = np.asarray(cset.conv.get("groups", 1.0), dtype=float)
        calls = calls[..., None] if calls.ndim else calls
        out[launch] = bool(np.any(near & (by_algo <= kp.launch_s * calls * (1 + _MARGIN))))
        return out

    def differences(self, fun: Callable[[np.ndarray], np.ndarray],
                    points: Iterable[np.ndarray]) -> list[np.ndarray]:
        """The residuals at each of ``points`` (``fun`` of each, as a map does): by parts where
        the i-th point is the last point evaluated with log-constant i moved by at most
        :data:`_STEP` (SciPy's forward differences), else by ``fun``."""
        points = [np.asarray(p, dtype=float) for p in points]
        last = self._last
        out = []
        moving: Optional[list[np.ndarray]] = None
        for i, point in enumerate(points):
            moved = None if last is None or point.shape != last[0].shape else \
                np.flatnonzero(point != last[0])
            if last is None or moved is None or moved.size > 1 or \
                    (moved.size == 1 and (moved[0] != i or abs(point[i] - last[0][i]) > _STEP)):
                out.append(fun(point))
                continue
            x, pieces, details, kp = last
            if moving is None:
                moving = [self._moving(q, details[q], kp) for q in range(len(self.parts))]
            pieces = list(pieces)
            trial = self.params(point)
            for q in range(len(self.parts)):
                if moved.size and moving[q][i]:
                    pieces[q] = self._part(q, trial, self._kept(q, i, details[q]))[0]
            out.append(np.concatenate(pieces))
        return out


# -- fit error -------------------------------------------------------------------------------

@dataclass(frozen=True)
class FitError:
    """How far predictions are from measurements, over ``rows`` kernels: the median of
    predicted / measured, the geometric mean of |predicted / measured - 1| (exp(mean(log|r - 1|)),
    exact zeros counted as :data:`ERROR_FLOOR` = 1e-4 so the logarithm exists), and the share of
    kernels predicted within +-25%."""

    rows: int
    median_ratio: float
    geomean_abs_error: float
    within_25pct: float

    def as_dict(self, digits: int = 4) -> dict[str, Union[int, float]]:
        """The figures as a mapping, rounded to ``digits`` decimals."""
        return {"rows": self.rows, "median_ratio": round(self.median_ratio, digits),
                "geomean_abs_error": round(self.geomean_abs_error, digits),
                "within_25pct": round(self.within_25pct, digits)}


def fit_error(ratio: np.ndarray) -> FitError:
    """The :class:`FitError` of an array of predicted / measured ratios (NaNs skipped)."""
    r = np.asarray(ratio, dtype=float)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return FitError(0, math.nan, math.nan, math.nan)
    e = np.abs(r - 1.0)
    return FitError(int(r.size), float(np.median(r)),
                    float(np.exp(np.mean(np.log(np.maximum(e, ERROR_FLOOR))))),
                    float(np.mean(e <= 0.25)))


def ratios(predicted: Mapping[str, np.ndarray], cset: CalibrationSet) -> dict[str, np.ndarray]:
    """predicted / measured per kind, measured rows only."""
    out = {}
    for kind in KINDS:
        ok = ~np.isnan(cset.seconds[kind])
        out[kind] = predicted[kind][ok] / cset.seconds[kind][ok]
    return out


#: predicted / measured ratios per GPU and kind.
RatioTable = dict[str, dict[str, np.ndarray]]


@dataclass(frozen=True)
class Evaluation:
    """The model's errors five ways, and the roofline's: ``own``/``logo`` hold each GPU's own fit
    and its leave-it-out fit (the other GPUs pooled); ``in_sample``, ``leave_one_out`` and
    ``roofline`` are predicted / measured per GPU and kind; ``cross`` and ``cross_roofline``
    map (source, target) to the ratios of the target's measured times predicted from the
    source's (measured on A x model_B / model_A, model_A = A's own fit, model_B = the fit that
    left B out). ``loao`` holds, per architecture, the fit on the GPUs of every other
    architecture, and ``leave_one_architecture_out`` each GPU predicted with the fit that left
    its architecture out (empty with one architecture): how a user meets an unmeasured GPU."""

    gpus: tuple[str, ...]
    own: dict[str, KernelParams]
    logo: dict[str, KernelParams]
    in_sample: RatioTable
    leave_one_out: RatioTable
    roofline: RatioTable
    cross: dict[tuple[str, str], dict[str, np.ndarray]]
    cross_roofline: dict[tuple[str, str], dict[str, np.ndarray]]
    loao: dict[str, KernelParams] = field(default_factory=dict)
    leave_one_architecture_out: RatioTable = field(default_factory=dict)
    #: each GPU's architecture
    architecture: dict[str, str] = field(default_factory=dict)

    def of_architecture(self, arch: str) -> list[str]:
        """The GPUs of ``arch``."""
        return [g for g in self.gpus if self.architecture.get(g) == arch]

    def cross_by_target(self, roofline: bool = False) -> RatioTable:
        """The cross-GPU ratios per target GPU and kind, pooled over the source GPUs."""
        table = self.cross_roofline if roofline else self.cross
        return {b: {kind: np.concatenate([table[(a, b)][kind] for a in self.gpus if a != b])
                    for kind in KINDS} for b in self.gpus}


def pooled(table: RatioTable, kinds: Sequence[str] = KINDS,
           gpus: Optional[Sequence[str]] = None) -> np.ndarray:
    """The ratios of ``kinds`` of ``gpus`` (default all) in one array."""
    return np.concatenate([table[g][k] for g in (gpus or list(table)) for k in kinds])


def _cross(a: CalibrationSet, b: CalibrationSet, model_a: Mapping[str, np.ndarray],
           model_b: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for kind in KINDS:
        index_b = {key: i for i, key in enumerate(b.keys(kind))}
        pairs = [(i, index_b[key]) for i, key in enumerate(a.keys(kind)) if key in index_b]
        ia = np.array([i for i, _ in pairs], dtype=int)
        ib = np.array([j for _, j in pairs], dtype=int)
        pred = a.seconds[kind][ia] * model_b[kind][ib] / model_a[kind][ia]
        r = pred / b.seconds[kind][ib]
        out[kind] = r[~np.isnan(r)]
    return out


def architectures(sets: Mapping[str, CalibrationSet]) -> dict[str, tuple[str, ...]]:
    """The GPUs of ``sets`` per architecture, in the order the sets list them."""
    out: dict[str, list[str]] = {}
    for name, cset in sets.items():
        out.setdefault(cset.gpu.architecture, []).append(name)
    return {arch: tuple(names) for arch, names in out.items()}


def evaluate(sets: Mapping[str, CalibrationSet],
             own: Optional[Mapping[str, KernelParams]] = None) -> Evaluation:
    """Fit every set on its own, every leave-one-out pool (``own`` may give the own fits) and,
    with two architectures or more, every leave-one-architecture-out pool; measure in-sample,
    leave-one-GPU-out, leave-one-architecture-out and cross-GPU errors, with the roofline's
    beside them. Needs at least two sets."""
    names = tuple(sets)
    if len(names) < 2:
        raise CalibrationError("evaluate: leave-one-GPU-out needs at least two GPUs")
    own = {g: (own or {}).get(g) or fit(sets[g]) for g in names}
    logo = {g: fit([sets[x] for x in names if x != g]) for g in names}
    own_pred = {g: predict(sets[g], own[g]) for g in names}
    logo_pred = {g: predict(sets[g], logo[g]) for g in names}
    roof = {g: roofline(sets[g]) for g in names}
    cross, cross_roof = {}, {}
    for a in names:
        for b in names:
            if a != b:
                cross[(a, b)] = _cross(sets[a], sets[b], own_pred[a], logo_pred[b])
                cross_roof[(a, b)] = _cross(sets[a], sets[b], roof[a], roof[b])
    groups = architectures(sets)
    loao = {arch: fit([sets[g] for g in names if g not in held]) for arch, held in
            groups.items()} if len(groups) > 1 else {}
    loao_table = {g: ratios(predict(sets[g], loao[arch]), sets[g])
                  for arch, held in groups.items() if arch in loao for g in held}
    return Evaluation(names, own, logo,
                      {g: ratios(own_pred[g], sets[g]) for g in names},
                      {g: ratios(logo_pred[g], sets[g]) for g in names},
                      {g: ratios(roof[g], sets[g]) for g in names}, cross, cross_roof,
                      loao, loao_table, {g: sets[g].gpu.architecture for g in names})


# -- kernel_params.json ----------------------------------------------------------------------

def significant(value: float, digits: int = 6) -> float:
    """``value`` rounded to ``digits`` significant digits."""
    return float(f"{value:.{digits}g}")


def _rounded(kp: KernelParams) -> KernelParams:
    return KernelParams(**{k: significant(v) for k, v in kp.as_dict().items()})


def params_document(sets: Mapping[str, CalibrationSet],
                    fits: Optional[Mapping[str, KernelParams]] = None) -> dict[str, Any]:
    """The ``kernel_params.json`` document of ``sets``, each GPU fitted on its own (or taken
    from ``fits``), parameters at 6 significant digits, with their provenance: source files,
    rows per kind, the in-sample fit error of the rounded parameters per kind, and the cuDNN and
    CUDA versions of the measurements."""
    from sst_cdma.model.fitted import FORMAT, VERSION

    families = {}
    for name, cset in sets.items():
        kp = _rounded((fits or {}).get(name) or fit(cset))
        errors = {kind: fit_error(r).as_dict()
                  for kind, r in ratios(predict(cset, kp), cset).items()}
        gpu = cset.gpu
        families[name] = {
            "device": gpu.model,
            "preset": gpu.preset,
            "params": kp.as_dict(),
            "provenance": {
                "source": [f"DeepBench {gpu.source_sheet} (Baidu, "
                           "github.com/baidu-research/DeepBench, Apache-2.0)"] +
                          list(cset.files),
                "cudnn": gpu.cudnn,
                "cuda": gpu.cuda,
                "rows": {kind: cset.rows(kind) for kind in KINDS},
                "fit_error": errors,
            },
        }
    if len(sets) > 1:
        families[POOLED] = _pooled_family(sets, (fits or {}).get(POOLED))
    return {"format": FORMAT, "version": VERSION, "calibrated_by": "sst-cdma calibrate",
            "families": families}


def _pooled_family(sets: Mapping[str, CalibrationSet],
                   kp: Optional[KernelParams] = None) -> dict[str, Any]:
    """The ``Pooled`` family: one fit on every set pooled (each on its own hardware), the
    parameters GPUs without measurements borrow; its fit error is over all the sets."""
    kp = _rounded(kp or fit(list(sets.values())))
    table = {name: ratios(predict(cset, kp), cset) for name, cset in sets.items()}
    first = next(iter(sets.values()))
    return {
        "device": "every measured GPU pooled (" + ", ".join(sets) + ")",
        "preset": "",
        "params": kp.as_dict(),
        "provenance": {
            "source": ["DeepBench results/train (Baidu, github.com/baidu-research/DeepBench, "
                       "Apache-2.0), every sheet listed in gpus.csv"] + list(first.files),
            "rows": {kind: sum(c.rows(kind) for c in sets.values()) for kind in KINDS},
            "fit_error": {kind: fit_error(pooled(table, (kind,))).as_dict() for kind in KINDS},
        },
    }


def write_params(path: Union[str, os.PathLike[str]],
                 data_dir: Optional[Union[str, os.PathLike[str]]] = None,
                 sets: Optional[Mapping[str, CalibrationSet]] = None) -> dict[str, Any]:
    """Fit every GPU of ``data_dir`` (or the given ``sets``) and write ``kernel_params.json``
    to ``path``; returns the document written."""
    doc = params_document(sets if sets is not None else load(data_dir))
    text = params_text(path, doc)
    try:
        write_text_whole(path, text)
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return doc


def _non_finite(value: Any, where: str = "") -> Optional[str]:
    """Where in ``value`` the first NaN or infinity is (``families.P100.params.x``), if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'document'}: not a finite number ({value})"
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def params_text(path: Union[str, os.PathLike[str]], doc: Mapping[str, Any]) -> str:
    """``doc`` as the text of ``kernel_params.json``; a NaN or infinity in it (which would be
    invalid JSON) is a :class:`CalibrationError` naming ``path`` and where it is."""
    found = _non_finite(doc)
    if found:
        raise CalibrationError(f"{path}: {found}, which JSON cannot hold")
    try:
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError as exc:
        raise CalibrationError(f"{path}: {exc}") from None


def check_params(path: Union[str, os.PathLike[str]], doc: Mapping[str, Any]) -> list[str]:
    """How the file at ``path`` differs from the refitted ``doc`` (families, devices, presets,
    parameters at 6 significant digits): one line per difference, empty when they agree. A
    ``doc`` that could not be written (a NaN or infinity) is a :class:`CalibrationError`."""
    params_text(path, doc)
    name = Path(path).name
    try:
        committed = load_json(path, PARAMS_FILE)
    except FileReadError as exc:
        raise CalibrationError(f"{name}: {exc}" if exc.parsing else
                               f"{path}: cannot read: {exc}") from None
    have = committed.get("families") if isinstance(committed, dict) else None
    if not isinstance(have, dict):
        return [f"{name}: no 'families' mapping"]
    out = []
    for fam in sorted(set(have) ^ set(doc["families"])):
        out.append(f"{name}: family {fam!r} " +
                   ("is not in the refit" if fam in have else "is missing"))
    for fam, entry in doc["families"].items():
        old = have.get(fam)
        if not isinstance(old, dict):
            continue
        for key in ("device", "preset"):
            if old.get(key) != entry[key]:
                out.append(f"{name}: {fam}: {key}: committed {old.get(key)!r}, refit "
                           f"{entry[key]!r}")
        committed = old.get("params")
        params = committed if isinstance(committed, dict) else {}
        for p, value in entry["params"].items():
            was = params.get(p)
            if not isinstance(was, (int, float)) or significant(float(was)) != value:
                out.append(f"{name}: {fam}: {p}: committed {was!r}, refit {value!r}")
        for p in sorted(set(params) - set(entry["params"])):
            out.append(f"{name}: {fam}: {p}: committed, but not a kernel parameter")
    return out


def format_fit_errors(doc: Mapping[str, Any]) -> str:
    """The in-sample fit error of a ``kernel_params.json`` document as a text table: per GPU
    and kind, rows, median predicted/measured, geometric-mean |r - 1| and share within
    +-25%."""
    lines = [f"{'GPU':<14} {'kernel':<10} {'rows':>5} {'median p/m':>10} {'geomean |r-1|':>14} "
             f"{'within 25%':>10}"]
    for fam, entry in doc["families"].items():
        for kind, e in entry["provenance"]["fit_error"].items():
            lines.append(f"{fam:<14} {kind:<10} {e['rows']:>5} {e['median_ratio']:>10.3f} "
                         f"{e['geomean_abs_error']:>13.1%} {e['within_25pct']:>10.0%}")
    return "\n".join(lines)
