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

    __slots__ = ("name", "capacity", "_busy", "flows", "_net")

    def __init__(self, name: str, capacity: float, net: Optional["FlowNetwork"] = None) -> None:
        if not capacity > 0:
            raise SimulationError(f"resource {name}: capacity must be positive, got {capacity}")
        self.name = name
        self.capacity = float(capacity)
        self._busy = 0.0
        self.flows: list[Flow] = []
        self._net = net

    @property
    def busy_units(self) -> float:
        """Units carried so far (the integral of used capacity over time), up to now."""
        if self._net is not None:
            for flow in self.flows:
                self._net._advance(flow)
        return self._busy


class Flow:
    """One transfer in progress: remaining amount, current rate, its resources and weights."""

    __slots__ = ("fid", "label", "amount", "remaining", "rate", "cap", "weights", "on_done",
                 "started_ps", "last_ps", "version", "alone")

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
        self.last_ps = started_ps
        self.version = 0
        # the rate this flow gets when nothing else shares its resources
        self.alone = min([cap] + [res.capacity / w for res, w in weights])


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
    ``FlowNetwork.of(sim)``). Flows interact only through shared resources, so a start or an end
    re-solves just the flows connected to it, and each flow has its own completion event."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.resources: dict[str, Resource] = {}
        self.flows: set[Flow] = set()
        self._next_id = 0
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
        res = self.resources[name] = Resource(name, capacity, self)
        return res

    def route(self, weights: dict[str, float], label: str = "") -> list[tuple[Resource, float]]:
        """Resolve ``{resource name: weight}`` once into the form :meth:`start` takes fastest
        (a transfer split into bursts reuses it for every burst)."""
        pairs = []
        for name, w in weights.items():
            if w < 0:
                raise SimulationError(f"flow {label}: negative weight on {name}")
            if w > 0:
                if name not in self.resources:
                    raise SimulationError(f"flow {label}: unknown resource {name!r}")
                pairs.append((self.resources[name], float(w)))
        return pairs

    def start(self, amount: float, weights: dict[str, float] | list[tuple[Resource, float]],
              on_done: Callable[[Flow], Any], cap: float = math.inf, label: str = "") -> Flow:
        """Start moving ``amount`` units over the named resources (or a :meth:`route`);
        ``on_done(flow)`` is called when the last unit arrives."""
        if amount < 0:
            raise SimulationError(f"flow {label}: negative amount {amount}")
        pairs = self.route(weights, label) if isinstance(weights, dict) else weights
        if not pairs and math.isinf(cap):
            raise SimulationError(f"flow {label}: needs a rate cap or a resource")
        flow = Flow(self._next_id, label, amount, pairs, cap, on_done, self.sim.now)
        self._next_id += 1
        self.flows.add(flow)
        alone = True
        for res, _ in pairs:
            if res.flows:
                alone = False
            res.flows.append(flow)
        if alone:  # nothing to share with: the isolated rate, one completion event
            flow.rate = flow.alone
            flow.version = 1
            t = math.ceil(flow.remaining / flow.rate * PS_PER_S - _EPS) if amount > 0 else 0
            self.sim.schedule(self.sim.now + max(t, 0), self._on_timer, (flow, 1))
        else:
            self._resolve(self._connected([flow]))
        return flow

    # -- internals -----------------------------------------------------------------------------
    def _advance(self, flow: Flow) -> None:
        """Move ``flow`` forward to now at its current rate."""
        now = self.sim.now
        if now > flow.last_ps:
            moved = flow.rate * (now - flow.last_ps) / PS_PER_S
            flow.remaining -= moved
            for res, w in flow.weights:
                res._busy += moved * w
            flow.last_ps = now

    @staticmethod
    def _connected(seeds: list[Flow]) -> list[Flow]:
        """Every flow that shares a resource, directly or through others, with ``seeds``."""
        if len(seeds) == 1 and all(len(res.flows) == 1 for res, _ in seeds[0].weights):
            return seeds  # the common case: a flow alone on its resources
        seen = {f.fid: f for f in seeds}
        todo = list(seeds)
        while todo:
            for res, _ in todo.pop().weights:
                for other in res.flows:
                    if other.fid not in seen:
                        seen[other.fid] = other
                        todo.append(other)
        return sorted(seen.values(), key=lambda f: f.fid)

    def _resolve(self, group: list[Flow]) -> None:
        """Max-min fair rates for ``group`` (progressive filling), then (re)schedule the
        completion of every flow whose rate changed."""
        self.solves += 1
        for f in group:
            self._advance(f)
        old = [f.rate for f in group]
        if len(group) == 1:
            group[0].rate = group[0].alone
        else:
            self._fill(group)
        for f, before in zip(group, old):
            if f.rate != before or f.version == 0:
                f.version += 1
                if f.rate > 0:
                    t = math.ceil(f.remaining / f.rate * PS_PER_S - _EPS) if f.remaining > 0 else 0
                    self.sim.schedule(self.sim.now + max(t, 0), self._on_timer, (f, f.version),
                                      EVENT_PRIORITY)

    @staticmethod
    def _fill(group: list[Flow]) -> None:
        for f in group:
            f.rate = 0.0
        residual: dict[int, float] = {}
        for f in group:
            for res, _ in f.weights:
                residual[id(res)] = res.capacity
        active = list(group)
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
        for f in group:
            # A flow that got what it would get alone takes exactly that rate, so that an
            # uncontended transfer lasts exactly what the closed-form model says.
            if abs(f.rate - f.alone) <= 1e-9 * f.alone:
                f.rate = f.alone

    def _on_timer(self, item: tuple[Flow, int]) -> None:
        flow, version = item
        if version != flow.version or flow not in self.flows:
            return  # the rate changed since this completion was scheduled
        self._advance(flow)
        self.flows.discard(flow)
        neighbours = []
        for res, _ in flow.weights:
            res.flows.remove(flow)
            neighbours.extend(res.flows)
        flow.remaining = 0.0
        if neighbours:
            self._resolve(self._connected(neighbours))
        flow.on_done(flow)

    def utilization(self, name: str, elapsed_ps: int) -> float:
        """Average fraction of ``name``'s capacity used over ``elapsed_ps``."""
        res = self.resources[name]
        return res.busy_units / (res.capacity * elapsed_ps / PS_PER_S) if elapsed_ps else 0.0
