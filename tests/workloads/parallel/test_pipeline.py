"""Pipeline schedules: every pass once per stage, the orders as Megatron-LM runs them, the step
time of uniform stages equal to the closed forms in integers (Narayanan et al., SC 2021), and
the micro-batches in flight per stage (1F1B: min(p - s, m); interleaved first stage: p times
1 + (p - 1)/(p v), Korthikanti et al., as megatron/training/theoretical_memory_usage.py
computes it)."""
from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import product

import pytest

from workloads.parallel import (BACKWARD, FORWARD, ChunkSpan, LayoutError, ModelShape, Work,
                                gpipe_order, in_flight, interleaved_order, make_layout,
                                makespan, one_f_one_b_order, schedule_table, stage_orders,
                                stage_steps)
from workloads.schedule import micro_batch_steps

#: picoseconds of one chunk's forward and backward: b = 2 f as in a transformer, and others
TIMES = [(1_000_000, 2_000_000), (3, 5), (7, 7), (5, 2)]


def orders_of(kind: str, p: int, m: int, v: int = 1) -> list[tuple[Work, ...]]:
    """Every stage's order of schedule ``kind``."""
    if kind == "gpipe":
        return [gpipe_order(p, s, m) for s in range(p)]
    if kind == "1f1b":
        return [one_f_one_b_order(p, s, m) for s in range(p)]
    return [interleaved_order(p, s, m, v) for s in range(p)]


CASES = ([("gpipe", p, m, 1) for p, m in product(range(1, 6), range(1, 10))]
         + [("1f1b", p, m, 1) for p, m in product(range(1, 6), range(1, 10))]
         + [("interleaved", p, m, v) for p, v, m in product(range(2, 6), range(2, 5),
                                                             range(1, 16)) if m % p == 0])


@pytest.mark.parametrize("kind, p, m, v", CASES)
def test_every_pass_of_every_micro_batch_appears_once_per_stage(kind, p, m, v):
    for order in orders_of(kind, p, m, v):
        expected = {(mb, phase, c) for mb in range(m) for phase in (FORWARD, BACKWARD)
                    for c in range(v)}
        seen = Counter((w.micro_batch, w.phase, w.chunk) for w in order)
        assert set(seen) == expected and set(seen.values()) == {1}
        position = {(w.micro_batch, w.phase, w.chunk): i for i, w in enumerate(order)}
        assert all(position[(mb, FORWARD, c)] < position[(mb, BACKWARD, c)]
                   for mb, _, c in expected)


@pytest.mark.parametrize("kind, p, m, v", [c for c in CASES if c[0] != "interleaved"])
@pytest.mark.parametrize("f, b", TIMES)
def test_gpipe_and_1f1b_take_m_plus_p_minus_1_stage_times(kind, p, m, v, f, b):
    result = makespan(orders_of(kind, p, m), f, b)
    assert result.step_time == (m + p - 1) * (f + b)
    assert result.busy == (m * (f + b),) * p
    assert result.idle == ((p - 1) * (f + b),) * p   # the bubble: (p - 1)/m of the busy time


@pytest.mark.parametrize("kind, p, m, v", [c for c in CASES if c[0] == "interleaved"])
@pytest.mark.parametrize("f, b", TIMES)
def test_interleaved_takes_m_plus_p_minus_1_over_v_stage_times(kind, p, m, v, f, b):
    # per-chunk times f/v and b/v, so a stage-time is v (f + b) here: the closed form
    # (m + (p - 1)/v) stage-times is (m v + p - 1)(f + b); it holds (checked here) for every
    # m that is a multiple of p, the micro-batch counts Megatron accepts with its default groups
    result = makespan(orders_of(kind, p, m, v), f, b)
    stage_time = v * (f + b)
    assert result.step_time == (m * v + p - 1) * (f + b)
    assert Fraction(result.step_time, stage_time) == m + Fraction(p - 1, v)
    assert result.busy == (m * stage_time,) * p


@pytest.mark.parametrize("p, m, c", [(4, 8, 3), (2, 4, 5), (3, 9, 1), (5, 2, 7)])
def test_send_time_adds_to_the_critical_path(p, m, c):
    # GPipe: the first forward and the last backward each cross p - 1 links, nothing else
    # waits on a send: (m + p - 1)(f + b) + 2 (p - 1) c
    f, b = 10, 20
    assert makespan(orders_of("gpipe", p, m), f, b, p2p_time=c).step_time == \
        (m + p - 1) * (f + b) + 2 * (p - 1) * c
    # 1F1B waits on sends in its steady state as well: never less than that
    assert makespan(orders_of("1f1b", p, m), f, b, p2p_time=c).step_time >= \
        (m + p - 1) * (f + b) + 2 * (p - 1) * c


def test_uneven_stages_are_bound_by_the_slowest():
    # 1F1B with one stage 4x slower than the others: once it starts (after stage 0's first
    # forward) it never waits, and stage 0's last backward follows its last: the step is
    # f0 + m (f1 + b1) + b0, and the slow stage idles only f0 + b0
    f, b = [10, 40, 10, 10], [20, 80, 20, 20]
    result = makespan(orders_of("1f1b", 4, 16), f, b)
    assert result.busy[1] == 16 * 120
    assert result.step_time == 10 + 16 * 120 + 20
    assert result.idle[1] == 10 + 20


@pytest.mark.parametrize("p, m", list(product(range(1, 7), range(1, 12))))
def test_1f1b_holds_min_p_minus_s_m_micro_batches_and_gpipe_m(p, m):
    assert in_flight(orders_of("1f1b", p, m)) == tuple(min(p - s, m) for s in range(p))
    assert in_flight(orders_of("gpipe", p, m)) == (m,) * p


@pytest.mark.parametrize("p, v", list(product(range(2, 7), range(2, 5))))
def test_interleaved_first_stage_holds_korthikantis_factor(p, v):
    # first stage: p (1 + (p - 1)/(p v)) micro-batches of a whole stage's activations, each
    # chunk 1/v of them; reached once the warm-up fits: m >= 2p (m a multiple of p)
    for m in range(2 * p, 5 * p + 1, p):
        peak = in_flight(orders_of("interleaved", p, m, v))
        assert Fraction(peak[0], v) == p * (1 + Fraction(p - 1, p * v))
        # later stages: Megatron's warm-up of 2 (p - s - 1) + (v - 1) p chunk passes, plus one
        assert peak == tuple(2 * (p - s - 1) + (v - 1) * p + 1 for s in range(p))


def test_megatrons_schedule_table_example():
    # megatron/core/pipeline_parallel/schedules.py: PP2 N3 M5 VP2 (group 3)
    assert schedule_table(5, 2, 3) == ((0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1),
                                       (3, 0), (4, 0), (3, 1), (4, 1))


def test_interleaved_warm_up_and_backward_chunks_follow_megatron():
    p, m, v = 4, 8, 2
    order = interleaved_order(p, 1, m, v)
    warmup = 2 * (p - 1 - 1) + (v - 1) * p             # get_pp_rank_microbatches
    assert [w.phase for w in order[:warmup]] == [FORWARD] * warmup
    assert order[warmup].phase == FORWARD and order[warmup + 1].phase == BACKWARD
    assert order[warmup + 1] == Work(0, BACKWARD, v - 1)  # the last chunk's backward first
    assert order[:4] == tuple(Work(k, FORWARD, 0) for k in range(4))
    assert order[4] == Work(0, FORWARD, 1)


def test_1f1b_order_is_megatrons():
    assert one_f_one_b_order(4, 1, 5) == (
        Work(0, FORWARD), Work(1, FORWARD),
        Work(2, FORWARD), Work(0, BACKWARD), Work(3, FORWARD), Work(1, BACKWARD),
        Work(4, FORWARD), Work(2, BACKWARD),
        Work(3, BACKWARD), Work(4, BACKWARD))
    assert one_f_one_b_order(4, 3, 2) == (Work(0, FORWARD), Work(0, BACKWARD),
                                          Work(1, FORWARD), Work(1, BACKWARD))


def test_the_layouts_orders_are_one_per_pipeline_rank():
    shape = ModelShape(layers=16, heads=8, kv_heads=8, hidden=512, ffn=2048, vocab=1000)
    layout = make_layout(shape, tp=2, pp=4, dp=8, vpp=2, schedule="interleaved",
                         micro_batches=8)
    orders = stage_orders(layout)
    assert len(orders) == 4
    assert orders == tuple(orders_of("interleaved", 4, 8, 2))


def test_a_one_stage_1f1b_order_gives_the_gradient_accumulation_steps():
    order = one_f_one_b_order(1, 0, 3)
    steps = stage_steps(order, [ChunkSpan(2, 10, 20)], n_ops=25, prologue_end=2,
                        update_start=20)
    assert steps == micro_batch_steps(25, 2, 10, 20, 3)


def test_steps_take_each_chunks_span():
    spans = [ChunkSpan(1, 5, 9), ChunkSpan(9, 14, 19)]
    steps = stage_steps(interleaved_order(2, 0, 2, 2), spans, n_ops=21, prologue_end=1,
                        update_start=19)
    assert steps[0].phase == "prologue" and steps[-1].phase == "update"
    for step in steps[1:-1]:
        span = spans[step.chunk]
        expected = ((span.start, span.forward_end) if step.phase == FORWARD
                    else (span.forward_end, span.end))
        assert (step.start, step.end) == expected
    assert len(steps) == 2 + 2 * 2 * 2


def test_orders_that_wait_on_each_other_are_refused():
    # stage 0 wants micro-batch 1's backward before running micro-batch 1's forward
    stuck = [(Work(0, FORWARD), Work(1, BACKWARD), Work(1, FORWARD), Work(0, BACKWARD)),
             (Work(0, FORWARD), Work(0, BACKWARD), Work(1, FORWARD), Work(1, BACKWARD))]
    with pytest.raises(LayoutError, match="wait on each other forever"):
        makespan(stuck, 1, 2)


def test_interleaved_refuses_what_megatron_refuses():
    with pytest.raises(LayoutError, match=r"group 4 must lie in \[pp 4, micro_batches 3\]"):
        interleaved_order(4, 0, 3, 2)
    with pytest.raises(LayoutError, match="last group of 2 .*fewer than pp 4"):
        interleaved_order(4, 0, 6, 2)
    with pytest.raises(LayoutError, match="stage 4 is not a pipeline rank of pp 4"):
        one_f_one_b_order(4, 4, 8)
