"""The plan of an iteration whose model states live off the GPU, or of several micro-batches:
what the GPU's stream still holds, the gradient buckets, and the text that reads back."""
from __future__ import annotations

import pytest

from workloads import WorkloadError, load_network, parse_stream, plan_iteration
from workloads.model_states import DEEPSPEED_BUCKET_ELEMENTS, Placement
from workloads.render import stream_text
from workloads.vdnn import state_name, weight_name, wgrad_name

NET = load_network("alexnet")


def plan(placement: Placement, policy: str = "none", dtype: str = "float16"):
    return plan_iteration(NET, 8, dtype, policy, optimizer="adam", placement=placement)


def test_states_on_the_host_leave_no_state_and_no_update_kernel_on_the_gpu():
    p = plan(Placement("host"))
    assert p.update == []
    assert not any(t.kind == "state" for t in p.tensors)
    assert not any(op.name.endswith(":state") for op in p.ops())
    weighted = [i for i in NET.infer(8, "float16") if i.params]
    params = sum(i.params for i in weighted)
    (bucket,) = p.model_states.buckets  # DeepSpeed's default bucket holds all of AlexNet
    assert bucket.params == params and bucket.grad_bytes == 2 * params
    assert bucket.state_bytes == 12 * params and bucket.step_dram_bytes == 28 * params
    assert bucket.layers == tuple(i.name for i in reversed(weighted))
    assert params < DEEPSPEED_BUCKET_ELEMENTS


def test_the_default_placement_is_todays_plan():
    assert plan(Placement()).ops() == plan_iteration(NET, 8, "float16", "none",
                                                     optimizer="adam").ops()
    assert plan(Placement()).model_states is None


def test_buckets_close_once_they_hold_the_bucket_size():
    p = plan(Placement("host", bucket_bytes=8 << 20))
    sizes = [b.grad_bytes for b in p.model_states.buckets]
    assert all(size >= 8 << 20 for size in sizes[:-1]) and sum(sizes) == \
        sum(i.weight_bytes for i in NET.infer(8, "float16") if i.params)
    wgrads = [w for b in p.model_states.buckets for w in b.wgrads]
    assert len(wgrads) == len(set(wgrads))


def test_gradients_on_the_host_are_allocated_at_their_kernel_and_never_freed_by_the_plan():
    ops = plan(Placement("host", gradients="host")).ops()
    for info in (i for i in NET.infer(8, "float16") if i.params):
        dw = wgrad_name(info.name)
        allocs = [k for k, op in enumerate(ops) if op.op == "alloc" and op.name == dw]
        kernel = next(k for k, op in enumerate(ops) if op.op == "compute" and
                      op.pass_ == "bwd" and op.name == info.name)
        assert len(allocs) == 1 and allocs[0] < kernel and ops[allocs[0]].phase == "backward"
        assert not any(op.op == "free" and op.name == dw for op in ops)  # the GPU frees it


def test_weights_on_the_host_are_prefetched_for_each_use_and_freed_after():
    ops = plan(Placement("host", weights="host")).ops()
    w = weight_name("conv2")
    uses = [op.op for op in ops if op.name == w and op.op in ("alloc", "prefetch", "wait",
                                                               "free")]
    # forward: prefetched ahead by conv1, waited, freed; backward: ahead by the layer after it
    assert uses == ["alloc", "prefetch", "wait", "free"] * 2
    assert all(op.codec == "none" for op in ops if op.op == "prefetch")


def test_weights_on_the_ssds_are_prefetched_from_the_nvme_tier():
    ops = plan(Placement("nvme", weights="nvme")).ops()
    prefetches = [op for op in ops if op.op == "prefetch"]
    assert prefetches and all(op.tier == "nvme" and op.codec == "none" for op in prefetches)
    w = weight_name("conv2")
    assert [op.op for op in ops if op.name == w and op.op in ("prefetch", "free")] == \
        ["prefetch", "free"] * 2


def test_states_on_the_ssds_leave_two_bucket_buffers_on_the_host():
    p = plan(Placement("nvme", bucket_bytes=8 << 20))
    states = p.model_states
    sizes = sorted((b.state_bytes for b in states.buckets), reverse=True)
    assert len(sizes) > 2
    assert states.host_bytes["optimizer_state_buffers"] == sizes[0] + sizes[1]
    assert "optimizer_states" not in states.host_bytes
    assert dict(states.nvme_resident) == {f"{b.name}:s": b.state_bytes for b in states.buckets}


def test_grad_accum_marks_one_micro_batch_and_keeps_one_step():
    p = plan_iteration(NET, 8, "float16", "conv", optimizer="adam",
                       placement=Placement(grad_accum=4))
    start, end = p.micro_batch_span()
    ops = p.ops()
    assert p.micro_batches == 4
    assert all(op.phase in ("forward", "backward") for op in ops[start:end])
    assert ops[end:] and ops[end].phase == "update"
    assert all(op.op == "alloc" for op in ops[:start])
    # what one micro-batch allocates it frees
    live = set()
    for op in ops[start:end]:
        if op.op == "alloc":
            live.add(op.name)
        elif op.op == "free":
            live.discard(op.name)
    assert live == set()


@pytest.mark.parametrize("placement", [Placement("host", gradients="host", bucket_bytes=8 << 20),
                                       Placement("host", weights="host"),
                                       Placement("nvme", weights="nvme"),
                                       Placement(grad_accum=2)])
def test_the_text_reads_back_as_the_stream(placement):
    stream = plan(placement).stream("x.stream")
    text = stream_text(stream)
    assert parse_stream(text, source="x.stream").ops == stream.ops
    if placement.grad_accum > 1:
        assert "2 micro-batches per optimizer step: the GPU runs phases forward and backward 2 " \
            "times" in text
    else:
        assert "the host CPU steps" in text


@pytest.mark.parametrize("placement, words", [
    (Placement(grad_accum=0), "grad_accum must be at least 1"),
    (Placement("host", bucket_bytes=10**12), "is larger than the gradients"),
    (Placement(delayed_update=True), "delayed_update=true overlaps"),
    (Placement(weights="host"), "weights=host: the update kernels"),
    (Placement(gradients="host"), "gradients=host: the gradients go to the host"),
    (Placement("disk"), "optimizer_states='disk': expected one of gpu, host, nvme"),
])
def test_a_placement_the_model_cannot_run_is_refused(placement, words):
    with pytest.raises(WorkloadError, match=words.replace("'", ".").replace("-", "-")):
        plan(placement)


def test_weights_on_the_host_refuse_recomputation():
    with pytest.raises(WorkloadError, match="weights=host with a policy that recomputes"):
        plan(Placement("host", weights="host"), policy="recompute")


def test_state_name_is_still_the_gpu_plans():
    assert any(op.name == state_name("conv1") for op in plan(Placement()).ops())
