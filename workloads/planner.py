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
overflows, plans again for a capacity lowered by the overflow. Where the greedy finds no plan
(the induced reads only grow, so its model may hold reads no plan needs any more),
:func:`fallback_plans` tries a plan without recomputation, else the least-memory plans, and
the one of least rendered peak is the planner's answer (docs/workloads.md section 8, "When the
greedy finds no plan").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import (TYPE_CHECKING, Any, Callable, Collection, Mapping, NamedTuple, Optional,
                    Sequence)

import numpy as np

from sst_cdma.engine.progress import tick, timed
from sst_cdma.model.price_memo import PriceMemo

from .errors import WorkloadError
from .network import LayerInfo, Network, TensorInfo
from .plan import Plan
from .vdnn import inferred, plan_iteration

if TYPE_CHECKING:  # the engine's answer to the cost query
    from components.messages import CopyCost

__all__ = ["PlanModel", "PlanResult", "PlanInfeasible", "build_model",
           "plan_greedy", "plan_milp", "plan_to_fit", "induced_needs", "plan_peak", "lower_bound_peak",
           "least_rows", "without_recompute", "fallback_plans",
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
    #: slots, bytes: every tensor at its smallest footprint, summed (None: worked out from
    #: ``resident`` when asked; :func:`lower_bound_peak`)
    least_resident: Optional[np.ndarray] = None
    #: slots, bytes: at least the most any row holds there (None: worked out from
    #: ``resident`` when asked)
    most_resident: Optional[np.ndarray] = None
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
    return _ModelBuilder(network, batch, dtype, base, kernel_ps, copy_costs, elastic_workspace,
                         transfer_ps)(capacity, extra_needs)


#: the plans :meth:`_ModelBuilder.plan` made (or the refusals), by the model they were made for,
#: with the network and all-keep plan its key names by identity (an auto run of GPT-2 XL
#: makes 9 over its placements)
_GREEDY = PriceMemo(32)

#: one tensor's candidate rows: its choices, and per choice the slots it is resident in (ranges
#: [a, b), which may overlap), the slots and costs of its (offload, prefetch, recompute) and its SM codec kernels' times
_Spans = tuple[tuple[int, int], ...]
_TensorRows = tuple[tuple[str, ...], list[tuple[_Spans, tuple[int, int, int],
                                                tuple[float, float, float],
                                                tuple[float, float]]]]


#: what builders alike share, by what places their rows (the network, held, and the slots,
#: forward kernel prices, copy costs and rebuilds): each tensor's rows, and the first model's
#: rows laid out (:class:`_Layout`; None until one is): a run's placements, and its baseline's,
#: plan one network with the same prices
_SHARED = PriceMemo(8)


class _Layout(NamedTuple):
    """The kept model arrays as :meth:`_ModelBuilder._lay_out` made them, for builders alike
    to start from (each writes on copies: see :meth:`_ModelBuilder._adopt`)."""

    placed: list
    allowed: list[tuple[str, ...]]
    row_choice: list[str]
    nbytes: list[int]
    row_tensor: np.ndarray
    first: np.ndarray
    resident: np.ndarray
    slots: np.ndarray
    costs: np.ndarray
    sm: np.ndarray
    least_t: list[np.ndarray]
    least: np.ndarray
    most: np.ndarray


class _ModelBuilder:
    """:func:`build_model` in two steps: what does not depend on the capacity or the reads a
    plan induces (the network's layers and tensors, the all-keep plan replayed) worked out
    once, then a model per call; :func:`plan_to_fit` builds one per round of induced reads,
    and each tensor's rows are kept while the reads that place them (the first and the last)
    stay the same. Builders whose rows are placed alike (``_SHARED``) share those rows and
    start from one layout."""

    def __init__(self, network: Network, batch: int, dtype: str, base: Plan,
                 kernel_ps: Callable[[object], int],
                 copy_costs: Optional[Mapping[str, CopyCost]],
                 elastic_workspace: bool,
                 transfer_ps: Optional[Callable[[object, int], int]]) -> None:
        self.infos, self.tensors = inferred(network, batch, dtype)
        self.info = {i.name: i for i in self.infos}
        self.idx = {i.name: k for k, i in enumerate(self.infos)}
        self.blocks, self.fpos, self.bpos = _positions(base)
        self.fixed, self.compute, self.fwd_ps, self.copies = _keep_slots(
            base, self.blocks, kernel_ps, elastic_workspace, transfer_ps)
        self.copy_costs = copy_costs
        # a rebuild re-runs forward kernels, whose weights must be on the GPU
        states = base.model_states
        self.recompute = states is None or states.placement.weights == "gpu"
        #: per tensor, the rows the kept model arrays hold (empty until the first model)
        self._placed: list[_TensorRows] = []
        #: the kept arrays are a model's too (copied before they change)
        self._handed = False
        self._allowed: list[tuple[str, ...]] = []
        self._row_choice: list[str] = []
        self._bytes: list[int] = []
        empty: np.ndarray = np.zeros(0)
        self._row_tensor = self._first = self._resident = self._slots = empty
        self._costs = self._sm = self._least = self._most = empty
        self._least_t: list[np.ndarray] = []
        #: what the models depend on besides the capacity and the induced reads: the network
        #: and the all-keep plan themselves (held, so their identity stands for them) and the
        #: prices, by value
        self.held = (network, base)
        fwd, costs = tuple(self.fwd_ps.items()), _cost_key(copy_costs)
        self.key = (id(network), batch, dtype, id(base), self.fixed.tobytes(),
                    self.compute.tobytes(), self.copies.tobytes(), fwd, elastic_workspace,
                    self.recompute, costs)
        placing = (id(network), batch, dtype, len(self.blocks), tuple(self.fpos.items()),
                   tuple(self.bpos.items()), fwd, self.recompute, costs)
        shared = _SHARED.get(placing)
        if shared is None:
            shared = [network, {}, None]
            _SHARED.put(placing, shared)
        #: [network, tensor -> (the reads that place its rows, its rows), _Layout or None]
        self._shared = shared
        self._rows: dict[str, tuple[Optional[tuple[int, int]], _TensorRows]] = shared[1]

    def plan(self, capacity: int, extra_needs: Mapping[str, frozenset[int]],
             label: str) -> PlanResult:
        """:func:`plan_greedy` of the model for ``capacity`` with ``extra_needs``: planned
        once per process for the same model (a run's baseline plans its placements again with
        the same all-keep plans and, where the engine's codec gains nothing, the same copy
        costs); a copy of the plan each time."""
        key = (self.key, capacity, frozenset(extra_needs.items()), label)
        entry = _GREEDY.get(key)
        if entry is None:
            done: PlanResult | tuple[str, int]
            try:
                done = plan_greedy(self(capacity, extra_needs), label)
            except PlanInfeasible as exc:
                done = (str(exc), exc.short_bytes)
            entry = (self.held, done)
            _GREEDY.put(key, entry)
        done = entry[1]
        if isinstance(done, tuple):
            raise PlanInfeasible(*done)
        return replace(done, choices=dict(done.choices), extra=dict(done.extra),
                       backward_end_ps=dict(done.backward_end_ps))

    def __call__(self, capacity: int,
                 extra_needs: Optional[Mapping[str, Collection[int]]] = None) -> PlanModel:
        """The model for ``capacity`` bytes with the backward reads ``extra_needs`` adds."""
        need = _needs(self.infos, self.idx, self.tensors)
        for tensor, at in (extra_needs or {}).items():
            if tensor in need:
                need[tensor].extend(k for k in at if k not in need[tensor])
        made = [self._tensor_rows(ti, need[ti.name]) for ti in self.tensors.values()]
        if not self._placed:
            self._start(made)
        changed = [t for t, rows in enumerate(made) if rows is not self._placed[t]]
        if changed and self._handed:  # the last model has these arrays: write on copies
            self._resident, self._slots = self._resident.copy(), self._slots.copy()
            self._costs, self._sm = self._costs.copy(), self._sm.copy()
        for t in changed:
            self._place(t, made[t])
        self._handed = True
        return PlanModel(list(self.tensors), list(self._allowed), self._row_tensor.copy(),
                         list(self._row_choice), self._resident, self.fixed, self.compute,
                         self._slots, self._costs, capacity, self._first.copy(), self._sm,
                         dict(self.bpos), self.copies, least_resident=self._least.copy(),
                         most_resident=self._most.copy())

    def kept(self) -> PlanResult:
        """The plan that keeps every tensor, as :func:`_result` of a model's keep rows gives
        it, without laying a model out: each tensor resident over its keep row's slots (one
        range), nothing copied or rebuilt (each slot's time its kernels' or the all-keep
        plan's own copies')."""
        need = _needs(self.infos, self.idx, self.tensors)
        n = len(self.blocks)
        held = [0] * (n + 1)  # whole bytes, where each tensor comes and goes
        for ti in self.tensors.values():
            options, rows = self._tensor_rows(ti, need[ti.name])
            assert options[0] == "keep" and len(rows[0][0]) == 1, "a keep row is one range"
            (a, b), = rows[0][0]
            held[a] += ti.bytes
            held[b] -= ti.bytes
        resident = np.array(list(itertools.accumulate(held[:n])), dtype=float)
        times = np.maximum(self.compute, self.copies)
        ends = np.cumsum(times).tolist()
        return PlanResult({name: "keep" for name in self.tensors}, float(times.sum()),
                          int((self.fixed + resident).max()),
                          backward_end_ps={layer: ends[k] for layer, k in self.bpos.items()})

    def _start(self, made: list[_TensorRows]) -> None:
        """The first model's rows: adopted where a builder alike laid out these very rows,
        else laid out (and kept for the next)."""
        kept: Optional[_Layout] = self._shared[2]
        if kept is not None and len(kept.placed) == len(made) and \
                all(a is b for a, b in zip(kept.placed, made)):
            self._adopt(kept)
            return
        self._lay_out(made)
        self._shared[2] = _Layout(list(self._placed), self._allowed, self._row_choice,
                                  self._bytes, self._row_tensor, self._first, self._resident,
                                  self._slots, self._costs, self._sm, list(self._least_t),
                                  self._least.copy(), self._most.copy())
        self._handed = True  # the layout kept has these arrays: write on copies

    def _adopt(self, kept: _Layout) -> None:
        """Start from ``kept``: its arrays shared until this builder writes (on copies, as
        after handing a model out), what it updates in place copied now."""
        self._placed, self._least_t = list(kept.placed), list(kept.least_t)
        self._allowed, self._row_choice, self._bytes = kept.allowed, kept.row_choice, kept.nbytes
        self._row_tensor, self._first = kept.row_tensor, kept.first
        self._resident, self._slots, self._costs, self._sm = \
            kept.resident, kept.slots, kept.costs, kept.sm
        self._least, self._most = kept.least.copy(), kept.most.copy()
        self._handed = True

    def _lay_out(self, made: list[_TensorRows]) -> None:
        """The first model's rows, kept to be updated in place: each tensor's choices do not
        depend on the reads (only the slots its rows hold it in do)."""
        self._allowed = [options for options, _ in made]
        self._bytes = [ti.bytes for ti in self.tensors.values()]
        self._row_choice = [c for options, _ in made for c in options]
        self._row_tensor = np.array([t for t, (options, _) in enumerate(made) for _ in options])
        self._first = np.cumsum([0] + [len(options) for options, _ in made])[:-1]
        rows = [row for _, tensor_rows in made for row in tensor_rows]
        self._resident = np.zeros((len(rows), len(self.blocks)))
        r = 0
        for ti, (_, tensor_rows) in zip(self.tensors.values(), made):
            for spans, _, _, _ in tensor_rows:
                for a, b in spans:
                    self._resident[r, a:b] = ti.bytes
                r += 1
        self._slots = np.array([slot for _, slot, _, _ in rows], dtype=int).reshape(-1, 3)
        self._costs = np.array([cost for _, _, cost, _ in rows]).reshape(-1, 3)
        self._sm = np.array([sm for _, _, _, sm in rows]).reshape(-1, 2)
        self._least_t = [self._resident[int(f):int(f) + len(options)].min(axis=0)
                         for f, (options, _) in zip(self._first, made)]
        self._least = np.zeros(len(self.blocks))
        for least in self._least_t:
            self._least += least
        self._most = self._resident.max(axis=0) if rows else np.zeros(len(self.blocks))
        self._placed = list(made)

    def _place(self, t: int, made: _TensorRows) -> None:
        """Tensor ``t``'s rows changed (its reads moved): write them over the old ones."""
        first = int(self._first[t])
        nbytes = self._bytes[t]
        rows = self._resident[first:first + len(made[1])]
        rows[:] = 0.0
        for k, (spans, slot, cost, sm) in enumerate(made[1]):
            for a, b in spans:
                rows[k, a:b] = nbytes
            self._slots[first + k] = slot
            self._costs[first + k] = cost
            self._sm[first + k] = sm
        least = rows.min(axis=0)
        self._least += least - self._least_t[t]  # whole bytes: exact
        self._least_t[t] = least
        np.maximum(self._most, rows.max(axis=0), out=self._most)  # still at least the most
        self._placed[t] = made

    def _tensor_rows(self, ti: TensorInfo, need: list[int]) -> _TensorRows:
        """Tensor ``ti``'s rows when the backward passes of layers ``need`` read it."""
        key = (min(need), max(need)) if need else None
        kept = self._rows.get(ti.name)
        if kept is not None and kept[0] == key:
            return kept[1]
        n = len(self.blocks)
        if need:
            release = min(need)
        else:
            users = [self.idx[u] for u in ti.consumers + ti.modifiers]
            release = min(users) if users else self.idx[ti.producer]
        span = (self.fpos[ti.producer], self.bpos.get(self.infos[release].name, n - 1))
        options = tuple(_options(ti, self.info[ti.producer], self.copy_costs, self.recompute))
        rows = []
        for choice in options:
            spans, slot, cost = _row(choice, ti, span, need, self.infos, self.fpos, self.bpos,
                                     self.fwd_ps, self.copy_costs)
            rows.append((spans, slot, cost, _sm_kernels(choice, cost, self.copy_costs, ti.name)))
        made = (options, rows)
        self._rows[ti.name] = (key, made)
        return made


def _compresses(c: CopyCost) -> bool:
    """Whether a copy through the codec beats the plain one either way: where it does not
    (dense data bypassed, or a codec slower than the link) ``compress`` is never the better
    choice, and the model leaves it out."""
    return c.packed_out_ps < c.plain_out_ps or c.packed_in_ps < c.plain_in_ps


def _cost_key(copy_costs: Optional[Mapping[str, CopyCost]]) -> Optional[tuple]:
    """What a model reads of ``copy_costs``, by value: each tensor's plain copy times and,
    where ``compress`` is open to it (:func:`_compresses`), its codec's times and SM kernels.
    Two engines whose codecs gain nothing on any tensor (a plain-copy baseline beside a codec
    that bypasses dense data) give the same key, so they share their plans."""
    if copy_costs is None:
        return None
    return tuple((name, c.plain_out_ps, c.plain_in_ps) +
                 ((c.packed_out_ps, c.packed_in_ps, c.sm_out_ps, c.sm_in_ps)
                  if _compresses(c) else ())
                 for name, c in copy_costs.items())


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
    freed = {first: sum(sizes[t] for t in bucket)
             for first, bucket in gradient_releases(base).items()}
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
        busy = moved = 0.0  # float sums, in the order numpy's would take them
        for o in block.ops:
            kind = o.op
            if kind == "alloc":
                if o.name not in activations:
                    in_use += sizes[o.name] - freed.get(o.name, 0)
                    if in_use > peak:
                        peak = in_use
            elif kind == "free":
                if o.name not in activations:
                    in_use -= sizes[o.name]
            elif kind == "compute":
                ps = kernel_ps(o)
                busy += ps
                if o.pass_ == "fwd":
                    fwd_ps[o.name] = ps
            elif kind in ("offload", "prefetch") and transfer_ps is not None:
                moved += transfer_ps(o, sizes[o.name])
        fixed[k] = peak
        compute[k] = busy
        copies[k] = moved
    return fixed, compute, fwd_ps, copies


def _options(ti: TensorInfo, producer: LayerInfo,
             copy_costs: Optional[Mapping[str, CopyCost]], recompute: bool = True) -> list[str]:
    """The choices open to tensor ``ti`` (``recompute`` False: no rebuild)."""
    options = ["keep"]
    if ti.consumers:
        if copy_costs is not None and ti.name in copy_costs:
            options.append("offload")
            if _compresses(copy_costs[ti.name]):
                options.append("compress")
        if producer.kind != "data" and recompute:
            options.append("recompute")
    return options


def _row(choice: str, ti: TensorInfo, span: tuple[int, int], need: Sequence[int],
         infos: Sequence[LayerInfo], fpos: Mapping[str, int], bpos: Mapping[str, int],
         fwd_ps: Mapping[str, int], copy_costs: Optional[Mapping[str, CopyCost]]
         ) -> tuple[_Spans, tuple[int, int, int], tuple[float, float, float]]:
    """One candidate row: the slots where tensor ``ti`` is resident under ``choice`` (its
    ``span`` is production to release under keep) as ranges [a, b), and the slots and costs
    of its offload, prefetch and recomputation."""
    start, end = span
    last_reader = max(fpos[c] for c in ti.consumers) if ti.consumers else start
    first_reader = min(fpos[c] for c in ti.consumers) if ti.consumers else start
    anchor = max(need) if need else None
    slot = (0, 0, 0)
    cost = (0.0, 0.0, 0.0)
    if choice == "keep":
        return ((start, end + 1),), slot, cost
    forward = (start, last_reader + 1)
    if anchor is None:
        return (forward,), slot, cost
    a_name = infos[anchor].name
    if choice == "recompute":
        rebuild = sum(fwd_ps.get(layer, 0) for layer in (ti.producer,) + ti.modifiers)
        return ((forward, (bpos[a_name], end + 1)), (0, 0, bpos[a_name]),
                (0.0, 0.0, float(rebuild)))
    above = infos[anchor + 1].name if anchor < len(infos) - 1 else a_name
    assert copy_costs is not None
    c = copy_costs[ti.name]
    out, back = (c.plain_out_ps, c.plain_in_ps) if choice == "offload" \
        else (c.packed_out_ps, c.packed_in_ps)
    return (forward, (bpos[above], end + 1)), (first_reader, bpos[above], 0), \
        (float(out), float(back), 0.0)


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
    infos, tensors = inferred(network, batch, dtype)
    idx = {i.name: k for k, i in enumerate(infos)}
    info = {i.name: i for i in infos}
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


def lower_bound_peak(model: PlanModel) -> int:
    """The least any plan can hold in its fullest slot: every tensor at its smallest
    footprint in every slot at once."""
    if model.least_resident is not None:
        return int((model.fixed + model.least_resident).max())
    if not len(model.tensors):
        return int(model.fixed.max())
    first = model.first_row
    last = first + np.array([len(c) for c in model.choices]) - 1
    least = model.resident[first]
    for k in range(1, int((last - first).max()) + 1):
        least = np.minimum(least, model.resident[np.minimum(first + k, last)])
    # bytes are whole numbers: the sum is exact in any order
    return int((model.fixed + least.sum(axis=0)).max())


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
    (vectorised, over the slots where some row could be over capacity), then a row is
    re-scored alone when it reaches the top of the queue (over the slots its tensor's choices
    differ in, the times from scalars), and applied when it still beats the next one; all
    scores are refreshed every :data:`REFRESH` changes. Bytes and capacities are whole
    numbers below 2**53, so every sum of them is exact in whatever order it is taken."""
    _check_feasible(model, label)
    state = _State(model, float(model.capacity))
    while state.excess > 0:
        _descend(state, label)
    _improve(state)
    return _result(model, np.array(state.current, dtype=model.first_row.dtype))


#: greedy changes between two full refreshes of every row's score
REFRESH = 32
#: a re-scored row is applied when it is within this fraction of the next row's (stale) score
LAZY_SLACK = 0.05


def _descend(state: _State, label: str) -> None:
    """One refresh of every row's score, then up to :data:`REFRESH` changes from the queue
    (each re-scored when it reaches the top); :class:`PlanInfeasible` where no change removes
    excess memory."""
    import heapq

    model = state.model
    gain = state.gains()
    dt = state.time_deltas()
    useful = (gain > 0) & (state.current_rows() != np.arange(len(gain)))
    if not useful.any():
        peak = state.peak()
        short = peak - model.capacity
        raise PlanInfeasible(f"{label + ': ' if label else ''}the planner found no plan "
                             f"that fits {model.capacity} bytes "
                             f"({model.capacity / GiB:.2f} GiB): its best holds {peak} "
                             f"bytes, {short} bytes ({short / GiB:.2f} GiB) short", short)
    rows = np.flatnonzero(useful)
    scores = gain[rows] / np.maximum(dt[rows], 1.0)
    heap = list(zip((-scores).tolist(), rows.tolist()))
    heapq.heapify(heap)
    applied = 0
    while heap and applied < REFRESH and state.excess > 0:
        row = _next_change(state, heap)
        if row is None:
            break
        state.apply(row)
        applied += 1


#: rows re-scored at once when the queue's top needs fresh scores (doubling while none of
#: them is applied, up to :data:`BATCH_MOST`)
BATCH_FIRST = 8
BATCH_MOST = 64


def _next_change(state: _State, heap: list[tuple[float, int]]) -> Optional[int]:
    """The row the lazy queue applies next, and the queue as it is then; None where the
    queue runs out first. One by one: pop the top, drop it if it is its tensor's current row
    or no longer removes excess, apply it if its fresh score is within :data:`LAZY_SLACK` of
    the next (stale) top, else push it back with its fresh score. The plan does not change
    until a row is applied, so the memory the next rows to pop would free is worked out
    ahead, several rows at once (:meth:`_State.gains_of`); their times, scores, pops, drops
    and pushes stay one by one."""
    import heapq

    ahead: list[tuple[float, int]] = []  # popped ahead of the queue, in order
    i = 0
    gains: dict[int, float] = {}  # excess removed, of the rows popped ahead
    fresh: dict[int, Optional[float]] = {}  # scores, of the rows popped
    batch = BATCH_FIRST
    current, tensor = state.current, state.tensor
    while True:
        if i < len(ahead) and (not heap or ahead[i] < heap[0]):
            item = ahead[i]
            i += 1
        elif heap and heap[0][1] in fresh:  # a row pushed back: its score is fresh
            item = heapq.heappop(heap)
        elif heap:  # pop the next rows ahead and score them at once
            # (rows not yet scored are all below those popped ahead before)
            assert i == len(ahead)
            ahead = [heapq.heappop(heap) for _ in range(min(batch, len(heap)))]
            i = 0
            batch = min(2 * batch, BATCH_MOST)
            rows = [r for _, r in ahead if current[tensor[r]] != r and r not in fresh]
            gains.update(zip(rows, state.gains_of(rows)))
            continue
        else:
            return None
        row = item[1]
        if current[tensor[row]] == row:
            continue
        if row not in fresh:
            gain = gains[row]
            fresh[row] = None if gain <= 0 else gain / max(state.time_delta(row), 1.0)
        score = fresh[row]
        if score is None:
            continue
        top = ahead[i] if i < len(ahead) else None
        if heap and (top is None or heap[0] < top):
            top = heap[0]
        if top is None or score >= (1 - LAZY_SLACK) * -top[0]:
            for rest in ahead[i:]:
                heapq.heappush(heap, rest)
            return row
        heapq.heappush(heap, (-score, row))


def _improve(state: _State) -> None:
    """Once every slot fits: apply the changes to cheaper choices that still fit, most time
    saved first, for up to :data:`REFRESH` passes while any applies."""
    current, tensor = state.current, state.tensor
    for _ in range(REFRESH):
        dt = state.time_deltas()
        order = np.argsort(dt, kind="stable")
        changed = False
        for row in order[dt[order] < 0].tolist():
            if current[tensor[row]] == row or state.time_delta(row) >= 0:
                continue
            if state.fits(row):
                state.apply(row)
                changed = True
        if not changed:
            break


def _whole_ps(model: PlanModel) -> bool:
    """Whether every time of ``model`` is a whole number of picoseconds (as the engine and the
    kernels slot price them) and all of them together stay far below 2**53: then every sum
    and difference of them is exact, in whatever order it is taken, so a switch's time can be
    worked out from the slots it moves time in alone, and a batch of them at once."""
    assert model.fixed_copies is not None
    arrays = (model.row_costs, model.row_compute, model.compute, model.fixed_copies)
    return sum(float(np.abs(a).sum()) for a in arrays) < 2.0 ** 48 and \
        all(bool((a == np.round(a)).all()) for a in arrays)


def _moves(model: PlanModel) -> list[list[tuple[int, float, float]]]:
    """Per row, the time it moves onto the streams: (slot, copy ps, compute ps) for each slot
    it moves any time in."""
    copy: np.ndarray = np.zeros(model.row_slots.shape)
    copy[:, :2] = model.row_costs[:, :2]
    busy: np.ndarray = np.zeros(model.row_slots.shape)
    cols = list(model.compute_cols)
    busy[:, cols] = model.row_compute[:, cols]
    some = (copy != 0) | (busy != 0)
    slots: list[list[int]] = model.row_slots.tolist()
    copies: list[list[float]] = copy.tolist()
    computes: list[list[float]] = busy.tolist()
    any_time: list[list[bool]] = some.tolist()
    moves = [[(s[k], c[k], b[k]) for k in (0, 1, 2) if z[k]]
             for s, c, b, z in zip(slots, copies, computes, any_time)]
    for row, moved in enumerate(moves):
        if len({slot for slot, _, _ in moved}) < len(moved):  # two in one slot: add up
            both: dict[int, list[float]] = {}
            for slot, c, b in moved:
                entry = both.setdefault(slot, [0.0, 0.0])
                entry[0] += c
                entry[1] += b
            moves[row] = [(slot, c, b) for slot, (c, b) in both.items()]
    return moves


class _State:
    """The greedy's current plan: one row per tensor; per slot the bytes over capacity
    (``slack``), and the copy, recompute and slot times (lists: the inner loop reads a few
    slots at a time), with the model's per-row tables as lists for the same reason.

    Memory is scored over the *open* slots alone: those where some row could be over
    capacity (``slack`` plus the most bytes any row holds there above 0). Elsewhere no switch
    can leave a slot over capacity, so the excess there is 0 before and after any switch:
    the open slots decide the excess, every gain and every fit. They are few (the slots over
    capacity and those near it), so the residency of every row there is kept at hand, and
    gathered again only when a switch opens a slot outside them or the scores are refreshed.
    """

    def __init__(self, model: PlanModel, cap: float) -> None:
        self.model = model
        self.tensor: list[int] = model.row_tensor.tolist()
        self.slots: list[list[int]] = model.row_slots.tolist()
        self.costs: list[list[float]] = model.row_costs.tolist()
        self.busy: list[list[float]] = model.row_compute.tolist()
        self.compute: list[float] = model.compute.tolist()
        #: per slot, the most bytes any row holds there (what a switch can add at most)
        self.colmax = model.most_resident if model.most_resident is not None else \
            model.resident.max(axis=0) if len(self.tensor) else np.zeros_like(model.fixed)
        #: times are whole picoseconds: a switch's time is worked out from the slots it moves
        self.whole = _whole_ps(model)
        self.moves = _moves(model) if self.whole else []
        rows = model.first_row.copy()  # every tensor kept
        self.current: list[int] = rows.tolist()
        self.cap = cap
        self.slack = model.memory(rows) - cap
        self.open_slots()
        copies, rec = _streams(model, rows)
        self.copies: list[float] = copies.tolist()
        self.rec: list[float] = rec.tolist()
        self.times: list[float] = np.maximum(model.compute + rec, copies).tolist()

    def open_slots(self) -> None:
        """Gather the open slots afresh (see the class), the rows' bytes and the slack there,
        and the excess."""
        self.is_open = self.slack + self.colmax > 0
        self.cols = np.flatnonzero(self.is_open)
        self.res_cols = np.take(self.model.resident, self.cols, axis=1)
        self._slack_moved()

    def _slack_moved(self) -> None:
        self.slack_cols = self.slack[self.cols]
        self.excess = float(np.maximum(self.slack_cols, 0.0).sum())

    def current_rows(self) -> np.ndarray:
        """Per row, the current row of its tensor."""
        return np.array(self.current)[self.model.row_tensor]

    def peak(self) -> int:
        """The current plan's fullest slot, bytes."""
        return int(self.slack.max() + self.cap)

    def gains(self) -> np.ndarray:
        """For every row: the excess memory (bytes over capacity, summed over the slots)
        switching its tensor to it removes."""
        is_open = self.slack + self.colmax > 0
        if is_open.sum() < 0.8 * len(self.cols):  # many closed: gather the fewer afresh
            self.open_slots()                     # (any more slots give the same sums)
        res = self.res_cols
        after = res[self.current_rows()]  # one array of rows x slots, worked in place
        np.subtract(res, after, out=after)
        after += self.slack_cols
        np.maximum(after, 0.0, out=after)
        return self.excess - after.sum(axis=1)

    def time_deltas(self) -> np.ndarray:
        """For every row: the predicted iteration time's change if its tensor switched to
        it."""
        return _time_deltas(self.model, np.array(self.current), np.array(self.copies),
                            np.array(self.rec), np.array(self.times))

    def _after(self, row: int) -> np.ndarray:
        """The bytes over capacity in the open slots after switching to ``row``."""
        res = self.res_cols
        return self.slack_cols + (res[row] - res[self.current[self.tensor[row]]])

    def gains_of(self, rows: list[int]) -> list[float]:
        """For each of ``rows``: the excess memory switching its tensor to it removes."""
        if not rows:
            return []
        res = self.res_cols
        cur = [self.current[self.tensor[r]] for r in rows]
        after = self.slack_cols + (res[rows] - res[cur])
        return (self.excess - np.maximum(after, 0.0).sum(axis=1)).tolist()

    def fits(self, row: int) -> bool:
        """Every slot within capacity after switching to ``row``."""
        return bool((self._after(row) <= 0).all())

    def time_delta(self, row: int) -> float:
        """The predicted iteration time's change if ``row``'s tensor switched to it."""
        old = self.current[self.tensor[row]]
        if self.whole:
            return self._whole_delta(row, old)
        copies: dict[int, float] = {}
        rec: dict[int, float] = {}
        for r, sign in ((row, 1.0), (old, -1.0)):
            slots, costs, busy = self.slots[r], self.costs[r], self.busy[r]
            for k in (0, 1):
                slot = slots[k]
                copies[slot] = copies.get(slot, 0.0) + sign * costs[k]
            for k in self.model.compute_cols:
                slot = slots[k]
                rec[slot] = rec.get(slot, 0.0) + sign * busy[k]
        total = 0.0
        for slot in set(copies) | set(rec):
            new = max(self.compute[slot] + self.rec[slot] + rec.get(slot, 0.0),
                      self.copies[slot] + copies.get(slot, 0.0))
            total += new - self.times[slot]
        return total

    def _whole_delta(self, row: int, old: int) -> float:
        """:meth:`time_delta` where every time is a whole number of picoseconds (see
        :func:`_whole_ps`): the same number, from the slots a row moves time in alone."""
        mine, theirs = self.moves[row], self.moves[old]
        if theirs:  # rarer: from a row that moves time too, add up per slot
            moved: dict[int, list[float]] = {}
            for slot, copy, busy in mine:
                moved[slot] = [copy, busy]
            for slot, copy, busy in theirs:
                both = moved.setdefault(slot, [0.0, 0.0])
                both[0] -= copy
                both[1] -= busy
            mine = [(slot, copy, busy) for slot, (copy, busy) in moved.items()]
        compute, rec, copies, times = self.compute, self.rec, self.copies, self.times
        total = 0.0
        for slot, copy, busy in mine:
            total += max(compute[slot] + rec[slot] + busy, copies[slot] + copy) - times[slot]
        return total

    def apply(self, row: int) -> None:
        """Switch ``row``'s tensor to ``row``."""
        t = self.tensor[row]
        old = self.current[t]
        self.current[t] = row
        res = self.model.resident
        self.slack += res[row] - res[old]
        if ((self.slack + self.colmax > 0) & ~self.is_open).any():
            self.open_slots()  # a slot opened: gather them again
        else:
            self._slack_moved()
        copies, rec = self.copies, self.rec
        old_slots, new_slots = self.slots[old], self.slots[row]
        for k in (0, 1):
            copies[old_slots[k]] -= self.costs[old][k]
            copies[new_slots[k]] += self.costs[row][k]
        for k in self.model.compute_cols:
            rec[old_slots[k]] -= self.busy[old][k]
            rec[new_slots[k]] += self.busy[row][k]
        for slot in set(old_slots) | set(new_slots):
            self.times[slot] = max(self.compute[slot] + rec[slot], copies[slot])


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
    tensor_of, choice_of = model.row_tensor.tolist(), model.row_choice
    choices = {model.tensors[tensor_of[r]]: choice_of[r] for r in rows.tolist()}
    times = model.slot_times(rows)  # model.time_ps(rows) is its sum
    ends = np.cumsum(times).tolist()
    return PlanResult(choices, float(times.sum()), int(model.memory(rows).max()),
                      backward_end_ps={layer: ends[k]
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
    lowered by the overflow; where the greedy finds no plan, the plans of
    :func:`fallback_plans` instead. :class:`PlanInfeasible` naming the least rendered peak of
    the plans made when none fits. ``render(choices)`` gives the per-tensor plan (default:
    :func:`plan_iteration` with policy ``auto``); ``base`` the all-keep plan;
    ``transfer_ps(op, bytes)`` prices the copies ``base`` makes itself (see :func:`build_model`)."""
    if render is None:
        def render(choices: Mapping[str, str]) -> Plan:
            return plan_iteration(network, batch, dtype, "auto", choices=choices)
    if base is None:
        base = plan_iteration(network, batch, dtype, "none")
    build = _ModelBuilder(network, batch, dtype, base, kernel_ps, copy_costs, elastic_workspace,
                          transfer_ps)
    fixed_ws = not elastic_workspace
    if plan_peak(base, fixed_ws) <= capacity:
        out = build.kept()
        out.rendered_peak_bytes = plan_peak(base, fixed_ws)
        return out
    target = capacity
    best: Optional[PlanResult] = None
    needs: dict[str, frozenset[int]] = {}
    for round_ in range(1, rounds + 1):
        tick("planning memory (policy auto): round", round_, rounds)
        try:
            tried, least = [_settled(build, network, batch, dtype, target, needs, label)], False
        except PlanInfeasible:
            tried, least = fallback_plans(build(target, needs), build(target), label)
        for result in tried:
            result.rendered_peak_bytes = plan_peak(render(result.choices), fixed_ws)
            result.rounds = round_
        result = min(tried, key=lambda r: r.rendered_peak_bytes)
        if best is None or result.rendered_peak_bytes < best.rendered_peak_bytes:
            best = result
        if result.rendered_peak_bytes <= capacity:
            return result
        target -= result.rendered_peak_bytes - capacity
        if least or target <= 0:
            break
    assert best is not None
    short = best.rendered_peak_bytes - capacity
    raise PlanInfeasible(f"{label + ': ' if label else ''}cannot fit in {capacity} bytes "
                         f"({capacity / GiB:.2f} GiB) of GPU memory: the plan of least memory "
                         f"the planner reaches holds {best.rendered_peak_bytes} bytes, {short} "
                         f"bytes ({short / GiB:.2f} GiB) short", short)


def _settled(build: _ModelBuilder, network: Network, batch: int, dtype: str, target: int,
             needs: dict[str, frozenset[int]], label: str) -> PlanResult:
    """The greedy plan for ``target`` bytes with the reads its recomputations induce held by
    its model: plan, add the reads the plan's recomputations induce to ``needs`` (in place),
    plan again until the model holds every read its plan makes (the reads only grow, so this
    ends). :class:`PlanInfeasible` where a model finds no plan (``needs`` then holds its
    reads)."""
    # the model cannot see that a recomputation reads its producer's inputs in the backward
    # pass until a plan recomputes
    for _ in range(NEEDS_ROUNDS):
        result = build.plan(target, needs, label)
        induced = induced_needs(network, batch, dtype, result.choices)
        grown = {t: needs.get(t, frozenset()) | induced.get(t, frozenset())
                 for t in set(needs) | set(induced)}
        if grown == needs:
            return result
        needs.clear()
        needs.update(grown)
    result = build.plan(target, needs, label)
    # priced with the reads this last plan induces, which the render will make
    grown = {t: needs.get(t, frozenset()) | at for t, at in induced_needs(
        network, batch, dtype, result.choices).items()}
    full = build(target, grown)
    priced = _result(full, _rows(full, result.choices))
    result.predicted_time_ps = priced.predicted_time_ps
    result.backward_end_ps = priced.backward_end_ps
    return result


def least_rows(model: PlanModel) -> np.ndarray:
    """Per tensor the row holding the fewest bytes over the slots (the least-memory plan of
    ``model``'s choices; the first such row on a tie)."""
    held = model.resident.sum(axis=1)
    out = []
    for t, options in enumerate(model.choices):
        first = int(model.first_row[t])
        out.append(first + int(np.argmin(held[first:first + len(options)])))
    return np.array(out, dtype=int)


def without_recompute(model: PlanModel) -> PlanModel:
    """``model`` with its recomputation rows left out. A plan without recomputation induces
    no backward reads, so a model built without induced reads holds every read such a plan
    makes: its peak is the render's, up to the model's second-order effects."""
    rows = np.flatnonzero(np.array(model.row_choice) != "recompute")
    choices = [tuple(c for c in options if c != "recompute") for options in model.choices]
    assert model.row_sm is not None
    return PlanModel(list(model.tensors), choices, model.row_tensor[rows],
                     [model.row_choice[r] for r in rows], model.resident[rows], model.fixed,
                     model.compute, model.row_slots[rows], model.row_costs[rows],
                     model.capacity,
                     np.cumsum([0] + [len(c) for c in choices])[:-1].astype(int),
                     model.row_sm[rows], dict(model.backward_slot), model.fixed_copies)


def fallback_plans(model: PlanModel, free: PlanModel, label: str = ""
                   ) -> tuple[list[PlanResult], bool]:
    """What to try where the greedy finds no plan of ``model`` (which holds the backward
    reads the recomputations of the plans before induced: they only grow, so they may hold
    reads no plan needs any more). ``free`` is the same model without those reads. First the
    greedy plan of ``free`` without recomputation (:func:`without_recompute`: no plan of it
    induces reads), where one fits it; else (and True) the least-memory plans, to be rendered
    and the one of least peak taken: each tensor's least row of ``model`` (which recomputes
    most, each rebuild holding its producer's inputs until it runs) and of ``free`` without
    recomputation (which holds no tensor for a rebuild)."""
    plain = without_recompute(free)
    try:
        return [plan_greedy(plain, label)], False
    except PlanInfeasible:
        return [_result(model, least_rows(model)), _result(plain, least_rows(plain))], True


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


#: the peaks :func:`plan_peak` replayed, by the plan (held, so its identity stands for it: the
#: schedules are shared read-only) and whether workspace counts; a policy ``auto`` run's
#: baseline asks again of every schedule its placements made
_PEAKS = PriceMemo(64)


def plan_peak(plan: Plan, workspace: bool = True) -> int:
    """The exact peak of ``plan``: its allocations replayed in issue order (without
    workspace buffers when ``workspace`` is False), less the gradients the GPU frees once
    their bucket is on the host (:func:`gradient_releases`). Worked out once per plan (treat
    plans as read-only once asked)."""
    peak: int = _PEAKS.of_object(plan, workspace, lambda: _replayed_peak(plan, workspace))
    return peak


def _replayed_peak(plan: Plan, workspace: bool) -> int:
    """:func:`plan_peak` worked out."""
    sizes = {t.name: t.bytes if workspace or t.kind != "workspace" else 0
             for t in plan.tensors}
    freed = {first: sum(sizes[t] for t in bucket)
             for first, bucket in gradient_releases(plan).items()}
    in_use = peak = 0
    for op in plan.ops():
        kind = op.op
        if kind == "alloc":
            in_use += sizes[op.name]
            if freed:
                in_use -= freed.get(op.name, 0)
            if in_use > peak:
                peak = in_use
        elif kind == "free":
            in_use -= sizes[op.name]
    return peak


def choices_counts(choices: Mapping[str, str], order: Sequence[str] = ("keep", "offload",
                                                                       "compress",
                                                                       "recompute")
                   ) -> dict[str, int]:
    """How many tensors take each choice."""
    return {c: sum(1 for v in choices.values() if v == c) for c in order}
