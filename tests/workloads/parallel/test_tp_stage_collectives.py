"""The tensor-parallel collectives of a pipeline stage's stream (transformer_stages'
with_tp_collectives): gpt2_small over tp 2 x pp 2 with 4 micro-batches. Each (micro-batch,
chunk) pass runs exactly the shard's CommOps of its layers, in their order, with their kinds
and bytes, each right after its layer's kernel: two all-reduces per block and pass without
sequence parallelism (Megatron's f and f-bar), all-gathers and reduce-scatters with it; the
embedding's on the first stage, the LM head's and the cross entropy's on the last; with
sequence parallelism each stage all-reduces its own layers' norm and bias gradients once, the
stages together the whole network's. The tensors each pass holds shrink as tensor.py's
accounting says. A recomputed forward kernel runs its layer's forward collectives again (full
recomputation); the attention core's recomputation (selective) runs none."""
from __future__ import annotations

import pytest

from workloads import load_network
from workloads.dtypes import itemsize
from workloads.parallel import LayoutError, ModelShape, make_layout
from workloads.parallel.tensor import CommOp, saved_activations, shard_transformer
from workloads.parallel.transformer_stages import (SEQUENCE_PARALLEL_GRADS, chunk_cuts,
                                                   micro_batch_name, shard_plan,
                                                   transformer_stage_stream,
                                                   with_tp_collectives)
from workloads.stream_schema import COLLECTIVES
from workloads.transformer import split_name

SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
TP, PP, M, BATCH, DTYPE, SEQ = 2, 2, 4, 1, "float32", 512


def built(sp: bool, policy: str = "none"):
    """The shard, its plan (under ``policy``), the layout and both stages' streams."""
    net = load_network("gpt2_small", SEQ)
    shard = shard_transformer(net, TP, sp)
    plan = shard_plan(net, TP, BATCH, DTYPE, policy, "adam", sequence_parallel=sp)
    layout = make_layout(SHAPE, tp=TP, pp=PP, micro_batches=M, sequence_parallel=sp)
    stages = [transformer_stage_stream(plan, layout, s, shard=shard) for s in range(PP)]
    return shard, plan, layout, stages


def stage_layers(plan, layout, stage: int) -> set[str]:
    """The layers of the stage's chunks."""
    return {name for cut in chunk_cuts(plan, layout)
            if cut.chunk.virtual_stage % layout.pp == stage for name in cut.layers}


def span_collectives(stream, start: int, end: int) -> list[tuple[str, int]]:
    """(kind, bytes) of the collectives of ops[start:end]."""
    return [(op.op, stream.tensors[op.name].bytes) for op in stream.ops[start:end]
            if op.op in COLLECTIVES]


@pytest.mark.parametrize("sp", [False, True])
def test_each_pass_runs_exactly_the_comm_ops_of_its_layers(sp):
    shard, plan, layout, stages = built(sp)
    comm = shard.comm_ops(BATCH, DTYPE)
    covered: list[CommOp] = []
    for s, stage in enumerate(stages):
        mine = stage_layers(plan, layout, s)
        ops = {phase: [c for c in comm if c.phase == phase and c.after_layer in mine]
               for phase in ("forward", "backward")}
        covered += ops["forward"] + ops["backward"]
        for mb in range(M):
            span = stage.spans[(mb, 0)]
            for phase, (start, end) in (("forward", (span.forward_start, span.forward_end)),
                                        ("backward", (span.backward_start,
                                                      span.backward_end))):
                assert span_collectives(stage.stream, start, end) == \
                    [(c.kind, c.bytes) for c in ops[phase]]
        # every collective names the tp group and lies in a pass, but the stage's one update
        every = [op for op in stage.stream.ops if op.op in COLLECTIVES]
        assert {op.group for op in every} == {"tp"}
        update = [op for op in every if op.phase == "update"]
        assert len(every) == M * (len(ops["forward"]) + len(ops["backward"])) + len(update)
        assert [op.name for op in update] == ([SEQUENCE_PARALLEL_GRADS] if sp else [])
    # the stages together run every forward and backward CommOp once a micro-batch
    assert sorted(map(repr, covered)) == \
        sorted(repr(c) for c in comm if c.phase != "update")


def test_without_sequence_parallelism_two_all_reduces_a_block_and_pass_in_place():
    shard, plan, layout, stages = built(False)
    for s, stage in enumerate(stages):
        ops = stage.stream.ops
        for b in sorted({split_name(n)[0] for n in stage_layers(plan, layout, s)} - {None}):
            fwd = [op.name for op in ops if op.op == "all_reduce" and op.phase == "forward"
                   and op.name.startswith(f"blk{b}/") and op.name.endswith(".m0")]
            bwd = [op.name for op in ops if op.op == "all_reduce" and op.phase == "backward"
                   and op.name.startswith(f"blk{b}/") and op.name.endswith(".m0")]
            # Megatron's f-bar on the row-parallel outputs, f on the column-parallel inputs'
            # gradients, in the activation tensors themselves
            assert fwd == [f"blk{b}/proj.m0", f"blk{b}/fc2.m0"]
            assert bwd == [f"blk{b}/ln2:grad.m0", f"blk{b}/ln1:grad.m0"]
        # each in-place all-reduce follows the kernel that writes its tensor
        for i, op in enumerate(ops):
            if op.op == "all_reduce" and op.phase != "update" and ":tp_" not in op.name:
                assert ops[i - 1].op == "compute" and op.name in ops[i - 1].writes
    first, last = (stage.stream.ops for stage in stages)
    ends = {s: {op.name.split(":")[0].split(".")[0] for op in ops if op.op in COLLECTIVES
                and not op.name.startswith("blk")} for s, ops in enumerate((first, last))}
    # the embedding's all-reduce on the first stage, the head's and the loss's on the last
    assert ends == {0: {"embed"}, 1: {"loss", "ln_f"}}
    assert any(op.op == "all_reduce" and op.name == micro_batch_name("embed", 0)
               for op in first)
    # the cross entropy's three all-reduces of one float32 per token, in buffers of their own
    tokens = BATCH * SEQ
    loss = [op for op in last if op.op == "all_reduce" and op.name.startswith("loss:")]
    assert len(loss) == 3 * M
    assert {stages[1].stream.tensors[op.name].bytes for op in loss} == {4 * tokens}
    assert any(op.op == "all_reduce" and op.name == micro_batch_name("ln_f:grad", 0)
               for op in last)


def test_with_sequence_parallelism_gathers_and_scatters_in_buffers():
    shard, plan, layout, stages = built(True)
    whole = shard_transformer(load_network("gpt2_small", SEQ), TP, False).network
    hidden = whole.tensors(BATCH, DTYPE)["blk0/proj"].bytes
    for stage in stages:
        ops = stage.stream.ops
        kinds = {op.op for op in ops if op.op in COLLECTIVES and op.phase != "update"}
        assert {"all_gather", "reduce_scatter"} <= kinds
        for i, op in enumerate(ops):
            if op.op in ("all_gather", "reduce_scatter"):
                # a buffer of the whole sequence, allocated just before and freed just after
                assert ":tp_" in op.name
                assert (ops[i - 1].op, ops[i - 1].name) == ("alloc", op.name)
                assert (ops[i + 1].op, ops[i + 1].name) == ("free", op.name)
        gathers = [op for op in ops if op.op == "all_gather" and "/ln1:" in op.name]
        assert gathers and {stage.stream.tensors[op.name].bytes for op in gathers} == {hidden}


def test_each_stage_all_reduces_its_own_norm_and_bias_gradients():
    shard, plan, layout, stages = built(True)
    total = 0
    for s, stage in enumerate(stages):
        nbytes = stage.stream.tensors[SEQUENCE_PARALLEL_GRADS].bytes
        assert nbytes == shard.sequence_parallel_params(stage_layers(plan, layout, s)) \
            * itemsize(DTYPE)
        update = [op for op in stage.stream.ops if op.phase == "update"]
        # before the optimizer's first step
        at = [i for i, op in enumerate(update) if op.op == "all_reduce"]
        assert at == [1] and update[0].op == "alloc" and update[2].op == "free"
        assert update[3].op == "compute"
        total += nbytes
    assert total == shard.sequence_parallel_params() * itemsize(DTYPE)


def test_the_tensors_a_pass_holds_shrink_as_the_accounting_says():
    held, saved = {}, {}
    for sp in (False, True):
        shard, plan, layout, stages = built(sp)
        sizes = shard.network.tensors(BATCH, DTYPE)
        keep = saved_activations(shard.network, BATCH, DTYPE)
        held[sp], saved[sp] = 0, 0
        for s, stage in enumerate(stages):
            span = stage.spans[(0, 0)]
            live: dict[str, int] = {}
            for op in stage.stream.ops[span.forward_start:span.forward_end]:
                if op.op == "alloc":
                    live[op.name] = stage.stream.tensors[op.name].bytes
                elif op.op in ("free", "send"):
                    live.pop(op.name, None)
            base = {name.rsplit(".m", 1)[0]: nbytes for name, nbytes in live.items()}
            # no collective buffer outlives its collective; each tensor held at the shard's size
            assert not any(":tp_" in name for name in base)
            assert all(sizes[name].bytes == nbytes for name, nbytes in base.items())
            blocks = {split_name(n)[0] for n in stage_layers(plan, layout, s)} - {None}
            for b in blocks:
                # every tensor the accounting keeps for the backward pass is held, at its size
                assert all(base[t] == n for t, n in keep[b].items())
                saved[sp] += sum(keep[b].values())
            held[sp] += sum(base.values())
    assert saved[True] < saved[False]
    assert held[False] - held[True] >= saved[False] - saved[True]


def test_a_comm_op_after_a_layer_with_no_kernel_is_refused():
    net = load_network("gpt2_small", 128)
    plan = shard_plan(net, TP, BATCH, DTYPE, "none", "none")
    with pytest.raises(LayoutError, match="all_reduce over tp after layer tokens \\(forward\\): "
                                          "the plan has no forward kernel"):
        with_tp_collectives(plan, [CommOp("all_reduce", "tp", 8, "tokens", "forward")])


@pytest.mark.parametrize("sp", [False, True])
def test_a_recomputed_kernel_runs_its_forward_collectives_again(sp):
    shard, _, _, plain = built(sp)
    forward: dict[str, list[tuple[str, int]]] = {}
    for c in shard.comm_ops(BATCH, DTYPE):
        if c.phase == "forward":
            forward.setdefault(c.after_layer, []).append((c.kind, c.bytes))
    for policy, rerun in (("recompute", True), ("recompute-attn", False)):
        _, _, _, stages = built(sp, policy)
        for stage, before in zip(stages, plain):
            tensors = stage.stream.tensors
            span = stage.spans[(0, 0)]
            backward = stage.stream.ops[span.backward_start:span.backward_end]
            again = [op for op in backward if op.op == "compute" and op.pass_ == "recompute"]
            assert again  # each policy recomputes something on each stage
            expected = []
            for i, op in enumerate(backward):
                if op.op != "compute" or op.pass_ != "recompute":
                    continue
                mine = forward.get(op.name, [])
                # right after the recomputed kernel, before the next kernel: its layer's
                # forward collectives, in order, kinds and bytes, in the backward phase
                follows = [o for o in backward[i + 1:] if o.op in COLLECTIVES
                           or o.op == "compute"][:len(mine)]
                assert [(o.op, tensors[o.name].bytes) for o in follows] == mine
                assert all(o.phase == "backward" and o.group == "tp" for o in follows)
                expected += mine
            # selective recomputation redoes the attention core only, and no collective
            # follows one of its kernels (Korthikanti et al. 2022, section 5)
            assert bool(expected) == rerun
            if not rerun:
                assert {split_name(op.name)[1] for op in again} <= {"scores", "probs", "context"}
            # the pass runs the plain pass's collectives plus those again, nothing else
            first = before.spans[(0, 0)]
            base = span_collectives(before.stream, first.backward_start, first.backward_end)
            mine_all = span_collectives(stage.stream, span.backward_start, span.backward_end)
            assert sorted(mine_all) == sorted(base + expected)
