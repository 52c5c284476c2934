"""Measured per-layer kernel times: the file that calibrates the GPU model against a real device.

By default a kernel lasts what the roofline says (FLOPs against peak FLOP/s, bytes against DRAM
bandwidth). A layer-times file replaces that with times measured on a real device, for one
network at one batch size and dtype::

    {"format": "sst-cdma-layer-times", "version": 1,
     "network": "vgg16", "batch": 64, "dtype": "float32",
     "device": "NVIDIA H200 (cuda:0)", "gpu": "h200",
     "measured_by": "sst-cdma time-layers 0.1.0",
     "layers": {"conv1_1": {"fwd": "1.234ms", "bwd": "2.5ms"}, ...}}

Every layer but the data layer runs one forward and one backward kernel, and the file must give
both for each: a file that covered some layers would silently mix measured and modelled time.
``seq_len`` (written for transformer networks, whose sequence length is an option) is the
sequence length the times were measured at: a run at another one refuses the file.
``gpu`` (optional) names the GPU preset of the measured device: a run on another preset then
scales each measured kernel by the kernel model's ratio (target over source) for that layer and
pass; without it the times are used as measured.
``sst-cdma time-layers`` writes such a file by timing each layer of the definition in PyTorch
(:mod:`sst_cdma.tools.capture.layer_timing`); hand-written files are welcome. The times (integer
picoseconds once read: :attr:`LayerTimes.times_ps`) become the compute ops' ``time_ps``, written
as the ``time=`` keys of a rendered stream's text (docs/workloads.md).
"""
from __future__ import annotations

import json
import os
from dataclasses import field
from decimal import Decimal
from typing import Any

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

from .errors import WorkloadError, read_fault
from .network import Network
from .durations import format_ps, parse_duration

__all__ = ["FORMAT", "VERSION", "PASSES", "LayerTimes", "load_layer_times", "format_ps",
           "kernel_times_source", "TensorCoreCheck", "tensor_core_check", "sequence_length",
           "implied_compute_efficiency"]

#: The kernel model's algorithms that run on tensor cores.
TENSOR_CORE_ALGORITHMS = ("TENSOR_GEMM", "TF32_GEMM", "FLASH_ATTENTION_2", "FLASH_ATTENTION_3")

FORMAT = "sst-cdma-layer-times"
VERSION = 1
PASSES = ("fwd", "bwd")
#: a layer-times file: two times per layer
LAYER_TIMES_FILE = FileKind("a layer-times file", 64 * MIB)
_KEYS = {"format", "version", "network", "batch", "dtype", "device", "gpu", "measured_by",
         "seq_len", "layers"}


@record
class LayerTimes(Record):
    """Measured kernel times of one network at one batch size and dtype, in picoseconds."""

    network: str
    batch: int
    dtype: str
    device: str
    times_ps: dict[str, dict[str, int]]
    measured_by: str = ""
    source: str = field(default="", compare=False)
    #: the GPU preset of the measured device ("" when not known)
    gpu: str = ""
    #: a transformer's sequence length (0: not a transformer, or not recorded)
    seq_len: int = 0

    def layers_text(self) -> dict[str, dict[str, str]]:
        """The times as exact text: the file's ``layers``."""
        return {layer: {p: format_ps(ps) for p, ps in passes.items()}
                for layer, passes in self.times_ps.items()}

    def check(self, network: Network, batch: int, dtype: str) -> None:
        """Raise :class:`WorkloadError` (naming the file) unless these times are for
        ``network`` at ``batch`` and ``dtype`` and cover each of its kernels."""
        where = self.source or None
        if self.network != network.name:
            raise WorkloadError(f"times measured for network {self.network!r}, not "
                                f"{network.name!r}", file=where)
        if self.batch != batch:
            raise WorkloadError(f"times measured at batch {self.batch}, not {batch} (kernel "
                                f"times do not scale linearly; measure at this batch)", file=where)
        if self.dtype != dtype:
            raise WorkloadError(f"times measured in {self.dtype}, not {dtype}", file=where)
        if self.seq_len and self.seq_len != sequence_length(network):
            raise WorkloadError(f"times measured at sequence length {self.seq_len}, not "
                                f"{sequence_length(network)}", file=where)
        layers = [layer.name for layer in network.layers if layer.kind != "data"]
        unknown = sorted(set(self.times_ps) - set(layers))
        if unknown:
            raise WorkloadError(f"no layer {unknown[0]!r} in network {network.name!r}"
                                + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""),
                                file=where)
        missing = [f"{name}.{p}" for name in layers for p in PASSES
                   if p not in self.times_ps.get(name, {})]
        if missing:
            raise WorkloadError(f"no time for {missing[0]}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                                + "; every layer needs its fwd and bwd kernel time", file=where)
        # zero is the time of a backward that does not run; one that runs takes time
        ran = [i.name for i in network.infer(batch, dtype) if i.has_backward
               and self.times_ps[i.name]["bwd"] == 0]
        if ran:
            raise WorkloadError(f"layer {ran[0]!r} bwd: a measured time of zero, but its "
                                f"backward runs (it has weights or inputs that need a gradient)",
                                file=where)

    def to_json(self) -> dict[str, Any]:
        """The file's content."""
        doc = {"format": FORMAT, "version": VERSION, "network": self.network,
               "batch": self.batch, "dtype": self.dtype, "device": self.device}
        if self.gpu:
            doc["gpu"] = self.gpu
        if self.seq_len:
            doc["seq_len"] = self.seq_len
        doc.update({"measured_by": self.measured_by, "layers": self.layers_text()})
        return doc

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the file (atomically: a reader never sees half of it)."""
        write_text_whole(path, json.dumps(self.to_json(), indent=1) + "\n")


def _parse(doc: Any, where: str) -> LayerTimes:
    def fail(message: str) -> WorkloadError:
        return WorkloadError(message, file=where)

    if not isinstance(doc, dict):
        raise fail("a layer-times file holds a JSON object")
    if doc.get("format") != FORMAT:
        raise fail(f"not a layer-times file (format must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise fail(f"unsupported version {doc.get('version')!r} (this reads version {VERSION})")
    extra = sorted(set(doc) - _KEYS)
    if extra:
        raise fail(f"unknown key {extra[0]!r}")
    for key, kind in (("network", str), ("dtype", str), ("device", str)):
        if not isinstance(doc.get(key), kind) or not doc[key]:
            raise fail(f"{key!r} must be a non-empty string")
    gpu = doc.get("gpu", "")
    if gpu != "":
        from sst_cdma.model.gpus import GPUS

        if not isinstance(gpu, str) or gpu not in GPUS:
            raise fail(f"'gpu' must name a GPU preset ({', '.join(sorted(GPUS))}), got {gpu!r}")
    batch = doc.get("batch")
    if type(batch) is not int or batch < 1:
        raise fail(f"'batch' must be a positive integer, got {batch!r}")
    seq_len = doc.get("seq_len", 0)
    if type(seq_len) is not int or seq_len < 0:
        raise fail(f"'seq_len' must be a non-negative integer, got {seq_len!r}")
    layers = doc.get("layers")
    if not isinstance(layers, dict) or not layers:
        raise fail("'layers' must map layer names to {\"fwd\": TIME, \"bwd\": TIME}")
    times: dict[str, dict[str, int]] = {}
    for name, passes in layers.items():
        if not isinstance(passes, dict):
            raise fail(f"layer {name!r}: expected {{\"fwd\": TIME, \"bwd\": TIME}}")
        times[name] = {}
        for p, text in passes.items():
            if p not in PASSES:
                raise fail(f"layer {name!r}: unknown pass {p!r} (fwd or bwd)")
            if not isinstance(text, str):
                raise fail(f"layer {name!r} {p}: time must be a string with a unit, "
                           f"e.g. \"1.5ms\", got {text!r}")
            try:
                ps = parse_duration(text)
            except ValueError as exc:
                raise fail(f"layer {name!r} {p}: {exc}") from None
            if ps == 0 and Decimal(text.rstrip("psnumµ")) != 0:
                raise fail(f"layer {name!r} {p}: {text!r} is under a picosecond")
            if ps == 0 and p == "fwd":
                raise fail(f"layer {name!r} {p}: a measured time must be positive, got {text!r}")
            times[name][p] = ps
    return LayerTimes(doc["network"], batch, doc["dtype"], doc["device"], times,
                      str(doc.get("measured_by", "")), where, gpu, seq_len)


def load_layer_times(path: str | os.PathLike[str]) -> LayerTimes:
    """Read and validate a layer-times file; errors are :class:`WorkloadError` naming it."""
    where = os.fspath(path)
    try:
        doc = load_json(path, LAYER_TIMES_FILE)
    except FileReadError as exc:
        raise WorkloadError(read_fault(exc, "layer times"), file=where) from None
    return _parse(doc, where)


def sequence_length(network: Network) -> int:
    """A transformer network's sequence length (its token input's), 0 for other networks."""
    if not any(layer.role for layer in network.layers):
        return 0
    return int(network.layers[0].params["shape"][0])


def implied_compute_efficiency(times: LayerTimes, network: Network, peak_flops: float) -> float:
    """The ``compute_efficiency`` at which the roofline's convolutions would take, together,
    the time measured for them: their FLOPs (forward and backward) over ``peak_flops`` x their
    measured time. Convolutions dominate these networks' work and are compute-bound, so this
    calibrates the roofline for GPUs that cannot be measured (same architecture, other peak)."""
    infos = {i.name: i for i in network.infer(times.batch, times.dtype)}
    convs = [name for name, info in infos.items() if info.kind == "conv" and name in times.times_ps]
    if not convs:
        raise WorkloadError("no convolution times to calibrate from", file=times.source or None)
    flops = sum(infos[n].flops_fwd + infos[n].flops_bwd for n in convs)
    seconds = sum(times.times_ps[n]["fwd"] + times.times_ps[n]["bwd"] for n in convs) / 1e12
    if seconds <= 0:
        raise WorkloadError("the convolutions' measured time is zero", file=times.source or None)
    return flops / (peak_flops * seconds)


@frozen_record
class TensorCoreCheck(FrozenRecord):
    """Measured against modelled time of the kernels the fitted model runs on tensor cores."""

    kernels: int
    measured_s: float
    modelled_s: float

    @property
    def ratio(self) -> float:
        """Measured over modelled time (above 1: the GPU is slower than the model assumes)."""
        return self.measured_s / self.modelled_s


def tensor_core_check(times: LayerTimes, network: Network, preset: str) -> TensorCoreCheck:
    """How far the tensor-core path's fitted constants are from ``times``, measured on GPU
    preset ``preset``: the kernels the fitted model prices on tensor cores (a GEMM or fused
    attention in a 16-bit type on a GPU with tensor cores for it), their measured and
    modelled total. ``kernels`` is 0 when the model prices none of them there."""
    from sst_cdma.model.fitted import kernel_model_for

    from .kernel_pricing import price_network

    priced = price_network(network, times.batch, times.dtype, kernel_model_for(preset))
    kernels, measured, modelled = 0, 0, 0
    for layer, passes in priced.items():
        for p, kernel in passes.items():
            if kernel.time_ps is not None and any(a in TENSOR_CORE_ALGORITHMS for a in
                                                  kernel.algorithm.split("+")):
                kernels += 1
                measured += times.times_ps[layer][p]
                modelled += kernel.time_ps
    return TensorCoreCheck(kernels, measured / 1e12, modelled / 1e12)


def kernel_times_source(kernel_model: str, preset: str, layer_times: str = "",
                        dtype: str = "float32", tf32: str = "", attention: str = "",
                        stack: str = "fused") -> str:
    """Where a GPU's kernel times come from, as ``summary.json``'s ``kernel_times`` says it:
    ``roofline``, ``model fitted on ...`` (the preset's fitted kernel model; the ``tf32`` mode
    on a GPU with TF32; for a 16-bit ``dtype`` how its convolutions and GEMMs are priced; the
    fused ``attention`` kernel, if any; the training ``stack`` where not the default) or
    ``measured on DEVICE (FILE)``,
    with how times measured on another preset are carried over. Raises
    :class:`~sst_cdma.model.kernel_model.ModelError` for a preset the model cannot price and
    :class:`WorkloadError` for a layer-times file that does not load."""
    if layer_times:
        measured = load_layer_times(layer_times)
        text = f"measured on {measured.device} ({layer_times})"
        if measured.gpu and measured.gpu != preset:
            text += (f", predicted for {preset} from {measured.gpu} by the kernel model's "
                     "per-layer ratio")
        elif not measured.gpu:
            text += (f", used unscaled on {preset} (the file names no GPU preset to scale "
                     "from: it has no 'gpu' field)")
        return text
    if kernel_model == "roofline":
        return "roofline"
    from sst_cdma.model.fitted import kernel_model_for

    from dataclasses import replace

    return replace(kernel_model_for(preset), tf32=tf32, stack=stack).describe(dtype, attention)
