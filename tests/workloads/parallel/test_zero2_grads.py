"""ZeRO-2's sharded gradients in a stage's passes (workloads/parallel/zero2_grads.py): gpt2_small
over tp 2 x pp 2 x dp 2 with 2 micro-batches. In every backward pass each layer the step updates
gets a buffer of its whole gradient before its first backward kernel, reduce-scattered over dp
right after that kernel's sync, waited for and freed once the next layer's is issued (the last
at the end of the pass); the persistent gradient is the 1/dp shard; the step reduces nothing
and all-gathers the weights it writes; a rank moves (m + 1)Ψ a step; at most two whole
gradients are held at once."""
from __future__ import annotations

import pytest

from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.tensor import shard_transformer
from workloads.parallel.transformer_stages import shard_plan, transformer_stage_stream
from workloads.parallel.zero import model_state_bytes
from workloads.parallel.zero2_grads import zero2_grad_name, zero2_pass
from workloads.stream_schema import COLLECTIVE_WAIT, StreamOp
from workloads.vdnn import weight_name, wgrad_name

SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
M = 2


def stage_stream(stage: int, dp: int = 2, zero: int = 2):
    """Stage ``stage``'s stream under tp 2 x pp 2 x ``dp`` with ZeRO ``zero``."""
    net = load_network("gpt2_small", 256)
    shard = shard_transformer(net, 2, False)
    plan = shard_plan(net, 2, 1, "float32", "none", "adam")
    layout = make_layout(SHAPE, tp=2, pp=2, dp=dp, zero=zero, micro_batches=M)
    return transformer_stage_stream(plan, layout, stage, shard=shard, optimizer="adam")


@pytest.mark.parametrize("stage", [0, 1])
def test_every_backward_pass_reduce_scatters_each_layer_s_whole_gradient(stage):
    built, plain = stage_stream(stage), stage_stream(stage, dp=1)
    ops, tensors = built.stream.ops, built.stream.tensors
    layers = [op.name for op in ops if op.op == "compute" and op.phase == "update"]
    for (mb, chunk), span in built.spans.items():
        backward = ops[span.backward_start:span.backward_end]
        scatters = [op for op in backward if op.op == "reduce_scatter"]
        assert sorted(op.name for op in scatters) == sorted(map(zero2_grad_name, layers))
        for layer in layers:
            buffer = zero2_grad_name(layer)
            at = {kind: [i for i, op in enumerate(backward) if op.op == kind and
                         op.name == buffer] for kind in ("alloc", "reduce_scatter",
                                                         COLLECTIVE_WAIT, "free")}
            assert all(len(v) == 1 for v in at.values()), (layer, at)
            kernels = [i for i, op in enumerate(backward) if op.op == "compute" and
                       op.name == layer and op.pass_ == "bwd"]
            # allocated just before its first backward kernel, reduced right after its sync
            assert at["alloc"][0] < kernels[0] and \
                all(backward[i].op not in ("compute",) for i in range(at["alloc"][0],
                                                                      kernels[0]))
            rs = at["reduce_scatter"][0]
            assert (backward[rs - 1].op, backward[rs - 1].name) == ("sync", layer)
            assert backward[rs].async_ and backward[rs].group == "dp"
            assert rs < at[COLLECTIVE_WAIT][0] == at["free"][0] - 1
            # the buffer holds the whole gradient; the persistent one is its 1/dp shard
            whole = plain.stream.tensors[wgrad_name(layer)].bytes
            assert tensors[buffer].bytes == whole
            params = whole // 4
            assert tensors[wgrad_name(layer)].bytes == \
                model_state_bytes(params, 2, 2, "float32", "adam").gradients == \
                -(-params // 2) * 4
        # each layer's wait comes once the next layer's reduce-scatter is issued
        waits = [op.name for op in backward if op.op == COLLECTIVE_WAIT]
        assert waits == [op.name for op in scatters]
        first_wait = next(i for i, op in enumerate(backward) if op.op == COLLECTIVE_WAIT)
        second_scatter = [i for i, op in enumerate(backward) if op.op == "reduce_scatter"][1]
        assert first_wait > second_scatter


@pytest.mark.parametrize("stage", [0, 1])
def test_the_step_reduces_nothing_and_the_volume_is_m_plus_1_psi(stage):
    built = stage_stream(stage)
    ops, tensors = built.stream.ops, built.stream.tensors
    update = [op for op in ops if op.phase == "update"]
    steps = [op for op in update if op.op == "compute"]
    layers = [op.name for op in steps]
    assert not [op for op in update if op.op in ("reduce_scatter", COLLECTIVE_WAIT)]
    last = update.index(steps[-1])
    assert [(op.op, op.name) for op in update[last:] if op.group == "dp"] == \
        [("all_gather", weight_name(n)) for n in layers]
    params = sum(tensors[weight_name(n)].bytes // 4 for n in layers)
    moved = sum(tensors[op.name].bytes for op in ops if op.group == "dp")
    assert moved == (M + 1) * params * 4


def test_at_most_two_whole_gradients_are_held_at_once():
    built = stage_stream(0)
    live, most = set(), 0
    for step in built.steps:
        for op in built.stream.ops[step.start:step.end]:
            if op.op == "alloc" and op.name.endswith(":zero2_dw"):
                live.add(op.name)
            elif op.op == "free":
                live.discard(op.name)
            most = max(most, len(live))
    assert most == 2 and not live


def test_a_pass_without_the_layers_is_unchanged():
    ops = [StreamOp("compute", "a", "backward", pass_="bwd"), StreamOp("sync", "a", "backward")]
    assert zero2_pass(ops, {"b"}) == ops
    done = zero2_pass(ops, {"a"})
    assert [(op.op, op.name) for op in done] == [
        ("alloc", "a:zero2_dw"), ("compute", "a"), ("sync", "a"),
        ("reduce_scatter", "a:zero2_dw"), (COLLECTIVE_WAIT, "a:zero2_dw"),
        ("free", "a:zero2_dw")]
