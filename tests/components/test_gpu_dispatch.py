"""The GPU dispatches each kind of stream op to its handler, and says what it waits for in a
typed reason (never a tensor name standing in for one)."""
from __future__ import annotations

from types import SimpleNamespace

from components.gpu import GPU, Wait, WaitReason
from workloads.stream_schema import OPS


def test_every_op_kind_of_the_stream_schema_has_a_handler():
    assert set(GPU.OP_HANDLERS) == set(OPS)


def test_a_wait_for_a_prefetch_names_its_tensor_in_a_typed_reason():
    gpu = SimpleNamespace(prefetched=set(), blocked=None)
    op = SimpleNamespace(op="wait", name="conv1:out")
    assert GPU._issue_wait(gpu, op) is False
    assert gpu.blocked == Wait(WaitReason.PREFETCH, "conv1:out")
    gpu.prefetched.add("conv1:out")
    assert GPU._still_waiting(gpu, gpu.blocked) is False
    assert GPU._issue_wait(gpu, op) is True


def test_a_sync_waits_while_a_stream_is_busy():
    gpu = SimpleNamespace(compute_busy=False, copy_busy=True, compute_q=[], copy_q=[],
                          blocked=None)
    gpu._streams_busy = lambda: GPU._streams_busy(gpu)
    assert GPU._issue_sync(gpu, SimpleNamespace(op="sync", name="fc1")) is False
    assert gpu.blocked == Wait(WaitReason.SYNC)
    assert GPU._still_waiting(gpu, gpu.blocked) is True
    gpu.copy_busy = False
    assert GPU._still_waiting(gpu, gpu.blocked) is False
