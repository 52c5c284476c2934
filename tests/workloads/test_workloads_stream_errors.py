"""The stream parser rejects malformed streams with "SOURCE:LINE: message"."""
from __future__ import annotations

import pytest

from workloads import StreamError, WorkloadError, parse_stream
from workloads.stream import parse_duration

BASE = """\
# a two-layer toy stream
stream version=1 network=toy batch=2 dtype=float32 policy=conv
tensor x bytes=64 kind=activation layer=data shape=2x8
tensor y bytes=64 kind=activation layer=fc1 sparse=1 shape=2x8
tensor y:grad bytes=64 kind=gradient layer=fc1 shape=2x8
tensor fc1:w bytes=256 kind=weight layer=fc1
tensor fc1:dw bytes=256 kind=gradient layer=fc1

phase forward
alloc fc1:w
alloc fc1:dw
alloc x
alloc y
offload x layer=fc1
compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y
sync fc1
free x
phase backward
alloc y:grad
alloc x
prefetch x layer=fc1
wait x
compute fc1 pass=bwd flops=1024 dram=640 reads=x,y:grad,fc1:w writes=fc1:dw
sync fc1
free y:grad
free x
free y    # inline comment
free fc1:w
free fc1:dw
end
"""
LINES = BASE.splitlines()


def line_of(text: str) -> int:
    return LINES.index(text) + 1


def test_base_stream_is_valid():
    s = parse_stream(BASE, source="toy.stream")
    assert [op.op for op in s.ops][:5] == ["alloc", "alloc", "alloc", "alloc", "offload"]
    assert s.computes("fwd")[0].time_ps == 1_500_000
    assert s.tensors["y"].sparse and s.tensors["y"].shape == (2, 8)
    assert s.ops[-1].op == "free" and s.ops[-1].line == line_of("free fc1:dw")


# (line to replace, replacement (None deletes it), message fragment)
CASES = [
    ("alloc y", "allocate y", "unknown op 'allocate'"),
    ("alloc y", "alloc", "'alloc' needs a tensor name"),
    ("alloc y", "alloc z", "tensor 'z' used before declared"),
    ("alloc y", "alloc x", "'alloc': tensor 'x' is already allocated"),
    ("free x", "free y:grad", "'free': tensor 'y:grad' is not allocated"),
    ("sync fc1", None, "while its offload may be in flight"),
    ("offload x layer=fc1", "offload x", "missing key(s) layer"),
    ("offload x layer=fc1", "offload x layer=fc1 layer=fc2", "duplicate key 'layer'"),
    ("offload x layer=fc1", "offload x layer=fc1 mode=fast", "unknown key 'mode'"),
    ("offload x layer=fc1", "offload x fc1", "unexpected token 'fc1'"),
    ("offload x layer=fc1", "offload x layer=", "malformed key=value"),
    ("offload x layer=fc1", "offload y:grad layer=fc1", "'offload': tensor 'y:grad' is not allocated"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=5.12e2 dram=384", "flops=5.12e2 is not a non-negative integer"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=-1 dram=384", "not a non-negative integer"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd dram=384", "missing key(s) flops"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=bwd flops=512 dram=384", "pass=bwd inside 'phase forward'"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=sideways flops=512 dram=384", "must be fwd, bwd, recompute or update"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=512 dram=384 time=fast", "bad duration 'fast'"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=512 dram=384 time=3min", "bad duration"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=512 dram=384 reads=x,y:grad", "reads tensor 'y:grad' which is not resident"),
    ("compute fc1 pass=fwd flops=512 dram=384 time=1.5us reads=x,fc1:w writes=y",
     "compute fc1 pass=fwd flops=512 dram=384 writes=x", "writes tensor 'x' while its offload"),
    ("sync fc1", "sync fc9", "'sync': layer 'fc9' has no compute before it"),
    ("prefetch x layer=fc1", "prefetch y layer=fc1", "'prefetch': tensor 'y' was never offloaded"),
    ("prefetch x layer=fc1", "prefetch x layer=fc1 tier=nvme",
     "'prefetch': tier=nvme on 'x', which was offloaded"),
    ("alloc x@2", None, "'prefetch': tensor 'x' is not allocated (alloc must precede prefetch)"),
    ("wait x", None, "reads tensor 'x' before its prefetch completed (missing wait)"),
    ("wait x", "wait y", "'wait': tensor 'y' has no prefetch before it"),
    ("phase backward", "phase sideways", "unknown phase 'sideways'"),
    ("phase backward", "phase forward", "out of order"),
    ("phase forward", None, "'alloc' before 'phase forward'"),
    ("end", None, "missing 'end'"),
    ("free fc1:dw", "free fc1:dw\nend", "'end' after 'end'"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "stream version=2 network=toy batch=2 dtype=float32 policy=conv", "unsupported stream version 2"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "stream version=1 network=toy batch=0 dtype=float32 policy=conv", "batch must be >= 1"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "stream version=1 network=toy batch=2 dtype=int8 policy=conv", "unknown dtype 'int8'"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "stream version=1 network=toy batch=2 dtype=float32 policy=some", "unknown policy 'some'"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "stream version=1 network=toy dtype=float32 policy=conv", "missing key(s) batch"),
    ("stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "tensor q bytes=4 kind=activation", "expected the 'stream version=1 ...' header first"),
    ("tensor x bytes=64 kind=activation layer=data shape=2x8",
     "tensor x bytes=64 kind=activation layer=data shape=2x9", "disagrees with shape 2x9"),
    ("tensor x bytes=64 kind=activation layer=data shape=2x8",
     "tensor x bytes=64 kind=activation layer=data shape=2x0", "bad shape '2x0'"),
    ("tensor x bytes=64 kind=activation layer=data shape=2x8",
     "tensor x bytes=64 kind=feature layer=data", "unknown kind 'feature'"),
    ("tensor x bytes=64 kind=activation layer=data shape=2x8",
     "tensor x bytes=64 kind=activation sparse=yes", "sparse=yes must be 0 or 1"),
    ("tensor x bytes=64 kind=activation layer=data shape=2x8",
     "tensor x bytes=sixty kind=activation", "bytes=sixty is not a non-negative integer"),
    ("tensor y bytes=64 kind=activation layer=fc1 sparse=1 shape=2x8",
     "tensor x bytes=64 kind=activation", "'x' declared twice"),
    ("tensor y bytes=64 kind=activation layer=fc1 sparse=1 shape=2x8",
     "tensor y=1 bytes=64 kind=activation", "'tensor' needs a tensor name"),
    ("alloc y", "tensor z bytes=4 kind=activation", "tensor declarations must precede the first 'phase'"),
    ("alloc y", "stream version=1 network=toy batch=2 dtype=float32 policy=conv",
     "duplicate 'stream' header"),
    ("sync fc1", "sync fc1 now=1", "unknown key 'now'"),
    ("sync fc1", "sync fc1#x", "'sync': bad layer name 'fc1#x'"),
]


@pytest.mark.parametrize("target, replacement, fragment", CASES)
def test_broken_line_is_reported_with_source_and_line(target, replacement, fragment):
    lines = list(LINES)
    target, _, nth = target.partition("@")
    k = [j for j, line in enumerate(lines) if line == target][int(nth or 1) - 1]
    if replacement is None:
        del lines[k]
    else:
        lines[k:k + 1] = replacement.split("\n")
    text = "\n".join(lines) + "\n"
    with pytest.raises(StreamError) as info:
        parse_stream(text, source="toy.stream")
    err = info.value
    assert fragment in str(err)
    assert str(err).startswith(f"toy.stream:{err.line}: ")
    assert err.source == "toy.stream"
    assert isinstance(err, WorkloadError) and isinstance(err, ValueError)
    # the reported line is the broken one (or, for a deletion, where the damage shows)
    offending = text.splitlines()[err.line - 1] if err.line <= len(text.splitlines()) else ""
    if replacement is not None and fragment not in ("missing 'end'",):
        assert offending.strip() in replacement.split("\n")


def test_deleted_lines_are_reported_where_the_damage_shows():
    lines = list(LINES)
    lines.remove("wait x")
    text = "\n".join(lines)
    with pytest.raises(StreamError) as info:
        parse_stream(text, source="s")
    assert info.value.line == line_of("wait x")  # the compute that now follows the prefetch
    assert text.splitlines()[info.value.line - 1].startswith("compute fc1 pass=bwd")


def test_empty_and_comment_only_streams():
    with pytest.raises(StreamError, match=r"^e:1: empty stream"):
        parse_stream("", source="e")
    with pytest.raises(StreamError, match=r"^c:2: empty stream"):
        parse_stream("# nothing\n\n", source="c")


def test_durations():
    assert parse_duration("1.25ms") == 1_250_000_000
    assert parse_duration("800us") == 800_000_000
    assert parse_duration("3e-3s") == 3_000_000_000
    assert parse_duration("7ps") == 7
    assert parse_duration(".5ns") == 500
    for bad in ("1.25", "ms", "-1ms", "1 ms", "1e999999999999s"):
        with pytest.raises(ValueError):
            parse_duration(bad)
