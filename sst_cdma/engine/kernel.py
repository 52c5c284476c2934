"""The discrete-event kernel: integer-picosecond time, links with per-end latency, clocks,
untimed init-phase messages and the end-of-simulation rule.

Events are delivered in (time, priority, order of sending) order, as in SST-core's TimeVortex.
The queue is a calendar of buckets: a dict from (time, priority) key to the list of
(handler, event) pairs due then, in sending order, plus a binary heap of the distinct keys. Most
sends land in a bucket that already exists (a dict lookup and a list append); the heap only
sees each distinct (time, priority) once, so the loop costs about one call per event.
Services the elements of a simulation share (the flow network) hang off the simulator by class
(:meth:`Simulator.service`). Nothing in here depends on wall-clock time or on hashing, so a run
is reproducible bit for bit.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Callable, Optional, TypeVar

# SST-core's activity priorities: at equal time a lower number runs first.
STOP_PRIORITY = 30
CLOCK_PRIORITY = 40
EVENT_PRIORITY = 50
STATISTIC_PRIORITY = 85
EXIT_PRIORITY = 99
PRIORITY_BITS = 7  # a queue key is time << PRIORITY_BITS | priority

Handler = Callable[[Any], Any]
_heappush = heapq.heappush


class SimulationError(RuntimeError):
    """A fault detected while the simulation runs (a component broke the model's rules)."""


class Service:
    """Base class of a simulation-wide service: one instance per simulation, shared by every
    element that asks for it with :meth:`Simulator.service` (``Element.service``). A service
    is declared by subclassing this; its constructor takes the simulator and nothing else.
    The flow network (``sst_cdma.engine.flows.FlowNetwork``) is one."""

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim


S = TypeVar("S", bound=Service)


class _Stop(Exception):
    """Raised inside the loop by the stop/exit actions; never escapes :meth:`Simulator.run`."""


class LinkEnd:
    """One end of a link as a component sees it: ``send`` delivers to the other end's handler
    after this end's latency plus an optional extra delay (both in picoseconds)."""

    __slots__ = ("name", "port", "latency", "_sim", "_peer", "_handler", "_target", "_dest",
                 "_buckets", "_keys", "_untimed_in", "_polled")

    def __init__(self, sim: "Simulator", name: str, port: str, latency_ps: int) -> None:
        self.name = name
        self.port = port
        self.latency = latency_ps
        self._sim = sim
        self._peer: Optional[LinkEnd] = None
        self._handler: Optional[Handler] = None
        self._untimed_in: deque = deque()
        self._polled: deque = deque()
        self._target: Handler = self._polled.append  # what the far end's send() calls
        self._dest: Optional[Handler] = None          # the peer's _target, cached for send()
        self._buckets = sim._buckets
        self._keys = sim._keys

    @property
    def peer(self) -> Optional["LinkEnd"]:
        """The far end of the link."""
        return self._peer

    @peer.setter
    def peer(self, other: "LinkEnd") -> None:
        self._peer = other
        self._dest = other._target

    @property
    def handler(self) -> Optional[Handler]:
        """The function events arriving on this end are delivered to (None: polled)."""
        return self._handler

    @handler.setter
    def handler(self, fn: Optional[Handler]) -> None:
        self._handler = fn
        self._target = fn if fn is not None else self._polled.append
        if self._peer is not None:
            self._peer._dest = self._target

    def send(self, event: Any, delay_ps: int = 0) -> None:
        """Deliver ``event`` to the far end ``latency + delay_ps`` picoseconds from now."""
        key = ((self._sim.now + self.latency + delay_ps) << PRIORITY_BITS) | EVENT_PRIORITY
        bucket = self._buckets.get(key)
        if bucket is None:
            self._buckets[key] = [(self._dest, event)]
            _heappush(self._keys, key)
        else:
            bucket.append((self._dest, event))

    def recv(self) -> Any:
        """Return the next event queued on a polling link (one configured with no handler)."""
        return self._polled.popleft() if self._polled else None

    def send_untimed(self, data: Any) -> None:
        """Send untimed data during the init phases (SST's ``sendUntimedData``)."""
        if self._sim.phase != "init":
            raise SimulationError(f"link {self.name}: send_untimed is only allowed during init")
        if self._peer is None:
            raise SimulationError(f"link {self.name}: send_untimed on an end with no far end")
        self._peer._untimed_in.append(data)
        self._sim._untimed_sent += 1

    def recv_untimed(self) -> Any:
        """Return the next untimed datum that arrived on this end, or None."""
        return self._untimed_in.popleft() if self._untimed_in else None


class Clock:
    """A clock at a fixed period; every handler is called with the cycle number on each tick and
    is removed when it returns True."""

    __slots__ = ("period", "handlers", "_sim", "_scheduled")

    def __init__(self, sim: "Simulator", period_ps: int) -> None:
        self.period = period_ps
        self.handlers: list[Callable[[int], Any]] = []
        self._sim = sim
        self._scheduled = False

    def _schedule_next(self) -> None:
        sim = self._sim
        nxt = (sim.now // self.period + 1) * self.period
        sim.schedule(nxt, self._tick, None, CLOCK_PRIORITY)
        self._scheduled = True

    def _tick(self, _: Any) -> None:
        cycle = self._sim.now // self.period
        keep = [h for h in self.handlers if not h(cycle)]
        self.handlers = keep
        self._scheduled = False
        if keep:
            self._schedule_next()


#: the run calls its ``progress`` hook after about this many events, and again after as many
PROGRESS_EVERY = 1 << 14


class Simulator:
    """Owns simulated time, the event queue, clocks and the primary-component bookkeeping."""

    def __init__(self) -> None:
        self.now: int = 0
        self.phase: str = "construct"
        self._keys: list[int] = []
        self._buckets: dict[int, list] = {}
        self._current_key = -1
        self._clocks: dict[int, Clock] = {}
        self._primaries: set[str] = set()
        self._primaries_not_done: set[str] = set()
        self._untimed_sent = 0
        self._services: dict[type, Service] = {}
        self.events_delivered = 0
        self.end_reason = ""
        #: called as ``progress(now_ps, events)`` every few thousand event times (None: never)
        self.progress: Optional[Callable[[int, int], None]] = None

    # -- scheduling -------------------------------------------------------------------------
    def schedule(self, time_ps: int, handler: Handler, event: Any = None,
                 priority: int = EVENT_PRIORITY) -> None:
        """Call ``handler(event)`` at absolute time ``time_ps``; at the current time only with a
        priority not yet passed (a lower number runs first)."""
        if not 0 <= priority < (1 << PRIORITY_BITS):
            raise SimulationError(f"priority {priority} out of range")
        key = (time_ps << PRIORITY_BITS) | priority
        if key < self._current_key:
            raise SimulationError(f"cannot schedule in the past ({time_ps} ps, priority "
                                  f"{priority}; now {self.now} ps)")
        bucket = self._buckets.get(key)
        if bucket is None:
            self._buckets[key] = [(handler, event)]
            heapq.heappush(self._keys, key)
        else:
            bucket.append((handler, event))

    def service(self, kind: type[S]) -> S:
        """This simulation's instance of service ``kind`` (a :class:`Service` subclass),
        created with ``kind(self)`` the first time anyone asks for it."""
        found = self._services.get(kind)
        if found is None:
            if not (isinstance(kind, type) and issubclass(kind, Service)):
                raise SimulationError(f"{getattr(kind, '__name__', kind)!r} is not a declared "
                                      "service (a subclass of sst_cdma.engine.kernel.Service)")
            found = self._services[kind] = kind(self)
        return found  # type: ignore[return-value]

    def pending(self) -> bool:
        """True while events other than the one being delivered are queued."""
        return bool(self._keys)

    def make_link(self, name: str, port_a: str, latency_a: int, port_b: str,
                  latency_b: int) -> tuple[LinkEnd, LinkEnd]:
        """Create the two ends of a link; end A sends with ``latency_a``, end B with ``latency_b``."""
        a = LinkEnd(self, name, port_a, latency_a)
        b = LinkEnd(self, name, port_b, latency_b)
        a.peer, b.peer = b, a
        return a, b

    def make_self_link(self, name: str, latency_ps: int) -> LinkEnd:
        """Create a link whose single end delivers to itself."""
        end = LinkEnd(self, name, name, latency_ps)
        end.peer = end
        return end

    def register_clock(self, period_ps: int, handler: Callable[[int], Any]) -> Clock:
        """Call ``handler(cycle)`` every ``period_ps`` until it returns True."""
        if period_ps <= 0:
            raise SimulationError(f"clock period must be positive, got {period_ps} ps")
        clock = self._clocks.get(period_ps)
        if clock is None:
            clock = self._clocks[period_ps] = Clock(self, period_ps)
        clock.handlers.append(handler)
        if not clock._scheduled and self.phase in ("setup", "run"):
            clock._schedule_next()
        return clock

    # -- end of simulation ---------------------------------------------------------------------
    def register_primary(self, name: str) -> None:
        """Mark a component as primary: the run ends once every primary says it may."""
        self._primaries.add(name)
        self._primaries_not_done.add(name)

    def primary_do_not_end(self, name: str) -> None:
        """A primary component withdraws its permission to end."""
        self._primaries_not_done.add(name)

    def primary_ok_to_end(self, name: str) -> None:
        """A primary component allows the run to end; when all have, the run exits at this time."""
        self._primaries_not_done.discard(name)
        if self._primaries and not self._primaries_not_done and self.phase == "run":
            self.schedule(self.now, self._exit, "all primary components are done", EXIT_PRIORITY)

    def _exit(self, reason: str) -> None:
        if self._primaries_not_done:
            return  # a primary changed its mind at the same time step
        self.end_reason = reason
        raise _Stop

    def _stop_at(self, reason: str) -> None:
        self.end_reason = reason
        raise _Stop

    # -- the loop ------------------------------------------------------------------------------
    def start_clocks(self) -> None:
        """Schedule the first tick of every clock registered before the run."""
        for clock in self._clocks.values():
            if clock.handlers and not clock._scheduled:
                clock._schedule_next()

    def run(self, stop_at_ps: Optional[int] = None) -> int:
        """Deliver events until every primary is done, the queue is empty, or ``stop_at_ps``.
        Returns the number of events delivered."""
        self.phase = "run"
        self.start_clocks()
        if stop_at_ps is not None:
            self.schedule(stop_at_ps, self._stop_at, f"--stop-at {stop_at_ps} ps", STOP_PRIORITY)
        if self._primaries and not self._primaries_not_done:
            self.schedule(self.now, self._exit, "all primary components are done", EXIT_PRIORITY)
        keys = self._keys
        buckets = self._buckets
        pop = heapq.heappop
        delivered = 0
        progress = self.progress
        check_at = PROGRESS_EVERY if progress is not None else -1
        try:
            while keys:
                key = pop(keys)
                self._current_key = key
                self.now = key >> PRIORITY_BITS
                bucket = buckets[key]
                for handler, event in bucket:  # sees events appended for this same key
                    handler(event)
                delivered += len(bucket)
                del buckets[key]
                if delivered >= check_at >= 0:
                    check_at = delivered + PROGRESS_EVERY
                    progress(self.now, self.events_delivered + delivered)  # type: ignore[misc]
            self.end_reason = "no events left"
        except _Stop:
            pass  # the stop/exit action's bucket is not counted as delivered events
        self.events_delivered += delivered
        self.phase = "finish"
        return delivered
