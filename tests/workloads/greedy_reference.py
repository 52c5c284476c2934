"""The greedy planner as it was before issue 35 made it fast (numpy over every slot at each
step), kept beside the tests only to prove that :func:`workloads.planner.plan_greedy` chooses
the same plan: the same rows applied in the same order, so the same choices, predicted time
and peak, and the same refusal where nothing fits."""
from __future__ import annotations

import heapq

import numpy as np

from workloads.planner import (GiB, LAZY_SLACK, REFRESH, PlanInfeasible, PlanModel, PlanResult,
                               _check_feasible, _result, _streams, _time_deltas)


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
