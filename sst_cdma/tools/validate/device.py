"""The device a validation run measures, and how it times work on it.

:class:`Probe` bundles what every measurement needs: the PyTorch device, a synchronization, a
:class:`Clock` (CUDA events on a GPU, the host's monotonic clock on the CPU), streams (two CUDA
streams on a GPU; on the CPU none: work runs in issue order) and whether host memory can be
pinned. The measurements take a Probe, so tests run them on the CPU, or with an injected clock,
through the same code as on a GPU.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Iterator, Optional, Protocol, Union

import torch

from sst_cdma.tools.capture.errors import CaptureError

__all__ = ["Clock", "EventClock", "HostClock", "Probe", "probe_for", "threads_for", "cuda_device",
           "NoGPU", "out_of_memory"]


def out_of_memory(exc: BaseException) -> bool:
    """True for PyTorch's out-of-memory error, also as a message another error carries."""
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


class NoGPU(CaptureError):
    """``validate`` was asked for a GPU where PyTorch sees none."""


#: a mark a clock made: a recorded CUDA event, or the host clock's nanoseconds
Mark = Union["torch.cuda.Event", int]


class Clock(Protocol):
    """Marks points of a device's work and the seconds between two marks."""

    def mark(self) -> Mark:
        """Mark this point of the current stream's work."""

    def seconds(self, start: Mark, end: Mark) -> float:
        """Seconds from ``start`` to ``end``; valid once the device has synchronized."""


class EventClock:
    """CUDA events with timing, recorded on the current stream: the GPU's own clock, so a mark
    is where the stream's work reaches, not where the host issued it."""

    def mark(self) -> Mark:
        """Record a timing event on the current CUDA stream."""
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Mark, end: Mark) -> float:
        """Seconds between two recorded events (``elapsed_time`` is in milliseconds)."""
        assert not isinstance(start, int) and not isinstance(end, int)
        return float(start.elapsed_time(end)) / 1e3


class HostClock:
    """The host's monotonic clock: on the CPU every operation has ended when it returns."""

    def mark(self) -> Mark:
        """Nanoseconds of ``time.perf_counter_ns``."""
        return time.perf_counter_ns()

    def seconds(self, start: Mark, end: Mark) -> float:
        """Seconds between two marks."""
        assert isinstance(start, int) and isinstance(end, int)
        return (end - start) / 1e9


def _no_stream() -> ContextManager[None]:
    return contextlib.nullcontext()


@dataclass
class Probe:
    """The measured device and how to time it.

    ``reduced`` asks every measurement for its small sizes (the CPU check the tests run).
    ``streams`` gives ``count`` contexts under which work is issued to a stream of its own
    (CUDA streams), with ``join`` making the current stream wait for them; on the CPU they are
    empty contexts and work runs one after the other.
    """

    device: torch.device
    clock: Clock
    sync: Callable[[], None]
    reduced: bool
    pin: bool
    stream_factory: Callable[[], ContextManager[None]] = field(default=_no_stream)

    @property
    def is_gpu(self) -> bool:
        """True on a CUDA device."""
        return self.device.type == "cuda"

    def host_buffer(self, nbytes: int) -> torch.Tensor:
        """``nbytes`` of host memory, page-locked (pinned) where a GPU is present."""
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=self.pin)

    def device_buffer(self, nbytes: int) -> torch.Tensor:
        """``nbytes`` of device memory."""
        return torch.empty(nbytes, dtype=torch.uint8, device=self.device)

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more fit in the device's free memory with a tenth to spare (on
        the CPU: always; the reduced sizes are small)."""
        if not self.is_gpu:
            return True
        free, _ = torch.cuda.mem_get_info(self.device)
        return nbytes <= 0.9 * free

    def median_seconds(self, run: Callable[[], object], repeat: int, warmup: int) -> float:
        """The median seconds of ``repeat`` runs of ``run`` after ``warmup`` untimed ones, each
        between two marks of the clock (on a GPU: events around its work on the stream, so
        back-to-back runs are timed without the host's launch gaps)."""
        for _ in range(warmup):
            run()
        self.sync()
        marks = []
        for _ in range(repeat):
            start = self.clock.mark()
            run()
            marks.append((start, self.clock.mark()))
        self.sync()
        return float(statistics.median(self.clock.seconds(a, b) for a, b in marks))

    def peak_memory_reset(self) -> None:
        """Start counting the device's peak allocated memory afresh (a GPU's only)."""
        if self.is_gpu:
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory(self) -> Optional[int]:
        """Peak allocated device memory since the last reset (None on the CPU)."""
        return int(torch.cuda.max_memory_allocated(self.device)) if self.is_gpu else None


def _cuda_stream_factory(device: torch.device) -> Callable[[], ContextManager[None]]:
    """Each call: a context on the next of two CUDA streams (made once, so that no stream is
    created between a timing mark and the work) that first waits for the current stream, and
    that the current stream waits for when it ends."""
    streams = (torch.cuda.Stream(device), torch.cuda.Stream(device))
    turn = [0]

    @contextlib.contextmanager
    def on_own_stream() -> Iterator[None]:
        outer = torch.cuda.current_stream(device)
        stream = streams[turn[0] % len(streams)]
        turn[0] += 1
        stream.wait_stream(outer)
        with torch.cuda.stream(stream):
            yield
        outer.wait_stream(stream)
    return on_own_stream


@contextlib.contextmanager
def threads_for(probe: Probe) -> Iterator[None]:
    """PyTorch's host threads during a run: one in the reduced run (on a machine shared with
    other work, several threads spin at each other's barriers and time the scheduler), as set
    otherwise (the GPU run's host work: launching kernels, the CPU Adam sets its own)."""
    old = torch.get_num_threads()
    if probe.reduced:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def cuda_device(text: str, current: Callable[[], int]) -> torch.device:
    """The CUDA device ``text`` names, with its index (``cuda`` is the ``current()`` one:
    ``torch.cuda.set_device`` and the streams need an index). ValueError for a device that is
    not a CUDA one."""
    dev = torch.device(text)
    if dev.type != "cuda":
        raise ValueError("not a CUDA device (validate measures a GPU; --cpu runs the reduced "
                         "check on the CPU)")
    return dev if dev.index is not None else torch.device("cuda", current())


def probe_for(cpu: bool, device: str = "cuda") -> Probe:
    """The Probe of a run: ``device`` (a CUDA device) unless ``cpu``, which gives the reduced
    CPU run. Raises :class:`NoGPU` when no CUDA device is usable and ``cpu`` is not set."""
    if cpu:
        return Probe(torch.device("cpu"), HostClock(), lambda: None, reduced=True, pin=False)
    if not torch.cuda.is_available():
        raise NoGPU("no CUDA GPU is visible to PyTorch; run on a GPU machine, or give --cpu "
                    "for the reduced check on the CPU")
    try:
        dev = cuda_device(device, torch.cuda.current_device)
        torch.empty(1, device=dev)
    except (RuntimeError, AssertionError, ValueError) as exc:
        raise NoGPU(f"--device {device}: not usable here: {str(exc).splitlines()[0]}") from None
    torch.cuda.set_device(dev)
    return Probe(dev, EventClock(), lambda: torch.cuda.synchronize(dev), reduced=False,
                 pin=True, stream_factory=_cuda_stream_factory(dev))
