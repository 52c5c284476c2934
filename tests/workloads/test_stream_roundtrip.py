"""A stream is made as objects; its text round-trips exactly: plan -> Stream, Stream -> text,
text -> parse -> the same Stream, for every shipped network under several policies, dtypes and
options (what a run writes as gpu.stream is this text: the golden streams pin it byte for
byte)."""
from __future__ import annotations

import pytest

from sst_cdma.model.fitted import kernel_model_for
from workloads import NETWORKS, parse_stream
from workloads.render import iteration_stream, render_stream, stream_text
from workloads.stream_schema import STATEMENTS, StreamOp, statement_line

#: (policy, dtype, options of iteration_stream)
VARIANTS = [
    ("none", "float32", {}),
    ("all", "float32", {"optimizer": "adam", "workspace": 1 << 20,
                        "allocation": "network-wide"}),
    ("conv", "bfloat16", {"kernel_model": "hopper"}),
    ("recompute", "float16", {"optimizer": "sgd"}),
    ("compress-all+offload-cheap", "bfloat16", {"kernel_model": "ampere",
                                                "memory_capacity": 4 << 30}),
]


def _options(options: dict) -> dict:
    out = dict(options)
    if "kernel_model" in out:
        out["kernel_model"] = kernel_model_for(out["kernel_model"])
    return out


@pytest.mark.parametrize("policy, dtype, options", VARIANTS,
                         ids=[f"{p}-{d}" for p, d, _ in VARIANTS])
@pytest.mark.parametrize("network", sorted(NETWORKS))
@pytest.mark.every_network
def test_objects_text_objects(network, policy, dtype, options):
    kw = _options(options)
    stream = iteration_stream(network, 2, dtype, policy, **kw)
    text = stream_text(stream)
    assert text == render_stream(network, 2, dtype, policy, **kw)
    again = parse_stream(text, stream.source)
    assert again == stream
    assert stream_text(parse_stream(stream_text(again), "plain")) == stream_text(again)
    assert parse_stream(stream_text(again), stream.source) == stream
    for op in stream.ops:  # integers all the way (no text in between to make them so)
        for value in (op.flops, op.dram, op.time_ps):
            assert value is None or type(value) is int
    assert all(type(t.bytes) is int for t in stream.tensors.values())


def test_priced_streams_carry_integer_times_and_algorithms():
    stream = iteration_stream("vgg16", 2, "float32", "conv", kernel_model=kernel_model_for("pascal"))
    convs = [op for op in stream.computes("fwd") if op.algorithm]
    assert convs and all(type(op.time_ps) is int and op.time_ps > 0 for op in convs)
    assert any(op.codec == "" for op in stream.ops if op.op == "offload")


def test_a_plain_copy_offload_and_its_prefetch_carry_codec_none():
    stream = iteration_stream("gpt2_small", 2, "bfloat16", "offload-ffn")
    plain = [op for op in stream.ops if op.op in ("offload", "prefetch") and op.codec == "none"]
    assert {op.op for op in plain} == {"offload", "prefetch"}
    lines = [statement_line(op) for op in plain]
    assert all(line.endswith("codec=none") for line in lines if line.startswith("offload"))
    assert not any("codec" in line for line in lines if line.startswith("prefetch"))


def test_every_declared_key_is_written_and_read():
    op = StreamOp("compute", "conv1", "forward", pass_="fwd", flops=2, dram=3, time_ps=1500,
                  algorithm="FFT", reads=("a", "b"), writes=("c",))
    line = statement_line(op)
    assert line == "compute conv1 pass=fwd flops=2 dram=3 time=1.5ns algo=FFT reads=a,b writes=c"
    keys = {key.key for _, key, _ in STATEMENTS["compute"].keys}
    assert keys == {"pass", "flops", "dram", "time", "algo", "reads", "writes"}
    assert STATEMENTS["compute"].required == {"pass", "flops", "dram"}
    assert STATEMENTS["offload"].required == {"layer"}
    assert STATEMENTS["offload"].optional == {"codec", "tier"}
    assert statement_line(StreamOp("offload", "x", "forward", layer="l", codec="none",
                                   tier="nvme")) == "offload x layer=l codec=none tier=nvme"
    # a weight never offloaded names the tier it starts on (--weights host|nvme)
    assert STATEMENTS["prefetch"].optional == {"tier"}
    assert statement_line(StreamOp("prefetch", "w", "forward", layer="l", tier="nvme")) == \
        "prefetch w layer=l tier=nvme"
    assert STATEMENTS["sync"].required == STATEMENTS["sync"].optional == frozenset()
