"""Part (c) of a validation run: copies between pinned host memory and the GPU, host-to-device
and device-to-host each alone, and both at once on two streams, at several sizes.

Each copy is ``non_blocking`` from page-locked host memory (the only kind the copy engines
move without a staging copy). "Both at once" issues an H2D copy on one stream and a D2H copy
on another, both waiting for a mark on the current stream, which then waits for both: the
time is from that mark to the current stream's mark after the join, and the rate counts both
directions' bytes. On the CPU (the reduced run) the two are plain copies one after the other.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from sst_cdma.tools.validate.bandwidth import BandwidthFigure
from sst_cdma.tools.validate.device import Probe

__all__ = ["DIRECTIONS", "measure_host_copies"]

#: what the copies measure, in the order measured
DIRECTIONS = ("host to device", "device to host", "both directions")


def _both(probe: Probe, h2d: tuple[torch.Tensor, torch.Tensor],
          d2h: tuple[torch.Tensor, torch.Tensor]) -> Callable[[], None]:
    """Both copies at once: H2D (device, host) on a stream, D2H (host, device) on another."""
    (dev_in, host_in), (host_out, dev_out) = h2d, d2h

    def run() -> None:
        with probe.stream_factory():
            dev_in.copy_(host_in, non_blocking=True)
        with probe.stream_factory():
            host_out.copy_(dev_out, non_blocking=True)
    return run


def _at_size(probe: Probe, size: int, repeat: int) -> list[BandwidthFigure]:
    host_in, host_out = probe.host_buffer(size), probe.host_buffer(size)
    dev_in, dev_out = probe.device_buffer(size), probe.device_buffer(size)
    host_in.fill_(1)
    dev_out.fill_(2)
    runs: dict[str, tuple[Callable[[], object], int]] = {
        "host to device": (lambda: dev_in.copy_(host_in, non_blocking=True), size),
        "device to host": (lambda: host_out.copy_(dev_out, non_blocking=True), size),
        "both directions": (_both(probe, (dev_in, host_in), (host_out, dev_out)), 2 * size),
    }
    warmup = max(1, repeat // 4)
    return [BandwidthFigure(what, size, traffic, probe.median_seconds(run, repeat, warmup))
            for what, (run, traffic) in runs.items()]


def measure_host_copies(probe: Probe, sizes: Sequence[int], repeat: int,
                        say: Callable[[str], None]) -> list[BandwidthFigure]:
    """Every direction's rate at each size (bytes per direction)."""
    found = []
    for size in sizes:
        if not probe.fits(2 * size):
            say(f"{size / 2**20:g} MiB: left out (two device buffers do not fit)")
            continue
        figures = _at_size(probe, size, repeat)
        found += figures
        say(f"{size / 2**20:g} MiB: " + ", ".join(
            f"{f.what} {f.bytes_per_s / 1e9:.2f} GB/s" for f in figures))
    return found
