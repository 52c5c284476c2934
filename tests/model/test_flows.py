"""Flow-level bandwidth sharing: max-min fairness, weights, caps, exact isolated durations."""
from __future__ import annotations

import pytest

from sst_cdma.engine.flows import FlowNetwork, isolated_duration_ps
from sst_cdma.engine.kernel import SimulationError, Simulator


def _net(**caps):
    sim = Simulator()
    net = sim.service(FlowNetwork)
    for name, cap in caps.items():
        net.resource(name, cap)
    return sim, net


def test_lone_flow_takes_its_isolated_duration_exactly():
    sim, net = _net(hbm=700e9, pcie=12.44e9)
    done = []
    net.start(123_456_789, {"hbm": 1.0, "pcie": 0.3}, lambda f: done.append(sim.now))
    sim.run()
    assert done == [isolated_duration_ps(123_456_789, [(700e9, 1.0), (12.44e9, 0.3)])]


def test_two_equal_flows_share_a_link_equally():
    sim, net = _net(link=10e9)
    done = []
    for i in range(2):
        net.start(1e9, {"link": 1.0}, lambda f, i=i: done.append((i, sim.now)))
    sim.run()
    # each gets 5 GB/s: 1 GB takes 200 ms, both end together
    assert done == [(0, 200_000_000_000), (1, 200_000_000_000)]


def test_capped_flow_leaves_the_rest_to_others():
    sim, net = _net(hbm=100.0)
    flows = [net.start(1e6, {"hbm": 1.0}, lambda f: None, cap=20.0),
             net.start(1e6, {"hbm": 1.0}, lambda f: None)]
    assert flows[0].rate == pytest.approx(20.0)
    assert flows[1].rate == pytest.approx(80.0)


def test_weights_scale_resource_use():
    # a 4x-compressed transfer loads the link with a quarter of its raw bytes
    sim, net = _net(hbm=1000.0, link=10.0)
    f = net.start(100.0, {"hbm": 1.0, "link": 0.25}, lambda f: None)
    assert f.rate == pytest.approx(40.0)


def test_rates_are_reallocated_when_a_flow_ends():
    sim, net = _net(link=10.0)
    ends = {}
    net.start(10.0, {"link": 1.0}, lambda f: ends.setdefault("short", sim.now))
    net.start(30.0, {"link": 1.0}, lambda f: ends.setdefault("long", sim.now))
    sim.run()
    # both at 5/s until the short one ends at 2 s (10 units); the long one then has 20 left at 10/s
    assert ends["short"] == 2_000_000_000_000
    assert ends["long"] == 4_000_000_000_000


def test_utilization_integrates_busy_capacity():
    sim, net = _net(link=10.0)
    net.start(10.0, {"link": 1.0}, lambda f: None)
    sim.schedule(2_000_000_000_000, lambda _: None)
    sim.run()
    assert net.utilization("link", sim.now) == pytest.approx(0.5)


def test_bad_flows_are_rejected():
    sim, net = _net(link=10.0)
    with pytest.raises(SimulationError, match="unknown resource"):
        net.start(1.0, {"nope": 1.0}, lambda f: None)
    with pytest.raises(SimulationError, match="negative amount"):
        net.start(-1.0, {"link": 1.0}, lambda f: None)
    with pytest.raises(SimulationError, match="rate cap or a resource"):
        net.start(1.0, {}, lambda f: None)
    with pytest.raises(SimulationError, match="capacity must be positive"):
        net.resource("zero", 0.0)


from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def flow_sets(draw):
    n_res = draw(st.integers(1, 4))
    caps = [draw(st.floats(1.0, 100.0)) for _ in range(n_res)]
    flows = []
    for _ in range(draw(st.integers(1, 6))):
        used = draw(st.lists(st.integers(0, n_res - 1), min_size=1, max_size=n_res, unique=True))
        weights = {f"r{i}": draw(st.floats(0.1, 4.0)) for i in used}
        cap = draw(st.one_of(st.just(float("inf")), st.floats(0.5, 80.0)))
        flows.append((weights, cap))
    return caps, flows


@settings(max_examples=150, deadline=None)
@given(flow_sets())
def test_rates_are_feasible_and_max_min_fair(data):
    caps, specs = data
    sim, net = _net(**{f"r{i}": c for i, c in enumerate(caps)})
    flows = [net.start(1e12, w, lambda f: None, cap=cap) for w, cap in specs]
    used = {f"r{i}": 0.0 for i in range(len(caps))}
    for f in flows:
        assert f.rate > 0
        assert f.rate <= f.cap * (1 + 1e-9)
        for res, w in f.weights:
            used[res.name] += f.rate * w
    for i, cap in enumerate(caps):
        assert used[f"r{i}"] <= cap * (1 + 1e-6)          # no resource over capacity
    # max-min fairness: every flow is held by its cap or by a saturated resource on which no
    # other flow gets a higher rate
    for f in flows:
        if f.rate >= f.cap * (1 - 1e-6):
            continue
        bottleneck = [res for res, _ in f.weights
                      if used[res.name] >= res.capacity * (1 - 1e-6)
                      and all(g.rate <= f.rate * (1 + 1e-6) for g in res.flows)]
        assert bottleneck, f"flow {f.fid} at {f.rate} has no bottleneck"


def _reference_rates(specs, capacity):
    """Max-min fair rates by plain progressive filling: ``specs`` lists (weights, cap)."""
    rates = [0.0] * len(specs)
    residual = dict(capacity)
    active = set(range(len(specs)))
    while active:
        load: dict[str, float] = {}
        for i in active:
            for name, w in specs[i][0].items():
                load[name] = load.get(name, 0.0) + w
        delta = min([residual[n] / total for n, total in load.items()] +
                    [specs[i][1] - rates[i] for i in active])
        for i in active:
            rates[i] += delta
            for name, w in specs[i][0].items():
                residual[name] -= delta * w
        active = {i for i in active
                  if specs[i][1] - rates[i] > 1e-9 * max(1.0, rates[i])
                  and all(residual[n] > 1e-9 * capacity[n] for n in specs[i][0])}
    return rates


@settings(max_examples=150, deadline=None)
@given(flow_sets(), st.lists(st.tuples(st.integers(0, 50), st.floats(1.0, 200.0)),
                             min_size=6, max_size=6))
def test_rates_stay_max_min_fair_as_flows_come_and_go(data, timing):
    """Starts that fit skip the solver and ends that free nobody skip it too: after every start
    and every end the rates must still equal a from-scratch max-min solution."""
    caps, specs = data
    capacity = {f"r{i}": c for i, c in enumerate(caps)}
    sim, net = _net(**capacity)
    live: dict[int, tuple] = {}
    checks = []

    def check(_=None):
        flows = sorted(live.values(), key=lambda f: f.fid)
        want = _reference_rates([(dict((r.name, w) for r, w in f.weights), f.cap)
                                 for f in flows], capacity)
        for f, rate in zip(flows, want):
            assert f.rate == pytest.approx(rate, rel=1e-6), (sim.now, f.fid)
        checks.append(len(flows))

    def finished(flow):
        del live[flow.fid]
        check()

    def begin(i):
        (weights, cap), (_, amount) = specs[i], timing[i]
        flow = net.start(amount, weights, finished, cap=cap)
        live[flow.fid] = flow
        check()

    for i in range(len(specs)):
        sim.schedule(timing[i][0] * 10**11, begin, i)
    sim.run()
    assert not live and len(checks) == 2 * len(specs)


def test_lost_time_is_charged_to_the_bottleneck_and_adds_up_to_the_stretch():
    # a flow alone on pcie (10 GB/s) shares hbm (12 GB/s) with a second flow for part of its
    # life: while both run, hbm holds each to 6 GB/s; what a flow lost there is its time
    # beyond its isolated duration, and nothing is charged to pcie, which never held it back
    sim, net = _net(hbm=12e9, pcie=10e9)
    done = {}
    copy = net.start(1e9, {"hbm": 1.0, "pcie": 1.0}, lambda f: done.setdefault("copy", sim.now))
    other = net.start(0.3e9, {"hbm": 1.0}, lambda f: done.setdefault("other", sim.now))
    assert copy.bottleneck is not None and copy.bottleneck.name == "hbm"
    sim.run()
    alone = isolated_duration_ps(1e9, [(12e9, 1.0), (10e9, 1.0)])
    assert done["copy"] - alone == pytest.approx(copy.lost_ps("hbm"), abs=2)
    assert copy.lost_ps("hbm") > 0
    assert copy.lost_ps("pcie") == 0
    # the other flow, held to half of hbm, lost as much time as it took beyond alone
    assert other.lost_ps("hbm") == pytest.approx(
        done["other"] - isolated_duration_ps(0.3e9, [(12e9, 1.0)]), abs=2)


def _finish_times(caps, specs, timing, memo: bool):
    """Completion (flow id, ps) of every flow, and every rate each solve gave, with the
    solver's layout memo on or off (off: each solve a full progressive fill)."""
    sim, net = _net(**{f"r{i}": c for i, c in enumerate(caps)})
    if not memo:
        net._fill = lambda group: FlowNetwork._progressive_fill(group)
    done, rates = [], []
    live = []

    def finished(flow):
        done.append((flow.fid, sim.now))
        rates.append([(f.fid, f.rate, f.bottleneck and f.bottleneck.name) for f in live
                      if f.version != -1])

    def begin(i):
        (weights, cap), (_, amount) = specs[i % len(specs)], timing[i]
        live.append(net.start(amount, weights, finished, cap=cap))
        rates.append([(f.fid, f.rate, f.bottleneck and f.bottleneck.name) for f in live
                      if f.version != -1])

    for i, (at, _) in enumerate(timing):
        sim.schedule(at * 10**11, begin, i)
    sim.run()
    return done, rates


@settings(max_examples=150, deadline=None)
@given(flow_sets(), st.lists(st.tuples(st.integers(0, 8), st.floats(1.0, 200.0)),
                             min_size=4, max_size=16))
def test_the_memoized_solver_gives_exactly_the_full_solves_rates_and_times(data, timing):
    """Reusing a layout's solution must change nothing: the very same rates and bottlenecks
    after every start and end, and the same integer-picosecond completion of every flow."""
    caps, specs = data
    assert _finish_times(caps, specs, timing, memo=True) == \
        _finish_times(caps, specs, timing, memo=False)
