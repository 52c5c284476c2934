"""The planner's model and greedy as they were before issue 35 made them fast (a mask per row,
numpy over every slot at each step), kept beside the tests only to prove that
:func:`workloads.planner.build_model` builds the same model and
:func:`workloads.planner.plan_greedy` chooses the same plan: the same rows applied in the same
order, so the same choices, predicted time and peak, and the same refusal where nothing
fits."""
from __future__ import annotations

import heapq

import numpy as np

from typing import Callable, Collection, Mapping, Optional, Sequence

from components.messages import CopyCost
from workloads.network import LayerInfo, Network, TensorInfo
from workloads.plan import Plan
from workloads.planner import (GiB, LAZY_SLACK, REFRESH, PlanInfeasible, PlanModel, PlanResult,
                               _keep_slots, _needs, _options, _positions, _result,
                               _sm_kernels, _streams, _time_deltas)


def reference_build_model(network: Network, batch: int, dtype: str, base: Plan,
                kernel_ps: Callable[[object], int], capacity: int,
                copy_costs: Optional[Mapping[str, CopyCost]] = None,
                elastic_workspace: bool = False,
                extra_needs: Optional[Mapping[str, Collection[int]]] = None,
                transfer_ps: Optional[Callable[[object, int], int]] = None) -> PlanModel:
    """The cost model, built row by row as it was before issue 35."""
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
            mask, slot, cost = _reference_row(choice, ti, span, need[ti.name], infos, fpos, bpos, n,
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


def _reference_row(choice: str, ti: TensorInfo, span: tuple[int, int], need: Sequence[int],
         infos: Sequence[LayerInfo], fpos: Mapping[str, int], bpos: Mapping[str, int], n: int,
         fwd_ps: Mapping[str, int], copy_costs: Optional[Mapping[str, CopyCost]]
         ) -> tuple[np.ndarray, tuple[int, int, int], tuple[float, float, float]]:
    """One candidate row as a mask of slots, as it was made before issue 35."""
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


def reference_lower_bound(model: PlanModel) -> int:
    """The least any plan can hold in its fullest slot, tensor by tensor."""
    least = np.zeros(model.fixed.shape)
    for t in range(len(model.tensors)):
        rows = np.arange(model.first_row[t], model.first_row[t] + len(model.choices[t]))
        least += model.resident[rows].min(axis=0)
    return int((model.fixed + least).max())


def _check_feasible(model: PlanModel, label: str = "") -> None:
    bound = reference_lower_bound(model)
    if bound > model.capacity:
        short = bound - model.capacity
        raise PlanInfeasible(
            f"{label + ': ' if label else ''}cannot fit in {model.capacity} bytes "
            f"({model.capacity / GiB:.2f} GiB) of GPU memory even with every activation "
            f"offloaded or recomputed: {short} bytes ({short / GiB:.2f} GiB) short", short)


def _excess(memory: np.ndarray, capacity: float) -> np.ndarray:
    return np.clip(memory - capacity, 0, None).sum(axis=-1)


class _State:
    """The greedy's current plan as whole-slot arrays."""

    def __init__(self, model: PlanModel) -> None:
        self.model = model
        self.current = model.first_row.copy()
        self.memory = model.memory(self.current)
        self.copies, self.rec = _streams(model, self.current)
        self.times = np.maximum(model.compute + self.rec, self.copies)

    def _delta(self, row: int) -> np.ndarray:
        m = self.model
        return m.resident[row] - m.resident[self.current[m.row_tensor[row]]]

    def score(self, row: int, excess: float, cap: float) -> float | None:
        """Excess removed per picosecond added (None: it removes none)."""
        gain = excess - _excess(self.memory + self._delta(row), cap)
        if gain <= 0:
            return None
        return float(gain / max(self.time_delta(row), 1.0))

    def fits(self, row: int, cap: float) -> bool:
        """Every slot within ``cap`` after switching to ``row``."""
        return bool((self.memory + self._delta(row) <= cap).all())

    def time_delta(self, row: int) -> float:
        """The predicted time's change if ``row``'s tensor switched to it."""
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
        m = self.model
        t = m.row_tensor[row]
        old = self.current[t]
        self.current = self.current.copy()
        self.current[t] = row
        self.memory = self.memory - m.resident[old] + m.resident[row]
        self.copies = self.copies.copy()
        self.rec = self.rec.copy()
        for k in (0, 1):
            self.copies[m.row_slots[old, k]] -= m.row_costs[old, k]
            self.copies[m.row_slots[row, k]] += m.row_costs[row, k]
        for k in m.compute_cols:
            self.rec[m.row_slots[old, k]] -= m.row_compute[old, k]
            self.rec[m.row_slots[row, k]] += m.row_compute[row, k]
        self.times = np.maximum(m.compute + self.rec, self.copies)


def plan_greedy_reference(model: PlanModel, label: str = "") -> PlanResult:
    """The greedy plan, computed the old way (see the module)."""
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
