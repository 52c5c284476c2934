"""The tied word embeddings' gradient all-reduce over the embedding group
(workloads/parallel/tied_grads.py): gpt2_small (tied head, learned positions) over tp 2 x pp 3.
The first and the last stage each issue one all-reduce a step, of the same bytes (the head's
vocabulary shard x hidden; its 1/dp shard where the gradients are sharded), after the dp
reductions and the sequence-parallel all-reduce and before the first step kernel; the last
stage in place on its copy's gradient, the first on a buffer of its own (its embedding
gradient holds the position table too); a middle stage, one stage, or a head that is not to
all-reduce issue none."""
from __future__ import annotations

import pytest

from workloads import load_network
from workloads.parallel import ModelShape, make_layout
from workloads.parallel.tensor import shard_transformer
from workloads.parallel.tied_grads import (EMBEDDING_GROUP, WORD_EMBEDDING_GRADS,
                                           with_embedding_all_reduce,
                                           word_embedding_grad_bytes)
from workloads.parallel.transformer_stages import (shard_plan, tied_head,
                                                   transformer_stage_stream)
from workloads.stream_schema import COLLECTIVE_WAIT, StreamOp, StreamTensor

SHAPE = ModelShape(layers=12, heads=12, kv_heads=12, hidden=768, ffn=3072, vocab=50257)
SEQ, DTYPE = 256, "float32"


def streams(pp: int, dp: int = 1, zero: int = 0, sp: bool = False, all_reduce: bool = True):
    """Every stage's stream of gpt2_small over tp 2 x ``pp`` x ``dp``, and the tied head."""
    net = load_network("gpt2_small", SEQ)
    shard = shard_transformer(net, 2, sp)
    plan = shard_plan(net, 2, 1, DTYPE, "none", "adam", sequence_parallel=sp)
    layout = make_layout(SHAPE, tp=2, pp=pp, dp=dp, zero=zero, micro_batches=2,
                         sequence_parallel=sp)
    tied = tied_head(shard.network, "adam", all_reduce)
    assert tied is not None
    return [transformer_stage_stream(plan, layout, s, tied=tied, shard=shard,
                                     optimizer="adam").stream for s in range(pp)], tied


def embedding_ops(stream):
    """The stream's collectives over the embedding group."""
    return [op for op in stream.ops if op.group == EMBEDDING_GROUP]


@pytest.mark.parametrize("dp, zero, sharded", [(1, 0, False), (2, 0, False), (2, 1, False),
                                               (2, 2, True), (2, 3, True)])
def test_the_end_stages_all_reduce_the_word_embeddings_gradient_once(dp, zero, sharded):
    stages, tied = streams(3, dp, zero)
    words = tied.params * 4 if not sharded else -(-tied.params // dp) * 4
    first, middle, last = (embedding_ops(s) for s in stages)
    assert middle == []
    for stream, ops, name in ((stages[0], first, WORD_EMBEDDING_GRADS),
                              (stages[2], last, "lm_head:dw")):
        assert [(op.op, op.name, op.phase) for op in ops] == [("all_reduce", name, "update")]
        assert stream.tensors[name].bytes == words
        update = [op for op in stream.ops if op.phase == "update"]
        at = update.index(ops[0])
        # after every dp reduction (or its wait), before the first step kernel
        assert all(op.op != "compute" for op in update[:at])
        assert update[at + 1:] and any(op.op == "compute" for op in update[at + 1:])
        assert all(op.op not in ("reduce_scatter", COLLECTIVE_WAIT) and
                   not (op.op == "all_reduce" and op.group == "dp") for op in update[at + 1:])
    # the first stage's embedding gradient holds the positions too: a buffer around the op
    i = stages[0].ops.index(first[0])
    assert [(op.op, op.name) for op in (stages[0].ops[i - 1], stages[0].ops[i + 1])] == \
        [("alloc", WORD_EMBEDDING_GRADS), ("free", WORD_EMBEDDING_GRADS)]
    assert stages[0].tensors["embed:dw"].bytes > stages[0].tensors[WORD_EMBEDDING_GRADS].bytes


def test_it_follows_the_sequence_parallel_all_reduce():
    stages, _ = streams(2, sp=True)
    for stream in stages:
        update = [op for op in stream.ops if op.phase == "update"]
        kinds = [(op.op, op.group) for op in update if op.group]
        assert kinds == [("all_reduce", "tp"), ("all_reduce", EMBEDDING_GROUP)]


def test_no_all_reduce_on_one_stage_or_when_not_asked():
    assert all(embedding_ops(s) == [] for s in streams(1)[0])
    assert all(embedding_ops(s) == [] for s in streams(2, all_reduce=False)[0])


def test_in_place_when_the_bytes_match_else_a_buffer():
    update = [StreamOp("collective_wait", "g", "update"), StreamOp("compute", "x", "update"),
              StreamOp("sync", "x", "update")]
    tensors = {"g": StreamTensor("g", 64, "gradient", "x")}
    same, ops = with_embedding_all_reduce(update, tensors, "g", 64)
    assert same == tensors
    assert [(op.op, op.name) for op in ops] == [("collective_wait", "g"), ("all_reduce", "g"),
                                                ("compute", "x"), ("sync", "x")]
    more, ops = with_embedding_all_reduce(update, tensors, "g", 48)
    assert more[WORD_EMBEDDING_GRADS].bytes == 48
    assert [op.op for op in ops] == ["collective_wait", "alloc", "all_reduce", "free",
                                     "compute", "sync"]
    # no step kernel (its states stepped on the host): at the update's end
    _, ops = with_embedding_all_reduce(update[:1], tensors, "g", 64)
    assert [op.op for op in ops] == ["collective_wait", "all_reduce"]
    assert word_embedding_grad_bytes(10, "float16", 4, True) == 3 * 2
    assert word_embedding_grad_bytes(10, "float16", 4, False) == 10 * 2
