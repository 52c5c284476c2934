"""ZeRO-Offload under data parallelism on a pipeline stage (workloads/parallel/zero_offload.py):
each rank's buckets hold its 1/dp partition of its stage's parameters (DeepSpeed pads the flat
buffer to dp equal parts), the stage's stream reduce-scatters the gradients before their
partitions leave and all-gathers the weights after the host's step, and each gradient is
final where its reduce-scatter (or, at dp 1, its last kernel) ends."""
from __future__ import annotations

import pytest

from sst_cdma.model.fitted import kernel_model_for
from workloads import load_network
from workloads.errors import WorkloadError
from workloads.model_states import Placement
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.transformer_stages import tied_head, transformer_stage_stream
from workloads.parallel.zero_offload import (final_gradient_ops, offload_collectives,
                                             partition, stage_state_plan)
from workloads.render import iteration_stream
from workloads.vdnn import OPTIMIZERS, weight_name, wgrad_name

NETWORK, SEQ, BATCH, DTYPE = "gpt2_small", 128, 1, "float16"
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
HOST = Placement("host")


def stage(pp: int, dp: int, zero: int, s: int = 0, m: int = 2):
    """Stage ``s`` of gpt2_small with its optimizer states on the host."""
    plan = iteration_stream(NETWORK, BATCH, DTYPE, "none", optimizer="adam",
                            kernel_model=kernel_model_for("hopper"), seq_len=SEQ,
                            placement=HOST).plan
    assert plan is not None
    lay = make_layout(SHAPE, pp=pp, dp=dp, zero=zero, micro_batches=m,
                      micro_batch_size=BATCH)
    net = load_network(NETWORK, SEQ)
    return transformer_stage_stream(plan, lay, s, "t", tied_head(net, "none"), None, "adam",
                                    HOST)


def test_partition_is_the_padded_share_at_zero_1_2_and_3_only():
    assert partition(10, 4, 1) == 3 and partition(12, 4, 2) == 3 and partition(10, 4, 3) == 3
    assert partition(10, 4, 0) == 10 and partition(10, 1, 1) == 10


def test_a_zero_3_bucket_holds_each_layer_s_shard():
    # ZeRO 3 partitions each parameter (DeepSpeed pads each to dp parts), ZeRO 1-2 the flat
    # buffer: 3 + 3 against ceil(20 / 4) = 5
    weighted = [("a", 10), ("b", 10)]
    (z3,) = stage_state_plan(weighted, DTYPE, "adam", HOST, 4, 3).buckets
    (z1,) = stage_state_plan(weighted, DTYPE, "adam", HOST, 4, 1).buckets
    assert z3.params == 6 and z3.grad_bytes == z3.weight_bytes == 12 and z1.params == 5


@pytest.mark.parametrize("dp", [1, 2, 4, 8])
def test_each_rank_s_buckets_hold_its_partition(dp):
    weighted = [("a", 1000), ("b", 3001), ("c", 7)]
    plan = stage_state_plan(weighted, DTYPE, "adam", HOST, dp, 1 if dp > 1 else 0)
    (bucket,) = plan.buckets  # DeepSpeed's 5e8-element bucket holds them all
    shard = -(-4008 // dp)
    adam = OPTIMIZERS["adam"]
    assert bucket.layers == ("c", "b", "a")  # backward order
    assert bucket.params == shard and bucket.grad_bytes == bucket.weight_bytes == 2 * shard
    assert bucket.state_bytes == adam.state_bytes(shard, DTYPE)
    assert bucket.step_dram_bytes == adam.dram_bytes(shard, DTYPE)


def test_a_small_bucket_cuts_whole_gradients_in_backward_order():
    weighted = [("a", 100), ("b", 100), ("c", 100)]
    placement = Placement("host", bucket_bytes=400)  # two layers' float16 gradients
    plan = stage_state_plan(weighted, DTYPE, "adam", placement, 4, 2)
    assert [b.layers for b in plan.buckets] == [("c", "b"), ("a",)]
    assert [b.params for b in plan.buckets] == [50, 25]


def test_collectives_around_the_host_step():
    weighted = [("a", 10), ("b", 20)]
    scatters, gathers = offload_collectives(weighted, 4, 1)
    assert [(op.op, op.name, op.group) for op in scatters] == \
        [("reduce_scatter", wgrad_name("b"), "dp"), ("reduce_scatter", wgrad_name("a"), "dp")]
    assert [(op.op, op.name) for op in gathers] == \
        [("all_gather", weight_name("a")), ("all_gather", weight_name("b"))]
    assert offload_collectives(weighted, 1, 0) == ([], [])
    # ZeRO 3's passes gather and reduce-scatter: nothing runs around the host's step
    assert offload_collectives(weighted, 4, 3) == ([], [])
    with pytest.raises(WorkloadError, match="zero 1, 2 or 3"):
        offload_collectives(weighted, 4, 0)


def test_refusals():
    with pytest.raises(WorkloadError, match="on the GPU"):
        stage_state_plan([("a", 1)], DTYPE, "adam", Placement(), 2, 1)
    with pytest.raises(WorkloadError, match="no weighted layer"):
        stage_state_plan([], DTYPE, "adam", HOST, 2, 1)


@pytest.mark.parametrize("dp, zero", [(1, 0), (4, 1)])
def test_a_stage_s_stream_moves_its_partition(dp, zero):
    built = stage(2, dp, zero)
    ops, tensors = built.stream.ops, built.stream.tensors
    plan = built.model_states
    assert plan is not None
    stage_params = sum(t.bytes // 2 for t in tensors.values()
                       if t.kind == "weight" and t.name == weight_name(t.layer))
    assert sum(b.params for b in plan.buckets) == -(-stage_params // dp)
    # no optimizer state and no update kernel on the GPU: the host steps them
    assert not [t for t in tensors.values() if t.kind == "state"]
    assert not [op for op in ops if op.op == "compute" and op.phase == "update"]
    scatters = [op.name for op in ops if op.op == "reduce_scatter"]
    gathers = [i for i, op in enumerate(ops) if op.op == "all_gather"]
    grads = {w for b in plan.buckets for w in b.wgrads}
    if dp == 1:
        assert not scatters and not gathers
    else:
        assert set(scatters) == grads
        # the gathers and the epilogue are the ops that wait for the host
        assert gathers[0] == len(ops) - built.after_states
    final = final_gradient_ops(list(ops), plan)
    assert sorted(w for ws in final.values() for w in ws) == sorted(grads)
    for at, ws in final.items():
        op = ops[at]
        if dp == 1:
            assert op.op == "compute" and op.phase == "backward"
            assert not any(w in later.writes for later in ops[at + 1:] for w in ws)
        else:
            assert op.op == "reduce_scatter" and ws == (op.name,)


@pytest.mark.parametrize("s", [0, 1])
def test_a_zero_3_stage_moves_its_shards_and_gathers_nothing_after_the_step(s):
    dp, m = 4, 2
    built = stage(2, dp, 3, s, m=m)
    unsharded = stage(2, 1, 0, s, m=m).stream.tensors
    ops, tensors = built.stream.ops, built.stream.tensors
    plan = built.model_states
    assert plan is not None
    weights = {t.layer: t.bytes // 2 for t in unsharded.values()
               if t.kind == "weight" and t.name == weight_name(t.layer)}
    # each layer's weights and gradients on the GPU are its 1/dp shard, no state is there,
    # and the host's buckets hold exactly those shards
    for layer, params in weights.items():
        assert tensors[weight_name(layer)].bytes == tensors[wgrad_name(layer)].bytes == \
            2 * -(-params // dp)
    assert not [t for t in tensors.values() if t.kind == "state"]
    assert sum(b.params for b in plan.buckets) == sum(-(-p // dp) for p in weights.values())
    assert not [op for op in ops if op.op == "compute" and op.phase == "update"]
    # the only dp collectives are the passes' (FSDP units'); none after the step
    assert not [op for op in ops if op.phase == "update" and op.group == "dp"]
    assert gathers_after(ops, built.after_states) == []
    # a gradient is final when the last micro-batch's reduce-scatter of its unit has ended
    final = final_gradient_ops(list(ops), plan)
    grads = {w for b in plan.buckets for w in b.wgrads}
    assert sorted(w for ws in final.values() for w in ws) == sorted(grads)
    for at, ws in final.items():
        op = ops[at]
        assert op.op == "collective_wait" and op.name.endswith(":fsdp_dw")
        scatter = max(i for i in range(at) if ops[i].op == "reduce_scatter"
                      and ops[i].name == op.name)
        # the last micro-batch's, after the last kernel writing each gradient (a tied
        # head's copy, which no kernel writes, after the last backward kernel)
        assert not any(k.op == "reduce_scatter" and k.name == op.name for k in ops[at + 1:])
        for w in ws:
            writes = [i for i, k in enumerate(ops) if k.op == "compute" and w in k.writes]
            assert not writes or max(writes) < scatter


def gathers_after(ops, after: int) -> list:
    """The all-gathers among the ``after`` ops that wait for the host."""
    return [op for op in ops[len(ops) - after:] if op.op == "all_gather"]


@pytest.mark.parametrize("s", [0, 1])
def test_a_zero_2_stage_keeps_only_the_gradient_shard_and_moves_it_once(s):
    dp, m = 4, 2
    built, zero1 = stage(2, dp, 2, s, m=m), stage(2, dp, 1, s, m=m)
    ops, tensors = built.stream.ops, built.stream.tensors
    plan, plan1 = built.model_states, zero1.model_states
    assert plan is not None and plan1 is not None
    grads = {w for b in plan.buckets for w in b.wgrads}
    # every layer a backward kernel writes has its gradient reduce-scattered in each
    # micro-batch's pass, its persistent gradient the 1/dp shard (ZeRO 1's is whole)
    buffers = [op.name for op in ops if op.op == "reduce_scatter" and op.async_]
    assert buffers and all(b.endswith(":zero2_dw") for b in buffers)
    in_passes = {b[:-len(":zero2_dw")] for b in buffers}
    assert len(buffers) == m * len(in_passes)
    for layer in in_passes:
        whole = zero1.stream.tensors[wgrad_name(layer)].bytes
        assert tensors[wgrad_name(layer)].bytes == 2 * -(-(whole // 2) // dp) < whole
        assert tensors[f"{layer}:zero2_dw"].bytes == whole
    # the update reduce-scatters only the gradients no pass reduced; the host's buckets,
    # what each copy moves, are the same partitions as ZeRO 1's
    again = {op.name for op in ops if op.op == "reduce_scatter" and op.phase == "update"}
    assert again == grads - {wgrad_name(layer) for layer in in_passes}
    assert [b.grad_bytes for b in plan.buckets] == [b.grad_bytes for b in plan1.buckets]
    # each reduced gradient's partition leaves once: after the last micro-batch's wait
    final = final_gradient_ops(list(ops), plan)
    assert sorted(w for ws in final.values() for w in ws) == sorted(grads)
    for at, ws in final.items():
        op = ops[at]
        if op.op == "collective_wait":
            assert op.name.endswith(":zero2_dw")
            assert not any(k.op == "reduce_scatter" and k.name == op.name for k in ops[at:])
            assert ws == (wgrad_name(op.name[:-len(":zero2_dw")]),)
        else:
            assert op.op == "reduce_scatter" and ws == (op.name,) and op.name in again
