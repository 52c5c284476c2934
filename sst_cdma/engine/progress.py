"""Progress of a run: the wall time of each of its phases (:class:`PhaseClock`, what
``--timing-info`` prints), our progress lines for long runs (after a few seconds of wall time,
a line now and then on stderr saying how far the run has come, in whichever phase it is),
SST-core's heartbeats (``--heartbeat-sim-period``, ``--heartbeat-wall-period``) and its
wall-clock limit (``--exit-after``)."""
from __future__ import annotations

import contextlib
import contextvars
import math
import re
import time
from typing import IO, Callable, Iterator, Optional

from sst_cdma.engine.kernel import (EXIT_PRIORITY, PRIORITY_BITS, STATISTIC_PRIORITY, STOP_PRIORITY,
                     Simulator)
from sst_cdma.engine.units import UnitAlgebra

__all__ = ["Progress", "PhaseClock", "PHASES", "timed", "tick", "SimHeartbeat", "WallWatch",
           "parse_wall_time", "heartbeat_lines"]

#: the phases of a run, as ``RunResult.timing`` keys them (seconds), and what each is, in the
#: order a run meets them; the models' own phases (rendering, pricing, planning) run inside
#: init, and a second of theirs is counted there only
PHASES = {
    "script_s": "the topology script (and the element libraries it loads)",
    "build_s": "building the components",
    "setup_s": "init and setup, less the phases below",
    "render_s": "rendering the iteration's streams",
    "pricing_s": "pricing the kernels",
    "planning_s": "planning memory (schedules, the planner)",
    "run_s": "the event loop",
    "finish_s": "the elements' finish (the reports)",
    "writing_s": "writing the statistics and the output files",
}


class Progress:
    """The kernel's ``progress`` hook: writes ``sst: simulated TIME, N events, S s`` to
    ``stream`` once ``after_s`` seconds of wall time have passed, then every ``every_s``."""

    def __init__(self, stream: IO[str], after_s: float = 3.0, every_s: float = 5.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream = stream
        self.after_s = after_s
        self.every_s = every_s
        self.clock = clock
        self.start = clock()
        self.next_at = self.start + after_s
        self.lines = 0
        #: the phase, count and total of the last phase line (None: none yet)
        self.last_phase: Optional[tuple[str, int, int]] = None

    def __call__(self, now_ps: int, events: int) -> None:
        """Report if the time has come."""
        wall = self.clock()
        if wall < self.next_at:
            return
        self.next_at = wall + self.every_s
        self.lines += 1
        print(f"sst: simulated {now_ps / 1e9:.3f} ms, {events:,} events, "
              f"{wall - self.start:.0f} s",
              file=self.stream, flush=True)

    def phase(self, what: str, done: int, total: int) -> None:
        """Report how far a phase outside the event loop has come (``what``: ``pricing
        kernels: layer``; ``done`` of ``total`` finished), if the time has come: ``sst:
        pricing kernels: layer 120 of 580, 4 s``. A line only ever shows a counter that has
        moved: none while nothing of the phase is done, none that repeats the last line's
        count (the time went elsewhere); the next tick that has moved gets the line."""
        wall = self.clock()
        if wall < self.next_at or done <= 0 or self.last_phase == (what, done, total):
            return
        self.next_at = wall + self.every_s
        self.lines += 1
        self.last_phase = (what, done, total)
        print(f"sst: {what} {done:,} of {total:,}, {wall - self.start:.0f} s",
              file=self.stream, flush=True)


class PhaseClock:
    """The wall time of a run's phases (:data:`PHASES` names them), each second counted once:
    a phase that runs inside another (pricing inside init) is taken out of the outer one, so
    the phases add up to the run. ``seconds`` is ``RunResult.timing``. While it is
    :meth:`active`, :func:`timed` and :func:`tick` anywhere in the run reach it, and
    ``progress`` (a :class:`Progress`, or None) gets the ticks."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = {}
        self.progress: Optional[Progress] = None
        self._open: list[list] = []  # [phase, when it (last) resumed]

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the block's wall time to phase ``name`` (less any phase inside it)."""
        now = self.clock()
        if self._open:
            self._charge(now)
        self._open.append([name, now])
        try:
            yield
        finally:
            self._charge(self.clock())
            self._open.pop()
            if self._open:
                self._open[-1][1] = self.clock()

    def _charge(self, now: float) -> None:
        top = self._open[-1]
        self.seconds[top[0]] = self.seconds.get(top[0], 0.0) + (now - top[1])
        top[1] = now

    @contextlib.contextmanager
    def active(self) -> Iterator["PhaseClock"]:
        """Make this the clock :func:`timed` and :func:`tick` reach while the block runs."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


_ACTIVE: contextvars.ContextVar[Optional[PhaseClock]] = contextvars.ContextVar(
    "sst_cdma_phase_clock", default=None)


@contextlib.contextmanager
def timed(name: str) -> Iterator[None]:
    """Count the block to phase ``name`` of the active :class:`PhaseClock` (outside a run,
    nothing is counted)."""
    clock = _ACTIVE.get()
    if clock is None:
        yield
        return
    with clock.phase(name):
        yield


def tick(what: str, done: int, total: int) -> None:
    """Tell the active run's progress lines how far a long phase has come (``done`` of
    ``total`` of ``what``); cheap, and nothing outside a run or without progress lines."""
    clock = _ACTIVE.get()
    if clock is not None and clock.progress is not None:
        clock.progress.phase(what, done, total)



_WALL_FORMATS = (
    (re.compile(r"(\d+):(\d+):(\d+)"), (3600, 60, 1)),
    (re.compile(r"(\d+):(\d+)"), (60, 1)),
    (re.compile(r"(\d+)"), (1,)),
    (re.compile(r"(\d+)h"), (3600,)),
    (re.compile(r"(\d+)m"), (60,)),
    (re.compile(r"(\d+)s"), (1,)),
)


def parse_wall_time(text: str) -> int:
    """Seconds of wall time in SST's formats: ``H:M:S``, ``M:S``, ``S``, ``Hh``, ``Mm``,
    ``Ss`` (``1:30`` is 90 s, ``2h`` 7200 s). ValueError naming the formats otherwise."""
    for pattern, scale in _WALL_FORMATS:
        m = pattern.fullmatch(str(text).strip())
        if m:
            return sum(int(g) * s for g, s in zip(m.groups(), scale))
    raise ValueError(f"{text!r} is not a wall time (H:M:S, M:S, S, Hh, Mm or Ss, e.g. 1:30 "
                     "or 10m)")


def _sim_time(ps: int) -> str:
    """Simulated time as SST prints it (``2 us``)."""
    return UnitAlgebra(f"{ps}ps").bestSI() if ps else "0 s"


def heartbeat_lines(sim: Simulator, since_s: float) -> str:
    """SST's heartbeat block: the time line and the figures this kernel has an equivalent for
    (SST's mempool and sync sizes and its maximum TimeVortex depth have none: left out)."""
    active = sum(len(bucket) for bucket in sim._buckets.values())
    return (f"# Simulation Heartbeat: Simulated Time {_sim_time(sim.now)} (Real CPU time since "
            f"last period {since_s:.5f} seconds)\n"
            f"\t{'Global active activities':<33}{active} activities\n")


class SimHeartbeat:
    """``--heartbeat-sim-period``: writes SST's heartbeat block at every multiple of
    ``period_ps`` of simulated time while the run goes on. It never keeps a finished run going
    nor moves its end time: between beats it hops from one time with events to the next (an
    action after that time's events), so when the last event has run the queue is empty. Its
    actions are not counted as delivered events."""

    BEAT_PRIORITY = STOP_PRIORITY - 1  # before --stop-at at the same time, as SST prints it
    HOP_PRIORITY = EXIT_PRIORITY - 1  # after every event of its time, before the exit check

    def __init__(self, sim: Simulator, period_ps: int, stream: Callable[[], IO[str]],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.sim = sim
        self.period_ps = period_ps
        self.stream = stream
        self.clock = clock
        self.last = clock()
        self.due = period_ps

    def start(self) -> None:
        """Begin: the first hop comes after the events of time 0."""
        self.last = self.clock()
        self.sim.schedule(self.sim.now, self._hop, None, self.HOP_PRIORITY)

    def _follow(self) -> None:
        """Schedule the beat when it is due before the next event, else a hop after it."""
        sim = self.sim
        sim.events_delivered -= 1  # the kernel counts this action's bucket
        if not self._model_pending():
            return  # the run is over
        next_time = sim._keys[0] >> PRIORITY_BITS
        if next_time >= self.due:
            sim.schedule(self.due, self._beat, None, self.BEAT_PRIORITY)
        elif next_time > sim.now or sim._current_key & ((1 << PRIORITY_BITS) - 1) < \
                self.HOP_PRIORITY:
            sim.schedule(next_time, self._hop, None, self.HOP_PRIORITY)
        else:  # only the exit check is left at this time
            sim.schedule(sim.now + 1, self._hop, None, self.HOP_PRIORITY)

    def _model_pending(self) -> bool:
        """Whether anything but periodic statistic dumps is queued (those, like this, only go
        on while something else is queued: counting them would keep both going forever)."""
        keys = self.sim._keys
        mask = (1 << PRIORITY_BITS) - 1
        if not keys:
            return False
        if keys[0] & mask != STATISTIC_PRIORITY:
            return True
        return any(key & mask != STATISTIC_PRIORITY for key in keys)

    def _hop(self, _: object) -> None:
        self._follow()

    def _beat(self, _: object) -> None:
        now = self.clock()
        self.stream().write(heartbeat_lines(self.sim, now - self.last))
        self.last = now
        self.due += self.period_ps
        self._follow()


class WallWatch:
    """Wall-clock duties, called with the kernel's ``progress`` hook (every few thousand
    events): the ``--heartbeat-wall-period`` heartbeat, and the ``--exit-after`` limit, which
    ends the run cleanly at the current simulated time (finish and statistics still run)."""

    def __init__(self, sim: Simulator, stream: Callable[[], IO[str]],
                 heartbeat_s: Optional[float] = None, exit_after_s: Optional[float] = None,
                 exit_after_text: str = "", progress: Optional[Progress] = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.sim = sim
        self.stream = stream
        self.heartbeat_s = heartbeat_s
        self.exit_after_text = exit_after_text
        self.progress = progress
        self.clock = clock
        self.start = self.last_beat = clock()
        self.next_beat = self.start + heartbeat_s if heartbeat_s else math.inf
        self.deadline = self.start + exit_after_s if exit_after_s is not None else math.inf

    def __call__(self, now_ps: int, events: int) -> None:
        """Beat, stop or report progress if the time has come."""
        if self.progress is not None:
            self.progress(now_ps, events)
        wall = self.clock()
        if wall >= self.next_beat:
            self.stream().write(heartbeat_lines(self.sim, wall - self.last_beat))
            self.last_beat = wall
            self.next_beat = wall + self.heartbeat_s  # type: ignore[operator]
        if wall >= self.deadline:
            self.stream().write(f"# --exit-after={self.exit_after_text}: wall-clock limit "
                                f"reached at simulated time {_sim_time(now_ps)}; ending the "
                                "simulation\n")
            self.sim._stop_at(f"--exit-after {self.exit_after_text}")
