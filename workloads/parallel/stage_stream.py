"""One pipeline stage's stream and schedule: the ops a GPU on pipeline rank ``stage`` runs for
one optimizer step, with the ``send`` and ``recv`` ops that carry activations forward and
their gradients backward between stages (docs/parallel.md, "The simulated pipeline").

The stream holds, for every micro-batch and every model chunk of the stage, that chunk's
forward span and its backward span; each (micro-batch, chunk) has tensors of its own, since
several micro-batches' activations are held at once (1F1B holds up to pp - stage). The
schedule (:class:`~workloads.schedule.Step` list) runs the spans in the stage's order
(:func:`~workloads.parallel.pipeline.stage_order`: GPipe, 1F1B or interleaved 1F1B).

A chunk's forward span: its input received from the stage before (``recv``, but on virtual
stage 0, whose input the data loader gives), each layer's kernel, and its output sent to the
stage after (``send``, but on the last virtual stage, whose output the loss takes). Its
backward span: the output's gradient received (but on the last virtual stage), each layer's
backward kernel in reverse, and the input's gradient sent back (but on virtual stage 0).

:func:`uniform_stage_stream` builds it for a chain of identical layers (a forward and a
backward time and an activation size each): the case the closed forms of
:func:`~workloads.parallel.pipeline.makespan` check exactly."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..durations import format_ps
from ..schedule import Step
from ..stream import Stream, parse_stream
from .layout import LayoutError, ParallelLayout
from .pipeline import BACKWARD, FORWARD, Order, stage_order
from .ranks import ChunkLayers, stage_plans

if TYPE_CHECKING:
    from ..model_states import ModelStatePlan

__all__ = ["UniformLayers", "StageStream", "uniform_stage_stream", "pipeline_steps",
           "peers", "PassSpans"]

#: (micro-batch, chunk): one forward and one backward span of a stage's stream
SpanKey = tuple[int, int]


@dataclass(frozen=True)
class UniformLayers:
    """A chain of identical layers: each one's forward and backward kernel time (integer
    picoseconds) and the bytes of its output activation (the same for its input gradient)."""

    forward_ps: int
    backward_ps: int
    activation: int

    def __post_init__(self) -> None:
        for name in ("forward_ps", "backward_ps", "activation"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise LayoutError(f"{name} {value!r}: must be a non-negative integer")
        if self.activation == 0:
            raise LayoutError("activation 0: a layer's output needs at least one byte")


@dataclass(frozen=True)
class PassSpans:
    """Where one (micro-batch, chunk)'s passes lie in a stage's stream: its forward ops
    ``[forward_start, forward_end)`` and its backward ops ``[backward_start, backward_end)``
    (the forward phase holds every forward span, the backward phase every backward one)."""

    forward_start: int
    forward_end: int
    backward_start: int
    backward_end: int


@dataclass(frozen=True)
class StageStream:
    """A stage's stream, its schedule, where each (micro-batch, chunk)'s passes lie, the
    order the schedule runs them in and, with the optimizer states on the host
    (ZeRO-Offload), the buckets its rank's host CPU steps and how many ops at the stream's
    end wait for that step (the weights' all-gathers and the epilogue)."""

    stream: Stream
    steps: tuple[Step, ...]
    spans: dict[SpanKey, PassSpans]
    order: Order
    model_states: Optional["ModelStatePlan"] = None
    after_states: int = 0


def peers(layout: ParallelLayout, stage: int) -> tuple[int, int]:
    """The pipeline ranks stage ``stage`` receives activations from and sends them to:
    ``(stage - 1) mod pp`` and ``(stage + 1) mod pp`` (with virtual stages the last rank's
    chunk c feeds the first rank's chunk c + 1, so the pipeline is a ring)."""
    return (stage - 1) % layout.pp, (stage + 1) % layout.pp


def _tensor_lines(chunk: ChunkLayers, mb: int, activation: int) -> list[str]:
    """The declarations of one (micro-batch, chunk)'s tensors: each layer's input ``x`` (the
    chunk's output last) and the gradients ``g`` of the same."""
    ends = range(chunk.layers.start, chunk.layers.stop + 1)
    return ([f"tensor x{i}.m{mb} bytes={activation} kind=activation layer=L{min(i, chunk.layers.stop - 1)}"
             for i in ends]
            + [f"tensor g{i}.m{mb} bytes={activation} kind=gradient layer=L{min(i, chunk.layers.stop - 1)}"
               for i in ends])


def _forward_lines(chunk: ChunkLayers, mb: int, uniform: UniformLayers,
                   prev: int, nxt: int) -> list[str]:
    """One (micro-batch, chunk)'s forward span."""
    first, stop = chunk.layers.start, chunk.layers.stop
    lines = [f"alloc x{first}.m{mb}"]
    if not chunk.embedding:
        lines.append(f"recv x{first}.m{mb} peer={prev}")
    for i in chunk.layers:
        lines += [f"alloc x{i + 1}.m{mb}",
                  f"compute L{i} pass=fwd flops=0 dram=0 time={format_ps(uniform.forward_ps)} "
                  f"reads=x{i}.m{mb} writes=x{i + 1}.m{mb}", f"sync L{i}"]
    lines.append(f"free x{stop}.m{mb}" if chunk.head else f"send x{stop}.m{mb} peer={nxt}")
    return lines


def _backward_lines(chunk: ChunkLayers, mb: int, uniform: UniformLayers,
                    prev: int, nxt: int) -> list[str]:
    """One (micro-batch, chunk)'s backward span."""
    first, stop = chunk.layers.start, chunk.layers.stop
    lines = [f"alloc g{stop}.m{mb}"]
    if not chunk.head:
        lines.append(f"recv g{stop}.m{mb} peer={nxt}")
    for i in reversed(chunk.layers):
        lines += [f"alloc g{i}.m{mb}",
                  f"compute L{i} pass=bwd flops=0 dram=0 time={format_ps(uniform.backward_ps)} "
                  f"reads=x{i}.m{mb},g{i + 1}.m{mb} writes=g{i}.m{mb}", f"sync L{i}",
                  f"free g{i + 1}.m{mb}", f"free x{i}.m{mb}"]
    lines.append(f"free g{first}.m{mb}" if chunk.embedding else f"send g{first}.m{mb} peer={prev}")
    return lines


def pipeline_steps(order: Order, spans: dict[SpanKey, PassSpans], n_ops: int,
                   prologue_end: int = 0, update_start: Optional[int] = None) -> list[Step]:
    """The steps of ``order`` over spans of their own per (micro-batch, chunk): the prologue
    ``[0, prologue_end)`` once (empty by default), each pass on its span, the update and the
    epilogue ``[update_start, n_ops)`` once (empty by default) (:func:`~workloads.parallel.
    pipeline.stage_steps` with one span per micro-batch as well as per chunk)."""
    steps = [Step(0, prologue_end, "prologue")]
    for work in order:
        span = spans[(work.micro_batch, work.chunk)]
        if work.phase == FORWARD:
            steps.append(Step(span.forward_start, span.forward_end, FORWARD, work.micro_batch,
                              work.chunk))
        else:
            steps.append(Step(span.backward_start, span.backward_end, BACKWARD,
                              work.micro_batch, work.chunk))
    at = n_ops if update_start is None else update_start
    steps.append(Step(at, n_ops, "update"))
    return steps


def uniform_stage_stream(layout: ParallelLayout, layers: int, stage: int,
                         uniform: UniformLayers, source: str = "<pipeline stage>"
                         ) -> StageStream:
    """Stage ``stage``'s stream and schedule under ``layout`` for a chain of ``layers``
    identical layers split as the layout says: the text's forward phase holds every
    (micro-batch, chunk)'s forward span, its backward phase every backward span, and the
    schedule's steps pick them in the stage's order."""
    if not 0 <= stage < layout.pp:
        raise LayoutError(f"stage {stage} is not a pipeline rank of pp {layout.pp}")
    plan = stage_plans(layout, layers)[stage]
    prev, nxt = peers(layout, stage)
    keys = [(mb, c.chunk) for mb in range(layout.micro_batches) for c in plan.chunks]
    chunk_of = {c.chunk: c for c in plan.chunks}
    header = [f"stream version=1 network=synthetic_pipeline batch={layout.micro_batch_size} "
              "dtype=float32 policy=none"]
    header += [line for mb, c in keys for line in _tensor_lines(chunk_of[c], mb,
                                                                uniform.activation)]
    forward: dict[SpanKey, list[str]] = {}
    backward: dict[SpanKey, list[str]] = {}
    for mb, c in keys:
        forward[(mb, c)] = _forward_lines(chunk_of[c], mb, uniform, prev, nxt)
        backward[(mb, c)] = _backward_lines(chunk_of[c], mb, uniform, prev, nxt)
    lines = header + ["phase forward"] + [op for k in keys for op in forward[k]]
    lines += ["phase backward"] + [op for k in keys for op in backward[k]] + ["end"]
    stream = parse_stream("\n".join(lines) + "\n", source)
    spans: dict[SpanKey, PassSpans] = {}
    f_at, b_at = 0, sum(len(ops) for ops in forward.values())
    for k in keys:
        spans[k] = PassSpans(f_at, f_at + len(forward[k]), b_at, b_at + len(backward[k]))
        f_at, b_at = f_at + len(forward[k]), b_at + len(backward[k])
    order = stage_order(layout, stage)
    return StageStream(stream, tuple(pipeline_steps(order, spans, len(stream.ops))), spans,
                       order)
