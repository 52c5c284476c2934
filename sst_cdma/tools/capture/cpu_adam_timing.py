"""Time the CPU AdamW step as ZeRO-Offload runs it on the host: fp32 master weights and
moments, an fp32 gradient, the updated weights written back as a 16-bit copy.

:func:`time_cpu_adam` measures each implementation (PyTorch's ``fused``, ``foreach``,
``for-loop``, and DeepSpeed's ``DeepSpeedCPUAdam`` as ``deepspeed`` where it can be imported,
:mod:`.deepspeed_adam`) at each size and thread count; :func:`cpu_adam_document` turns the
measurements into the version-1 file :mod:`sst_cdma.model.cpu_adam` reads.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import torch

from sst_cdma import __version__
from sst_cdma.model.cpu_adam import (FORMAT, IMPLEMENTATIONS, SIMD_BITS, VERSION,
                                     check_cpu_adam, headline)
from sst_cdma.model.dtypes import DTYPES
from sst_cdma.tools.capture.deepspeed_adam import DEEPSPEED, deepspeed_adam, deepspeed_version
from sst_cdma.tools.capture.errors import CaptureError, Unavailable

__all__ = ["AdamTiming", "Unavailable", "time_cpu_adam", "machine_description",
           "cpu_adam_document", "available_cores", "BYTES_HELD_PER_PARAM", "cpu_features",
           "optimizer_names"]

#: the step's element types: fp32 master, moments and gradient, a bf16 weight copy
MASTER_DTYPE = "float32"
WEIGHT_COPY_DTYPE = "bfloat16"
#: bytes a timed parameter holds: fp32 master weight, gradient and two moments, the 16-bit
#: copy (the foreach implementation's temporaries come on top)
BYTES_HELD_PER_PARAM = 4 * DTYPES[MASTER_DTYPE] + DTYPES[WEIGHT_COPY_DTYPE]


@dataclass(frozen=True)
class AdamTiming:
    """One measurement: ``params`` parameters in ``tensors`` equal tensors, ``threads``
    threads, the wall time of each timed step."""

    implementation: str
    params: int
    tensors: int
    threads: int
    seconds: tuple[float, ...]

    @property
    def median_s(self) -> float:
        """The median step time."""
        return float(statistics.median(self.seconds))

    @property
    def min_s(self) -> float:
        """The fastest step: others' work on a shared machine only slows steps down."""
        return min(self.seconds)

    @property
    def params_per_s(self) -> float:
        """Parameters updated per second in the fastest step."""
        return self.params / self.min_s

    def to_dict(self) -> dict[str, Any]:
        """The measurement's entry in the file."""
        return {"implementation": self.implementation, "params": self.params,
                "tensors": self.tensors, "threads": self.threads,
                "seconds": [round(s, 9) for s in self.seconds],
                "median_s": self.median_s, "min_s": self.min_s,
                "params_per_s": self.params_per_s}


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _flags(implementation: str) -> dict[str, bool]:
    return {"fused": {"fused": True}, "foreach": {"foreach": True},
            "for-loop": {"foreach": False}}[implementation]


def _state(params: int, tensors: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Master weights with their gradients set, and the 16-bit copies, ``tensors`` of them."""
    generator = torch.Generator().manual_seed(0)
    sizes = [params // tensors + (1 if i < params % tensors else 0) for i in range(tensors)]
    masters, copies = [], []
    for size in sizes:
        master = torch.randn(size, generator=generator, dtype=getattr(torch, MASTER_DTYPE))
        master.mul_(0.02).requires_grad_(True)
        master.grad = torch.randn(size, generator=generator).mul_(1e-3)
        masters.append(master)
        copies.append(torch.empty(size, dtype=getattr(torch, WEIGHT_COPY_DTYPE)))
    return masters, copies


def _optimizer(implementation: str, masters: list[torch.Tensor]) -> torch.optim.Optimizer:
    """The implementation's AdamW over ``masters`` (lr 1e-4, weight decay 0.01, the default
    betas and eps); one it cannot build here is :class:`Unavailable`."""
    if implementation == DEEPSPEED:
        return deepspeed_adam(masters, lr=1e-4, weight_decay=0.01)
    try:
        return torch.optim.AdamW(masters, lr=1e-4, weight_decay=0.01,
                                 **_flags(implementation))  # type: ignore[arg-type]
    except (RuntimeError, ValueError) as exc:
        raise Unavailable(f"{implementation}: {str(exc).splitlines()[0]}") from None


def _time_one(implementation: str, params: int, tensors: int, threads: int, repeat: int,
              warmup: int) -> AdamTiming:
    masters, copies = _state(params, tensors)
    optimizer = _optimizer(implementation, masters)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    seconds = []
    try:
        with torch.no_grad():
            for run in range(warmup + repeat):
                start = time.perf_counter()
                try:
                    optimizer.step()
                except (RuntimeError, ValueError) as exc:
                    raise Unavailable(f"{implementation}: {str(exc).splitlines()[0]}") from None
                for copy, master in zip(copies, masters):
                    copy.copy_(master)
                if run >= warmup:
                    seconds.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(old)
    return AdamTiming(implementation, params, tensors, threads, tuple(seconds))


def time_cpu_adam(sizes: Sequence[int], threads: Sequence[int],
                  implementations: Sequence[str] = IMPLEMENTATIONS, *, tensors: int = 16,
                  repeat: int = 5, warmup: int = 2,
                  show: Callable[[AdamTiming], None] | None = None,
                  ) -> tuple[list[AdamTiming], dict[str, str]]:
    """Time the AdamW step for every implementation, size (total parameters, split into
    ``tensors`` tensors) and thread count; the median of ``repeat`` timed steps after
    ``warmup`` untimed ones counts. Returns the measurements and, per implementation this
    PyTorch cannot run, why."""
    for name in implementations:
        if name not in IMPLEMENTATIONS:
            raise CaptureError(f"--implementations: {name!r} is not one of "
                               f"{', '.join(IMPLEMENTATIONS)}")
    found: list[AdamTiming] = []
    unavailable: dict[str, str] = {}
    for implementation in implementations:
        for size in sizes:
            for count in threads:
                if implementation in unavailable:
                    break
                try:
                    timing = _time_one(implementation, size, min(tensors, size), count,
                                       repeat, warmup)
                except Unavailable as exc:
                    unavailable[implementation] = str(exc)
                    break
                found.append(timing)
                if show is not None:
                    show(timing)
    if not found:
        raise CaptureError("no implementation could be timed: "
                           + "; ".join(unavailable.values()))
    return found, unavailable


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def cpu_features(text: str) -> tuple[list[str], float | None]:
    """The vector extensions (of :data:`~sst_cdma.model.cpu_adam.SIMD_BITS`, widest first)
    and the clock in MHz (None where not given) that ``/proc/cpuinfo``'s text ``text`` gives
    for its first CPU: the ``flags`` line (x86) or ``Features`` line (Arm), and ``cpu MHz``."""
    flags: set[str] = set()
    mhz: float | None = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(value)
            except ValueError:
                mhz = None
    return [flag for flag in SIMD_BITS if flag in flags], mhz if mhz and mhz > 0 else None


def machine_description() -> dict[str, Any]:
    """The measuring machine: CPU model, cores this process may use, architecture, memory,
    OS, the 1-minute load average when the measurement started (others' work skews it), and
    where Linux says them, the CPU's vector extensions and clock (``/proc/cpuinfo``)."""
    try:
        load: float | None = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        load = None
    found = {"cpu": _cpu_model(), "cores": available_cores(),
             "architecture": platform.machine(), "memory_bytes": _memory_bytes(),
             "os": platform.platform(), "load_average": load}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            simd, mhz = cpu_features(info.read())
    except OSError:
        return found
    found["simd"] = simd
    if mhz is not None:
        found["cpu_mhz"] = mhz
    return found


def optimizer_names(implementations: Sequence[str]) -> dict[str, str]:
    """What each implementation measured ran: the optimizer class and its flags."""
    names = {"fused": "torch.optim.AdamW(fused=True)", "foreach": "torch.optim.AdamW(foreach=True)",
             "for-loop": "torch.optim.AdamW(foreach=False)",
             DEEPSPEED: "deepspeed.ops.adam.DeepSpeedCPUAdam(adamw_mode=True)"}
    return {name: names[name] for name in implementations}


def cpu_adam_document(timings: Sequence[AdamTiming], unavailable: dict[str, str],
                      machine: dict[str, Any], command: str,
                      date: str | None = None) -> dict[str, Any]:
    """The version-1 CPU Adam file of these measurements (checked before it is returned)."""
    itemsize = DTYPES[MASTER_DTYPE]
    measurements = [t.to_dict() for t in timings]
    cores = max(t.threads for t in timings)
    measured = list(dict.fromkeys(t.implementation for t in timings))
    software = {"torch": torch.__version__, "python": sys.version.split()[0],
                "sst-cdma": __version__}
    if DEEPSPEED in measured:
        software["deepspeed"] = deepspeed_version()
    optimizers = optimizer_names(measured)
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "machine": machine,
        "date": date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "software": software, "command": command,
        "step": {"optimizer": ", ".join(dict.fromkeys(o.split("(")[0]
                                                     for o in optimizers.values())),
                 "master_dtype": MASTER_DTYPE,
                 "moments_dtype": MASTER_DTYPE, "gradient_dtype": MASTER_DTYPE,
                 "weight_copy_dtype": WEIGHT_COPY_DTYPE,
                 # read: master, exp_avg, exp_avg_sq, gradient; written: master, the two
                 # moments and the 16-bit weight copy
                 "bytes_per_param_read": 4 * itemsize,
                 "bytes_per_param_written": 3 * itemsize + DTYPES[WEIGHT_COPY_DTYPE]},
        "measurements": measurements, "optimizers": optimizers,
    }
    if unavailable:
        doc["unavailable"] = dict(unavailable)
    doc.update(headline(measurements, cores))  # type: ignore[arg-type]
    check_cpu_adam(doc)
    return doc
