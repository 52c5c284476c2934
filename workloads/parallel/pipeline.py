"""Pipeline schedules: the order in which one pipeline rank runs the forward and backward passes
of its micro-batches on its model chunks, and a reference executor of those orders.

- GPipe (Huang et al., NeurIPS 2019): every micro-batch's forward, then every backward, each in
  micro-batch order.
- 1F1B: Megatron-LM's ``forward_backward_pipelining_without_interleaving``
  (megatron/core/pipeline_parallel/schedules.py): ``pp - stage - 1`` warm-up forwards, then
  one forward and one backward in turn, then the cool-down backwards.
- Interleaved 1F1B: Megatron-LM's ``forward_backward_pipelining_with_interleaving`` (same file;
  Narayanan et al., SC 2021, section 2.2.2): the (micro-batch, chunk) table of
  ``get_schedule_table``, ``get_pp_rank_microbatches``' warm-up count, forwards in table order,
  backwards in table order on the mirrored chunk (``get_model_chunk_id(k, forward=False)``).

An order depends only on the pipeline rank (never on the tp or dp coordinate): one per stage.
:func:`stage_steps` turns an order into the :class:`~workloads.schedule.Step` list a GPU runs;
:func:`makespan` runs the orders of all stages under their dependencies (the step time and each
stage's busy and idle time, exact in integers) and :func:`in_flight` gives each stage's peak
count of micro-batches whose activations are held (forward run, backward not yet)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence, Union

from ..schedule import Step
from .layout import LayoutError

if TYPE_CHECKING:
    from .layout import ParallelLayout

__all__ = ["FORWARD", "BACKWARD", "Work", "Order", "ChunkSpan", "Makespan", "virtual_stage",
           "gpipe_order", "one_f_one_b_order", "interleaved_order", "schedule_table",
           "stage_order", "stage_orders", "stage_steps", "makespan", "in_flight"]

FORWARD = "forward"
BACKWARD = "backward"


@dataclass(frozen=True)
class Work:
    """One pass a pipeline rank runs: ``phase`` (:data:`FORWARD` or :data:`BACKWARD`) of
    micro-batch ``micro_batch`` on its model chunk ``chunk``."""

    micro_batch: int
    phase: str
    chunk: int = 0


#: one pipeline rank's passes, in the order it runs them
Order = tuple[Work, ...]


def virtual_stage(pp: int, stage: int, chunk: int) -> int:
    """The virtual stage that model chunk ``chunk`` of pipeline rank ``stage`` is:
    ``chunk * pp + stage`` (Megatron-LM megatron/core/transformer/transformer_layer.py,
    get_transformer_layer_offset)."""
    return chunk * pp + stage


def _check(pp: int, stage: int, micro_batches: int) -> None:
    """Refuse a stage outside the pipeline or a count of micro-batches below one."""
    if pp < 1 or not 0 <= stage < pp:
        raise LayoutError(f"stage {stage} is not a pipeline rank of pp {pp}")
    if micro_batches < 1:
        raise LayoutError(f"micro_batches {micro_batches}: must be a positive integer")


def gpipe_order(pp: int, stage: int, micro_batches: int) -> Order:
    """GPipe: all ``micro_batches`` forwards, then all backwards, in micro-batch order."""
    _check(pp, stage, micro_batches)
    return (tuple(Work(k, FORWARD) for k in range(micro_batches))
            + tuple(Work(k, BACKWARD) for k in range(micro_batches)))


def one_f_one_b_order(pp: int, stage: int, micro_batches: int) -> Order:
    """1F1B as Megatron-LM runs it: ``min(pp - stage - 1, micro_batches)`` warm-up forwards;
    then forward ``k + warm-up`` and backward ``k`` in turn; then the remaining backwards."""
    _check(pp, stage, micro_batches)
    warmup = min(pp - stage - 1, micro_batches)
    order = [Work(k, FORWARD) for k in range(warmup)]
    for k in range(micro_batches - warmup):
        order += [Work(k + warmup, FORWARD), Work(k, BACKWARD)]
    order += [Work(k, BACKWARD) for k in range(micro_batches - warmup, micro_batches)]
    return tuple(order)


def schedule_table(micro_batches: int, vpp: int, group: int) -> tuple[tuple[int, int], ...]:
    """Megatron-LM's ``get_schedule_table``: the (micro-batch, chunk) of each forward, taking
    the micro-batches in groups of ``group``: each group's micro-batches on chunk 0, then on
    chunk 1, ... (the last group holds what is left)."""
    table: list[tuple[int, int]] = []
    for first in range(0, micro_batches, group):
        batch = range(first, min(first + group, micro_batches))
        table += [(mb, chunk) for chunk in range(vpp) for mb in batch]
    return tuple(table)


def interleaved_order(pp: int, stage: int, micro_batches: int, vpp: int,
                      group: Optional[int] = None) -> Order:
    """Interleaved 1F1B as Megatron-LM runs it, ``vpp`` chunks per rank and micro-batch groups
    of ``group`` (``microbatch_group_size_per_vp_stage``, pp by default): warm-up
    ``min(2 * (pp - stage - 1) + (vpp - 1) * group, micro_batches * vpp)`` forwards, then one
    forward and one backward in turn, then the remaining backwards. Forward ``k`` runs entry
    ``k`` of :func:`schedule_table`; backward ``k`` runs the same micro-batch on the mirrored
    chunk ``vpp - 1 - chunk``. Megatron's checks: ``pp <= group <= micro_batches`` and a last
    group of 0 or at least pp micro-batches."""
    _check(pp, stage, micro_batches)
    group = pp if group is None else group
    if not pp <= group <= micro_batches:
        raise LayoutError(f"interleaved schedule: group {group} must lie in [pp {pp}, "
                          f"micro_batches {micro_batches}]")
    if 0 < micro_batches % group < pp:
        raise LayoutError(f"interleaved schedule: micro_batches {micro_batches} leaves a last "
                          f"group of {micro_batches % group} (group {group}), fewer than pp {pp}")
    table = schedule_table(micro_batches, vpp, group)
    total = len(table)
    warmup = min(2 * (pp - stage - 1) + (vpp - 1) * group, total)

    def forward(k: int) -> Work:
        return Work(table[k][0], FORWARD, table[k][1])

    def backward(k: int) -> Work:
        return Work(table[k][0], BACKWARD, vpp - 1 - table[k][1])

    order = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [forward(k + warmup), backward(k)]
    order += [backward(k) for k in range(total - warmup, total)]
    return tuple(order)


def stage_order(layout: "ParallelLayout", stage: int) -> Order:
    """The order pipeline rank ``stage`` runs under ``layout``'s schedule."""
    if layout.schedule == "gpipe":
        return gpipe_order(layout.pp, stage, layout.micro_batches)
    if layout.schedule == "1f1b":
        return one_f_one_b_order(layout.pp, stage, layout.micro_batches)
    return interleaved_order(layout.pp, stage, layout.micro_batches, layout.vpp)


def stage_orders(layout: "ParallelLayout") -> tuple[Order, ...]:
    """One order per pipeline rank (every tp and dp coordinate of a stage runs the same)."""
    return tuple(stage_order(layout, stage) for stage in range(layout.pp))


@dataclass(frozen=True)
class ChunkSpan:
    """Where one model chunk's passes lie in a rank's stream: forward ``[start, forward_end)``,
    backward ``[forward_end, end)``."""

    start: int
    forward_end: int
    end: int


def stage_steps(order: Order, spans: Sequence[ChunkSpan], n_ops: int, prologue_end: int,
                update_start: int) -> list[Step]:
    """The steps a GPU runs for ``order``: the prologue ``[0, prologue_end)`` once, each pass
    of the order on its chunk's span (``spans[chunk]``), then the update and the epilogue
    ``[update_start, n_ops)`` once (the single-chunk, one-stage 1F1B order gives
    :func:`workloads.schedule.micro_batch_steps`)."""
    steps = [Step(0, prologue_end, "prologue")]
    for work in order:
        span = spans[work.chunk]
        if work.phase == FORWARD:
            steps.append(Step(span.start, span.forward_end, FORWARD, work.micro_batch,
                              work.chunk))
        else:
            steps.append(Step(span.forward_end, span.end, BACKWARD, work.micro_batch,
                              work.chunk))
    steps.append(Step(update_start, n_ops, "update"))
    return steps


@dataclass(frozen=True)
class Makespan:
    """What :func:`makespan` found: ``step_time`` (when the last pass ends), each stage's
    ``busy`` and ``idle`` time (``idle = step_time - busy``) and each stage's ``timeline``
    of (pass, start, end) in its order."""

    step_time: int
    busy: tuple[int, ...]
    idle: tuple[int, ...]
    timeline: tuple[tuple[tuple[Work, int, int], ...], ...]


#: a duration for every virtual stage alike, or one per virtual stage
Durations = Union[int, Sequence[int]]


def _per_virtual_stage(times: Durations, count: int, name: str) -> tuple[int, ...]:
    """``times`` as one duration per virtual stage."""
    if isinstance(times, int):
        return (times,) * count
    out = tuple(times)
    if len(out) != count:
        raise LayoutError(f"{name} has {len(out)} entries, but there are {count} virtual stages")
    return out


class _Executor:
    """The state of :func:`makespan`: the finish time of each pass run so far."""

    def __init__(self, orders: Sequence[Order], forward: tuple[int, ...],
                 backward: tuple[int, ...], p2p_time: int, chunks: int) -> None:
        self.orders, self.forward, self.backward = orders, forward, backward
        self.p2p, self.pp, self.last = p2p_time, len(orders), len(orders) * chunks - 1
        self.done: dict[tuple[int, str, int], int] = {}

    def ready(self, work: Work, stage: int) -> Optional[int]:
        """When ``work`` on ``stage`` may start as far as the other passes go, or None while
        a pass it waits for has not run: the forward of the virtual stage before (plus the
        send), the backward of the one after (plus the send) and its own forward."""
        k = virtual_stage(self.pp, stage, work.chunk)
        if work.phase == FORWARD:
            deps = [(k - 1, FORWARD)] if k > 0 else []
        else:
            deps = [(k, FORWARD)] + ([(k + 1, BACKWARD)] if k < self.last else [])
        at = 0
        for dep_k, phase in deps:
            end = self.done.get((work.micro_batch, phase, dep_k))
            if end is None:
                return None
            at = max(at, end + (self.p2p if dep_k % self.pp != stage else 0))
        return at

    def duration(self, work: Work, stage: int) -> int:
        """How long ``work`` runs on ``stage``."""
        k = virtual_stage(self.pp, stage, work.chunk)
        return self.forward[k] if work.phase == FORWARD else self.backward[k]

    def finish(self, work: Work, stage: int, end: int) -> None:
        """Record that ``work`` ended at ``end``; a pass run twice is refused."""
        key = (work.micro_batch, work.phase, virtual_stage(self.pp, stage, work.chunk))
        if key in self.done:
            raise LayoutError(f"stage {stage} runs {work.phase} of micro-batch "
                              f"{work.micro_batch} on chunk {work.chunk} twice")
        self.done[key] = end


def makespan(orders: Sequence[Order], forward_time: Durations, backward_time: Durations,
             p2p_time: int = 0) -> Makespan:
    """Run each stage's order in sequence, each pass as soon as its stage is free and the
    passes it needs have ended: the forward of (micro-batch, virtual stage k) after that of
    (micro-batch, k - 1), the backward of (micro-batch, k) after its own forward and after the
    backward of (micro-batch, k + 1); ``p2p_time`` is added where the two lie on different
    pipeline ranks. ``forward_time`` and ``backward_time``: one duration per pass (integers,
    e.g. picoseconds) or one per virtual stage. Orders that wait on each other forever are
    refused."""
    chunks = 1 + max((w.chunk for order in orders for w in order), default=0)
    count = len(orders) * chunks
    run = _Executor(orders, _per_virtual_stage(forward_time, count, "forward_time"),
                    _per_virtual_stage(backward_time, count, "backward_time"), p2p_time, chunks)
    position, free = [0] * len(orders), [0] * len(orders)
    timeline: list[list[tuple[Work, int, int]]] = [[] for _ in orders]
    while any(position[s] < len(order) for s, order in enumerate(orders)):
        moved = False
        for stage, order in enumerate(orders):
            while position[stage] < len(order):
                work = order[position[stage]]
                at = run.ready(work, stage)
                if at is None:
                    break
                start = max(free[stage], at)
                free[stage] = end = start + run.duration(work, stage)
                run.finish(work, stage, end)
                timeline[stage].append((work, start, end))
                position[stage] += 1
                moved = True
        if not moved:
            stuck = [f"stage {s}: {order[position[s]]}" for s, order in enumerate(orders)
                     if position[s] < len(order)]
            raise LayoutError("the orders wait on each other forever: " + "; ".join(stuck))
    step = max(free, default=0)
    busy = tuple(sum(end - start for _, start, end in line) for line in timeline)
    return Makespan(step, busy, tuple(step - b for b in busy),
                    tuple(tuple(line) for line in timeline))


def in_flight(orders: Sequence[Order]) -> tuple[int, ...]:
    """Each stage's peak count of (micro-batch, chunk) passes whose forward has run and whose
    backward has not: the activations it holds at once, in units of one chunk's activations of
    one micro-batch (a whole stage's with one chunk per rank)."""
    peaks = []
    for order in orders:
        held = peak = 0
        for work in order:
            held += 1 if work.phase == FORWARD else -1
            peak = max(peak, held)
        peaks.append(peak)
    return tuple(peaks)
