"""Transformer workloads: the ``transformer:`` definitions, their layer names and roles,
shapes, parameter counts, FLOPs, backward needs, options (seq_len, attention), errors, pricing
and simulation."""
from __future__ import annotations

import io
import math
import typing

import pytest
import yaml

import sst_cdma
from sst_cdma.model.closed_form import from_simulation
from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.model.kernel_model import price_gemm
from sst_cdma.engine.runner import RunError
from workloads import (TRANSFORMERS, WorkloadError, load_network, parse_stream,
                                render_stream, stream_stats)
from workloads.kernel_pricing import price_network
from workloads.render import iteration_stream, stream_text
from workloads.transformer import _OPTIONAL, FIELDS, TransformerConfig, role_of, split_name

#: Published parameter counts (HF configs; GPT-2 and OPT with the LM head tied to the embedding).
PUBLISHED = {
    "gpt2_small": 124_439_808, "gpt2_medium": 354_823_168, "gpt2_large": 774_030_080,
    "gpt2_xl": 1_557_611_200, "opt_125m": 125_239_296, "opt_350m": 331_196_416,
    "opt_1_3b": 1_315_758_080, "llama_7b": 6_738_415_616,
    "llama_13b": 13_015_864_320,
    # the Hugging Face checkpoints' safetensors totals (meta-llama/Llama-3.1-8B, -70B, -405B)
    "llama3_8b": 8_030_261_248, "llama3_70b": 70_553_706_496, "llama3_405b": 405_853_388_800,
}
#: Published totals given rounded, with no breakdown to compare term by term: what the
#: simulator counts is tested against its closed form in test_llama3_gpt3.py
ROUNDED = {"gpt3_175b": 175_000_000_000}
BASE = {"style": "gpt2", "layers": 2, "hidden": 64, "heads": 8, "kv_heads": 8, "ffn": 256,
        "vocab": 100, "positions": 32, "seq_len": 16, "activation": "gelu", "norm": "layernorm",
        "attention": "naive", "tie_embeddings": True, "bias": True}


def write(tmp_path, name="tiny", **fields):
    doc = {"name": name, "transformer": {**BASE, **fields}}
    for k in [k for k, v in fields.items() if v is None]:
        del doc["transformer"][k]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_shipped_transformers_have_their_published_parameter_counts():
    counts = {n: load_network(n).param_count() for n in TRANSFORMERS}
    assert {n: c for n, c in counts.items() if n not in ROUNDED} == PUBLISHED
    assert set(ROUNDED) <= set(counts)


def test_the_configs_attribute_types_are_the_fields_it_reads():
    hints = typing.get_type_hints(TransformerConfig)
    assert hints == {**FIELDS, **_OPTIONAL}


def test_split_name_and_roles():
    assert split_name("blk11/qkv") == (11, "qkv")
    assert split_name("lm_head") == (None, "lm_head")
    roles = {layer.name: layer.role
             for layer in load_network("llama_7b", attention="fused").layers}
    assert roles["blk0/rope"] == roles["blk0/attn"] == roles["blk3/proj"] == "attention"
    assert roles["blk0/fc1"] == roles["blk0/act"] == "ffn"
    assert roles["blk0/ln1"] == roles["ln_f"] == "norm"
    assert roles["blk31/res2"] == "residual"
    assert roles["embed"] == "embedding" and roles["lm_head"] == roles["loss"] == "head"
    assert all(layer.role == "" for layer in load_network("alexnet").layers)
    assert role_of("conv1") == ""


def test_gpt2_block_layers_shapes_and_needs():
    net = load_network("gpt2_small")
    names = [layer.name for layer in net.layers]
    assert names[:2] == ["tokens", "embed"] and names[-3:] == ["ln_f", "lm_head", "loss"]
    assert [n for n in names if n.startswith("blk0/")] == [
        f"blk0/{r}" for r in ("ln1", "qkv", "scores", "probs", "context", "proj", "res1",
                              "ln2", "fc1", "act", "fc2", "res2")]
    infos = {i.name: i for i in net.infer(2)}
    assert infos["tokens"].shape == (2, 1024)
    assert infos["blk0/qkv"].shape == (2, 1024, 3 * 768)
    assert infos["blk0/scores"].shape == infos["blk0/probs"].shape == (2, 12, 1024, 1024)
    assert infos["blk0/context"].shape == (2, 1024, 768)
    assert infos["lm_head"].shape == infos["loss"].shape == (2, 1024, 50257)
    assert infos["lm_head"].params == 0  # tied to the embedding
    # what autograd saves
    assert infos["blk0/qkv"].bwd_needs == ("blk0/ln1",)
    assert infos["blk0/act"].bwd_needs == ("blk0/fc1",)
    assert infos["blk0/probs"].bwd_needs == ("blk0/probs",)
    assert infos["blk0/context"].bwd_needs == ("blk0/probs", "blk0/qkv")
    assert infos["blk0/ln2"].bwd_needs == ("blk0/res1",)
    assert infos["loss"].bwd_needs == ("loss",)
    assert infos["blk0/res1"].bwd_needs == ()
    assert infos["embed"].grad_inputs == ()  # token ids get no gradient


def test_fused_attention_keeps_float32_row_statistics():
    net = load_network("gpt2_small", attention="fused")
    names = [layer.name for layer in net.layers if layer.name.startswith("blk0/")]
    assert "blk0/attn" in names and "blk0/scores" not in names
    info = {i.name: i for i in net.infer(2, "bfloat16")}["blk0/attn"]
    assert info.bwd_needs == ("blk0/qkv", "blk0/attn")
    t = net.tensors(2, "bfloat16")["blk0/attn"]
    assert t.stats_bytes == 2 * 12 * 1024 * 4
    assert t.bytes == 2 * 1024 * 768 * 2 + t.stats_bytes
    stream = parse_stream(render_stream(net, 2, "bfloat16", "all"), "gpt2_small")
    assert stream.tensors["blk0/attn"].bytes == t.bytes
    assert stream.tensors["blk0/attn:grad"].bytes == t.bytes - t.stats_bytes
    # fused attention's iteration holds far less than the (heads, S, S) scores and probs
    naive = stream_stats(parse_stream(render_stream("gpt2_small", 2, "bfloat16", "none"), "n"))
    fused = stream_stats(parse_stream(render_stream(net, 2, "bfloat16", "none"), "f"))
    assert fused.peak_bytes < 0.7 * naive.peak_bytes


def test_relu_is_in_place_on_fc1_and_swiglu_halves_it():
    opt = load_network("opt_125m")
    act = opt.layer("blk0/act")
    assert act.kind == "relu" and act.tensor == "blk0/fc1"
    assert opt.tensors(1)["blk0/fc1"].sparse
    assert opt.layer("blk0/fc2").input_tensors == ("blk0/fc1",)
    llama = {i.name: i for i in load_network("llama_7b").infer(1)}
    assert llama["blk0/fc1"].shape == (1, 2048, 2 * 11008)
    assert llama["blk0/act"].shape == (1, 2048, 11008)
    assert llama["blk0/rope"].shape == llama["blk0/qkv"].shape
    assert llama["blk0/rope"].bwd_needs == ()
    assert llama["lm_head"].params == 32000 * 4096


def test_grouped_query_attention(tmp_path):
    net = load_network(write(tmp_path, kv_heads=2, attention="fused"))
    infos = {i.name: i for i in net.infer(1)}
    assert infos["blk0/qkv"].shape == (1, 16, 64 + 2 * 2 * 8)
    assert infos["blk0/attn"].shape == (1, 16, 64)


def test_opt_350m_projects_its_narrow_embedding_and_norms_after_the_residuals():
    net = load_network("opt_350m")
    names = [layer.name for layer in net.layers]
    assert names[2] == "proj_in" and names[-3] == "proj_out" and "ln_f" not in names
    assert net.layer("blk0/qkv").inputs == ("proj_in",)
    assert net.layer("blk0/ln1").inputs == ("blk0/res1",)
    assert net.layer("blk1/qkv").inputs == ("blk0/ln2",)


def test_linear_flops_are_a_gemm_per_token():
    net = load_network("gpt2_small", seq_len=128)
    infos = {i.name: i for i in net.infer(4)}
    assert infos["blk0/fc1"].flops_fwd == 2 * 4 * 128 * 768 * 3072
    assert infos["blk0/fc1"].flops_bwd == 2 * infos["blk0/fc1"].flops_fwd
    assert infos["blk0/scores"].flops_fwd == 2 * 4 * 12 * 128 * 128 * 64
    # forward FLOPs of the linears = 2 x tokens x their weights (biases not counted)
    weights = sum(i.params - i.shape[-1] for i in infos.values()
                  if i.kind == "linear" and i.params)
    weights += 768 * 50257  # the tied LM head
    assert sum(i.flops_fwd for i in infos.values() if i.kind == "linear") == \
        2 * 4 * 128 * weights
    # the tied head reads the embedding table
    head = infos["lm_head"]
    assert head.dram_fwd == (4 * 128 * 768 + 768 * 50257 + 4 * 128 * 50257) * 4


def test_seq_len_and_attention_options():
    assert load_network("gpt2_small", seq_len=256).sample_shape("blk0/probs") == (12, 256, 256)
    short = stream_text(iteration_stream("gpt2_small", 2, "bfloat16", "all", seq_len=64))
    fused = stream_text(iteration_stream("gpt2_small", 2, "bfloat16", "all", seq_len=64,
                                         attention="fused"))
    plain = stream_text(iteration_stream("gpt2_small", 2, "bfloat16", "all"))
    assert "layer=tokens shape=2x64\n" in short and "layer=tokens shape=2x1024\n" in plain
    assert "tensor blk0/attn " in fused and "tensor blk0/attn " not in short
    with pytest.raises(WorkloadError, match="alexnet.yaml: option seq_len applies to "
                                            "transformer networks only"):
        load_network("alexnet", seq_len=128)
    with pytest.raises(WorkloadError, match="option attention applies"):
        load_network("vgg16", attention="fused")


@pytest.mark.parametrize("fields, message", [
    ({"heads": 12}, "field 'heads': 12 heads do not divide hidden 64"),
    ({"kv_heads": 3}, "field 'kv_heads': 3 kv_heads do not divide heads 8"),
    ({"seq_len": 33}, "field 'seq_len': sequence length 33 exceeds the 32 learned positions"),
    ({"style": "bert"}, "field 'style': unknown style 'bert'"),
    ({"activation": "tanh"}, "field 'activation': unknown activation 'tanh'"),
    ({"norm": None}, "field 'norm': missing"),
    ({"layers": 0}, "field 'layers': must be a positive integer"),
    ({"bias": "yes"}, "field 'bias': must be true or false"),
    ({"depth": 3}, "unknown transformer field"),
    ({"style": "llama", "hidden": 36, "heads": 4, "kv_heads": 4, "activation": "swiglu",
      "norm": "rmsnorm", "tie_embeddings": False, "bias": False},
     "layer 'blk0/rope': rope rotates pairs of a head's channels: its head dimension must be "
     "even, got 9"),
])
def test_bad_definitions_are_one_line_naming_file_and_field(tmp_path, fields, message):
    path = write(tmp_path, **fields)
    with pytest.raises(WorkloadError) as err:
        load_network(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text


def test_seq_len_override_is_checked_against_the_positions():
    with pytest.raises(WorkloadError, match="gpt2_small.yaml: transformer field 'seq_len'"):
        load_network("gpt2_small", seq_len=2048)
    assert load_network("llama_7b", seq_len=4096).sample_shape("tokens") == (4096,)


def test_linear_is_priced_as_a_gemm_over_every_token_and_the_softmax_left_memory_bound():
    model = kernel_model_for("h100_pcie")
    net = load_network("gpt2_small", seq_len=128)
    prices = price_network(net, 4, "bfloat16", model)
    hw, kp = model.hardware, model.params
    fwd = price_gemm(4 * 128, 3072, 768, hw, kp, dtype="bfloat16", tc=model.tensor).seconds
    assert prices["blk0/fc1"]["fwd"].time_ps == math.ceil(fwd * 1e12)
    assert prices["blk0/fc1"]["bwd"].algorithm == "TENSOR_GEMM+TENSOR_GEMM"
    for layer in ("blk0/scores", "blk0/context"):  # batched GEMMs (test_kernel_pricing.py)
        assert prices[layer]["fwd"].algorithm == "TENSOR_GEMM"
    for layer in ("blk0/probs", "blk0/act", "blk0/ln1"):
        assert prices[layer]["fwd"].time_ps is None


def run(repo, *options, topology="topologies/pascal_cdma.py"):
    return sst_cdma.run(repo / topology, list(options), console=io.StringIO())


def test_simulation_equals_closed_form_on_a_short_gpt2(repo):
    result = run(repo, "--network", "gpt2_small", "--seq-len", "128", "--batch", "2",
                 "--policy", "all", "--algorithm", "none", "--no-baselines", "--no-contention")
    gpu = result.results["gpu0"]
    closed = from_simulation(result.simulation, "gpu0")
    assert gpu.iteration_time_ps == closed.iteration_ps
    assert [(ln["layer"], ln["phase"], ln["end_ps"]) for ln in gpu.layers] == closed.boundaries


@pytest.mark.parametrize("kernel_model", ["fitted", "roofline"])
def test_bfloat16_gpt2_with_policy_all_runs_on_hopper(repo, kernel_model):
    result = run(repo, "--network", "gpt2_small", "--batch", "4", "--dtype", "bfloat16",
                 "--policy", "all", "--seq-len", "256", "--kernel-model", kernel_model,
                 "--optimizer", "adam", "--no-baselines",
                 topology="topologies/hopper_pcie5_cdma.py")
    gpu = result.simulation.components["gpu0"]
    offloads = sorted(op.name for op in gpu.ops if op.op == "offload")
    assert offloads and offloads == sorted(op.name for op in gpu.ops if op.op == "prefetch")
    assert result.results["gpu0"].iteration_time_ps > 0


def test_transformer_options_on_a_cnn_are_one_line_naming_the_option(repo):
    with pytest.raises(RunError) as err:
        run(repo, "--network", "alexnet", "--seq-len", "128", "--no-baselines")
    assert "option seq_len" in str(err.value) and "\n" not in str(err.value)
