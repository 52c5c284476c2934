"""Chunk mode's burst pipeline: a burst holds a buffer slot from its first-stage start until its
second stage ends, and the stage timing follows from that."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from components.cdma_engine import _BurstPipeline
from components.copy_bounds import CopyBounds
from sst_cdma.engine.flows import FlowNetwork, isolated_duration_ps
from sst_cdma.engine.kernel import Simulator

FAST, SLOW = 4e12, 1e12  # bytes per second of the two stages


class RecordingFlows:
    """The real flow network, with every burst's stage, start and end written down."""

    def __init__(self, net: FlowNetwork, stage_of: dict) -> None:
        self.net = net
        self.stage_of = stage_of
        self.log: list[tuple[str, str, int]] = []  # (stage, start|end, time)

    def launch(self, amount, route, on_done, cap=math.inf, label=""):
        stage = self.stage_of[id(route)]
        self.log.append((stage, "start", self.net.sim.now))

        def done(flow):
            self.log.append((stage, "end", self.net.sim.now))
            on_done(flow)

        return self.net.launch(amount, route, done, cap, label)


def transfer(raw: int, burst: int, buffer: int, first_rate: float, second_rate: float):
    """Run one pipelined transfer; return (end time, stage log, bursts counted)."""
    sim = Simulator()
    net = sim.service(FlowNetwork)
    net.resource("a", first_rate)
    net.resource("b", second_rate)
    first, second = net.route({"a": 1.0}), net.route({"b": 1.0})
    flows = RecordingFlows(net, {id(first): "first", id(second): "second"})
    finished, bursts = [], []
    engine = SimpleNamespace(
        flows=flows, params={"burst": burst, "buffer": buffer},
        bounds=CopyBounds({"a": "engine"}),
        stat_bursts=SimpleNamespace(add_data=lambda value, count: bursts.append(count)),
        transfer_done=lambda req, wire, start: finished.append(sim.now))
    req = SimpleNamespace(raw_bytes=raw, tensor="x")
    _BurstPipeline(engine, req, raw, 0, first, second).pump()
    sim.run()
    assert len(finished) == 1
    return finished[0], flows.log, bursts[0]


def burst_sizes(raw, burst):
    return [burst] * (raw // burst) + ([raw % burst] if raw % burst else [])


def ps(amount, rate):
    return isolated_duration_ps(amount, [(rate, 1.0)])


def occupancy_never_exceeds(log, slots):
    held = peak = 0
    for stage, what, _ in sorted(log, key=lambda e: (e[2], e[1] == "start")):
        if stage == "first" and what == "start":
            held += 1
        elif stage == "second" and what == "end":
            held -= 1
        peak = max(peak, held)
    return peak <= slots, peak


def test_one_slot_serializes_the_stages():
    sizes = burst_sizes(10_000, 1_000)
    end, log, bursts = transfer(10_000, 1_000, 1_000, FAST, SLOW)
    assert end == sum(ps(s, FAST) + ps(s, SLOW) for s in sizes)
    assert bursts == 10
    assert occupancy_never_exceeds(log, 1)[0]


def test_two_slots_keep_the_slow_stage_busy_after_the_first_burst():
    sizes = burst_sizes(10_500, 1_000)  # the last burst is short
    end, log, bursts = transfer(10_500, 1_000, 2_000, FAST, SLOW)
    assert end == ps(sizes[0], FAST) + sum(ps(s, SLOW) for s in sizes)
    assert bursts == 11
    ok, peak = occupancy_never_exceeds(log, 2)
    assert ok and peak == 2


@pytest.mark.parametrize("slots", [1, 2, 4])
def test_a_slow_first_stage_is_the_bottleneck_whatever_the_buffer(slots):
    sizes = burst_sizes(8_000, 1_000)
    end, log, _ = transfer(8_000, 1_000, 1_000 * slots, SLOW, FAST)
    if slots == 1:
        assert end == sum(ps(s, SLOW) + ps(s, FAST) for s in sizes)
    else:
        assert end == sum(ps(s, SLOW) for s in sizes) + ps(sizes[-1], FAST)
    assert occupancy_never_exceeds(log, slots)[0]


def test_a_full_buffer_stalls_the_first_stage_until_a_burst_lands():
    # fast first stage, 2 slots: burst 3 may start only when burst 1 has left the buffer
    _, log, _ = transfer(4_000, 1_000, 2_000, FAST, SLOW)
    first_starts = [t for stage, what, t in log if stage == "first" and what == "start"]
    second_ends = [t for stage, what, t in log if stage == "second" and what == "end"]
    assert first_starts[2] == second_ends[0]
    assert first_starts[3] == second_ends[1]
