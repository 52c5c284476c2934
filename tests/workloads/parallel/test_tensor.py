"""Tensor and sequence parallelism (workloads/parallel/tensor.py): one rank's shard of a
transformer, the collectives it runs, and its saved activations beside Korthikanti et al.
(2022), term by term (docs/tensor_parallel.md)."""
from __future__ import annotations

import pytest

from sst_cdma.tools.tensor_parallel import main
from sst_cdma.model.fitted import kernel_model_for
from workloads import WorkloadError, load_network, parse_stream, stream_stats
from workloads.kernel_pricing import price_network
from workloads.loader import build_network
from workloads.parallel.tensor import (GPT3, PAPER_TERMS, CommOp, gpt3_like, korthikanti_rows,
                                       padded_vocab, saved_activations,
                                       shard_transformer)
from workloads.render import render_stream
from workloads.transformer import split_name

MATMULS = ("linear", "attn_scores", "attn_context", "flash_attention")
S, H, A, T = GPT3["seq_len"], GPT3["hidden"], GPT3["heads"], 8   # GPT-3 175B (Table 3)
SBH = S * 1 * H * 2          # one micro-batch of 16-bit activations: s b h elements, bytes
AS2B = A * S * S * 1         # a s^2 b, in the paper's byte terms


def small(**changes):
    """A two-block transformer of a chosen shape (GQA, SwiGLU... by ``changes``)."""
    doc = {"style": "llama", "layers": 2, "hidden": 256, "heads": 8, "kv_heads": 4,
           "ffn": 512, "vocab": 1000, "positions": 64, "seq_len": 64, "activation": "swiglu",
           "norm": "rmsnorm", "attention": "naive", "tie_embeddings": False, "bias": False}
    return build_network({"name": "small", "transformer": {**doc, **changes}}, "small.yaml")


NETWORKS = {
    "gpt2_small": lambda: load_network("gpt2_small"),       # positions, biases, tied head
    "llama_7b": lambda: load_network("llama_7b", seq_len=256),
    "gqa_fused": lambda: small(attention="fused"),
    "gpt_like_bias": lambda: small(style="gpt2", activation="gelu", norm="layernorm",
                                   bias=True, tie_embeddings=True, kv_heads=8),
}


def _replicated(whole):
    """What every rank holds whole, counted on the unsharded network: the norms, the
    row-parallel biases and the learned position table."""
    total = 0
    for info in whole.infer(1):
        part = split_name(info.name)[1]
        layer = whole.layer(info.name)
        if info.kind in ("layernorm", "rmsnorm"):
            total += info.params
        elif part in ("proj", "fc2") and layer.params["bias"]:
            total += info.shape[-1]
        elif part == "embed":
            total += layer.params["positions"] * layer.params["hidden"]
    return total


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_shards_times_tp_hold_the_whole_plus_the_replicated_and_the_padded_rows(name, tp, sp):
    whole = NETWORKS[name]()
    shard = shard_transformer(whole, tp, sp)
    embed = whole.layer("embed").params
    tables = 1 if whole.layer("lm_head").params["tied"] else 2
    padding = (shard.padded_vocab - embed["vocab"]) * embed["hidden"] * tables
    assert shard.padded_vocab % (128 * tp) == 0 and shard.padded_vocab >= embed["vocab"]
    assert shard.network.param_count() * tp == \
        whole.param_count() + (tp - 1) * _replicated(whole) + padding
    assert shard.replicated_params() == _replicated(whole)


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_the_shards_matmul_flops_times_tp_are_the_wholes(name, sp):
    tp = 4
    whole = NETWORKS[name]()
    shard = shard_transformer(whole, tp, sp)
    vocab, padded = whole.layer("embed").params["vocab"], shard.padded_vocab
    mine = {i.name: i for i in shard.network.infer(2, "float16")}
    checked = 0
    for info in whole.infer(2, "float16"):
        if info.kind not in MATMULS:
            continue
        ours = mine[info.name]
        scale = (padded, vocab) if info.name == "lm_head" else (1, 1)  # the padded rows
        assert ours.flops_fwd * tp * scale[1] == info.flops_fwd * scale[0], info.name
        assert ours.flops_bwd * tp * scale[1] == info.flops_bwd * scale[0], info.name
        checked += 1
    assert checked >= 2 * 5 + 1


def test_sequence_parallelism_splits_the_norms_and_residuals_by_tp():
    whole = NETWORKS["gpt_like_bias"]()
    plain, sp = (shard_transformer(whole, 4, s).network for s in (False, True))
    full = whole.tensors(2, "float16")
    for name in ("embed", "blk0/ln1", "blk0/proj", "blk0/res1", "blk1/ln2", "blk1/fc2",
                 "blk1/res2", "ln_f"):
        assert plain.tensors(2, "float16")[name].bytes == full[name].bytes, name
        assert sp.tensors(2, "float16")[name].bytes * 4 == full[name].bytes, name
    # the gathering GEMMs run over the whole sequence: their outputs are the plain shard's
    for name in ("blk0/qkv", "blk1/fc1", "lm_head", "loss"):
        assert sp.sample_shape(name) == plain.sample_shape(name), name


def test_gpt3_shape_with_sequence_parallelism_keeps_one_t_th_of_the_whole_per_block():
    net = gpt3_like()
    one = saved_activations(shard_transformer(net, 1).network, 1, "float16", "selective")[1]
    sp = saved_activations(shard_transformer(net, T, True).network, 1, "float16",
                           "selective")[1]
    assert sum(sp.values()) * T == sum(one.values()) == 32 * SBH // 2
    assert {k: v * T for k, v in sp.items()} == one


def _block_ops(ops, block):
    return [op for op in ops if op.after_layer.startswith(f"blk{block}/")]


def test_tensor_parallelism_runs_two_all_reduces_per_block_each_way_of_sbh_16_bit_bytes():
    shard = shard_transformer(gpt3_like(), T)
    ops = shard.comm_ops(1, "float16")
    for block in (0, 1):
        mine = _block_ops(ops, block)
        assert [(op.kind, op.after_layer, op.phase) for op in mine] == [
            ("all_reduce", f"blk{block}/proj", "forward"),
            ("all_reduce", f"blk{block}/fc2", "forward"),
            ("all_reduce", f"blk{block}/fc1", "backward"),
            ("all_reduce", f"blk{block}/qkv", "backward")]
        assert all(op.bytes == SBH and op.group == "tp" for op in mine)
    # the vocab-parallel ends: the embedding's sum, the head's input gradient, the loss's three
    assert (ops[0].kind, ops[0].after_layer, ops[0].bytes) == ("all_reduce", "embed", SBH)
    loss = [op for op in ops if op.after_layer == "loss"]
    assert [op.bytes for op in loss] == [S * 4] * 3 and all(op.kind == "all_reduce"
                                                            for op in loss)
    assert [op.phase for op in ops].index("backward") > max(
        i for i, op in enumerate(ops) if op.phase == "forward")


def test_sequence_parallelism_turns_them_into_all_gathers_and_reduce_scatters():
    shard = shard_transformer(gpt3_like(), T, sequence_parallel=True)
    ops = shard.comm_ops(1, "float16")
    mine = _block_ops(ops, 1)
    assert [(op.kind, op.after_layer.split("/")[1], op.phase) for op in mine] == [
        ("all_gather", "ln1", "forward"), ("reduce_scatter", "proj", "forward"),
        ("all_gather", "ln2", "forward"), ("reduce_scatter", "fc2", "forward"),
        ("all_gather", "res2", "backward"),        # fc2's output gradient
        ("all_gather", "act", "backward"),         # fc1's saved input, again
        ("reduce_scatter", "fc1", "backward"),
        ("all_gather", "res1", "backward"),        # proj's output gradient
        ("all_gather", "scores", "backward"),      # qkv's saved input, again
        ("reduce_scatter", "qkv", "backward")]
    assert all(op.bytes == SBH for op in mine)
    # GPT-3's learned positions: Megatron all-reduces the embedding, then splits it
    assert (ops[0].kind, ops[0].after_layer) == ("all_reduce", "embed")
    update = [op for op in ops if op.phase == "update"]
    norms_and_biases = 2 * (2 * 2 * H + 2 * H) + 2 * H    # ln1, ln2, proj, fc2; ln_f
    assert [(op.kind, op.bytes) for op in update] == [("all_reduce", norms_and_biases * 2)]


def test_rotary_embeddings_reduce_scatter_the_embedding_and_tp_1_runs_no_collective():
    ops = shard_transformer(small(), 4, True).comm_ops(1, "float16")
    assert (ops[0].kind, ops[0].after_layer, ops[0].bytes) == ("reduce_scatter", "embed",
                                                               64 * 256 * 2)
    assert shard_transformer(small(), 1).comm_ops(1, "float16") == []
    with pytest.raises(ValueError, match="kind 'broadcast'"):
        CommOp("broadcast", "tp", 1, "embed", "forward")


def _rows(tp, sp, recompute, attention="naive"):
    shard = shard_transformer(gpt3_like(attention), tp, sp)
    return {r.term: r for r in korthikanti_rows(shard, 1, "float16", recompute, block=1)}


def _paper(term, t, sp):
    whole = term.sbh * SBH // 2 + term.as2b * AS2B
    return whole // t if term.split or sp else whole


@pytest.mark.parametrize("tp, sp", [(1, False), (T, False), (T, True)])
@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_every_term_korthikanti_counts_the_simulator_counts_alike_or_does_not_model(
        tp, sp, recompute):
    rows = _rows(tp, sp, recompute)
    for term in PAPER_TERMS:
        row = rows[term.name]
        dropped = recompute == "selective" and term.core
        assert row.paper == (0 if dropped else _paper(term, tp, sp)), term.name
        if term.part and not dropped:
            assert row.simulator == row.paper and row.tensor, term.name
        else:   # the dropouts' masks and output: the simulator has no dropout
            assert row.simulator == 0, term.name
    # the totals: Table 2's formula, less the dropouts the simulator does not model
    paper = sum(r.paper for r in rows.values())
    sim = sum(r.simulator for r in rows.values())
    masks = 2 * (SBH // 2) // (tp if sp else 1)            # attention and MLP dropout masks
    core = 0 if recompute == "selective" else 3 * AS2B // tp
    formula = {"none": (10 + 24 // tp) * SBH // 2 + 5 * AS2B // tp if not sp
               else 34 * SBH // 2 // tp + 5 * AS2B // tp,
               "selective": (10 + 24 // tp) * SBH // 2 if not sp else 34 * SBH // 2 // tp}
    if tp == 1:
        formula = {"none": 34 * SBH // 2 + 5 * AS2B, "selective": 34 * SBH // 2}
    assert paper == formula[recompute]
    assert paper - sim == masks + core


def test_full_recomputation_keeps_the_layer_input_whole_or_one_t_th_with_sequence_parallel():
    row, = _rows(T, False, "full").values()
    assert row.paper == row.simulator == SBH and row.tensor == "blk0/res2"
    row, = _rows(T, True, "full").values()
    assert (row.paper, row.simulator) == (SBH, SBH // T)   # the paper's 2sbh assumes no SP


def test_fused_attention_keeps_no_square_tensor_but_its_float32_row_statistics():
    rows = _rows(T, True, "none", attention="fused")
    assert rows["softmax output"].simulator == 0 and rows["softmax output"].paper == 2 * AS2B // T
    context = rows["linear projection input"]
    assert context.tensor == "blk1/attn"
    assert context.simulator - context.paper == 4 * (A // T) * S    # (a/t) s float32 each


def test_swiglu_and_grouped_query_attention_differ_by_their_widths():
    net, tp = small(), 4                           # h 256, 8 heads of 32, 4 KV heads, ffn 512
    rows = {r.term: r for r in korthikanti_rows(shard_transformer(net, tp), 1, "float16")}
    assert rows["Q and K (4sbh), V (2sbh)"].simulator == (256 + 2 * 4 * 32) * 64 * 2 // tp
    assert rows["Q and K (4sbh), V (2sbh)"].tensor == "blk0/rope"
    assert rows["GeLU input"].simulator == 2 * 512 * 64 * 2 // tp      # gate and up
    assert rows["4h->h linear input"].simulator == 512 * 64 * 2 // tp
    assert rows["GeLU input"].paper == rows["4h->h linear input"].paper == 8 * 64 * 256 // tp


@pytest.mark.parametrize("changes, tp, sp, says", [
    ({}, 3, False, "tp 3 does not divide the 8 attention heads"),
    ({}, 8, False, "tp 8 does not divide the 4 KV heads"),
    ({"kv_heads": 8, "ffn": 100}, 8, False, "tp 8 does not divide the 100 FFN width"),
    ({"kv_heads": 8, "seq_len": 60}, 8, True, "tp 8 does not divide the 60 tokens"),
    ({}, 0, False, "tp must be a positive integer, got 0"),
    ({}, True, False, "tp must be a positive integer, got True"),
])
def test_a_tp_that_does_not_divide_is_refused_in_one_line_naming_it(changes, tp, sp, says):
    with pytest.raises(WorkloadError, match=says) as caught:
        shard_transformer(small(**changes), tp, sp)
    assert "\n" not in str(caught.value)


def test_the_vocabulary_is_padded_as_megatron_pads_it_not_refused():
    assert padded_vocab(50257, 1) == 50304 and padded_vocab(50257, 8) == 51200
    assert padded_vocab(51200, 8) == 51200 and padded_vocab(50257, 4, 1) == 50260
    shard = shard_transformer(load_network("gpt2_small"), 4, make_vocab_size_divisible_by=1)
    assert shard.network.layer("embed").params["vocab"] == 50260 // 4
    assert shard.network.sample_shape("lm_head")[-1] == 50260 // 4
    with pytest.raises(WorkloadError, match="make_vocab_size_divisible_by must be"):
        shard_transformer(small(), 2, make_vocab_size_divisible_by=0)


def test_a_network_not_expanded_from_a_transformer_is_refused():
    with pytest.raises(WorkloadError, match="shards a transformer"):
        shard_transformer(load_network("alexnet"), 2)
    with pytest.raises(WorkloadError, match="proj_in/proj_out"):
        shard_transformer(load_network("opt_350m"), 2)


@pytest.mark.parametrize("sp", [False, True])
def test_a_shard_renders_and_its_gemms_run_over_the_whole_sequence(sp):
    net = NETWORKS["gpt_like_bias"]()
    shard = shard_transformer(net, 4, sp).network
    stream = parse_stream(render_stream(shard, 2, "float16", "none"), "shard")
    assert stream_stats(stream).peak_bytes > 0
    model = kernel_model_for("hopper")
    plain = price_network(shard_transformer(net, 4).network, 2, "float16", model)
    priced = price_network(shard, 2, "float16", model)
    for name in ("blk0/qkv", "blk0/proj", "blk1/fc1", "blk1/fc2", "lm_head"):
        assert priced[name]["fwd"].time_ps == plain[name]["fwd"].time_ps > 0, name
        assert priced[name]["bwd"].time_ps == plain[name]["bwd"].time_ps > 0, name


def test_the_table_command_prints_the_pages_figures(capsys):
    assert main(["--table"]) == 0
    text = capsys.readouterr().out
    assert "| tensor + sequence parallel + selective recomputation | sbh(34/t) | 4.25 | 4 | " \
           "0.25 |" in text
    with pytest.raises(SystemExit):
        main([])
