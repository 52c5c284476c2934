"""A pipeline stage's stream: the send and recv ops of the stream format, and the ops and
schedule of each stage of a small pipeline listed in full (a recv before a chunk's first
forward but on virtual stage 0, a send after its last but on the last virtual stage, and the
mirror image in the backward pass)."""
from __future__ import annotations

import pytest

from workloads import StreamError, parse_stream
from workloads.parallel import LayoutError, ModelShape, make_layout
from workloads.parallel.stage_stream import UniformLayers, peers, uniform_stage_stream
from workloads.stream_schema import statement_line

HEAD = "stream version=1 network=x batch=1 dtype=float32 policy=none\n"
UNIFORM = UniformLayers(forward_ps=10, backward_ps=20, activation=100)


def layout(layers: int, **kwargs):
    """A layout of a chain of ``layers`` (the other shape numbers play no part)."""
    shape = ModelShape(layers=layers, heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
    return make_layout(shape, **kwargs)


def stage_lines(stage_stream) -> list[tuple[str, list[str]]]:
    """Each step of a stage's schedule: its name and the text of its ops."""
    ops = stage_stream.stream.ops
    out = []
    for step in stage_stream.steps:
        name = step.phase if step.micro_batch is None else \
            f"{step.phase} mb{step.micro_batch} c{step.chunk}"
        out.append((name, [statement_line(op) for op in ops[step.start:step.end]]))
    return out


def test_send_and_recv_are_read_and_written_with_their_peer():
    text = HEAD + ("tensor a bytes=8 kind=activation\ntensor b bytes=8 kind=activation\n"
                   "phase forward\nalloc a\nrecv a peer=0\nalloc b\n"
                   "compute L1 pass=fwd flops=0 dram=0 time=5ps reads=a writes=b\nsync L1\n"
                   "send b peer=2\nfree a\nend\n")
    stream = parse_stream(text)
    assert [(op.op, op.name, op.peer) for op in stream.ops if op.op in ("send", "recv")] == \
        [("recv", "a", 0), ("send", "b", 2)]
    assert [statement_line(op) for op in stream.ops][1] == "recv a peer=0"
    assert [statement_line(op) for op in stream.ops][5] == "send b peer=2"


@pytest.mark.parametrize("body, message", [
    ("alloc a\nsend a\nend\n", "'send': missing key(s) peer"),
    ("send a peer=1\nend\n", "'send': tensor 'a' is not allocated"),
    ("recv a peer=1\nend\n", "'recv': tensor 'a' is not allocated"),
    ("alloc a\nsend a peer=1\nfree a\nend\n", "'free': tensor 'a' is not allocated"),
    ("alloc a\nrecv a peer=x\nend\n", "peer=x is not a non-negative integer"),
    ("alloc a\noffload a layer=L1\nsend a peer=1\nend\n",
     "'send': tensor 'a' while its offload may be in flight"),
])
def test_a_bad_send_or_recv_is_refused_in_one_line(body, message):
    text = HEAD + "tensor a bytes=8 kind=activation\nphase forward\n" + body
    with pytest.raises(StreamError) as info:
        parse_stream(text, "s")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_two_stage_1f1b_pipeline_lists_each_stage_s_ops_in_its_order():
    lay = layout(2, pp=2, micro_batches=2, schedule="1f1b")
    first = stage_lines(uniform_stage_stream(lay, 2, 0, UNIFORM))
    fwd = "compute L0 pass=fwd flops=0 dram=0 time=10ps reads=x0.m{k} writes=x1.m{k}"
    bwd = "compute L0 pass=bwd flops=0 dram=0 time=20ps reads=x0.m{k},g1.m{k} writes=g0.m{k}"
    assert first == [("prologue", [])] + [
        (f"forward mb{k} c0", [f"alloc x0.m{k}", f"alloc x1.m{k}", fwd.format(k=k), "sync L0",
                               f"send x1.m{k} peer=1"]) for k in (0, 1)] + [
        (f"backward mb{k} c0", [f"alloc g1.m{k}", f"recv g1.m{k} peer=1", f"alloc g0.m{k}",
                                bwd.format(k=k), "sync L0", f"free g1.m{k}", f"free x0.m{k}",
                                f"free g0.m{k}"]) for k in (0, 1)] + [("update", [])]
    last = stage_lines(uniform_stage_stream(lay, 2, 1, UNIFORM))
    fwd1 = "compute L1 pass=fwd flops=0 dram=0 time=10ps reads=x1.m{k} writes=x2.m{k}"
    bwd1 = "compute L1 pass=bwd flops=0 dram=0 time=20ps reads=x1.m{k},g2.m{k} writes=g1.m{k}"
    forward = {k: (f"forward mb{k} c0", [f"alloc x1.m{k}", f"recv x1.m{k} peer=0",
                                         f"alloc x2.m{k}", fwd1.format(k=k), "sync L1",
                                         f"free x2.m{k}"]) for k in (0, 1)}
    backward = {k: (f"backward mb{k} c0", [f"alloc g2.m{k}", f"alloc g1.m{k}", bwd1.format(k=k),
                                           "sync L1", f"free g2.m{k}", f"free x1.m{k}",
                                           f"send g1.m{k} peer=0"]) for k in (0, 1)}
    # the last stage: no warm-up, one forward and one backward in turn
    assert last == [("prologue", []), forward[0], backward[0], forward[1], backward[1],
                    ("update", [])]


def test_interleaved_chunks_receive_from_the_stage_before_round_the_ring():
    lay = layout(4, pp=2, vpp=2, micro_batches=2, schedule="interleaved")
    assert peers(lay, 0) == (1, 1) and peers(lay, 1) == (0, 0)
    first = uniform_stage_stream(lay, 4, 0, UNIFORM)
    ops = first.stream.ops
    peer_ops = {key: [statement_line(op) for op in ops[s.forward_start:s.forward_end]
                      + ops[s.backward_start:s.backward_end] if op.op in ("send", "recv")]
                for key, s in first.spans.items()}
    # chunk 0 of stage 0 is virtual stage 0 (layer 0): no recv forward, no send backward;
    # chunk 1 is virtual stage 2 (layer 2): fed by stage 1's chunk 0, feeding stage 1's chunk 1
    assert peer_ops[(0, 0)] == ["send x1.m0 peer=1", "recv g1.m0 peer=1"]
    assert peer_ops[(1, 1)] == ["recv x2.m1 peer=1", "send x3.m1 peer=1",
                                "recv g3.m1 peer=1", "send g2.m1 peer=1"]
    last = uniform_stage_stream(lay, 4, 1, UNIFORM)
    ops = last.stream.ops
    span = last.spans[(0, 1)]   # virtual stage 3, the last: no send forward, no recv backward
    assert [statement_line(op) for op in ops[span.forward_start:span.forward_end]
            + ops[span.backward_start:span.backward_end] if op.op in ("send", "recv")] == \
        ["recv x3.m0 peer=0", "send g3.m0 peer=0"]
    # the schedule is the stage's interleaved order: forwards in table order first
    assert [(s.phase, s.micro_batch, s.chunk) for s in first.steps[1:5]] == [
        ("forward", 0, 0), ("forward", 1, 0), ("forward", 0, 1), ("forward", 1, 1)]


def test_every_stage_sends_what_its_peer_receives():
    lay = layout(12, pp=3, vpp=2, micro_batches=3, schedule="interleaved")
    sent: dict[tuple[int, int, str], list[int]] = {}
    got: dict[tuple[int, int, str], list[int]] = {}
    for stage in range(3):
        built = uniform_stage_stream(lay, 12, stage, UNIFORM)
        for step in built.steps:
            for op in built.stream.ops[step.start:step.end]:
                if op.op == "send":
                    sent.setdefault((stage, op.peer, op.phase), []).append(step.micro_batch)
                elif op.op == "recv":
                    got.setdefault((op.peer, stage, op.phase), []).append(step.micro_batch)
    # each (sender, receiver, phase) carries the same micro-batches in the same order
    assert sent == got
    assert len(sent) == 6  # forward and backward both ways round the ring of three


def test_a_stage_outside_the_pipeline_or_a_bad_layer_is_refused():
    with pytest.raises(LayoutError, match="stage 2 is not a pipeline rank of pp 2"):
        uniform_stage_stream(layout(2, pp=2), 2, 2, UNIFORM)
    with pytest.raises(LayoutError, match="activation 0"):
        UniformLayers(1, 1, 0)
    with pytest.raises(LayoutError, match="forward_ps -1"):
        UniformLayers(-1, 1, 1)
