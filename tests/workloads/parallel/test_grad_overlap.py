"""ZeRO 0-2's gradient reductions overlapped with the backward pass
(workloads/parallel/grad_overlap.py): each chunk's last backward pass of the step, each
gradient reduced asynchronously right after its layer's backward kernel. docs/parallel.md,
"ZeRO-3 and the overlap"."""
from __future__ import annotations

import pytest

from workloads.parallel import ModelShape, make_layout
from workloads.parallel.grad_overlap import (last_backward_passes, overlap_reductions,
                                             stepped_gradients)
from workloads.parallel.pipeline import BACKWARD, stage_order
from workloads.stream_schema import StreamOp

SHAPE = ModelShape(layers=8, heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)


@pytest.mark.parametrize("schedule, vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_each_chunk_s_last_backward_pass_is_the_last_in_its_order(schedule, vpp):
    layout = make_layout(SHAPE, pp=2, vpp=vpp, schedule=schedule, micro_batches=4)
    for s in range(2):
        order = stage_order(layout, s)
        last = last_backward_passes(order)
        assert [c for _, c in last] == list(range(vpp))
        for mb, c in last:
            at = order.index(next(w for w in order if (w.micro_batch, w.chunk, w.phase)
                                  == (mb, c, BACKWARD)))
            assert not any(w.chunk == c and w.phase == BACKWARD for w in order[at + 1:])


def _backward(layers):
    """A backward span: each layer's kernel and sync."""
    return [op for n in layers for op in (StreamOp("compute", n, "backward", pass_="bwd",
                                                   flops=0, dram=0),
                                          StreamOp("sync", n, "backward"))]


def test_each_gradient_is_reduced_after_its_layer_s_kernel_in_the_last_pass_only():
    update = [StreamOp("compute", n, "update", pass_="update", flops=0, dram=0,
                       reads=(f"{n}:w", f"{n}:dw"), writes=(f"{n}:w",)) for n in ("a", "b")]
    update.append(StreamOp("compute", "c", "update", pass_="update", flops=0, dram=0,
                           reads=("c:w",), writes=("c:w",)))
    grads = stepped_gradients(update)
    assert grads == ["a:dw", "b:dw"]
    passes = {(mb, 0): ([], _backward(["b", "a"])) for mb in range(2)}
    out, done = overlap_reductions(passes, [(1, 0)], grads, "reduce_scatter")
    assert out[(0, 0)] == passes[(0, 0)]
    assert done == ["b:dw", "a:dw"]
    assert [(op.op, op.name) for op in out[(1, 0)][1]] == [
        ("compute", "b"), ("sync", "b"), ("reduce_scatter", "b:dw"),
        ("compute", "a"), ("sync", "a"), ("reduce_scatter", "a:dw")]
    assert all(op.async_ and op.group == "dp" for op in out[(1, 0)][1]
               if op.op == "reduce_scatter")
    # a gradient whose layer has no kernel in the pass is left to the step
    _, done = overlap_reductions(passes, [(1, 0)], ["z:dw", *grads], "all_reduce")
    assert "z:dw" not in done
