"""ZeRO-3 in a pipeline stage's stream (workloads/parallel/fsdp_stage.py): each FSDP unit
gathered one unit ahead in both passes, waited for before its first kernel and freed after
its last, its gradients reduce-scattered after its backward; the persistent model states the
1/dp shards; the stage's dp volume ZeRO-3's 3Ψ a micro-batch. docs/parallel.md, "ZeRO-3 and
the overlap"."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pytest

from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.fsdp_stage import gathered_name, stage_units, unit_grad_name
from workloads.parallel.transformer_stages import tied_head, transformer_stage_stream
from workloads.parallel.zero import fsdp_schedule, model_state_bytes, step_volume_bytes
from workloads.render import iteration_stream
from workloads.vdnn import state_name, weight_name, wgrad_name

SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
DP, MICRO = 4, 2


@lru_cache(maxsize=None)
def plan():
    """gpt2_small's single-GPU render of one micro-batch (256 tokens, float32, Adam)."""
    stream = iteration_stream("gpt2_small", 1, "float32", "none", None, "adam", 0, "liveness",
                              None, None, None, seq_len=256)
    return stream.plan


@lru_cache(maxsize=None)
def stage(s: int, zero: int = 3, dp: int = DP):
    """Stage ``s`` of two under dp ``dp`` and ZeRO ``zero``."""
    layout = make_layout(SHAPE, pp=2, dp=dp, zero=zero, micro_batches=MICRO)
    net = load_network("gpt2_small", 256)
    return transformer_stage_stream(plan(), layout, s, tied=tied_head(net, "adam"),
                                    optimizer="adam")


def units_of(s: int):
    """The stage's FSDP units (of all its layers, sized by its unsharded dp-1 declarations),
    that stream and the layers its step updates."""
    plain = stage(s, 0, 1).stream
    every = list(dict.fromkeys(op.name for op in plain.ops if op.op == "compute"
                               and op.pass_ == "fwd"))
    layers = [op.name for op in plain.ops if op.op == "compute" and op.phase == "update"]
    return stage_units(every, plain.tensors, "float32"), plain, layers


@pytest.mark.parametrize("s", [0, 1])
def test_each_pass_gathers_one_unit_ahead_and_frees_after_use(s):
    built = stage(s)
    ops = built.stream.ops
    units, _, _ = units_of(s)
    assert len(units) >= 7  # six blocks and the embedding, or the final norm and the head
    unit_of = {layer: u.name for u in units for layer in u.layers}
    for key, span in built.spans.items():
        for phase, (a, b) in (("forward", (span.forward_start, span.forward_end)),
                              ("backward", (span.backward_start, span.backward_end))):
            run = ops[a:b]
            order = list(dict.fromkeys(unit_of[op.name] for op in run
                                       if op.op == "compute" and op.name in unit_of))
            assert sorted(order) == sorted(u.name for u in units)
            gathers = [i for i, op in enumerate(run) if op.op == "all_gather"]
            assert [run[i].name for i in gathers] == [gathered_name(u) for u in order]
            assert all(run[i].async_ and run[i].group == "dp" for i in gathers)
            for k, u in enumerate(order):
                first = min(i for i, op in enumerate(run) if op.op == "compute"
                            and unit_of.get(op.name) == u)
                last = max(i for i, op in enumerate(run) if op.op == "compute"
                           and unit_of.get(op.name) == u)
                # one unit of prefetch: unit k + 1's gather issued before unit k's first
                # kernel, unit k + 2's after it
                if k + 1 < len(order):
                    assert gathers[k + 1] < first
                if k + 2 < len(order):
                    assert gathers[k + 2] > first
                wait = next(i for i, op in enumerate(run) if op.op == "collective_wait"
                            and op.name == gathered_name(u))
                free = next(i for i, op in enumerate(run) if op.op == "free"
                            and op.name == gathered_name(u))
                assert gathers[k] < wait < first and last < free
                assert (run[free - 1].op, run[free - 1].name) == ("sync", run[last].name)
                if phase == "backward":
                    scatter = next(i for i, op in enumerate(run) if op.op == "reduce_scatter"
                                   and op.name == unit_grad_name(u))
                    assert run[scatter].async_ and free < scatter
                    done = next(i for i, op in enumerate(run) if op.op == "collective_wait"
                                and op.name == unit_grad_name(u))
                    # waited for after the next unit's reduce-scatter (the last at the end)
                    assert done > scatter and (k + 1 == len(order) or done > last)
            if phase == "forward":
                assert not any(op.op == "reduce_scatter" for op in run)


@dataclass(frozen=True)
class Layer:
    """A layer as zero.py's FSDP functions take it."""

    name: str
    params: int
    weight_bytes: int


@pytest.mark.parametrize("s", [0, 1])
def test_the_units_and_their_collectives_are_fsdp_schedule_s(s):
    units, plain, layers = units_of(s)
    built = stage(s)
    ops, tensors = built.stream.ops, built.stream.tensors
    every = list(dict.fromkeys(op.name for op in plain.ops if op.op == "compute"
                               and op.pass_ == "fwd"))
    infos = []
    for name in every:
        t = plain.tensors.get(weight_name(name))
        infos.append(Layer(name, t.bytes // 4 if t else 0, t.bytes if t else 0))
    shard_ops = fsdp_schedule(infos)
    span = built.spans[(0, 0)]
    for phase, (a, b) in (("forward", (span.forward_start, span.forward_end)),
                          ("backward", (span.backward_start, span.backward_end))):
        want = sorted((op.kind, op.units[0], op.bytes) for op in shard_ops
                      if op.phase == phase and op.kind != "free")
        got = sorted((op.op, op.name.split(":")[0], tensors[op.name].bytes)
                     for op in ops[a:b] if op.group == "dp")
        assert got == want
    # a unit's bytes are its layers' unsharded weights, its buffers that size
    for u in units:
        assert u.weight_bytes == sum(plain.tensors[weight_name(n)].bytes for n in u.layers
                                     if weight_name(n) in plain.tensors) > 0
        assert tensors[gathered_name(u.name)].bytes == tensors[unit_grad_name(u.name)].bytes \
            == u.weight_bytes
    assert {n for u in units for n in u.layers} >= set(layers)


@pytest.mark.parametrize("s", [0, 1])
def test_the_stage_holds_the_shards_and_moves_three_psi_a_micro_batch(s):
    units, plain, layers = units_of(s)
    built = stage(s).stream
    psi = 0
    for n in layers:
        params = plain.tensors[weight_name(n)].bytes // 4
        psi += params
        held = model_state_bytes(params, DP, 3, "float32", "adam")
        assert (built.tensors[weight_name(n)].bytes, built.tensors[wgrad_name(n)].bytes,
                built.tensors[state_name(n)].bytes) == \
            (held.weights, held.gradients, held.optimizer)
    # the step runs no collective: the weights stay sharded until the next gather
    assert not [op for op in built.ops if op.phase == "update" and op.group]
    moved = sum(built.tensors[op.name].bytes * (2 if op.op == "all_reduce" else 1)
                for op in built.ops if op.group == "dp")
    assert moved == MICRO * step_volume_bytes(psi, 3, "float32") == MICRO * 3 * psi * 4


def test_zero_3_at_dp_1_runs_no_dp_collective():
    assert not [op for op in stage(0, 3, 1).stream.ops if op.group == "dp"]


@pytest.mark.parametrize("s", [0, 1])
def test_at_most_two_units_gathered_and_two_gradient_buffers_at_once(s):
    held = {":fsdp_w": set(), ":fsdp_dw": set()}
    most = {key: 0 for key in held}
    for op in stage(s).stream.ops:
        for suffix, alive in held.items():
            if op.name.endswith(suffix):
                if op.op == "alloc":
                    alive.add(op.name)
                elif op.op == "free":
                    alive.discard(op.name)
                most[suffix] = max(most[suffix], len(alive))
    assert most == {":fsdp_w": 2, ":fsdp_dw": 2}
    assert not any(held.values())
