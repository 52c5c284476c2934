"""Part (b) of a validation run: the device memory bandwidth kernels reach, at several sizes.

Two streaming kernels: a device-to-device copy (``dst.copy_(src)``: each byte read once and
written once, 2 x size of traffic) and an add (``torch.add(a, b, out=c)`` over float32: two
operands read, one written, 3 x size). The rate is the traffic over the median time of the
kernel (CUDA events around it). Sizes well above the last-level cache measure the DRAM
(HBM); the smallest show the cache and the launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from sst_cdma.tools.validate.device import Probe

__all__ = ["BandwidthFigure", "measure_device_bandwidth"]


@dataclass(frozen=True)
class BandwidthFigure:
    """One measured rate: ``what`` (the kernel or copy), ``size`` bytes per operand, the bytes
    it moves, the median seconds and the rate in bytes per second."""

    what: str
    size: int
    traffic: int
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        """Traffic over the time."""
        return self.traffic / self.seconds


def _copy(probe: Probe, size: int, repeat: int, warmup: int) -> BandwidthFigure:
    src, dst = probe.device_buffer(size), probe.device_buffer(size)
    src.fill_(1)
    seconds = probe.median_seconds(lambda: dst.copy_(src), repeat, warmup)
    return BandwidthFigure("device copy", size, 2 * size, seconds)


def _add(probe: Probe, size: int, repeat: int, warmup: int) -> BandwidthFigure:
    n = size // 4
    a = torch.ones(n, device=probe.device)
    b = torch.ones(n, device=probe.device)
    c = torch.empty(n, device=probe.device)
    seconds = probe.median_seconds(lambda: torch.add(a, b, out=c), repeat, warmup)
    return BandwidthFigure("add kernel", 4 * n, 12 * n, seconds)


def measure_device_bandwidth(probe: Probe, sizes: Sequence[int], repeat: int,
                             say: Callable[[str], None]) -> list[BandwidthFigure]:
    """The copy's and the add's rate at each size (bytes per operand)."""
    found = []
    for size in sizes:
        if not probe.fits(3 * size):
            say(f"{size / 2**20:g} MiB: left out (the add's three operands do not fit)")
            continue
        for kernel in (_copy, _add):
            figure = kernel(probe, size, repeat, max(1, repeat // 4))
            found.append(figure)
            say(f"{figure.what} {size / 2**20:g} MiB: {figure.bytes_per_s / 1e9:.1f} GB/s")
        if probe.is_gpu:
            torch.cuda.empty_cache()
    return found
