"""Part (d) of a validation run: a real training step (forward, backward, Adam), once with every
activation the backward pass keeps offloaded to pinned host memory by
``torch.autograd.graph.save_on_cpu(pin_memory=True)`` and once without, each with its
per-layer timeline.

The timeline comes from the clock's marks (CUDA events on a GPU), recorded by hooks: a layer's
forward is the span between marks before and after its module runs; its backward is the span
from the moment the gradient of its output is complete (a hook on the output tensor) to the next
such moment, or the end of the backward pass. ``save_on_cpu`` copies each saved tensor to pinned
host memory as the forward pass saves it (on the compute stream, so a layer's forward span
holds its copies) and back as the backward pass needs it. The step's figures are those of the
timed step whose time is the median.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Optional

import torch
from workloads.loader import load_network
from workloads.network import Network
from workloads.torch_builder import TorchNetwork, build_torch

from sst_cdma.tools.validate.device import Clock, Mark, Probe

__all__ = ["Span", "StepTiming", "Recorder", "spans_of", "time_training_step"]



@dataclass(frozen=True)
class Span:
    """What one layer did in one phase of a step, in seconds from the step's start."""

    layer: str
    phase: str
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        """The span's length."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class StepTiming:
    """A measured training step: the network, whether activations were offloaded, the median
    step's phases and per-layer spans, the peak device memory (None on the CPU) and the bytes
    offloaded."""

    network: str
    batch: int
    dtype: str
    offload: bool
    step_s: float
    forward_s: float
    backward_s: float
    update_s: float
    spans: tuple[Span, ...]
    steps: tuple[float, ...]
    peak_memory: Optional[int]
    #: bytes save_on_cpu moved to host memory in the step (every saved tensor, weights too)
    offloaded_bytes: int = 0


class Recorder:
    """Hooks that mark each layer's forward start and end and the moment its output's gradient
    is complete; inactive (no marks) until :meth:`recording`."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.active = False
        self.marks: list[tuple[str, str, Mark]] = []

    def attach(self, model: TorchNetwork, net: Network) -> None:
        """Hook every layer of ``net`` that has a module in ``model``."""
        for layer in net.layers:
            try:
                module = model.module_of(layer.name)
            except KeyError:  # data, add, concat: no module, their time falls between
                continue
            module.register_forward_pre_hook(self._before(layer.name))
            module.register_forward_hook(self._after(layer.name))

    def _before(self, name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: object) -> None:
            if self.active:
                self.marks.append((name, "start", self.clock.mark()))
        return hook

    def _after(self, name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: object, output: object) -> None:
            if not self.active:
                return
            self.marks.append((name, "end", self.clock.mark()))
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(self._gradient(name))
        return hook

    def _gradient(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            if self.active:
                self.marks.append((name, "gradient", self.clock.mark()))
        return hook

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[str, str, Mark]]]:
        """Record the marks of one step (a fresh list)."""
        self.marks = []
        self.active = True
        try:
            yield self.marks
        finally:
            self.active = False


def spans_of(marks: list[tuple[str, str, Mark]], clock: Clock, step: tuple[Mark, Mark, Mark,
             Mark, Mark]) -> list[Span]:
    """The per-layer spans of one step from its hook marks (in recording order) and the step's
    own marks (start, forward end, backward end, update end, and again the end)."""
    start, fwd_end, bwd_end, upd_end, _ = step
    at: Callable[[Mark], float] = lambda m: clock.seconds(start, m)  # noqa: E731
    spans: list[Span] = []
    opened: dict[str, Mark] = {}
    gradients = []
    for name, what, mark in marks:
        if what == "start":
            opened[name] = mark
        elif what == "end" and name in opened:
            spans.append(Span(name, "forward", at(opened.pop(name)), at(mark)))
        elif what == "gradient":
            gradients.append((name, mark))
    for i, (name, mark) in enumerate(gradients):
        end = gradients[i + 1][1] if i + 1 < len(gradients) else bwd_end
        spans.append(Span(name, "backward", at(mark), at(end)))
    spans.append(Span("optimizer", "update", at(bwd_end), at(upd_end)))
    return spans


def _inputs(net: Network, batch: int, probe: Probe) -> list[torch.Tensor]:
    """Random inputs of the data layers: token ids for a transformer, images otherwise."""
    generator = torch.Generator().manual_seed(0)
    infos = {i.name: i for i in net.infer(batch, "float32")}
    out = []
    for layer in net.layers:
        if layer.kind != "data":
            continue
        shape = infos[layer.name].shape
        consumer = next(x for x in net.layers if layer.tensor in x.input_tensors)
        if consumer.kind == "embedding":
            out.append(torch.randint(consumer.params["vocab"], shape, generator=generator)
                       .to(probe.device))
        else:
            out.append(torch.randn(shape, generator=generator).to(probe.device))
    return out


def _saving(offload: bool, saved: list[int]) -> ContextManager[object]:
    """``save_on_cpu(pin_memory=True)`` when offloading, each tensor it packs counted in
    ``saved`` (bytes); else nothing."""
    if not offload:
        return contextlib.nullcontext()
    hooks = torch.autograd.graph.save_on_cpu(pin_memory=True)
    pack = hooks.pack_hook

    def counting(tensor: torch.Tensor) -> object:
        saved.append(tensor.numel() * tensor.element_size())
        return pack(tensor)
    hooks.pack_hook = counting
    return hooks


def _step(model: TorchNetwork, inputs: list[torch.Tensor], optimizer: torch.optim.Optimizer,
          clock: Clock, offload: bool, saved: list[int]
          ) -> tuple[Mark, Mark, Mark, Mark, Mark]:
    """One training step; its marks (start, forward end, backward end, update end, end)."""
    start = clock.mark()
    with _saving(offload, saved):
        loss = model(*inputs).float().mean()
    fwd_end = clock.mark()
    loss.backward()
    bwd_end = clock.mark()
    optimizer.step()
    upd_end = clock.mark()
    optimizer.zero_grad(set_to_none=True)
    return start, fwd_end, bwd_end, upd_end, clock.mark()


def _phases(clock: Clock, step: tuple[Mark, Mark, Mark, Mark, Mark]) -> tuple[float, ...]:
    """Step, forward, backward and update seconds of one step's marks."""
    start, fwd_end, bwd_end, upd_end, _ = step
    return (clock.seconds(start, upd_end), clock.seconds(start, fwd_end),
            clock.seconds(fwd_end, bwd_end), clock.seconds(bwd_end, upd_end))


def _timed_steps(probe: Probe, model: TorchNetwork, net: Network, batch: int, offload: bool,
                 steps: int, warmup: int
                 ) -> tuple[list[tuple[tuple[float, ...], list[Span]]], int]:
    """``steps`` timed steps after ``warmup`` untimed ones: each step's phases (step, forward,
    backward, update seconds) and spans; and the bytes a step offloaded."""
    recorder = Recorder(probe.clock)
    recorder.attach(model, net)
    inputs = _inputs(net, batch, probe)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    saved: list[int] = []
    for _ in range(warmup):
        _step(model, inputs, optimizer, probe.clock, offload, saved)
    probe.sync()
    probe.peak_memory_reset()
    done = []
    for _ in range(steps):
        saved.clear()
        with recorder.recording() as marks:
            step = _step(model, inputs, optimizer, probe.clock, offload, saved)
        probe.sync()  # every mark recorded: the clock can read them
        done.append((_phases(probe.clock, step), spans_of(marks, probe.clock, step)))
    return done, sum(saved)


def time_training_step(probe: Probe, network: str, batch: int, offload: bool, steps: int,
                       warmup: int, say: Callable[[str], None]) -> StepTiming:
    """Time ``steps`` float32 training steps of ``network`` at ``batch`` (with or without
    activations offloaded) and return the one of median time."""
    net = load_network(network)
    torch.manual_seed(0)
    model = build_torch(net, device=probe.device).train()
    done, saved = _timed_steps(probe, model, net, batch, offload, steps, warmup)
    peak = probe.peak_memory()
    del model
    if probe.is_gpu:
        torch.cuda.empty_cache()
    # the median step itself (an average of steps would be no step's timeline)
    (step_s, forward_s, backward_s, update_s), spans = \
        sorted(done, key=lambda d: d[0][0])[(len(done) - 1) // 2]
    timing = StepTiming(net.name, batch, "float32", offload, step_s, forward_s, backward_s,
                        update_s, tuple(spans), tuple(d[0][0] for d in done), peak, saved)
    say(f"{net.name} batch {batch}{' offloaded' if offload else ''}: step "
        f"{step_s * 1e3:.2f} ms (median of {len(done)}), forward {forward_s * 1e3:.2f}, "
        f"backward {backward_s * 1e3:.2f}, update {update_s * 1e3:.2f} ms"
        + (f", {saved / 2**20:.1f} MiB offloaded" if offload else "")
        + (f", peak {peak / 2**30:.2f} GiB" if peak else ""))
    return timing
