"""Every stage plans its memory: policy ``auto`` on a pipeline stage (docs/parallel.md, "Every
stage plans its memory").

A stage holds its layers' model states and, under its schedule, several (micro-batch, chunk)
passes at once: while one pass runs, the others wait between their forward and their backward
(1F1B: ``min(pp - stage, m)`` in all on stage ``stage``, the last stage one). The single-GPU
planner (:mod:`workloads.planner`) plans one micro-batch of a whole network; here it plans the
stage's share of that network for the stage's pressure:

* the cost model is the planner's model of the whole network's render for one micro-batch
  (:func:`~workloads.planner.build_model`), cut to the stage's slots (its chunks' forward,
  backward and update blocks) and to the activations the stage holds: those its layers make
  (but the boundary tensors it sends on, which leave at the end of its forward pass) and the
  boundary tensors it receives (keep, offload or compress: their producer is on the stage
  before, so they are not recomputed);
* its fixed bytes are the stage's own model states (as the stage's stream allocates them in
  its prologue: ZeRO's shards and a tied head's copy included) and the transients of its
  blocks, plus each sent boundary tensor from its making to its send;
* the waiting passes: a tensor its choice keeps across the seam between its chunk's forward
  and backward is held by every waiting pass of that chunk (offloaded, compressed and
  recomputed tensors are not held while a pass waits). :func:`stage_pressure` lists, for each
  chunk and phase that runs, how many passes of each chunk of other micro-batches wait
  meanwhile (the moments no other moment outnumbers in every chunk; the running
  micro-batch's other chunks are in its one-micro-batch model already); the slots of that chunk and phase must hold each
  such set: its row holds, besides its own bytes in those slots, ``waiting passes of its
  chunk x bytes``. The first set is added to the slots themselves, every further one to a
  copy of them that takes no time (appended after the update slots), so each slot's memory
  is checked against every moment it runs in;
* the planner's greedy descent (:func:`~workloads.planner.plan_greedy`) plans that model,
  adding the backward reads its recomputations induce until they are stable, as
  :func:`~workloads.planner.plan_to_fit` does; then the stage's stream is cut from the render
  of those choices and its allocations replayed in the schedule's order
  (:func:`stage_peak`): while that exact peak overflows, the stage plans again for a capacity
  lowered by the overflow. Where the greedy finds no plan, the stage tries the plans
  :func:`~workloads.planner.fallback_plans` gives (without recomputation, else the
  least-memory plans); a stage that no plan fits runs the plan of least exact peak it made and
  is reported short.

:func:`stage_model` gives the model alone, for checking the greedy plan against the
mixed-integer optimum (:func:`~workloads.planner.plan_milp`) per stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import numpy as np

from sst_cdma.engine.progress import timed

from ..network import Network
from ..plan import Plan
from ..planner import (PlanInfeasible, PlanModel, PlanResult, build_model, choices_counts,
                       fallback_plans, induced_needs, plan_greedy)
from ..vdnn import inferred
from .layout import ParallelLayout
from .pipeline import BACKWARD, FORWARD, Order, stage_order
from .stage_stream import StageStream
from .transformer_stages import chunk_cuts

if TYPE_CHECKING:
    from components.messages import CopyCost

__all__ = ["StagePressure", "stage_pressure", "StageProblem", "StageMemoryPlan", "stage_model",
           "plan_stage", "stage_peak", "stage_state_bytes", "few_micro_batches"]

#: plans per stage while the exact peak of the cut stream overflows the model's
ROUNDS = 6
#: plans per capacity while the reads induced by recomputation grow (they only grow)
NEEDS_ROUNDS = 64


#: how many passes of each chunk wait (chunk order) while a pass runs
Waiting = tuple[int, ...]


@dataclass(frozen=True)
class StagePressure:
    """A stage's passes in flight under its order: the most (micro-batch, chunk) passes held
    at once (``in_flight``, as :func:`~workloads.parallel.pipeline.in_flight` counts them),
    the most waiting (forward run, backward not) while another runs (``waiting``), and per
    (chunk, phase) that runs the sets of other micro-batches' waiting passes it runs beside
    (``moments``: how many of each chunk; those no other set outnumbers in every chunk). The
    running micro-batch's own other chunks are not counted there: the model of one
    micro-batch holds them already (a chunk's tensors from its forward to its backward)."""

    in_flight: int
    waiting: int
    moments: dict[tuple[int, str], tuple[Waiting, ...]]


def stage_pressure(order: Order, chunks: int = 1) -> StagePressure:
    """The pressure of a stage of ``chunks`` model chunks running ``order``."""
    held: set[tuple[int, int]] = set()
    seen: dict[tuple[int, str], set[Waiting]] = {}
    peak = waiting = 0
    for work in order:
        me = (work.micro_batch, work.chunk)
        counts = [0] * chunks
        for mb, chunk in held - {me}:
            # the running micro-batch's other chunks are in the one-micro-batch model already
            counts[chunk] += mb != work.micro_batch
        seen.setdefault((work.chunk, work.phase), set()).add(tuple(counts))
        waiting = max(waiting, len(held - {me}))
        if work.phase == FORWARD:
            held.add(me)
        else:
            held.discard(me)
        peak = max(peak, len(held))
    moments = {key: _unmatched(sets) for key, sets in seen.items()}
    return StagePressure(peak, waiting, moments)


def _unmatched(sets: set[Waiting]) -> tuple[Waiting, ...]:
    """The sets of waiting passes no other set outnumbers in every chunk, most first."""
    kept = [c for c in sets
            if not any(o != c and all(a >= b for a, b in zip(o, c)) for o in sets)]
    return tuple(sorted(kept, reverse=True))


@dataclass(frozen=True)
class StageProblem:
    """What a stage's planner works on: the ``network`` (or the tensor-parallel shard) the
    plans are rendered from, its all-keep render ``base`` for one micro-batch (policy
    ``none``, as the stage renders it), the ``layout`` and the ``stage``; kernels priced by
    ``kernel_ps(op)`` and copies by ``copy_costs`` (tensor -> CopyCost; None: no engine, so
    keep and recompute only); ``render(choices)`` the network's plan with those per-tensor
    choices (policy ``auto``) and ``cut(plan, layout)`` the stage's stream and schedule cut
    from a plan under a layout (``layout`` or :func:`few_micro_batches` of it:
    :func:`~workloads.parallel.transformer_stages.transformer_stage_stream`)."""

    network: Network
    base: Plan
    layout: ParallelLayout
    stage: int
    kernel_ps: Callable[[Any], int]
    copy_costs: Optional[Mapping[str, "CopyCost"]]
    render: Callable[[Mapping[str, str]], Plan]
    cut: Callable[[Plan, ParallelLayout], StageStream]


def few_micro_batches(layout: ParallelLayout) -> ParallelLayout:
    """``layout`` with the fewest micro-batches its schedule takes (one; pp for interleaving):
    a stage's stream cut for it holds the same model states, cut in a fraction of the time."""
    return replace(layout, micro_batches=layout.pp if layout.schedule == "interleaved" else 1)


@dataclass
class StageMemoryPlan:
    """A stage's plan: its pressure, the capacity, its model states' bytes, the per-tensor
    choices of its activations (``choices``), the model's predicted time of one pass of each
    chunk and the optimizer step (``predicted_pass_ps``) and peak, the exact peak of the cut
    stream in the schedule's order (``peak_bytes``), whether it fits, the rounds it took,
    whether the planner had to move anything (``planned``) and the stream it runs
    (``built``)."""

    stage: int
    pressure: StagePressure
    capacity_bytes: int
    model_state_bytes: int
    choices: dict[str, str]
    predicted_pass_ps: float
    model_peak_bytes: int
    peak_bytes: int
    fits: bool
    rounds: int
    planned: bool
    built: StageStream = field(repr=False)
    #: with the optimizer states placed by the planner (``optimizer_states`` ``auto``): where
    #: it put them and why (:func:`~workloads.parallel.stage_states.place_optimizer_states`)
    states_choice: Optional[dict[str, str]] = None

    @property
    def short_bytes(self) -> int:
        """Bytes the stage's peak exceeds its capacity by (0 when it fits)."""
        return max(0, self.peak_bytes - self.capacity_bytes)

    def counts(self) -> dict[str, int]:
        """How many of the stage's activations take each choice."""
        return choices_counts(self.choices)

    def as_dict(self) -> dict[str, Any]:
        """The summary's ``planner`` entry of the stage."""
        return {"in_flight": self.pressure.in_flight,
                "waiting": self.pressure.waiting,
                "capacity_bytes": self.capacity_bytes,
                "model_state_bytes": self.model_state_bytes,
                "choices": self.counts(),
                "predicted_pass_time_s": self.predicted_pass_ps * 1e-12,
                "peak_bytes": self.peak_bytes, "fits": self.fits,
                "bytes_short": self.short_bytes, "rounds": self.rounds,
                **({"optimizer_states": dict(self.states_choice)} if self.states_choice else {})}


def stage_peak(built: StageStream) -> int:
    """The exact peak of a stage's stream: its allocations replayed in its schedule's order (a
    ``send`` hands its tensor over: the stream counts it freed from there)."""
    sizes = {name: t.bytes for name, t in built.stream.tensors.items()}
    ops = built.stream.ops
    in_use = peak = 0
    for step in built.steps:
        for op in ops[step.start:step.end]:
            if op.op == "alloc":
                in_use += sizes[op.name]
                peak = max(peak, in_use)
            elif op.op in ("free", "send"):
                in_use -= sizes[op.name]
    return peak


def stage_state_bytes(built: StageStream) -> int:
    """The bytes a stage's prologue allocates: its model states, as its stream holds them."""
    sizes = {name: t.bytes for name, t in built.stream.tensors.items()}
    first = built.steps[0]
    return sum(sizes[op.name] for op in built.stream.ops[first.start:first.end]
               if op.op == "alloc")


@dataclass(frozen=True)
class _Slots:
    """The stage's slots in the whole network's model: their indices there (forward, then
    backward, then update, each in the plan's order), per (chunk, phase) the stage slots
    its passes run in, per chunk the last forward and first backward slot (whole-model
    indices), and each whole-model slot's nearest stage slot of the same phase."""

    full: np.ndarray
    groups: dict[tuple[int, str], np.ndarray]
    seams: dict[int, tuple[int, int]]
    lookup: np.ndarray


def _slots(problem: StageProblem, cuts: list[Any]) -> _Slots:
    """Where stage ``problem.stage``'s chunks lie among the model's slots."""
    base = problem.base
    nf, nb = len(base.forward), len(base.backward)
    fpos = {b.layer: k for k, b in enumerate(base.forward)}
    bpos = {b.layer: nf + k for k, b in enumerate(base.backward)}
    upos = {b.layer: nf + nb + k for k, b in enumerate(base.update)}
    layers = {name for cut in cuts for name in cut.layers}
    phases = [sorted(pos[name] for name in layers if name in pos) for pos in (fpos, bpos, upos)]
    full = np.array(phases[0] + phases[1] + phases[2], dtype=int)
    at_full = {int(x): k for k, x in enumerate(full)}
    groups = {(cut.chunk.chunk, phase): np.array(sorted(at_full[pos[n]] for n in cut.layers
                                                        if n in pos), dtype=int)
              for cut in cuts for phase, pos in ((FORWARD, fpos), (BACKWARD, bpos))}
    seams = {cut.chunk.chunk: (max(fpos[n] for n in cut.layers),
                               min(bpos[n] for n in cut.layers if n in bpos)) for cut in cuts}
    n = nf + nb + len(base.update)
    bounds = [(0, nf), (nf, nf + nb), (nf + nb, n)]
    lookup = np.zeros(n, dtype=int)
    at = 0
    for (lo, hi), mine in zip(bounds, phases):
        where = np.array(mine) if mine else full
        index = np.arange(at, at + len(mine)) if mine else np.arange(len(full))
        for x in range(lo, hi):
            lookup[x] = index[int(np.argmin(np.abs(where - x)))]
        at += len(mine)
    return _Slots(full, groups, seams, lookup)


def _stage_tensors(problem: StageProblem, cuts: list[Any]
                   ) -> tuple[dict[str, int], set[str], dict[str, int]]:
    """The activations the stage plans (tensor -> its chunk), those of them it receives, and
    the boundary tensors it sends on (tensor -> its chunk)."""
    _, tensors = inferred(problem.network, problem.base.batch, problem.base.dtype)
    planned: dict[str, int] = {}
    received: set[str] = set()
    sent: dict[str, int] = {}
    for cut in cuts:
        c = cut.chunk.chunk
        mine = set(cut.layers)
        for name in cut.inputs:
            if name in tensors:
                planned[name] = c
                received.add(name)
        for name, ti in tensors.items():
            if ti.producer in mine:
                if name in cut.outputs:
                    sent[name] = c
                else:
                    planned[name] = c
    return planned, received, sent


class _StageCut:
    """The stage's share of the whole model: worked out once per stage (its slots, tensors,
    pressure and model states), then a stage model per whole model."""

    def __init__(self, problem: StageProblem, keep: StageStream) -> None:
        self.problem = problem
        layout, stage = problem.layout, problem.stage
        self.cuts = [cut for cut in chunk_cuts(problem.base, layout)
                     if cut.chunk.virtual_stage % layout.pp == stage]
        self.slots = _slots(problem, self.cuts)
        self.planned, self.received, self.sent = _stage_tensors(problem, self.cuts)
        self.pressure = stage_pressure(stage_order(layout, stage), layout.vpp)
        self.states = stage_state_bytes(keep)
        self.full_states = _prologue_bytes(problem.base)

    def full_model(self, capacity: int, needs: Mapping[str, frozenset[int]]) -> PlanModel:
        """The whole network's model (the stage's capacity; the reads ``needs`` adds)."""
        p = self.problem
        return build_model(p.network, p.base.batch, p.base.dtype, p.base, p.kernel_ps,
                           capacity, p.copy_costs, extra_needs=needs)

    def model(self, full: PlanModel) -> PlanModel:
        """The stage's model cut from the whole network's ``full``."""
        s = self.slots
        rows: list[int] = []
        row_tensor: list[int] = []
        tensors: list[str] = []
        choices: list[tuple[str, ...]] = []
        for t, name in enumerate(full.tensors):
            if name not in self.planned:
                continue
            first = int(full.first_row[t])
            mine = [c for c in full.choices[t]
                    if not (c == "recompute" and name in self.received)]
            rows += [first + full.choices[t].index(c) for c in mine]
            row_tensor += [len(tensors)] * len(mine)
            tensors.append(name)
            choices.append(tuple(mine))
        picked = np.array(rows, dtype=int)
        resident, copies = self._resident(full, picked, [self.planned[tensors[t]]
                                                         for t in row_tensor])
        fixed = self._fixed(full)
        assert full.row_sm is not None and full.fixed_copies is not None
        first_row = np.cumsum([0] + [len(c) for c in choices])[:-1].astype(int)
        quiet = np.zeros(len(copies))
        return PlanModel(tensors, choices, np.array(row_tensor, dtype=int),
                         [full.row_choice[r] for r in rows], resident,
                         np.concatenate([fixed, fixed[copies]]),
                         np.concatenate([full.compute[s.full], quiet]),
                         s.lookup[full.row_slots[picked]] if rows
                         else np.zeros((0, 3), dtype=int),
                         full.row_costs[picked] if rows else np.zeros((0, 3)), full.capacity,
                         first_row, full.row_sm[picked] if rows else np.zeros((0, 2)),
                         {layer: int(s.lookup[k]) for layer, k in full.backward_slot.items()
                          if layer in self._layers()},
                         np.concatenate([full.fixed_copies[s.full], quiet]))

    def _resident(self, full: PlanModel, rows: np.ndarray, chunk_of: list[int]
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The rows' bytes per stage slot with the waiting passes they hold, and the stage
        slots copied (a moment of waiting passes beyond each slot's first: its copies take
        no time) whose columns follow the slots'."""
        s = self.slots
        own = full.resident[rows][:, s.full] if len(rows) else np.zeros((0, len(s.full)))
        kept = self._kept_bytes(full, rows)
        chunks = np.array(chunk_of, dtype=int)
        out = own.copy()
        extra: list[np.ndarray] = []
        copied: list[np.ndarray] = []
        for key, cols in s.groups.items():
            for k, moment in enumerate(self.pressure.moments[key]):
                held = np.array(moment, dtype=float)[chunks] * kept
                if k == 0:
                    out[:, cols] += held[:, None]
                else:
                    extra.append(own[:, cols] + held[:, None])
                    copied.append(cols)
        if extra:
            out = np.hstack([out] + extra)
        return out, (np.concatenate(copied) if copied else np.zeros(0, dtype=int))

    def _layers(self) -> set[str]:
        return {name for cut in self.cuts for name in cut.layers}

    def _kept_bytes(self, full: PlanModel, rows: np.ndarray) -> np.ndarray:
        """Per row: the bytes one waiting pass holds under it (a kept tensor across the seam
        between its chunk's forward and backward; 0 for every other row)."""
        out = np.zeros(len(rows))
        for k, r in enumerate(rows):
            chunk = self.planned[full.tensors[full.row_tensor[r]]]
            f_last, b_first = self.slots.seams[chunk]
            if full.row_choice[r] == "keep" and full.resident[r, f_last] and \
                    full.resident[r, b_first]:
                out[k] = full.resident[r, f_last]
        return out

    def _fixed(self, full: PlanModel) -> np.ndarray:
        """The stage's fixed bytes per slot: the whole model's, less the other layers' model
        states, plus each sent boundary tensor from its making to its send."""
        s = self.slots
        fixed = full.fixed[s.full] - self.full_states + self.states
        _, tensors = inferred(self.problem.network, self.problem.base.batch,
                              self.problem.base.dtype)
        fpos = {b.layer: k for k, b in enumerate(self.problem.base.forward)}
        for name, chunk in self.sent.items():
            start, end = fpos[tensors[name].producer], s.seams[chunk][0]
            fixed = fixed + np.where((s.full >= start) & (s.full <= end), tensors[name].bytes, 0)
        return fixed


def _prologue_bytes(plan: Plan) -> int:
    """The bytes a plan's prologue allocates (its model states), as the planner's model
    counts them among its fixed bytes."""
    sizes = {t.name: t.bytes for t in plan.tensors if t.kind != "activation"}
    return sum(sizes.get(o.name, 0) for o in plan.prologue if o.op == "alloc")


def stage_model(problem: StageProblem, capacity: int,
                needs: Optional[Mapping[str, frozenset[int]]] = None,
                keep: Optional[StageStream] = None) -> PlanModel:
    """The planner's model of stage ``problem.stage`` for ``capacity`` bytes (the module's
    docstring): ``keep`` is the stage's all-keep stream, of any micro-batches (its model
    states are read from it; cut from ``problem.base`` for :func:`few_micro_batches` when
    not given), ``needs`` the backward reads recomputations add."""
    built = keep if keep is not None else problem.cut(problem.base,
                                                      few_micro_batches(problem.layout))
    cut = _StageCut(problem, built)
    return cut.model(cut.full_model(capacity, needs or {}))


@timed("planning_s")
def plan_stage(problem: StageProblem, capacity: int, label: str = "") -> StageMemoryPlan:
    """Stage ``problem.stage``'s plan for ``capacity`` bytes of GPU memory (the module's
    docstring): all-keep when its cut stream fits, else the greedy plan of its model (or,
    where the greedy finds none, a fallback plan) whose cut stream's exact peak fits, else
    (nothing fits) the plan of least exact peak it made, reported short."""
    cut = _StageCut(problem, problem.cut(problem.base, few_micro_batches(problem.layout)))
    model = cut.model(cut.full_model(capacity, {}))
    rows = model.first_row
    if model.memory(rows).max() <= capacity:  # the model's all-keep peak is the stream's
        keep = problem.cut(problem.base, problem.layout)
        peak = stage_peak(keep)
        if peak <= capacity:
            # policy auto keeping everything renders the all-keep plan's ops: only the name
            # differs
            kept = replace(keep, stream=replace(keep.stream, policy="auto"))
            return StageMemoryPlan(problem.stage, cut.pressure, capacity, cut.states,
                                   {t: "keep" for t in model.tensors}, model.time_ps(rows),
                                   int(model.memory(rows).max()), peak, True, 0, False, kept)
    target = capacity
    best: Optional[StageMemoryPlan] = None
    for round_ in range(1, ROUNDS + 1):
        made, least = _planned(problem, cut, target, capacity, round_, label)
        if best is None or made.peak_bytes < best.peak_bytes:
            best = made
        if made.fits or least:  # fits, or nothing fits the model: the least-memory plan
            break
        target -= made.peak_bytes - capacity
        if target <= 0:
            break
    assert best is not None
    return best


def _planned(problem: StageProblem, cut: _StageCut, target: int, capacity: int,
             round_: int, label: str) -> tuple[StageMemoryPlan, bool]:
    """One round: the greedy plan of the stage's model for ``target`` bytes, its reads
    settled, its stream cut and its exact peak; where the greedy finds none, the plans
    :func:`~workloads.planner.fallback_plans` gives, the one of least peak (and True when
    those are the least-memory plans)."""
    needs: dict[str, frozenset[int]] = {}
    model = cut.model(cut.full_model(target, needs))
    net, batch, dtype = problem.network, problem.base.batch, problem.base.dtype
    try:
        for _ in range(NEEDS_ROUNDS):
            result = plan_greedy(model, label)
            induced = induced_needs(net, batch, dtype, result.choices)
            grown = {t: needs.get(t, frozenset()) | induced.get(t, frozenset())
                     for t in set(needs) | set(induced)}
            if grown == needs:
                break
            needs = grown
            model = cut.model(cut.full_model(target, needs))
        tried, least = [result], False
    except PlanInfeasible:
        tried, least = fallback_plans(model, cut.model(cut.full_model(target, {})), label)
    made = [_made(problem, cut, capacity, round_, result) for result in tried]
    return min(made, key=lambda m: m.peak_bytes), least


def _made(problem: StageProblem, cut: _StageCut, capacity: int, round_: int,
          result: PlanResult) -> StageMemoryPlan:
    """The stage's plan of ``result``'s choices: its stream cut from their render, and the
    stream's exact peak."""
    built = problem.cut(problem.render(result.choices), problem.layout)
    peak = stage_peak(built)
    return StageMemoryPlan(problem.stage, cut.pressure, capacity, cut.states, result.choices,
                           result.predicted_time_ps, result.model_peak_bytes, peak,
                           peak <= capacity, round_, True, built)
