"""The automatic planner behind policy ``auto``: per activation tensor, the cheapest of keep,
offload (plain copy), compress (through the cDMA codec) and recompute that makes the iteration
fit the GPU memory.

The cost model (docs/workloads.md, "The planner's cost model") works on the *slots* of the
per-tensor schedule — one per forward block, backward block and update block, each ended by a
``sync``:

* a slot's time is ``max(kernels + recompute kernels, copies issued in it)``: copies and
  kernels overlap, and the sync waits for the slower stream. An offload is issued in the
  forward slot of the tensor's first reader; its prefetch in the backward slot one layer
  above its anchor (the latest layer whose backward reads it), or on demand in the anchor's
  own slot when that is the last layer; a recomputation runs the producer's (and its in-place
  modifiers') forward kernels in the anchor's backward slot;
* copy times are the engine's (:class:`components.messages.CopyCost`: the flow's bottleneck over GPU DRAM, codec
  and host link, plus the path latency), kernel times the priced stream's; where SM kernels
  (de)compress a copy (Blackwell's Decompression Engine), the kernel runs on the compute stream
  in the copy's slot, and the copy, which waits for it, includes it too;
* memory: the bytes resident in each slot are the fixed buffers (weights, gradients,
  workspace, state: the most held at any op of the slot) plus, per tensor, its size in every
  slot its choice keeps it in (keep: production to last backward use; offload/compress:
  production to its last forward reader, then prefetch to last backward use; recompute: to its
  last forward reader, then anchor to last backward use). The plan must keep every slot within
  the capacity.

:func:`plan_greedy` descends greedily (the change that removes the most excess memory per
second added, then a pass that undoes changes memory no longer needs); :func:`plan_milp` solves
the same model exactly as a mixed-integer program (SciPy's ``milp``), for checking. A
recomputation reads its producer's inputs in the backward pass, which couples choices:
:func:`plan_to_fit` adds the reads a plan induces (:func:`induced_needs`) to the model and plans
again until the model holds every read of its plan. The model ignores the recompute kernels'
workspace, so :func:`plan_to_fit` also renders each plan and, when the rendered peak still
overflows, plans again for a capacity lowered by the overflow.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Optional, Sequence

import numpy as np

from sst_cdma.engine.progress import tick, timed

from .errors import WorkloadError
from .network import LayerInfo, Network, TensorInfo
from .plan import Plan
from .vdnn import plan_iteration

if TYPE_CHECKING:  # the engine's answer to the cost query
    from components.messages import CopyCost

__all__ = ["PlanModel", "PlanResult", "PlanInfeasible", "build_model",
           "plan_greedy", "plan_milp", "plan_to_fit", "induced_needs", "plan_peak", "lower_bound_peak",
           "gradient_releases",
           "choices_counts"]

GiB = 1024 ** 3
#: At most this many plans per capacity while the reads induced by recomputation grow. They
#: only grow, so the rounds end; a transformer's residual stream lengthens its recomputation
#: chains by about a block per round (OPT-125M at batch 48 on the A100 takes 9 rounds).
NEEDS_ROUNDS = 64


class PlanInfeasible(WorkloadError):
    """Nothing fits: even the choice that holds least of every tensor overflows the GPU
    memory. ``short_bytes`` is how much is missing."""

    def __init__(self, message: str, short_bytes: int) -> None:
        super().__init__(message)
        self.short_bytes = short_bytes


@dataclass
class PlanModel:
    """The cost model of one network on one machine: per candidate row (tensor, choice) its
    resident bytes per slot and its time effects; the fixed bytes and kernel times per slot."""

    tensors: list[str]
    choices: list[tuple[str, ...]]          # per tensor: its allowed choices
    row_tensor: np.ndarray                  # row -> tensor index
    row_choice: list[str]                   # row -> choice
    resident: np.ndarray                    # rows x slots, bytes
    fixed: np.ndarray                       # slots, bytes
    compute: np.ndarray                     # slots, ps (kernels of the keep schedule)
    row_slots: np.ndarray                   # rows x 3: slots of (offload, prefetch, recompute)
    row_costs: np.ndarray                   # rows x 3: ps of (offload, prefetch, recompute)
    capacity: int
    first_row: np.ndarray                   # tensor -> its first row (keep)
    #: rows x 2: ps of the SM (de)compression kernels the offload and the prefetch run on the
    #: compute stream, in their slots (Blackwell's Decompression Engine; zeros elsewhere)
    row_sm: Optional[np.ndarray] = None
    #: layer -> its backward slot (where its weight gradients are written)
    backward_slot: dict[str, int] = field(default_factory=dict)
    #: slots, ps: the copy stream's time no choice moves (the weights' prefetches with the
    #: weights off the GPU; zeros elsewhere)
    fixed_copies: Optional[np.ndarray] = None
    #: rows x 3: ps the compute stream runs in the slots of (offload, prefetch, recompute): the
    #: SM codec kernels and the recomputation (derived)
    row_compute: np.ndarray = field(init=False, repr=False)
    #: the columns of ``row_compute`` that hold any time (the recomputation's alone without SM
    #: codec kernels: the greedy's inner loops skip the others)
    compute_cols: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rows = len(self.row_choice)
        if self.fixed_copies is None:
            self.fixed_copies = np.zeros_like(self.compute)
        if self.row_sm is None:
            self.row_sm = np.zeros((rows, 2))
        self.row_compute = np.column_stack([self.row_sm[:, 0], self.row_sm[:, 1],
                                            self.row_costs[:, 2]]) if rows else np.zeros((0, 3))
        self.compute_cols = (0, 1, 2) if self.row_sm.any() else (2,)

    def memory(self, rows: np.ndarray) -> np.ndarray:
        """Bytes resident per slot when ``rows`` (one per tensor) are chosen."""
        return self.fixed + self.resident[rows].sum(axis=0)

    def slot_times(self, rows: np.ndarray) -> np.ndarray:
        """Per slot: max(kernels + recomputation + SM codec kernels, copies)."""
        copies, rec = _streams(self, rows)
        return np.maximum(self.compute + rec, copies)

    def time_ps(self, rows: np.ndarray) -> float:
        """Predicted iteration time of a choice of rows."""
        return float(self.slot_times(rows).sum())


@dataclass
class PlanResult:
    """A plan: tensor -> choice, its predicted iteration time and modelled peak, and (from
    :func:`plan_to_fit`) the rendered stream's exact peak."""

    choices: dict[str, str]
    predicted_time_ps: float
    model_peak_bytes: int
    rendered_peak_bytes: int = 0
    rounds: int = 1
    extra: dict[str, float] = field(default_factory=dict)
    #: layer -> predicted time (ps from the iteration's start) its backward slot ends
    backward_end_ps: dict[str, float] = field(default_factory=dict)
    #: the plan's model states moved besides the stream (``ModelStatePlan``; None: all on
    #: the GPU)
    model_states: Optional[Any] = None


def _positions(plan: Plan) -> tuple[list, dict[str, int], dict[str, int]]:
    blocks = list(plan.forward) + list(plan.backward) + list(plan.update)
    nf = len(plan.forward)
    fpos = {b.layer: k for k, b in enumerate(plan.forward)}
    bpos = {b.layer: nf + k for k, b in enumerate(plan.backward)}
    return blocks, fpos, bpos


def build_model(network: Network, batch: int, dtype: str, base: Plan,
                kernel_ps: Callable[[object], int], capacity: int,
                copy_costs: Optional[Mapping[str, CopyCost]] = None,
                elastic_workspace: bool = False,
                extra_needs: Optional[Mapping[str, Collection[int]]] = None,
                transfer_ps: Optional[Callable[[object, int], int]] = None) -> PlanModel:
    """The planner's cost model of ``network`` from its all-keep plan ``base`` (the same
    options, policy ``none``): ``kernel_ps(op)`` prices a compute op as the GPU does,
    ``copy_costs`` gives each tensor's copy costs (None: no engine, so only keep and
    recompute). ``elastic_workspace``: leave convolution workspace out of the memory model
    (the fitted kernel model sizes it to the memory free when the plan is rendered).
    ``extra_needs``: tensor -> layer indices whose backward slot also reads it (the rebuild of
    a recomputed consumer, :func:`induced_needs`). ``transfer_ps(op, bytes)`` prices the copies
    ``base`` itself makes (the weights' prefetches with the weights off the GPU)."""
    infos = network.infer(batch, dtype)
    info = {i.name: i for i in infos}
    idx = {i.name: k for k, i in enumerate(infos)}
    tensors = network.tensors(batch, dtype)
    blocks, fpos, bpos = _positions(base)
    n = len(blocks)
    fixed, compute, fwd_ps, copies = _keep_slots(base, blocks, kernel_ps, elastic_workspace,
                                                 transfer_ps)
    need = _needs(infos, idx, tensors)
    for tensor, at in (extra_needs or {}).items():
        if tensor in need:
            need[tensor].extend(k for k in at if k not in need[tensor])
    # a rebuild re-runs forward kernels, whose weights must be on the GPU
    states = base.model_states
    recompute = states is None or states.placement.weights == "gpu"
    names: list[str] = []
    allowed: list[tuple[str, ...]] = []
    rows_t: list[int] = []
    rows_c: list[str] = []
    resident: list[np.ndarray] = []
    slots: list[tuple[int, int, int]] = []
    costs: list[tuple[float, float, float]] = []
    sm: list[tuple[float, float]] = []
    first: list[int] = []
    for ti in tensors.values():
        users = [idx[u] for u in ti.consumers + ti.modifiers]
        if need[ti.name]:
            release = min(need[ti.name])
        else:
            release = min(users) if users else idx[ti.producer]
        span = (fpos[ti.producer], bpos.get(infos[release].name, n - 1))
        options = _options(ti, info[ti.producer], copy_costs, recompute)
        t = len(names)
        names.append(ti.name)
        allowed.append(tuple(options))
        first.append(len(rows_c))
        for choice in options:
            mask, slot, cost = _row(choice, ti, span, need[ti.name], infos, fpos, bpos, n,
                                    fwd_ps, copy_costs)
            rows_t.append(t)
            rows_c.append(choice)
            resident.append(mask * ti.bytes)
            slots.append(slot)
            costs.append(cost)
            sm.append(_sm_kernels(choice, cost, copy_costs, ti.name))
    return PlanModel(names, allowed, np.array(rows_t), rows_c, np.array(resident),
                     fixed, compute, np.array(slots, dtype=int), np.array(costs), capacity,
                     np.array(first), np.array(sm).reshape(-1, 2), dict(bpos), copies)


def _sm_kernels(choice: str, cost: tuple[float, float, float],
                copy_costs: Optional[Mapping[str, CopyCost]], tensor: str) -> tuple[float, float]:
    """The compute-stream time of the SM (de)compression kernels a ``compress`` row's offload
    and prefetch run (Blackwell's Decompression Engine), where the row has those copies."""
    if choice != "compress" or copy_costs is None:
        return 0.0, 0.0
    c = copy_costs[tensor]
    return (float(c.sm_out_ps) if cost[0] else 0.0), (float(c.sm_in_ps) if cost[1] else 0.0)


def _keep_slots(base: Plan, blocks: list, kernel_ps: Callable[[object], int],
                elastic_workspace: bool, transfer_ps: Optional[Callable[[object, int], int]] = None
                ) -> tuple[np.ndarray, np.ndarray, dict[str, int], np.ndarray]:
    """The all-keep plan replayed: per slot the bytes that do not depend on the choices (all
    but activations, and workspace when elastic) at their peak and the kernels' time, each
    layer's forward kernel time, and per slot the time of the plan's own copies (priced by
    ``transfer_ps``; none without it)."""
    sizes = {t.name: t.bytes for t in base.tensors}
    releases = gradient_releases(base)
    activations = {t.name for t in base.tensors if t.kind == "activation"
                   or (elastic_workspace and t.kind == "workspace")}
    fixed = np.zeros(len(blocks))
    compute = np.zeros(len(blocks))
    copies = np.zeros(len(blocks))
    in_use = sum(sizes[o.name] for o in base.prologue if o.op == "alloc"
                 and o.name not in activations)
    fwd_ps: dict[str, int] = {}
    for k, block in enumerate(blocks):
        peak = in_use
        for o in block.ops:
            if o.op in ("alloc", "free") and o.name in activations:
                continue
            if o.op == "alloc":
                in_use += sizes[o.name] - sum(sizes[t] for t in releases.get(o.name, ()))
                peak = max(peak, in_use)
            elif o.op == "free":
                in_use -= sizes[o.name]
            elif o.op == "compute":
                ps = kernel_ps(o)
                compute[k] += ps
                if o.pass_ == "fwd":
                    fwd_ps[o.name] = ps
            elif o.op in ("offload", "prefetch") and transfer_ps is not None:
                copies[k] += transfer_ps(o, sizes[o.name])
        fixed[k] = peak
    return fixed, compute, fwd_ps, copies


def _options(ti: TensorInfo, producer: LayerInfo,
             copy_costs: Optional[Mapping[str, CopyCost]], recompute: bool = True) -> list[str]:
    """The choices open to tensor ``ti`` (``recompute`` False: no rebuild)."""
    options = ["keep"]
    if ti.consumers:
        if copy_costs is not None and ti.name in copy_costs:
            options.append("offload")
            c = copy_costs[ti.name]
            # through a codec that gains nothing (dense data bypassed, or a codec slower
            # than the link) a compressed copy is never the better one: leave it out
            if c.packed_out_ps < c.plain_out_ps or c.packed_in_ps < c.plain_in_ps:
                options.append("compress")
        if producer.kind != "data" and recompute:
            options.append("recompute")
    return options


def _row(choice: str, ti: TensorInfo, span: tuple[int, int], need: Sequence[int],
         infos: Sequence[LayerInfo], fpos: Mapping[str, int], bpos: Mapping[str, int], n: int,
         fwd_ps: Mapping[str, int], copy_costs: Optional[Mapping[str, CopyCost]]
         ) -> tuple[np.ndarray, tuple[int, int, int], tuple[float, float, float]]:
    """One candidate row: the slots where tensor ``ti`` is resident under ``choice`` (its
    ``span`` is production to release under keep), and the slots and costs of its offload,
    prefetch and recomputation."""
    start, end = span
    last_reader = max(fpos[c] for c in ti.consumers) if ti.consumers else start
    first_reader = min(fpos[c] for c in ti.consumers) if ti.consumers else start
    anchor = max(need) if need else None
    mask = np.zeros(n)
    slot = (0, 0, 0)
    cost = (0.0, 0.0, 0.0)
    if choice == "keep":
        mask[start:end + 1] = 1
        return mask, slot, cost
    mask[start:last_reader + 1] = 1
    if anchor is None:
        return mask, slot, cost
    a_name = infos[anchor].name
    if choice == "recompute":
        mask[bpos[a_name]:end + 1] = 1
        rebuild = sum(fwd_ps.get(layer, 0) for layer in (ti.producer,) + ti.modifiers)
        return mask, (0, 0, bpos[a_name]), (0.0, 0.0, float(rebuild))
    above = infos[anchor + 1].name if anchor < len(infos) - 1 else a_name
    mask[bpos[above]:end + 1] = 1
    assert copy_costs is not None
    c = copy_costs[ti.name]
    out, back = (c.plain_out_ps, c.plain_in_ps) if choice == "offload" \
        else (c.packed_out_ps, c.packed_in_ps)
    return mask, (first_reader, bpos[above], 0), (float(out), float(back), 0.0)


def _needs(infos: Sequence, idx: Mapping[str, int], tensors: Mapping) -> dict[str, list[int]]:
    need: dict[str, list[int]] = {t: [] for t in tensors}
    for i in infos:
        for t in i.bwd_needs:
            need[t].append(idx[i.name])
    return need


def induced_needs(network: Network, batch: int, dtype: str,
                  choices: Mapping[str, str]) -> dict[str, frozenset[int]]:
    """The backward reads a plan's recomputations add: a recomputed tensor is rebuilt in the
    backward slot of its anchor (the latest layer whose backward reads it) from its producer's
    inputs, so each of those inputs is read there too (tensor -> layer indices), the same rule
    the render applies (:func:`~workloads.vdnn.plan_iteration`), chains included."""
    infos = network.infer(batch, dtype)
    idx = {i.name: k for k, i in enumerate(infos)}
    info = {i.name: i for i in infos}
    tensors = network.tensors(batch, dtype)
    need = _needs(infos, idx, tensors)
    extra: dict[str, set[int]] = {}
    for ti in sorted(tensors.values(), key=lambda t: idx[t.producer], reverse=True):
        if choices.get(ti.name) != "recompute" or not need[ti.name] or not ti.consumers:
            continue
        anchor = max(need[ti.name])
        for x in dict.fromkeys(info[ti.producer].inputs):
            if x in need and anchor not in need[x]:
                need[x].append(anchor)
                extra.setdefault(x, set()).add(anchor)
    return {t: frozenset(at) for t, at in extra.items()}


def _excess(memory: np.ndarray, capacity: float) -> np.ndarray:
    return np.clip(memory - capacity, 0, None).sum(axis=-1)


def lower_bound_peak(model: PlanModel) -> int:
    """The least any plan can hold in its fullest slot: every tensor at its smallest
    footprint in every slot at once."""
    least = np.zeros(model.fixed.shape)
    for t in range(len(model.tensors)):
        rows = np.arange(model.first_row[t], model.first_row[t] + len(model.choices[t]))
        least += model.resident[rows].min(axis=0)
    return int((model.fixed + least).max())


def _check_feasible(model: PlanModel, label: str = "") -> None:
    bound = lower_bound_peak(model)
    if bound > model.capacity:
        short = bound - model.capacity
        raise PlanInfeasible(
            f"{label + ': ' if label else ''}cannot fit in {model.capacity} bytes "
            f"({model.capacity / GiB:.2f} GiB) of GPU memory even with every activation "
            f"offloaded or recomputed: {short} bytes ({short / GiB:.2f} GiB) short", short)


def plan_greedy(model: PlanModel, label: str = "") -> PlanResult:
    """Greedy plan: from all-keep, repeatedly apply the change (one tensor to another choice)
    that removes the most excess memory per picosecond it adds, until every slot fits; then
    apply, most time saved first, the changes to cheaper choices that still fit.

    Lazy evaluation keeps it fast on big models: every row's score is computed at once
    (vectorised), then a row is re-scored alone when it reaches the top of the queue, and
    applied when it still beats the next one; all scores are refreshed every
    :data:`REFRESH` changes."""
    import heapq

    _check_feasible(model, label)
    cap = float(model.capacity)
    state = _State(model)
    rows_tensor = model.row_tensor
    all_rows = np.arange(len(rows_tensor))
    while _excess(state.memory, cap) > 0:
        excess = float(_excess(state.memory, cap))
        delta = model.resident - model.resident[state.current[rows_tensor]]
        gain = excess - _excess(state.memory + delta, cap)
        dt = _time_deltas(model, state.current, state.copies, state.rec, state.times)
        useful = (gain > 0) & (all_rows != state.current[rows_tensor])
        if not useful.any():
            peak = int(state.memory.max())
            short = peak - model.capacity
            raise PlanInfeasible(f"{label + ': ' if label else ''}the planner found no plan "
                                 f"that fits {model.capacity} bytes "
                                 f"({model.capacity / GiB:.2f} GiB): its best holds {peak} "
                                 f"bytes, {short} bytes ({short / GiB:.2f} GiB) short", short)
        heap = [(-float(g / max(d, 1.0)), int(r)) for r, g, d in
                zip(all_rows[useful], gain[useful], dt[useful])]
        heapq.heapify(heap)
        applied = 0
        while heap and applied < REFRESH:
            excess = float(_excess(state.memory, cap))
            if excess <= 0:
                break
            _, row = heapq.heappop(heap)
            if state.current[rows_tensor[row]] == row:
                continue
            score = state.score(row, excess, cap)
            if score is None:
                continue
            if not heap or score >= (1 - LAZY_SLACK) * -heap[0][0]:
                state.apply(row)
                applied += 1
            else:
                heapq.heappush(heap, (-score, row))
    # improvement: cheaper choices that keep every slot within capacity, most time saved first
    for _ in range(REFRESH):
        dt = _time_deltas(model, state.current, state.copies, state.rec, state.times)
        order = np.argsort(dt, kind="stable")
        changed = False
        for row in order[dt[order] < 0]:
            row = int(row)
            if state.current[rows_tensor[row]] == row or state.time_delta(row) >= 0:
                continue
            if state.fits(row, cap):
                state.apply(row)
                changed = True
        if not changed:
            break
    return _result(model, state.current)


#: greedy changes between two full refreshes of every row's score
REFRESH = 32
#: a re-scored row is applied when it is within this fraction of the next row's (stale) score
LAZY_SLACK = 0.05


class _State:
    """The greedy's current plan: one row per tensor, the memory per slot and the copy and
    recompute time per slot it implies."""

    def __init__(self, model: PlanModel) -> None:
        self.model = model
        self.current = model.first_row.copy()  # every tensor kept
        self.memory = model.memory(self.current)
        self.copies, self.rec = _streams(model, self.current)
        self.times = np.maximum(model.compute + self.rec, self.copies)

    def _delta(self, row: int) -> np.ndarray:
        m = self.model
        return m.resident[row] - m.resident[self.current[m.row_tensor[row]]]

    def score(self, row: int, excess: float, cap: float) -> float | None:
        """Excess memory removed per picosecond added by switching to ``row`` (None: it
        removes none)."""
        gain = excess - _excess(self.memory + self._delta(row), cap)
        if gain <= 0:
            return None
        return float(gain / max(self.time_delta(row), 1.0))

    def fits(self, row: int, cap: float) -> bool:
        """Every slot within ``cap`` after switching to ``row``."""
        return bool((self.memory + self._delta(row) <= cap).all())

    def time_delta(self, row: int) -> float:
        """The predicted iteration time's change if ``row``'s tensor switched to it."""
        m = self.model
        old = self.current[m.row_tensor[row]]
        copies: dict[int, float] = {}
        rec: dict[int, float] = {}
        for r, sign in ((row, 1.0), (old, -1.0)):
            for k in (0, 1):
                slot = int(m.row_slots[r, k])
                copies[slot] = copies.get(slot, 0.0) + sign * m.row_costs[r, k]
            for k in m.compute_cols:
                slot = int(m.row_slots[r, k])
                rec[slot] = rec.get(slot, 0.0) + sign * m.row_compute[r, k]
        total = 0.0
        for slot in set(copies) | set(rec):
            new = max(m.compute[slot] + self.rec[slot] + rec.get(slot, 0.0),
                      self.copies[slot] + copies.get(slot, 0.0))
            total += new - self.times[slot]
        return total

    def apply(self, row: int) -> None:
        """Switch ``row``'s tensor to ``row``."""
        (self.current, self.memory, self.copies, self.rec,
         self.times) = _apply(self.model, self.current, row, self.memory, self.copies, self.rec)


def _streams(model: PlanModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per slot, the copy stream's time and the compute stream's beyond the keep schedule's
    kernels (recomputation and SM codec kernels) when ``rows`` are chosen."""
    assert model.fixed_copies is not None
    copies = model.fixed_copies.copy()
    rec = np.zeros_like(model.compute)
    for k in (0, 1):
        np.add.at(copies, model.row_slots[rows, k], model.row_costs[rows, k])
    for k in model.compute_cols:
        np.add.at(rec, model.row_slots[rows, k], model.row_compute[rows, k])
    return copies, rec


def _apply(model: PlanModel, current: np.ndarray, row: int, memory: np.ndarray,
           copies: np.ndarray, rec: np.ndarray):
    t = model.row_tensor[row]
    old = current[t]
    current = current.copy()
    current[t] = row
    memory = memory - model.resident[old] + model.resident[row]
    copies = copies.copy()
    rec = rec.copy()
    for k in (0, 1):
        copies[model.row_slots[old, k]] -= model.row_costs[old, k]
        copies[model.row_slots[row, k]] += model.row_costs[row, k]
    for k in model.compute_cols:
        rec[model.row_slots[old, k]] -= model.row_compute[old, k]
        rec[model.row_slots[row, k]] += model.row_compute[row, k]
    times = np.maximum(model.compute + rec, copies)
    return current, memory, copies, rec, times


def _time_deltas(model: PlanModel, current: np.ndarray, copies: np.ndarray, rec: np.ndarray,
                 times: np.ndarray) -> np.ndarray:
    """For every row: the change of predicted iteration time if its tensor switched to it."""
    old = current[model.row_tensor]
    slots_new, slots_old = model.row_slots, model.row_slots[old]
    cost_new, cost_old = model.row_costs, model.row_costs[old]
    busy_new, busy_old = model.row_compute, model.row_compute[old]
    # the (at most six) slots a switch touches; per row, the distinct ones
    touched = np.concatenate([slots_new, slots_old], axis=1)  # rows x 6
    dcopy = np.zeros(touched.shape)
    drec = np.zeros(touched.shape)
    for j in range(6):
        s = touched[:, j]
        for k in (0, 1):
            dcopy[:, j] += np.where(slots_new[:, k] == s, cost_new[:, k], 0)
            dcopy[:, j] -= np.where(slots_old[:, k] == s, cost_old[:, k], 0)
        for k in model.compute_cols:
            drec[:, j] += np.where(slots_new[:, k] == s, busy_new[:, k], 0)
            drec[:, j] -= np.where(slots_old[:, k] == s, busy_old[:, k], 0)
    new_t = np.maximum(model.compute[touched] + rec[touched] + drec,
                       copies[touched] + dcopy) - times[touched]
    # count each distinct slot once per row
    first = np.ones(touched.shape, dtype=bool)
    for j in range(1, 6):
        for i in range(j):
            first[:, j] &= touched[:, j] != touched[:, i]
    return (new_t * first).sum(axis=1)


def _rows(model: PlanModel, choices: Mapping[str, str]) -> np.ndarray:
    """The model's row of each tensor's choice in ``choices``."""
    return np.array([model.first_row[t] + model.choices[t].index(choices[name])
                     for t, name in enumerate(model.tensors)])


def _result(model: PlanModel, rows: np.ndarray) -> PlanResult:
    choices = {model.tensors[model.row_tensor[r]]: model.row_choice[r] for r in rows}
    ends = np.cumsum(model.slot_times(rows))
    return PlanResult(choices, model.time_ps(rows), int(model.memory(rows).max()),
                      backward_end_ps={layer: float(ends[k])
                                       for layer, k in model.backward_slot.items()})


def plan_milp(model: PlanModel, time_limit: float = 60.0) -> PlanResult:
    """The exact optimum of the same model: binary x (one row per tensor), slot times
    tau_s >= kernels_s + recompute_s(x) + SM codec kernels_s(x) and >= copies_s(x), every
    slot's memory within capacity; minimise the sum of tau. SciPy's ``milp`` (HiGHS)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    _check_feasible(model)
    rows, slots = model.resident.shape[0], model.fixed.shape[0]
    nvar = rows + slots
    cons = []
    # one choice per tensor
    one = lil_matrix((len(model.tensors), nvar))
    for r, t in enumerate(model.row_tensor):
        one[t, r] = 1
    cons.append(LinearConstraint(one.tocsr(), 1, 1))
    # memory per slot
    # bytes in GiB and times in ms keep the coefficients in a range the solver handles well
    mem = lil_matrix((slots, nvar))
    mem[:, :rows] = model.resident.T / GiB
    cons.append(LinearConstraint(mem.tocsr(), -np.inf, (model.capacity - model.fixed) / GiB))
    # tau_s - recompute_s(x) >= compute_s ; tau_s - copies_s(x) >= 0
    a_rec = lil_matrix((slots, nvar))
    a_copy = lil_matrix((slots, nvar))
    for r in range(rows):
        for k in (0, 1):
            if model.row_costs[r, k]:
                a_copy[model.row_slots[r, k], r] -= model.row_costs[r, k] / 1e9
        for k in model.compute_cols:
            if model.row_compute[r, k]:
                a_rec[model.row_slots[r, k], r] -= model.row_compute[r, k] / 1e9
    for s in range(slots):
        a_rec[s, rows + s] = 1
        a_copy[s, rows + s] = 1
    cons.append(LinearConstraint(a_rec.tocsr(), model.compute / 1e9, np.inf))
    assert model.fixed_copies is not None
    cons.append(LinearConstraint(a_copy.tocsr(), model.fixed_copies / 1e9, np.inf))
    c = np.concatenate([np.zeros(rows), np.ones(slots)])
    integrality = np.concatenate([np.ones(rows), np.zeros(slots)])
    bounds = Bounds(np.zeros(nvar), np.concatenate([np.ones(rows), np.full(slots, np.inf)]))
    res = milp(c, constraints=cons, integrality=integrality, bounds=bounds,
               options={"time_limit": time_limit, "mip_rel_gap": 1e-6})
    if res.x is None:
        raise PlanInfeasible(f"the mixed-integer program found no plan ({res.message})", 0)
    chosen = np.zeros(len(model.tensors), dtype=int)
    for r in range(rows):
        if res.x[r] > 0.5:
            chosen[model.row_tensor[r]] = r
    return _result(model, chosen)


@timed("planning_s")
def plan_to_fit(network: Network, batch: int, dtype: str, capacity: int,
                kernel_ps: Callable[[object], int],
                copy_costs: Optional[Mapping[str, CopyCost]] = None,
                render: Optional[Callable[[Mapping[str, str]], Plan]] = None,
                base: Optional[Plan] = None, rounds: int = 6,
                label: str = "", elastic_workspace: bool = False,
                transfer_ps: Optional[Callable[[object, int], int]] = None) -> PlanResult:
    """Plan ``network`` greedily for ``capacity`` bytes and check the rendered plan's exact
    peak; while it overflows (the model's second-order effects), plan again for a capacity
    lowered by the overflow. ``render(choices)`` gives the per-tensor plan (default:
    :func:`plan_iteration` with policy ``auto``); ``base`` the all-keep plan;
    ``transfer_ps(op, bytes)`` prices the copies ``base`` makes itself (see :func:`build_model`)."""
    if render is None:
        def render(choices: Mapping[str, str]) -> Plan:
            return plan_iteration(network, batch, dtype, "auto", choices=choices)
    if base is None:
        base = plan_iteration(network, batch, dtype, "none")
    model = build_model(network, batch, dtype, base, kernel_ps, capacity, copy_costs,
                        elastic_workspace, transfer_ps=transfer_ps)
    fixed_ws = not elastic_workspace
    if plan_peak(base, fixed_ws) <= capacity:
        keep = model.first_row.copy()
        out = _result(model, keep)
        out.rendered_peak_bytes = plan_peak(base, fixed_ws)
        return out
    target = capacity
    result = None
    needs: dict[str, frozenset[int]] = {}
    for round_ in range(1, rounds + 1):
        tick("planning memory (policy auto): round", round_, rounds)
        # the model cannot see that a recomputation reads its producer's inputs in the backward
        # pass: plan, add the reads the plan's recomputations induce, plan again until the
        # model holds every read its plan makes (the reads only grow, so this ends)
        for _ in range(NEEDS_ROUNDS):
            model.capacity = target
            result = plan_greedy(model, label)
            induced = induced_needs(network, batch, dtype, result.choices)
            grown = {t: needs.get(t, frozenset()) | induced.get(t, frozenset())
                     for t in set(needs) | set(induced)}
            if grown == needs:
                break
            needs = grown
            model = build_model(network, batch, dtype, base, kernel_ps, target, copy_costs,
                                elastic_workspace, needs, transfer_ps)
        else:
            model.capacity = target
            result = plan_greedy(model, label)
            # priced with the reads this last plan induces, which the render will make
            grown = {t: needs.get(t, frozenset()) | at for t, at in induced_needs(
                network, batch, dtype, result.choices).items()}
            full = build_model(network, batch, dtype, base, kernel_ps, target, copy_costs,
                               elastic_workspace, grown, transfer_ps)
            priced = _result(full, _rows(full, result.choices))
            result.predicted_time_ps = priced.predicted_time_ps
            result.backward_end_ps = priced.backward_end_ps
        peak = plan_peak(render(result.choices), fixed_ws)
        result.rendered_peak_bytes = peak
        result.rounds = round_
        if peak <= capacity:
            return result
        target -= peak - capacity
        if target <= 0:
            break
    assert result is not None
    short = result.rendered_peak_bytes - capacity
    raise PlanInfeasible(f"{label + ': ' if label else ''}the planner's best plan holds "
                         f"{result.rendered_peak_bytes} bytes, {short} bytes "
                         f"({short / GiB:.2f} GiB) more than the {capacity} bytes "
                         f"({capacity / GiB:.2f} GiB) of GPU memory", short)


def gradient_releases(plan: Plan) -> dict[str, tuple[str, ...]]:
    """With the gradients on the host, what the GPU has freed when each bucket starts: the
    first gradient allocated of bucket ``k`` -> the gradients of bucket ``k - 2``, whose copy
    the GPU waits for there (the plan's ``gradient_buffers``; the plan never frees them). Empty
    for every other plan."""
    states = plan.model_states
    if states is None or states.placement.gradients != "host":
        return {}
    order = {op.name: k for k, op in enumerate(plan.ops()) if op.op == "alloc"}
    out = {}
    for k, bucket in enumerate(states.buckets):
        held = states.gradient_buffers
        if k >= held:
            first = min(bucket.wgrads, key=lambda t: order.get(t, len(order)))
            out[first] = states.buckets[k - held].wgrads
    return out


def plan_peak(plan: Plan, workspace: bool = True) -> int:
    """The exact peak of ``plan``: its allocations replayed in issue order (without
    workspace buffers when ``workspace`` is False), less the gradients the GPU frees once
    their bucket is on the host (:func:`gradient_releases`)."""
    sizes = {t.name: t.bytes if workspace or t.kind != "workspace" else 0
             for t in plan.tensors}
    releases = gradient_releases(plan)
    in_use = peak = 0
    for op in plan.ops():
        if op.op == "alloc":
            in_use += sizes[op.name] - sum(sizes[t] for t in releases.get(op.name, ()))
            peak = max(peak, in_use)
        elif op.op == "free":
            in_use -= sizes[op.name]
    return peak


def choices_counts(choices: Mapping[str, str], order: Sequence[str] = ("keep", "offload",
                                                                       "compress",
                                                                       "recompute")
                   ) -> dict[str, int]:
    """How many tensors take each choice."""
    return {c: sum(1 for v in choices.values() if v == c) for c in order}
