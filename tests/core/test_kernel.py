"""The event kernel: ordering, link latencies, self-links, clocks, end of simulation."""
from __future__ import annotations

import pytest

from sst_cdma.engine.kernel import (CLOCK_PRIORITY, EVENT_PRIORITY, SimulationError, Simulator)


def test_events_delivered_in_time_priority_send_order():
    sim = Simulator()
    seen = []
    sim.schedule(20, seen.append, "t20-p50-a")
    sim.schedule(10, seen.append, "t10-p50-a")
    sim.schedule(20, seen.append, "t20-p40", priority=40)
    sim.schedule(10, seen.append, "t10-p50-b")
    sim.schedule(20, seen.append, "t20-p50-b")
    sim.run()
    assert seen == ["t10-p50-a", "t10-p50-b", "t20-p40", "t20-p50-a", "t20-p50-b"]
    assert sim.now == 20
    assert sim.events_delivered == 5


def test_same_time_event_sent_during_delivery_runs_after_earlier_ones():
    sim = Simulator()
    seen = []

    def first(_):
        seen.append("first")
        sim.schedule(sim.now, seen.append, "zero-delay")

    sim.schedule(5, first)
    sim.schedule(5, seen.append, "second")
    sim.run()
    assert seen == ["first", "second", "zero-delay"]


def test_scheduling_in_the_past_is_an_error():
    sim = Simulator()

    def late(_):
        sim.schedule(sim.now - 1, print)

    sim.schedule(10, late)
    with pytest.raises(SimulationError, match="in the past"):
        sim.run()


def test_link_ends_have_their_own_latency():
    sim = Simulator()
    a, b = sim.make_link("l", "pa", 100, "pb", 7)
    got = []
    a.handler = lambda ev: got.append(("a", sim.now, ev))
    b.handler = lambda ev: got.append(("b", sim.now, ev))
    a.send("x")            # a's latency: 100
    b.send("y", 3)         # b's latency 7 + extra 3
    sim.run()
    assert got == [("a", 10, "y"), ("b", 100, "x")]


def test_self_link_delivers_to_itself():
    sim = Simulator()
    end = sim.make_self_link("timer", 50)
    got = []
    end.handler = lambda ev: (got.append(sim.now), ev < 3 and end.send(ev + 1))
    end.send(1)
    sim.run()
    assert got == [50, 100, 150]


def test_polled_link_queues_events():
    sim = Simulator()
    a, b = sim.make_link("l", "pa", 10, "pb", 10)
    a.send("m1")
    a.send("m2")
    sim.run()
    assert b.recv() == "m1" and b.recv() == "m2" and b.recv() is None


def test_clock_ticks_at_period_with_cycle_numbers_and_stops_itself():
    sim = Simulator()
    ticks = []

    def tick(cycle):
        ticks.append((sim.now, cycle))
        return cycle >= 4

    sim.register_clock(250, tick)
    sim.run()
    assert ticks == [(250, 1), (500, 2), (750, 3), (1000, 4)]


def test_clock_runs_before_events_at_the_same_time():
    sim = Simulator()
    seen = []
    sim.schedule(1000, seen.append, "event")
    sim.register_clock(1000, lambda c: seen.append("clock") or True)
    sim.run()
    assert seen == ["clock", "event"]
    assert CLOCK_PRIORITY < EVENT_PRIORITY


def test_primary_components_end_the_run_even_with_events_left():
    sim = Simulator()
    sim.register_primary("p")
    sim.register_clock(10, lambda c: sim.primary_ok_to_end("p") if c == 3 else False)
    sim.schedule(10_000, print, "never")
    sim.run()
    assert sim.now == 30
    assert sim.end_reason == "all primary components are done"


def test_run_ends_when_no_events_remain_without_primaries():
    sim = Simulator()
    sim.schedule(42, lambda _: None)
    sim.run()
    assert sim.now == 42 and sim.end_reason == "no events left"


def test_stop_at_ends_before_events_at_that_time():
    sim = Simulator()
    seen = []
    for t in (10, 20, 30):
        sim.schedule(t, seen.append, t)
    sim.run(stop_at_ps=20)
    assert seen == [10] and sim.now == 20
    assert "stop-at" in sim.end_reason


def test_clock_period_must_be_positive():
    with pytest.raises(SimulationError):
        Simulator().register_clock(0, lambda c: True)
