"""Progress lines for long runs: after a few seconds of wall time, a line now and then saying
how far the simulation has come, so a user waiting on a big system sees it move (SST's
heartbeat, driven by wall time)."""
from __future__ import annotations

import time
from typing import IO, Callable

__all__ = ["Progress"]


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

