"""Flow-level bandwidth sharing (SimGrid-style): transfers are flows over resources, and the
resources' capacity is shared max-min fairly among the flows crossing them.

A flow moves ``amount`` units (raw bytes, say) and loads each resource on its path with
``weight`` bytes of that resource per unit: a cDMA offload of a tensor compressed 4x loads HBM
with weight 1 (it reads raw bytes) and PCIe with weight 0.25 (only compressed bytes cross it).
A flow may carry a rate cap (a kernel that cannot use DRAM faster than its compute allows).

Rates change only when a flow starts or ends, and each flow has one pending completion event:
exact for bandwidth-bound transfers, with a handful of events per transfer. Most starts and
ends need no solve at all. A flow that fits beside the others at its isolated rate leaves every
other rate as it was (a saturated resource could not have taken it, so each other flow keeps
its bottleneck); an end frees capacity that only flows running below their isolated rate can
use. Only when one of those tests fails are the connected flows re-solved by progressive
filling. ``tests/model/test_flows.py`` checks the rates against a from-scratch solution after
every start and end.

A re-solve brings every flow of the group up to now (its remaining amount, the time it lost),
and the results depend on that rounding: re-solving only the flows whose rates change, or
one solve for the completions of one instant, would round differently (and could move a
completion by a picosecond), so the solver does neither; what it saves is per flow (resources keyed by themselves, a layout
solved once for every node that meets it).
"""
from __future__ import annotations

import math
from heapq import heappush
from operator import attrgetter
from typing import Any, Callable, Optional

from sst_cdma.engine.kernel import EVENT_PRIORITY, PRIORITY_BITS, Service, SimulationError, Simulator

PS_PER_S = 1e12
_EPS = 1e-9
_FULL = 1 + 1e-9  # a resource loaded to within this factor of capacity counts as full
_FILL_MEMO_SIZE = 1 << 16  # solved layouts kept (a run of symmetric GPUs needs a few hundred)
#: route shape -> its number (the shapes of a run are few: one per kind of transfer)
_SHAPE_IDS: dict[tuple[tuple[float, float], ...], int] = {}


class Resource:
    """A shared capacity in units per second (e.g. HBM bandwidth in B/s)."""

    __slots__ = ("name", "capacity", "flows", "routes", "used", "_residual", "_load", "_net")

    def __init__(self, name: str, capacity: float, net: Optional["FlowNetwork"] = None) -> None:
        if not capacity > 0:
            raise SimulationError(f"resource {name}: capacity must be positive, got {capacity}")
        self.name = name
        self.capacity = float(capacity)
        self.flows: list[Flow] = []
        self.routes: list[tuple[Route, float]] = []  # every route through here, with its weight
        self.used = 0.0  # units per second the flows on it use now
        self._residual = 0.0  # scratch space of the max-min solver
        self._load = 0.0
        self._net = net

    @property
    def busy_units(self) -> float:
        """Units carried so far (the integral of used capacity over time), up to now: what
        finished flows moved, plus the progress of the flows still on this resource."""
        busy = 0.0
        for route, w in self.routes:
            busy += route.done * w
        now = self._net.sim.now if self._net is not None else 0
        for flow in self.flows:
            moved = flow.amount - flow.remaining + flow.rate * (now - flow.last_ps) / PS_PER_S
            busy += moved * flow.route.weight_of[self.name]
        return busy


class Route:
    """The resources a kind of transfer crosses and the units of each it uses per unit moved,
    resolved once (see :meth:`FlowNetwork.route`) and shared by every flow taking it."""

    __slots__ = ("pairs", "resources", "weight_of", "weight_at", "alone", "done", "shape",
                 "shape_id", "_durations")

    def __init__(self, pairs: list[tuple[Resource, float]]) -> None:
        self.pairs = pairs
        #: the resources alone, in route order (what the solver's walks read)
        self.resources = tuple(res for res, _ in pairs)
        self.weight_of = {res.name: w for res, w in pairs}
        #: the same weights keyed by the resource itself (no name to hash on the hot path)
        self.weight_at = {res: w for res, w in pairs}
        #: (capacity, weight) of each resource on the way: what the max-min solver reads
        self.shape = tuple((res.capacity, w) for res, w in pairs)
        #: one small number per distinct shape: what the solver's layout keys hold
        self.shape_id = _SHAPE_IDS.setdefault(self.shape, len(_SHAPE_IDS))
        # the rate a flow gets on this route when nothing else shares it
        self.alone = min([math.inf] + [res.capacity / w for res, w in pairs])
        self.done = 0.0  # units moved by finished flows, for the resources' busy time
        self._durations: dict[float, int] = {}
        for res, w in pairs:
            res.routes.append((self, w))

    def alone_ps(self, amount: float) -> int:
        """Duration of ``amount`` units alone on this route (memoized: bursts repeat sizes)."""
        t = self._durations.get(amount)
        if t is None:
            t = self._durations[amount] = _duration_ps(amount, self.alone)
        return t


class Flow:
    """One transfer in progress: remaining amount, current rate, its route and rate cap."""

    __slots__ = ("fid", "label", "amount", "remaining", "rate", "cap", "route", "on_done",
                 "last_ps", "version", "alone", "bottleneck", "lost")

    def __init__(self, fid: int, label: str, amount: float, route: Route, cap: float,
                 on_done: Callable[["Flow"], Any], now_ps: int) -> None:
        self.fid = fid
        self.label = label
        self.amount = self.remaining = amount
        self.rate = 0.0
        self.cap = cap
        self.route = route
        self.on_done = on_done
        self.last_ps = now_ps  # when ``remaining`` was last brought up to date
        self.version = 0  # bumped at each reschedule; -1 once finished
        self.alone = route.alone if cap >= route.alone else cap
        #: the saturated resource holding the flow below its isolated rate (None: none)
        self.bottleneck: Optional[Resource] = None
        #: resource name -> ps the flow lost there: the integral of (1 - rate / alone) while
        #: that resource held it back; they add up to its time beyond its isolated duration
        self.lost: Optional[dict[str, float]] = None

    def lost_ps(self, resource: str) -> float:
        """Picoseconds this flow lost at ``resource`` (see ``lost``)."""
        return self.lost.get(resource, 0.0) if self.lost else 0.0

    def note_lost(self, now_ps: int) -> None:
        """Charge the time since ``last_ps`` at the current rate to the bottleneck."""
        res = self.bottleneck
        if res is not None and now_ps > self.last_ps:
            if self.lost is None:
                self.lost = {}
            self.lost[res.name] = self.lost.get(res.name, 0.0) + \
                (1.0 - self.rate / self.alone) * (now_ps - self.last_ps)

    @property
    def weights(self) -> list[tuple[Resource, float]]:
        """(resource, units of it per unit moved) for each resource on the way."""
        return self.route.pairs


_fid = attrgetter("fid")


def _duration_ps(amount: float, rate: float) -> int:
    """Whole picoseconds to move ``amount`` at ``rate`` (rounded up; a hair of slack so that
    an exact multiple does not round up because of floating point)."""
    return math.ceil(amount / rate * PS_PER_S - _EPS) if amount > 0 else 0


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
    return _duration_ps(amount, rate)


class FlowNetwork(Service):
    """All resources and flows of one simulation: a declared service elements look up with
    ``self.service(FlowNetwork)`` (``sim.service(FlowNetwork)`` outside an element). Flows interact only through shared resources, so a start or an end
    re-solves just the flows connected to it, and each flow has its own completion event.

    A flow alone on its resources costs no solve at all: it starts at its route's isolated rate
    and its completion is a single event. This is the common case and the hot path of every
    model, so it is written out inline rather than through helpers."""

    def __init__(self, sim: Simulator) -> None:
        super().__init__(sim)
        self.resources: dict[str, Resource] = {}
        self._routes: dict[tuple[tuple[str, float], ...], Route] = {}
        self._next_id = 0
        #: layout of a group (see :meth:`_fill`) -> its rates and bottlenecks
        self._fills: dict[tuple, tuple[tuple[float, int], ...]] = {}

    def resource(self, name: str, capacity: float) -> Resource:
        """Register a resource; names are unique."""
        if name in self.resources:
            raise SimulationError(f"resource {name!r} registered twice")
        res = self.resources[name] = Resource(name, capacity, self)
        return res

    def route(self, weights: dict[str, float], label: str = "") -> Route:
        """Resolve ``{resource name: weight}`` into a :class:`Route` (the same object for the
        same weights, so a transfer split into bursts, or a kernel's DRAM traffic, reuses it)."""
        key = tuple(weights.items())
        route = self._routes.get(key)
        if route is not None:
            return route
        pairs = []
        for name, w in key:
            if w < 0:
                raise SimulationError(f"flow {label}: negative weight on {name}")
            if w > 0:
                if name not in self.resources:
                    raise SimulationError(f"flow {label}: unknown resource {name!r}")
                pairs.append((self.resources[name], float(w)))
        route = self._routes[key] = Route(pairs)
        return route

    def start(self, amount: float, weights: dict[str, float] | Route,
              on_done: Callable[[Flow], Any], cap: float = math.inf, label: str = "") -> Flow:
        """Start moving ``amount`` units over the named resources (or a :meth:`route`);
        ``on_done(flow)`` is called when the last unit arrives."""
        if amount < 0:
            raise SimulationError(f"flow {label}: negative amount {amount}")
        route = weights if type(weights) is Route else self.route(weights, label)  # type: ignore[arg-type]
        if not route.pairs and cap == math.inf:
            raise SimulationError(f"flow {label}: needs a rate cap or a resource")
        return self.launch(float(amount), route, on_done, cap, label)

    def launch(self, amount: float, route: Route, on_done: Callable[[Flow], Any],
               cap: float = math.inf, label: str = "") -> Flow:
        """:meth:`start` without its checks, for callers that hold a :class:`Route` and a
        non-negative amount (a transfer's bursts: the hot path of chunk mode)."""
        sim = self.sim
        flow = Flow(self._next_id, label, amount, route, cap, on_done, sim.now)
        self._next_id += 1
        rate = flow.alone
        fits = True  # can it run at its isolated rate without squeezing any resource?
        for res, w in route.pairs:
            if res.flows and res.used + rate * w > res.capacity * _FULL:
                fits = False
            res.flows.append(flow)
        if fits:
            # Then nobody's rate changes: every other flow keeps its bottleneck (a saturated
            # resource could not have taken this one), and this one runs at its isolated rate.
            flow.rate = rate
            flow.version = 1
            for res, w in route.pairs:
                res.used += rate * w
            t = route.alone_ps(flow.amount) if rate == route.alone \
                else _duration_ps(flow.amount, rate)
            key = ((sim.now + t) << PRIORITY_BITS) | EVENT_PRIORITY
            bucket = sim._buckets.get(key)
            if bucket is None:
                sim._buckets[key] = [(self._on_timer, (flow, 1))]
                heappush(sim._keys, key)
            else:
                bucket.append((self._on_timer, (flow, 1)))
        else:
            self._resolve(self._connected([flow]))
        return flow

    # -- internals -----------------------------------------------------------------------------
    @staticmethod
    def _connected(seeds: list[Flow]) -> list[Flow]:
        """Every flow that shares a resource, directly or through others, with ``seeds``."""
        seen = set(seeds)
        found = list(seen)
        walked: set[Resource] = set()  # each resource's flows are looked at once
        for f in found:  # grows as the walk finds more
            for res in f.route.resources:
                if res not in walked:
                    walked.add(res)
                    for other in res.flows:
                        if other not in seen:
                            seen.add(other)
                            found.append(other)
        if len(found) == 1:
            return seeds
        found.sort(key=_fid)  # flow order: by id
        return found

    def _resolve(self, group: list[Flow]) -> None:
        """Max-min fair rates for ``group`` (progressive filling), then (re)schedule the
        completion of every flow whose rate changed."""
        sim = self.sim
        now = sim.now
        old = []
        touched: set[Resource] = set()
        for f in group:  # bring every flow forward to now at its old rate
            last = f.last_ps
            if now > last:
                held = f.bottleneck
                if held is not None:  # Flow.note_lost, written out
                    lost = f.lost
                    if lost is None:
                        lost = f.lost = {}
                    lost[held.name] = lost.get(held.name, 0.0) + \
                        (1.0 - f.rate / f.alone) * (now - last)
                f.remaining -= f.rate * (now - last) / PS_PER_S
                f.last_ps = now
            old.append(f.rate)
            touched.update(f.route.resources)
        if len(group) == 1:
            group[0].rate = group[0].alone
            group[0].bottleneck = None
        else:
            self._fill(group)
        for res in touched:  # each resource's use, added up in its flows' order
            used = 0.0
            for f in res.flows:
                used += f.rate * f.route.weight_at[res]
            res.used = used
        buckets = sim._buckets
        on_timer = self._on_timer
        for f, before in zip(group, old):
            if f.rate != before or f.version == 0:
                f.version += 1
                if f.rate > 0:
                    t = _duration_ps(f.remaining, f.rate) if f.remaining > 0 else 0
                    key = ((now + max(t, 0)) << PRIORITY_BITS) | EVENT_PRIORITY
                    if key < sim._current_key:  # past this instant's priority: refused there
                        sim.schedule(now + max(t, 0), on_timer, (f, f.version), EVENT_PRIORITY)
                        continue
                    bucket = buckets.get(key)
                    if bucket is None:
                        buckets[key] = [(on_timer, (f, f.version))]
                        heappush(sim._keys, key)
                    else:
                        bucket.append((on_timer, (f, f.version)))

    def _fill(self, group: list[Flow]) -> None:
        """Max-min fair rates and bottlenecks for ``group``, solved once per layout.

        Progressive filling reads nothing but the group's layout: in flow order, each flow's
        rate cap and route shape (capacity and weight of each resource; a number per distinct
        shape stands for it in the key) and which resources the flows share. Symmetric GPUs in lockstep and repeated iterations meet the same
        layouts over and over, in every node, so the solution of a layout is kept and
        reused: the same arithmetic on the same numbers, hence the very same rates.

        A group of one flow listed several times (the one neighbour left on several of a
        finished flow's resources) is filled as it is: each copy adds its share to the one
        flow, which no layout of distinct flows says."""
        if group[0] is group[1]:
            self._progressive_fill(group)
            return
        slot: dict[Resource, int] = {}
        place = slot.setdefault  # a resource's slot: the order the group first meets it in
        key: list = []
        add = key.append
        for f in group:
            route = f.route
            add(f.cap)
            add(route.shape_id)
            for res in route.resources:
                add(place(res, len(slot)))
        layout = tuple(key)
        solved = self._fills.get(layout)
        if solved is None:
            self._progressive_fill(group)
            where = {res: i for i, res in enumerate(slot)}
            solved = tuple((f.rate, -1 if f.bottleneck is None else where[f.bottleneck])
                           for f in group)
            if len(self._fills) >= _FILL_MEMO_SIZE:
                self._fills.clear()
            self._fills[layout] = solved
            return
        resources = list(slot)
        for f, (rate, at) in zip(group, solved):
            f.rate = rate
            f.bottleneck = None if at < 0 else resources[at]

    @staticmethod
    def _progressive_fill(group: list[Flow]) -> None:
        """Max-min fair rates for ``group`` from scratch: raise every unfrozen flow's rate
        alike until a resource fills or a flow reaches its cap, freeze those, repeat."""
        for f in group:
            f.rate = 0.0
            f.bottleneck = None
            for res, _ in f.route.pairs:
                res._residual = res.capacity
        active = group
        while active:
            loaded: list[Resource] = []
            for f in active:
                for res, _ in f.route.pairs:
                    res._load = 0.0
            for f in active:
                for res, w in f.route.pairs:
                    if res._load == 0.0:
                        loaded.append(res)
                    res._load += w
            delta = math.inf
            for res in loaded:
                delta = min(delta, res._residual / res._load)
            for f in active:
                delta = min(delta, f.cap - f.rate)
            delta = max(delta, 0.0)
            for f in active:
                f.rate += delta
                for res, w in f.route.pairs:
                    res._residual -= delta * w
            limit = _EPS * max(1.0, delta)
            still = []
            for f in active:
                if f.cap - f.rate <= _EPS * max(1.0, f.rate):
                    f.rate = f.cap
                    continue
                full = next((res for res, _ in f.route.pairs if res._residual <= limit), None)
                if full is None:
                    still.append(f)
                else:
                    f.bottleneck = full
            active = still
        for f in group:
            # A flow that got what it would get alone takes exactly that rate, so that an
            # uncontended transfer lasts exactly what the closed-form model says.
            if abs(f.rate - f.alone) <= 1e-9 * f.alone:
                f.rate = f.alone
            if f.rate >= f.alone:
                f.bottleneck = None

    def _on_timer(self, item: tuple[Flow, int]) -> None:
        flow, version = item
        if version != flow.version:
            return  # the rate changed since this completion was scheduled, or it is done
        flow.version = -1
        if flow.bottleneck is not None:
            flow.note_lost(self.sim.now)
        route = flow.route
        route.done += flow.amount
        squeezed = False  # does a flow left on these resources run below its isolated rate?
        rate = flow.rate
        for res, w in route.pairs:
            flows = res.flows
            flows.remove(flow)
            if flows:
                res.used -= rate * w
                if not squeezed:
                    for other in flows:
                        if other.rate != other.alone:
                            squeezed = True
                            break
            else:
                res.used = 0.0
        flow.remaining = 0.0
        if squeezed:
            # only flows below their isolated rate can gain from the freed capacity
            neighbours = []
            for res in route.resources:
                neighbours.extend(res.flows)
            self._resolve(self._connected(neighbours))
        flow.on_done(flow)

    def utilization(self, name: str, elapsed_ps: int) -> float:
        """Average fraction of ``name``'s capacity used over ``elapsed_ps``."""
        res = self.resources[name]
        return res.busy_units / (res.capacity * elapsed_ps / PS_PER_S) if elapsed_ps else 0.0
