"""Pipeline stages of a real transformer (workloads/parallel/transformer_stages.py): gpt2_small's
single-GPU render cut over 2 and 4 stages. Every layer lies on exactly one stage; each
(micro-batch, chunk) pass runs the single-GPU render's kernels for its layers; the messages
carry the boundary tensor's bytes; the embedding and the LM head sit on the end stages; the
model states are allocated once; a plan that moves a tensor across a seam is refused."""
from __future__ import annotations

import pytest

from sst_cdma.model.fitted import kernel_model_for

from workloads import load_network
from workloads.parallel import LayoutError, ModelShape, make_layout, stage_order
from workloads.parallel.transformer_stages import (TiedHead, chunk_cuts, micro_batch_name,
                                                   shard_plan, tied_head,
                                                   transformer_stage_stream)
from workloads.render import iteration_stream
from workloads.transformer import split_name
from workloads.vdnn import grad_name

NETWORK, SEQ, BATCH, DTYPE = "gpt2_small", 128, 2, "float16"
#: gpt2_small: 12 blocks, 12 heads, hidden 768, FFN 3072, vocabulary 50257 (its definition)
SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)


def rendered(policy: str = "none", optimizer: str = "adam"):
    """The single-GPU plan of one micro-batch, its kernels priced by the H100's fitted
    model."""
    stream = iteration_stream(NETWORK, BATCH, DTYPE, policy, optimizer=optimizer,
                              kernel_model=kernel_model_for("hopper"), seq_len=SEQ)
    assert stream.plan is not None
    return stream.plan


def layout(pp: int, m: int = 3, schedule: str = "1f1b", vpp: int = 1, split=None):
    """A layout of gpt2_small over ``pp`` stages."""
    return make_layout(SHAPE, pp=pp, vpp=vpp, schedule=schedule, micro_batches=m,
                       micro_batch_size=BATCH, stage_split=split)


def base(name: str) -> str:
    """A stage tensor's name without its micro-batch suffix."""
    head, _, tail = name.rpartition(".m")
    return head if tail.isdigit() else name


def compute_key(op):
    """What the test compares of a kernel: its layer, pass, FLOPs, DRAM bytes and time."""
    return (op.name, op.pass_, op.flops, op.dram, op.time_ps)


@pytest.mark.parametrize("pp, split", [(2, None), (4, None), (4, (2, 4, 4, 2))])
def test_every_layer_is_on_exactly_one_stage(pp, split):
    plan = rendered()
    lay = layout(pp, split=split)
    streams = [transformer_stage_stream(plan, lay, s) for s in range(pp)]
    per_stage = [{op.name for op in st.stream.ops if op.op == "compute"} for st in streams]
    everything = {b.layer for b in plan.forward if b.kind != "data"}
    assert set().union(*per_stage) == everything
    assert sum(len(layers) for layers in per_stage) == len(everything)
    sizes = split or (12 // pp,) * pp
    for s, layers in enumerate(per_stage):
        blocks = {name.split("/")[0] for name in layers if name.startswith("blk")}
        first = sum(sizes[:s])
        assert blocks == {f"blk{b}" for b in range(first, first + sizes[s])}


@pytest.mark.parametrize("pp", [2, 4])
def test_each_pass_runs_the_single_gpu_kernels_of_its_layers(pp):
    plan = rendered()
    lay = layout(pp)
    for s in range(pp):
        built = transformer_stage_stream(plan, lay, s)
        ops = built.stream.ops
        for (mb, chunk), span in built.spans.items():
            forward = [op for op in ops[span.forward_start:span.forward_end]
                       if op.op == "compute"]
            backward = [op for op in ops[span.backward_start:span.backward_end]
                        if op.op == "compute"]
            layers = {op.name for op in forward}
            want_f = [op for b in plan.forward if b.layer in layers for op in b.ops
                      if op.op == "compute"]
            want_b = [op for b in plan.backward if b.layer in layers for op in b.ops
                      if op.op == "compute"]
            assert any(op.time_ps for op in want_f + want_b)   # matmuls priced by the model
            assert [compute_key(op) for op in forward] == [compute_key(op) for op in want_f]
            assert [compute_key(op) for op in backward] == [compute_key(op) for op in want_b]
            # the kernels read and write the micro-batch's own activations
            assert [tuple(map(base, op.reads)) for op in forward + backward] == \
                [op.reads for op in want_f + want_b]
            assert all(name.endswith(f".m{mb}") for op in forward for name in op.writes)


@pytest.mark.parametrize("pp", [2, 4])
def test_the_messages_carry_the_boundary_tensor_s_bytes(pp):
    plan = rendered()
    lay = layout(pp, m=2)
    # the residual stream entering a chunk: micro-batch x sequence x hidden, 2 bytes each
    boundary = BATCH * SEQ * 768 * 2
    tensors = load_network(NETWORK, SEQ).tensors(BATCH, DTYPE)
    for s in range(pp):
        stream = transformer_stage_stream(plan, lay, s).stream
        messages = [op for op in stream.ops if op.op in ("send", "recv")]
        last_block = 12 // pp * (s + 1) - 1
        first_in = f"blk{12 // pp * s - 1}/res2"
        want = []
        for mb in range(2):
            if s > 0:
                want.append(("recv", micro_batch_name(first_in, mb), s - 1, "forward"))
            if s < pp - 1:
                want.append(("send", micro_batch_name(f"blk{last_block}/res2", mb), s + 1,
                             "forward"))
        for mb in range(2):
            if s < pp - 1:
                want.append(("recv", micro_batch_name(grad_name(f"blk{last_block}/res2"), mb),
                             s + 1, "backward"))
            if s > 0:
                want.append(("send", micro_batch_name(grad_name(first_in), mb), s - 1,
                             "backward"))
        assert [(op.op, op.name, op.peer, op.phase) for op in messages] == want
        for op in messages:
            assert stream.tensors[op.name].bytes == boundary == tensors[
                base(op.name).removesuffix(":grad")].bytes


def test_the_end_stages_hold_the_embedding_and_the_head():
    plan = rendered()
    lay = layout(4, m=2)
    streams = [transformer_stage_stream(plan, lay, s).stream for s in range(4)]
    computes = [{op.name for op in st.ops if op.op == "compute"} for st in streams]
    weights = [{t.name for t in st.tensors.values() if t.kind == "weight"} for st in streams]
    assert {"embed"} <= computes[0] and "embed:w" in weights[0]
    assert {"ln_f", "lm_head", "loss"} <= computes[3] and "ln_f:w" in weights[3]
    for s in (1, 2):
        assert not computes[s] & {"embed", "ln_f", "lm_head", "loss"}
        assert not weights[s] & {"embed:w", "ln_f:w"}
    # the logits are the last stage's alone: a micro-batch x sequence x vocabulary tensor
    logits = BATCH * SEQ * 50257 * 2
    assert streams[3].tensors[micro_batch_name("lm_head", 0)].bytes == logits
    assert not any(t.name.startswith("lm_head") for s in range(3)
                   for t in streams[s].tensors.values())
    # stage 0 receives nothing in its forward passes, the last sends nothing forward
    assert not [op for op in streams[0].ops if op.op == "recv" and op.phase == "forward"]
    assert not [op for op in streams[3].ops if op.op == "send" and op.phase == "forward"]


def test_the_model_states_are_allocated_once_and_stepped_once():
    plan = rendered()
    lay = layout(2, m=3)
    built = transformer_stage_stream(plan, lay, 1)
    ops = built.stream.ops
    prologue = built.steps[0]
    assert prologue.phase == "prologue"
    states = {t.name for t in built.stream.tensors.values() if t.kind in ("weight", "state")}
    allocs = [op.name for op in ops if op.op == "alloc" and base(op.name) == op.name
              and op.name in states]
    assert sorted(allocs) == sorted(states)
    assert all(ops.index(next(o for o in ops if o.op == "alloc" and o.name == t))
               < prologue.end for t in states)
    # blocks 6-11's weights and ln_f's, one update kernel each
    updates = [op.name for op in ops if op.op == "compute" and op.pass_ == "update"]
    assert updates == [op.name for b in plan.update for op in b.ops if op.op == "compute"
                       and (op.name == "ln_f" or (split_name(op.name)[0] or 0) >= 6)]
    assert built.steps[-1].phase == "update" and built.steps[-1].start < built.steps[-1].end
    # every pass the order runs, once, between the prologue and the update
    order = stage_order(lay, 1)
    assert [(s.micro_batch, s.phase) for s in built.steps[1:-1]] == \
        [(w.micro_batch, w.phase) for w in order]


def test_interleaved_chunks_take_their_virtual_stages_blocks():
    plan = rendered()
    lay = layout(2, m=4, schedule="interleaved", vpp=2)
    cuts = chunk_cuts(plan, lay)
    assert [c.layers[0] for c in cuts] == ["tokens", "blk3/ln1", "blk6/ln1", "blk9/ln1"]
    built = transformer_stage_stream(plan, lay, 1)
    # stage 1 holds virtual stages 1 and 3: it sends chunk 0's output round the ring to
    # stage 0, whose chunk 1 takes it
    sends = {op.name for op in built.stream.ops if op.op == "send" and op.phase == "forward"}
    assert sends == {micro_batch_name("blk5/res2", mb) for mb in range(4)}


def test_a_tensor_parallel_shard_splits_the_kernels():
    net = load_network(NETWORK, SEQ)
    whole = shard_plan(net, 1, BATCH, DTYPE, "none", "adam")
    half = shard_plan(net, 2, BATCH, DTYPE, "none", "adam")
    lay = layout(2, m=1)
    one = transformer_stage_stream(whole, lay, 0).stream
    two = transformer_stage_stream(half, lay, 0).stream
    flops = {op.name: op.flops for op in one.ops if op.op == "compute" and op.pass_ == "fwd"}
    shard = {op.name: op.flops for op in two.ops if op.op == "compute" and op.pass_ == "fwd"}
    for layer in ("blk0/qkv", "blk0/proj", "blk0/fc1", "blk0/fc2"):
        assert shard[layer] * 2 == flops[layer]
    # the residual stream is whole on every tensor-parallel rank: the same message
    sent = [op.name for op in two.ops if op.op == "send"]
    assert two.tensors[sent[0]].bytes == one.tensors[sent[0]].bytes


def test_vdnn_s_prefetches_ahead_stay_on_the_stage_that_offloaded():
    # vDNN-all prefetches ahead the nearest earlier layer's offloaded tensors: at the first
    # block of a chunk that is the chunk before's last block, on another GPU; each such
    # prefetch moves to the start of the backward pass of the chunk that offloaded it
    plan = rendered("all")
    lay = layout(4, m=2)
    streams = [transformer_stage_stream(plan, lay, s).stream for s in range(4)]
    for stream in streams:
        offloaded = {op.name for op in stream.ops if op.op == "offload"}
        prefetched = [op.name for op in stream.ops if op.op == "prefetch"]
        assert sorted(prefetched) == sorted(offloaded)
    single = [op.name for b in plan.forward for op in b.ops if op.op == "offload"]
    # every tensor offloaded once per micro-batch, on one stage (the boundary tensor by the
    # stage that received it)
    assert sorted(base(op.name) for st in streams for op in st.ops if op.op == "offload") == \
        sorted(single * 2)

    def chunk_of(layer: str) -> int:   # 3 blocks a stage; the embedding first, the head last
        block = split_name(layer)[0]
        return block // 3 if block is not None else (0 if layer in ("tokens", "embed") else 3)

    offloader = {op.name: chunk_of(b.layer) for b in plan.forward for op in b.ops
                 if op.op == "offload"}
    crossing = [(chunk_of(b.layer), op.name) for b in plan.backward for op in b.ops
                if op.op == "prefetch" and chunk_of(b.layer) != offloader[op.name]]
    assert crossing   # the single-GPU plan does prefetch across the seams
    for _, tensor in crossing:
        stage = offloader[tensor]
        prefetches = [op for op in streams[stage].ops if op.op == "prefetch"
                      and base(op.name) == tensor]
        assert len(prefetches) == 2 and all(op.phase == "backward" for op in prefetches)


def test_a_plan_that_moves_a_tensor_across_a_seam_is_refused():
    # recomputing the boundary tensor re-runs its producer, on the stage before, where the
    # stage that needs it has none of its inputs
    plan = iteration_stream(NETWORK, BATCH, DTYPE, "plan", optimizer="adam", seq_len=SEQ,
                            choices=(("blk5/res2", "recompute"),)).plan
    with pytest.raises(LayoutError, match=r"compute blk5/res2 on virtual stage 1 names tensor "
                                          r"blk5/res1 of virtual stage 0: the plan moves it "
                                          r"across the seam"):
        transformer_stage_stream(plan, layout(2), 1)


def test_a_per_tensor_policy_applies_per_chunk():
    plan = rendered("recompute-attn")
    lay = layout(4, m=2)
    recomputed = [op.name for s in range(4) for op in
                  transformer_stage_stream(plan, lay, s).stream.ops
                  if op.op == "compute" and op.pass_ == "recompute"]
    single = [op.name for b in plan.backward for op in b.ops
              if op.op == "compute" and op.pass_ == "recompute"]
    assert sorted(recomputed) == sorted(single * 2)


def test_a_bad_stage_is_refused():
    with pytest.raises(LayoutError, match="stage 4 is not a pipeline rank of pp 4"):
        transformer_stage_stream(rendered(), layout(4), 4)


def test_the_last_stage_holds_a_copy_of_the_tied_word_embeddings():
    # gpt2_small ties its LM head to the word embeddings (50257 x 768): Megatron-LM keeps a
    # copy, with its gradient and optimizer state, on the last stage
    plan = rendered()
    tied = tied_head(load_network(NETWORK, SEQ), "adam")
    assert tied == TiedHead(50257 * 768, "adam")
    lay = layout(4, m=2)
    last = transformer_stage_stream(plan, lay, 3, tied=tied)
    tensors = last.stream.tensors
    assert tensors["lm_head:w"].bytes == tensors["lm_head:dw"].bytes == 50257 * 768 * 2
    # Adam in mixed precision: two moments and the master weights, float32
    assert tensors["lm_head:state"].bytes == 3 * 4 * 50257 * 768
    ops = last.stream.ops
    assert {op.name for op in ops[:last.steps[0].end] if op.op == "alloc"} >= \
        {"lm_head:w", "lm_head:dw", "lm_head:state"}
    assert [op.name for op in ops if op.op == "compute" and op.pass_ == "update"][-1] == \
        "lm_head"
    plain = transformer_stage_stream(plan, lay, 3)
    assert len(ops) == len(plain.stream.ops) + 3 + 2 + 3   # allocs, step and sync, frees
    for s in range(3):
        assert "lm_head:w" not in transformer_stage_stream(plan, lay, s, tied=tied).stream.tensors
    # one stage: the head uses the embedding's own weights
    assert "lm_head:w" not in transformer_stage_stream(plan, layout(1), 0, tied=tied).stream.tensors
    assert tied_head(load_network("llama3_8b", 128)) is None   # its own LM head weights
