"""A closed form of one ZeRO-Offload optimizer step (optimizer states in host memory, the
step on the host CPU) as DeepSpeed's stage 1-2 optimizer runs it
(``deepspeed/runtime/zero/stage_1_and_2.py``: the gradient copies in ``reduce_ipg_grads``
during the backward pass, the CPU step over the whole partition in ``step()``, then the
weights copied back; docs/workloads.md section 9): the GPU's stream walked as
:mod:`~sst_cdma.model.closed_form` walks it, then the model-state traffic bucket by bucket,
each of three FIFO queues next free at one number:

    gradients b:  start = max(last kernel writing b's gradients ends, gradients_free)
                  gradients_free = start + latency + grad_bytes / rate
                  (state_compression: rate the flow's through the codec units and the
                  link at grad_bytes / ratio, as the engine moves it)
    opens:        max(stream end, last bucket's gradients landed)   (delayed: 0, the
                  previous iteration's gradients are on the host)
    CPU step b:   start = max(opens, cpu_free)
                  cpu_free = start + step time alone (with the CPU codec's time for
                  state_compression=host)
    weights b:    start = max(last bucket stepped, weights_free)    (delayed too)
                  weights_free = start + latency + weight_bytes / rate
    step:         max(stream end, gradients_free, cpu_free, weights_free)

So without the delayed update the step is the passes, the CPU's step and the weights' copy
back one after the other; with it the CPU's step and the copy back run beside the next
iteration's passes, and the steady state is the larger of the two, never more than the
immediate update's sum.

With the gradients on the host (``gradients=host``) the GPU holds two buckets of them: the
stream's allocation that starts bucket b is issued no earlier than bucket b-2's gradients land
(the walk of the stream waits there, as for a ``wait``), which the gradients queue, computed
as each bucket is written, gives in time.

With the weights on the host (``weights=host``) the stream itself prefetches each layer's
weights (its closed form prices them as any prefetch) and nothing is copied back.

ZeRO-Infinity (``optimizer_states=nvme``) adds two queues between the SSDs and host DRAM,
the states read (two host buffers: a read waits for the write-back of the bucket two before)
from when the step opens, and written back; the CPU step of a bucket waits for its states:

    read b:       start = max(opens, write b-2 ends, read_free)
                  read_free = start + latency + state_bytes / rate
    CPU step b:   start = max(opens, read_free, cpu_free)
    write b:      start = max(b stepped, write_free); write_free = start + ... / rate
    step:         max(stream end, gradients_free, cpu_free, weights_free, write_free)

With the weights on the SSDs (``weights=nvme``) the stream prefetches them from the drives
and the weights queue writes each bucket's 16-bit weights from host DRAM to them once the
last bucket is stepped.

exact for the event simulation where nothing else interferes: kernels not sharing DRAM with
the copies (the GPU's ``hbm_contention`` off), no activation offloads beside them, and no
resource the copies and the CPU share (host DRAM) saturated. Only kernels of the step's last
micro-batch send gradients (``grad_accum``: they accumulate on the GPU until then), except
with the gradients accumulated on the host (``gradients=host`` with ``grad_accum`` above 1),
whose every micro-batch goes through the reduction stream of
:mod:`~sst_cdma.model.host_accumulation`, the last one's ending in the gradients queue's
copies, and the step opens once they are over.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Optional

from sst_cdma.engine.flows import isolated_duration_ps
from sst_cdma.engine.records import Record, record
from sst_cdma.model.closed_form import ClosedFormResult, iterate
from sst_cdma.model.host_accumulation import accumulating_walk

__all__ = ["ZeroOffloadResult", "zero_offload_step", "state_traffic", "from_simulation"]


@record
class ZeroOffloadResult(Record):
    """The step's time and each bucket's (gradients landed, stepped, weights back) in ps,
    beside the GPU stream's closed form."""

    step_ps: int
    stream: ClosedFormResult
    buckets: list[tuple[int, int, int]] = field(default_factory=list)


def zero_offload_step(ops: list[Any], kernel_ps: Callable[[Any], int],
                      transfer_ps: Callable[[Any], int], after_sync_ps: Callable[[Any], int],
                      buckets: Any, copy_ps: Callable[[str, int], int],
                      step_ps: Callable[[Any], int], delayed: bool,
                      last_micro_batch: int = 0, weights_back: bool = True,
                      storage_ps: Optional[Callable[[str, int], int]] = None,
                      states_nvme: bool = False, weights_to_nvme: bool = False,
                      gradients_host: bool = False, gradient_buffers: int = 2,
                      micro_starts: tuple[int, ...] = (),
                      add_ps: Optional[Callable[[Any], int]] = None
                      ) -> ZeroOffloadResult:
    """The step of ``buckets`` (``StateBucket`` records, in backward order) after the
    stream's ``ops``; ``copy_ps(direction, bytes)`` prices a plain copy, ``step_ps(bucket)``
    the CPU's step of a bucket alone; ``last_micro_batch`` is the index of the op the step's
    last micro-batch starts at; ``weights_back`` False: the weights live on the host (the
    stream prefetches them per layer), nothing comes back after the step. ``storage_ps``
    (direction, bytes) prices a copy between host DRAM and the SSDs (``offload``: to them);
    ``states_nvme``: the states live on the SSDs; ``weights_to_nvme``: the stepped weights are
    written to the SSDs rather than copied to the GPU. ``gradients_host``: the GPU holds
    ``gradient_buffers`` buckets of gradients at once, so the allocation (or kernel) that
    starts bucket ``k`` waits until bucket ``k - gradient_buffers``'s gradients have
    landed. ``add_ps`` (bucket) given: the gradients accumulate on the host over the
    micro-batches starting at the ops ``micro_starts``, its add kernel priced so."""
    if add_ps is not None:
        walked, last_ready, last_landed = accumulating_walk(
            ops, kernel_ps, transfer_ps, after_sync_ps, buckets, copy_ps, add_ps,
            micro_starts, gradient_buffers)
        step, out = state_traffic(last_ready, walked.iteration_ps, buckets, copy_ps, step_ps,
                                  delayed, weights_back, storage_ps, states_nvme,
                                  weights_to_nvme, last_landed)
        return ZeroOffloadResult(step, walked, out)
    bucket_of = {w: k for k, b in enumerate(buckets) for w in b.wgrads}
    ready = [0] * len(buckets)
    left = [len(b.wgrads) for b in buckets]
    landed: list[int] = []  # the gradients queue, bucket by bucket as each is written
    started = [False] * len(buckets)

    def kernel_ended(index: int, op: Any, end: int) -> None:
        if index < last_micro_batch:
            return
        for tensor in op.writes:
            if tensor in bucket_of:
                k = bucket_of[tensor]
                ready[k] = max(ready[k], end)
                left[k] -= 1
                if left[k] == 0:
                    assert k == len(landed), "buckets are written in order"
                    landed.append(max(ready[k], landed[-1] if landed else 0)
                                  + copy_ps("offload", buckets[k].grad_bytes))

    def gate(index: int, op: Any) -> int:
        at = 0
        for tensor in (op.writes if op.op == "compute" else (op.name,)):
            k = bucket_of.get(tensor)
            if k is None or started[k] or index < last_micro_batch:
                continue
            started[k] = True
            if k >= gradient_buffers:
                at = max(at, landed[k - gradient_buffers])
        return at

    stream = iterate(ops, kernel_ps, transfer_ps, after_sync_ps, kernel_ended,
                     gate if gradients_host else None)
    step, out = state_traffic(ready, stream.iteration_ps, buckets, copy_ps, step_ps, delayed,
                              weights_back, storage_ps, states_nvme, weights_to_nvme)
    return ZeroOffloadResult(step, stream, out)


def state_traffic(ready: list[int], stream_end: int, buckets: Any,
                  copy_ps: Callable[[str, int], int], step_ps: Callable[[Any], int],
                  delayed: bool, weights_back: bool = True,
                  storage_ps: Optional[Callable[[str, int], int]] = None,
                  states_nvme: bool = False, weights_to_nvme: bool = False,
                  landed: Optional[list[int]] = None
                  ) -> tuple[int, list[tuple[int, int, int]]]:
    """The model-state queues of the step (the module's recurrence) after a stream that ends
    at ``stream_end``, bucket ``k``'s gradients all written at ``ready[k]``: the step's end
    and each bucket's (gradients landed, stepped, weights back). The arguments are
    :func:`zero_offload_step`'s; the planner of policy ``auto`` prices a placement with
    it too. ``landed`` given: when each bucket's gradients landed (accumulated on the host,
    :mod:`~sst_cdma.model.host_accumulation`), in place of the gradients queue."""
    nvme = storage_ps or (lambda _direction, _raw: 0)
    if landed is None:
        grads_free = 0
        landed = []
        for k, bucket in enumerate(buckets):
            grads_free = max(ready[k], grads_free) + copy_ps("offload", bucket.grad_bytes)
            landed.append(grads_free)
    grads_free = max(landed, default=0)
    # DeepSpeed's step() runs after the backward pass and every gradient copy; delayed: the
    # previous iteration's step, from time 0
    opens = 0 if delayed else max(stream_end, grads_free)
    cpu_free = read_free = write_free = 0
    written: list[int] = []
    stepped = []
    for k, bucket in enumerate(buckets):
        cpu_start = max(opens, cpu_free)
        if states_nvme:
            buffer_free = written[k - 2] if k >= 2 else 0
            read_free = max(opens, buffer_free, read_free) + \
                nvme("prefetch", bucket.state_bytes)
            cpu_start = max(cpu_start, read_free)
        cpu_free = cpu_start + step_ps(bucket)
        stepped.append(cpu_free)
        if states_nvme:
            write_free = max(cpu_free, write_free) + nvme("offload", bucket.state_bytes)
            written.append(write_free)
    weights_free = cpu_free  # the weights go back once the whole partition is stepped
    out = []
    for k, bucket in enumerate(buckets):
        if weights_back:
            weights_free += nvme("offload", bucket.weight_bytes) if weights_to_nvme \
                else copy_ps("prefetch", bucket.weight_bytes)
        out.append((landed[k], stepped[k], weights_free if weights_back else 0))
    return max(stream_end, grads_free, cpu_free, weights_free, write_free), out


def from_simulation(simulation: Any, gpu_name: str) -> ZeroOffloadResult:
    """The closed form for GPU ``gpu_name`` of a built (or finished) simulation whose
    optimizer states are on the host, every number from its components: the kernels slot
    prices the kernels, the engine on ``dma`` the copies, the CPU on the ``cpu`` port of the
    driver in its ``model_states`` slot the steps."""

    gpu = simulation.components[gpu_name]
    dram_bw = gpu.flows.resources[gpu.hbm_resource].capacity
    dma = simulation.peer(gpu_name, "dma")[0]
    cpu = simulation.peer(gpu.states.name, "cpu")[0]
    flows = gpu.flows

    def kernel(op: Any) -> int:
        return gpu.kernels.kernel_ps(op.time_ps, op.flops or 0, op.dram or 0, dram_bw)

    def latency(op: Any) -> int:
        return gpu.kernels.after_sync_ps(op.time_ps is None or gpu.workload.modelled_times)

    compression = gpu.states.compression

    def copy(direction: str, raw: int) -> int:
        # state_compression: through the engine's codec at the profile's wire size
        wire = compression.wire("gradients" if direction == "offload" else "weights", raw)
        weights = dma.weights(direction, raw, wire, compression.coded)
        pairs = [(flows.resources[name].capacity, w) for name, w in weights.items()]
        return dma.path.latency_ps + isolated_duration_ps(raw, pairs)

    def transfer(op: Any) -> int:
        raw = gpu.stream.tensors[op.name].bytes
        wire = dma.wire.get(op.name, raw)
        tier = op.tier or gpu.params["offload_to"]
        weights = dma.weights(op.op, raw, wire, op.codec != "none", tier)
        pairs = [(flows.resources[name].capacity, w) for name, w in weights.items()]
        latency = dma.path.latency_ps if tier == "host" else dma.storage.latency_ps[op.op]
        return latency + isolated_duration_ps(raw, pairs)

    def storage(direction: str, raw: int) -> int:
        route = dma.storage
        pairs = [(flows.resources[name].capacity, w)
                 for name, w in route.host_weights[direction].items()]
        return route.host_latency_ps[direction] + isolated_duration_ps(raw, pairs)

    def step(bucket: Any) -> int:
        return cpu.request_alone_ps(gpu.states.step_request(bucket.name))

    def add(bucket: Any) -> int:  # reads both gradients, writes the sum
        return gpu.kernels.kernel_ps(None, bucket.params, 3 * bucket.grad_bytes, dram_bw)

    states = gpu.states
    last = max(gpu.micro_starts) if gpu.micro_starts else 0
    return zero_offload_step(gpu.ops, kernel, transfer, latency, states.plan.buckets, copy,
                             step, states.delayed, last, states.weights_back,
                             storage if dma.storage is not None else None,
                             states.states_nvme, states.placement.weights == "nvme",
                             states.placement.gradients == "host", states.plan.gradient_buffers,
                             tuple(sorted(gpu.micro_starts)),
                             add if states.accumulates else None)
