"""Flow-level bandwidth sharing (SimGrid-style): transfers are flows over resources, and the
resources' capacity is shared max-min fairly among the flows crossing them.

A flow moves ``amount`` units (raw bytes, say) and loads each resource on its path with
``weight`` bytes of that resource per unit: a cDMA offload of a tensor compressed 4x loads HBM
with weight 1 (it reads raw bytes) and PCIe with weight 0.25 (only compressed bytes cross it).
A flow may carry a rate cap (a kernel that cannot use DRAM faster than its compute allows).

Rates change only when a flow starts or ends, so the solver runs once per such event and the
simulation schedules a single event for the next completion: exact for bandwidth-bound
transfers, with a handful of events per transfer.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from .kernel import EVENT_PRIORITY, SimulationError, Simulator

PS_PER_S = 1e12
_EPS = 1e-9


class Resource:
    """A shared capacity in units per second (e.g. HBM bandwidth in B/s)."""

    __slots__ = ("name", "capacity", "busy_units", "flows")

    def __init__(self, name: str, capacity: float) -> None:
        if not capacity > 0:
            raise SimulationError(f"resource {name}: capacity must be positive, got {capacity}")
        self.name = name
        self.capacity = float(capacity)
        self.busy_units = 0.0   # integral of used capacity over time (units)
        self.flows: list[Flow] = []


class Flow:
    """One transfer in progress: remaining amount, current rate, its resources and weights."""

    __slots__ = ("fid", "label", "amount", "remaining", "rate", "cap", "weights", "on_done",
                 "started_ps")

    def __init__(self, fid: int, label: str, amount: float, weights: list[tuple[Resource, float]],
                 cap: float, on_done: Callable[["Flow"], Any], started_ps: int) -> None:
        self.fid = fid
        self.label = label
        self.amount = float(amount)
        self.remaining = float(amount)
        self.rate = 0.0
        self.cap = cap
        self.weights = weights
        self.on_done = on_done
        self.started_ps = started_ps


def isolated_duration_ps(amount: float, weights: list[tuple[float, float]],
                         cap: float = math.inf) -> int:
    """Time a flow takes when it is alone on its resources: ``weights`` lists (capacity,
    weight) pairs. The closed-form model uses the same arithmetic, so both agree exactly."""
    rate = cap
    for capacity, weight in weights:
        if weight > 0:
            rate = min(rate, capacity / weight)
    if math.isinf(rate):
        raise SimulationError("a flow needs a rate cap or at least one resource")
    return math.ceil(amount / rate * PS_PER_S - _EPS) if amount > 0 else 0


class FlowNetwork:
    """All resources and flows of one simulation (a shared service components look up with
    ``FlowNetwork.of(sim)``)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.resources: dict[str, Resource] = {}
        self.flows: list[Flow] = []
        self._next_id = 0
        self._last_ps = 0
        self._version = 0
        self.solves = 0

    @classmethod
    def of(cls, sim: Simulator) -> "FlowNetwork":
        """The simulation's flow network (created on first use)."""
        net = getattr(sim, "_flow_network", None)
        if net is None:
            net = cls(sim)
            sim._flow_network = net  # type: ignore[attr-defined]
        return net

    def resource(self, name: str, capacity: float) -> Resource:
        """Register a resource; names are unique."""
        if name in self.resources:
            raise SimulationError(f"resource {name!r} registered twice")
        res = self.resources[name] = Resource(name, capacity)
        return res

    def start(self, amount: float, weights: dict[str, float], on_done: Callable[[Flow], Any],
              cap: float = math.inf, label: str = "") -> Flow:
        """Start moving ``amount`` units over the named resources; ``on_done(flow)`` is called
        when the last unit arrives."""
        if amount < 0:
            raise SimulationError(f"flow {label}: negative amount {amount}")
        pairs = []
        for name, w in weights.items():
            if w < 0:
                raise SimulationError(f"flow {label}: negative weight on {name}")
            if w > 0:
                if name not in self.resources:
                    raise SimulationError(f"flow {label}: unknown resource {name!r}")
                pairs.append((self.resources[name], float(w)))
        if not pairs and math.isinf(cap):
            raise SimulationError(f"flow {label}: needs a rate cap or a resource")
        self._advance()
        flow = Flow(self._next_id, label, amount, pairs, cap, on_done, self.sim.now)
        self._next_id += 1
        self.flows.append(flow)
        for res, _ in pairs:
            res.flows.append(flow)
        self._solve()
        return flow

    # -- internals -----------------------------------------------------------------------------
    def _advance(self) -> None:
        """Move every flow forward to now at its current rate."""
        now = self.sim.now
        dt = (now - self._last_ps) / PS_PER_S
        if dt > 0:
            for flow in self.flows:
                moved = flow.rate * dt
                flow.remaining -= moved
                for res, w in flow.weights:
                    res.busy_units += moved * w
        self._last_ps = now

    def _solve(self) -> None:
        """Max-min fair rates by progressive filling, then schedule the next completion."""
        self.solves += 1
        active = [f for f in self.flows]
        for f in active:
            f.rate = 0.0
        residual = {id(r): r.capacity for r in self.resources.values()}
        while active:
            load: dict[int, float] = {}
            for f in active:
                for res, w in f.weights:
                    load[id(res)] = load.get(id(res), 0.0) + w
            delta = math.inf
            for rid, total in load.items():
                delta = min(delta, residual[rid] / total)
            for f in active:
                delta = min(delta, f.cap - f.rate)
            if math.isinf(delta):
                raise SimulationError("flow without capacity limit")
            delta = max(delta, 0.0)
            for f in active:
                f.rate += delta
                for res, w in f.weights:
                    residual[id(res)] -= delta * w
            saturated = {rid for rid in load if residual[rid] <= _EPS * max(1.0, delta)}
            still = []
            for f in active:
                if f.cap - f.rate <= _EPS * max(1.0, f.rate):
                    f.rate = f.cap
                elif not any(id(res) in saturated for res, _ in f.weights):
                    still.append(f)
            active = still
        for f in self.flows:
            # A flow that got what it would get alone takes exactly that rate, so that an
            # uncontended transfer lasts exactly what the closed-form model says.
            alone = min([f.cap] + [res.capacity / w for res, w in f.weights])
            if abs(f.rate - alone) <= 1e-9 * alone:
                f.rate = alone
        self._schedule_next()

    def _schedule_next(self) -> None:
        self._version += 1
        best: Optional[int] = None
        for f in self.flows:
            if f.rate <= 0:
                continue
            t = math.ceil(f.remaining / f.rate * PS_PER_S - _EPS) if f.remaining > 0 else 0
            if best is None or t < best:
                best = t
        if best is not None:
            self.sim.schedule(self.sim.now + max(best, 0), self._on_timer, self._version,
                              EVENT_PRIORITY)

    def _on_timer(self, version: int) -> None:
        if version != self._version:
            return  # rates changed since this completion was scheduled
        self._advance()
        done = [f for f in self.flows
                if f.remaining <= 0 or (f.rate > 0 and f.remaining / f.rate * PS_PER_S < 1.0)]
        for f in done:
            self.flows.remove(f)
            for res, _ in f.weights:
                res.flows.remove(f)
            f.remaining = 0.0
        self._solve()
        for f in done:
            f.on_done(f)

    def utilization(self, name: str, elapsed_ps: int) -> float:
        """Average fraction of ``name``'s capacity used over ``elapsed_ps``."""
        self._advance()
        res = self.resources[name]
        return res.busy_units / (res.capacity * elapsed_ps / PS_PER_S) if elapsed_ps else 0.0
