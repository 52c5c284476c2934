"""Progress lines of long runs: none for a short run, then one now and then."""
from __future__ import annotations

import io

import pytest

import sst_cdma
from sst_cdma.kernel import PROGRESS_EVERY, Simulator
from sst_cdma.progress import Progress


def test_progress_waits_then_reports_now_and_then():
    now = [0.0]
    out = io.StringIO()
    p = Progress(out, after_s=3, every_s=5, clock=lambda: now[0])
    p(1_000_000, 10)
    assert out.getvalue() == ""  # under three seconds: quiet
    now[0] = 3.5
    p(2_000_000_000, 1234567)
    assert out.getvalue() == "sst: simulated 2.000 ms, 1,234,567 events, 4 s\n"
    now[0] = 6.0
    p(3_000_000_000, 2_000_000)
    assert p.lines == 1  # the next line is due at 8.5 s
    now[0] = 9.0
    p(4_000_000_000, 3_000_000)
    assert p.lines == 2


@pytest.mark.parametrize("per_time", [1, 1000])
def test_the_kernel_calls_its_hook_every_few_thousand_events(per_time):
    # one event per time, or many at each time (a big system in lockstep): counted by events
    sim = Simulator()
    seen = []
    sim.progress = lambda now, events: seen.append((now, events))
    for t in range(4 * PROGRESS_EVERY // per_time):
        for _ in range(per_time):
            sim.schedule(t, lambda _: None)
    sim.run()
    counts = [events for _, events in seen]
    assert len(counts) >= 3
    for before, events in zip([0] + counts, counts):  # each after about PROGRESS_EVERY more
        assert PROGRESS_EVERY <= events - before < PROGRESS_EVERY + per_time
    for now, events in seen:  # reported at the time of the last event delivered
        assert now == (events - 1) // per_time


def test_a_short_run_prints_no_progress(repo):
    err = io.StringIO()
    sst_cdma.run(repo / "topologies/pascal_cdma.py", ["--network", "alexnet", "--batch", "8"],
                 console=io.StringIO(), progress=err)
    assert err.getvalue() == ""
