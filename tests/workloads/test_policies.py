"""Per-tensor policies: keep / offload / compress / recompute, the policy terms, plan files,
and the schedule they render (recompute kernels in the backward pass, codec=none offloads)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads import StreamError, WorkloadError, load_network, parse_stream, \
    render_stream, stream_stats
from workloads.policies import check_policy, group_members, load_plan_file, \
    resolve_choices
from workloads.stats import tensor_choices
from workloads.vdnn import plan_iteration

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny_transformer.yaml"


def stream(network, policy, batch=8, **kw):
    text = render_stream(network, batch, "float32", policy, **kw)
    return parse_stream(text, f"{policy}.stream")


@pytest.fixture(scope="module")
def tiny():
    return load_network(TINY)


def test_all_keep_choices_schedule_exactly_what_policy_none_does():
    net = load_network("resnet50")
    none = plan_iteration(net, 2, "float32", "none")
    keep = plan_iteration(net, 2, "float32", "plan",
                          choices={t: "keep" for t in net.tensors(2, "float32")})
    flat = [(o.op, o.name) for b in none.forward + none.backward for o in b.ops]
    assert flat == [(o.op, o.name) for b in keep.forward + keep.backward for o in b.ops]


def test_offload_is_a_plain_copy_and_compress_goes_through_the_codec(tiny):
    plain, packed = stream(tiny, "offload-ffn"), stream(tiny, "compress-ffn")
    out = [op for op in plain.ops if op.op == "offload"]
    assert out and all(op.codec == "none" for op in out)
    # the prefetch of a plain copy is plain too
    assert all(op.codec == "none" for op in plain.ops if op.op == "prefetch")
    assert all(op.codec == "" for op in packed.ops if op.op in ("offload", "prefetch"))
    assert [op.name for op in out] == [op.name for op in packed.ops if op.op == "offload"]
    assert {op.name for op in out} == {"blk0/fc1", "blk0/act", "blk1/fc1", "blk1/act"}


def test_recompute_attn_recomputes_the_attention_core_before_its_first_backward_use(tiny):
    s = stream(tiny, "recompute-attn")
    rebuilt = [op for op in s.ops if op.op == "compute" and op.pass_ == "recompute"]
    assert sorted(w for op in rebuilt for w in op.writes) == sorted(
        f"blk{i}/{r}" for i in (0, 1) for r in ("scores", "probs", "context"))
    assert all(op.phase == "backward" for op in rebuilt)
    # the recompute kernel is the forward kernel: same FLOPs and DRAM bytes
    fwd = {op.name: op for op in s.computes("fwd")}
    for op in rebuilt:
        assert (op.flops, op.dram) == (fwd[op.name].flops, fwd[op.name].dram)
    # each recomputed tensor is rebuilt before the first backward kernel that reads it (or
    # the recompute kernel that rebuilds a tensor from it: scores only to rebuild probs)
    for op in rebuilt:
        tensor = op.writes[0]
        first_read = next(k for k, o in enumerate(s.ops) if o.op == "compute" and
                          o.phase == "backward" and tensor in o.reads and o is not op)
        assert s.ops.index(op) < first_read
    choices = tensor_choices(s)
    assert {t for t, c in choices.items() if c == "recompute"} == set(
        w for op in rebuilt for w in op.writes)
    assert stream_stats(s).peak_bytes < stream_stats(stream(tiny, "none")).peak_bytes


def test_full_recompute_keeps_only_each_blocks_output(tiny):
    choices = resolve_choices(tiny, 8, "float32", "recompute")
    assert choices["embed"] == "keep" and choices["blk0/res2"] == "keep"
    assert choices["blk1/res2"] == "keep" and choices["tokens"] == "keep"
    block = [t for t in choices if t.startswith("blk") and not t.endswith("/res2")]
    assert block and all(choices[t] == "recompute" for t in block)
    s = stream(tiny, "recompute")
    assert s.computes("recompute")  # kernels re-run
    assert stream_stats(s).leaked == ()


def test_combinations_apply_left_to_right(tiny):
    choices = resolve_choices(tiny, 8, "float32", "recompute-attn+compress-ffn")
    assert choices["blk0/probs"] == "recompute" and choices["blk1/fc1"] == "compress"
    assert choices["blk0/qkv"] == "keep"
    later = resolve_choices(tiny, 8, "float32", "offload-all+recompute-attn")
    assert later["blk0/scores"] == "recompute" and later["blk0/qkv"] == "offload"
    # the network input is never recomputed
    assert resolve_choices(tiny, 8, "float32", "recompute-all")["tokens"] == "keep"


def test_cnn_recompute_is_the_cheap_layers_and_fits_in_less_memory():
    net = load_network("resnet50")
    choices = resolve_choices(net, 4, "float32", "recompute")
    kinds = {i.output: i.kind for i in net.infer(4, "float32")}
    recomputed = [t for t, c in choices.items() if c == "recompute"]
    assert recomputed and all(kinds[t] not in ("conv", "fc", "data") for t in recomputed)
    assert all(choices[t] == "keep" for t in choices if kinds[t] == "conv")
    none, rec = stream(net, "none", 4), stream(net, "recompute", 4)
    assert stream_stats(rec).peak_bytes < 0.7 * stream_stats(none).peak_bytes
    # no copies, and recomputation adds exactly the recomputed kernels' forward FLOPs
    assert stream_stats(rec).offloaded_bytes == 0
    extra = sum(op.flops for op in rec.computes("recompute"))
    fwd = {op.name: op.flops for op in none.computes("fwd")}
    assert extra == sum(fwd[op.name] for op in rec.computes("recompute")) > 0


def test_recomputed_chains_rebuild_inputs_first():
    # recompute everything that can be: each recomputed producer's inputs are resident
    # (the parser checks it), rebuilt in forward order
    net = load_network("alexnet")
    s = stream(net, "recompute-all", 2)
    written = [op.writes[0] for op in s.computes("recompute")]
    assert written and stream_stats(s).leaked == ()


@pytest.mark.parametrize("policy,message", [
    ("recompute-attn", "has no tensor in group 'attn'"),
    ("evict-ffn", "unknown term 'evict-ffn'"),
    ("recompute-everything", "unknown term 'recompute-everything'"),
    ("conv+recompute-attn", "do not combine"),
    ("Recompute", "bad syntax"),
])
def test_bad_policies_are_one_line_errors(policy, message):
    with pytest.raises(WorkloadError) as err:
        render_stream("alexnet", 2, "float32", policy)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_check_policy_accepts_every_documented_form():
    for policy in ("none", "all", "conv", "recompute", "auto", "plan", "recompute-attn",
                   "recompute-attn+offload-ffn", "recompute-attn+compress-ffn", "keep-all"):
        check_policy(policy)


def test_group_members_follow_the_naming_convention(tiny):
    assert group_members(tiny, 8, "float32", "attn") == [
        "blk0/scores", "blk0/probs", "blk0/context", "blk1/scores", "blk1/probs",
        "blk1/context"]
    assert "blk0/qkv" in group_members(tiny, 8, "float32", "attention")
    assert group_members(tiny, 8, "float32", "residual") == [
        "blk0/res1", "blk0/res2", "blk1/res1", "blk1/res2"]


def test_plan_file_drives_the_schedule(tiny, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"blk0/qkv": "offload", "blk0/probs": "recompute",
                                "blk1/fc1": "compress"}))
    chosen = load_plan_file(path, tiny, 8, "float32")
    s = parse_stream(render_stream(tiny, 8, "float32", "plan", choices=chosen), "p")
    got = tensor_choices(s)
    assert (got["blk0/qkv"], got["blk0/probs"], got["blk1/fc1"]) == (
        "offload", "recompute", "compress")
    assert got["blk0/scores"] == "keep"


@pytest.mark.parametrize("content,message", [
    ({"nope": "keep"}, "tensor 'nope': no such activation tensor"),
    ({"blk0/qkv": "evict"}, "tensor 'blk0/qkv': unknown choice 'evict'"),
    ({"tokens": "recompute"}, "tensor 'tokens': the network input cannot be recomputed"),
    (["blk0/qkv"], "a plan file is a JSON object"),
    ({"loss": "compress"}, "tensor 'loss': no layer reads it after its producer, so there is "
                           "nothing to compress (only keep applies)"),
])
def test_bad_plan_files_name_the_file_and_the_tensor(tiny, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(WorkloadError) as err:
        load_plan_file(path, tiny, 8, "float32")
    assert message in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_plan_file_that_is_not_json_is_one_error(tiny, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("{not json")
    with pytest.raises(WorkloadError, match="not a JSON plan file"):
        load_plan_file(path, tiny, 8, "float32")


HEADER = """stream version=1 network=toy batch=1 dtype=float32 policy=recompute-attn
tensor x bytes=4 kind=activation
tensor y bytes=4 kind=activation
phase forward
alloc x
alloc y
"""


def test_stream_recompute_pass_is_only_allowed_in_backward():
    text = HEADER + "compute l pass=recompute flops=1 dram=1 reads=x writes=y\nsync l\nend\n"
    with pytest.raises(StreamError, match="pass=recompute inside 'phase forward'"):
        parse_stream(text, "t")
    ok = HEADER + ("compute l pass=fwd flops=1 dram=1 reads=x writes=y\nsync l\nfree y\n"
                   "phase backward\nalloc y\ncompute l pass=recompute flops=1 dram=1 reads=x "
                   "writes=y\nsync l\nfree x\nfree y\nend\n")
    s = parse_stream(ok, "t")
    assert [op.pass_ for op in s.computes()] == ["fwd", "recompute"]


def test_stream_codec_key_names_only_a_plain_copy():
    base = HEADER + "offload x layer=l codec={}\ncompute l pass=fwd flops=1 dram=1\nsync l\n" \
        "free x\nphase backward\nalloc x\nprefetch x layer=l\nwait x\nfree x\nfree y\nend\n"
    s = parse_stream(base.format("none"), "t")
    assert [op.codec for op in s.ops if op.op in ("offload", "prefetch")] == ["none", "none"]
    with pytest.raises(StreamError, match="only codec=none"):
        parse_stream(base.format("zvc"), "t")
    with pytest.raises(StreamError, match="unknown key 'codec'"):
        parse_stream(HEADER + "prefetch x layer=l codec=none\nend\n", "t")
