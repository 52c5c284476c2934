"""The closed form of gradients accumulated on the host over several micro-batches
(``gradients=host`` with ``grad_accum`` above 1), as DeepSpeed's stage 1-2 optimizer runs it
with the optimizer offloaded (``async_accumulate_grad_in_cpu_via_gpu`` in
``deepspeed/runtime/zero/stage_1_and_2.py``; docs/workloads.md section 9, "Gradient
accumulation"). Each micro-batch's buckets go through one FIFO queue, the reduction stream,
next free at one number:

    bucket b, micro-batch m of N:
        start  = max(last kernel of m writing b's gradients ends, reduction_free)
        reduction_free = start
                         + (m > 0: copy host to GPU of b's gradients + the add kernel)
                         + copy GPU to host of b's gradients
                         + (m = N - 1: the step's copy of b's gradients)
        b's gradients leave the GPU at reduction_free

and the stream waits: the allocation (or kernel) that starts bucket b in micro-batch m for
bucket b - 2's gradients of m to leave the GPU (two buffers, as with one micro-batch), and
micro-batch m + 1's first allocation or kernel for the reduction stream to be free
(DeepSpeed synchronizes at the end of each backward pass).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Sequence

from sst_cdma.model.closed_form import ClosedFormResult, iterate

__all__ = ["accumulated_landing", "accumulating_walk"]


def accumulated_landing(ready: int, free: int, bucket: Any, copy_ps: Callable[[str, int], int],
                        add_ps: Callable[[Any], int], first: bool, last: bool) -> int:
    """When ``bucket``'s gradients of one micro-batch leave the GPU, the reduction stream
    free from ``free`` and its gradients all written at ``ready`` (the module's recurrence;
    ``first``/``last``: the step's first/last micro-batch)."""
    at = max(ready, free)
    if not first:
        at += copy_ps("prefetch", bucket.grad_bytes) + add_ps(bucket)
    at += copy_ps("offload", bucket.grad_bytes)
    if last:
        at += copy_ps("offload", bucket.grad_bytes)
    return at


class _Walk:
    """The reduction stream and the stream's waits over the micro-batches (see the module)."""

    def __init__(self, buckets: Any, copy_ps: Callable[[str, int], int],
                 add_ps: Callable[[Any], int], micro_starts: Sequence[int],
                 gradient_buffers: int) -> None:
        self.buckets, self.copy_ps, self.add_ps = buckets, copy_ps, add_ps
        self.starts = sorted(micro_starts)
        self.held = gradient_buffers
        self.bucket_of = {w: k for k, b in enumerate(buckets) for w in b.wgrads}
        self.micro = -1
        self.free = 0
        self.settled = False
        self.ready: list[int] = []
        self.left: list[int] = []
        self.started: list[bool] = []
        self.landed: list[int] = []

    def _enter(self, index: int) -> int:
        """The micro-batch op ``index`` is in; a new one starts with every bucket unwritten."""
        micro = bisect_right(self.starts, index) - 1
        if micro != self.micro:
            self.micro, self.settled = micro, micro <= 0
            self.ready = [0] * len(self.buckets)
            self.left = [len(b.wgrads) for b in self.buckets]
            self.started = [False] * len(self.buckets)
            self.landed = []
        return micro

    def kernel_ended(self, index: int, op: Any, end: int) -> None:
        """A kernel ended: a bucket it completed goes through the reduction stream."""
        micro = self._enter(index)
        for tensor in op.writes:
            k = self.bucket_of.get(tensor)
            if k is None:
                continue
            self.ready[k] = max(self.ready[k], end)
            self.left[k] -= 1
            if self.left[k] == 0:
                assert k == len(self.landed), "buckets are written in order"
                self.free = accumulated_landing(self.ready[k], self.free, self.buckets[k],
                                                self.copy_ps, self.add_ps, micro == 0,
                                                micro == len(self.starts) - 1)
                self.landed.append(self.free)

    def gate(self, index: int, op: Any) -> int:
        """The earliest ``op`` may be issued: a micro-batch's first op once the reduction
        stream is free, a bucket's first once the bucket two before it left the GPU."""
        self._enter(index)
        at = 0
        if not self.settled:
            self.settled, at = True, self.free
        for tensor in (op.writes if op.op == "compute" else (op.name,)):
            k = self.bucket_of.get(tensor)
            if k is None or self.started[k]:
                continue
            self.started[k] = True
            if k >= self.held:
                at = max(at, self.landed[k - self.held])
        return at


def accumulating_walk(ops: list[Any], kernel_ps: Callable[[Any], int],
                      transfer_ps: Callable[[Any], int], after_sync_ps: Callable[[Any], int],
                      buckets: Any, copy_ps: Callable[[str, int], int],
                      add_ps: Callable[[Any], int], micro_starts: Sequence[int],
                      gradient_buffers: int
                      ) -> tuple[ClosedFormResult, list[int], list[int]]:
    """The stream's ``ops`` walked (micro-batch ``m`` from op ``micro_starts[m]``) with the
    reduction stream of every micro-batch: the walk, and each bucket's gradients of the last
    micro-batch all written and off the GPU (after the step's copy). ``add_ps(bucket)``
    prices the add kernel; the other arguments are
    :func:`~sst_cdma.model.zero_offload.zero_offload_step`'s."""
    walk = _Walk(buckets, copy_ps, add_ps, micro_starts, gradient_buffers)
    stream = iterate(ops, kernel_ps, transfer_ps, after_sync_ps, walk.kernel_ended, walk.gate)
    return stream, walk.ready, walk.landed
