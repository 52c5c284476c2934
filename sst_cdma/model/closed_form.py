"""A closed-form, per-layer model of one training iteration: the same workload stream, walked
once with two numbers per stream (when the compute stream and the copy stream are next free).

    kernel:    start = max(issue, compute_free);  compute_free = start + roofline time
    transfer:  start = max(issue, copy_free);     copy_free = start + latency + bytes / rate
    sync:      issue = max(issue, compute_free, copy_free)      (a layer boundary)
    wait X:    issue = max(issue, X's prefetch done)

so each layer takes max(compute, transfer) where nothing else interferes. It is exact for the
event simulation when kernels do not share DRAM bandwidth with the DMA engine (the GPU's
``hbm_contention`` off) and no two GPUs share a link: then every flow runs alone at
``min(capacity / weight)`` over its resources. With contention the simulation can only be
slower; the tests measure by how much.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Optional

from sst_cdma.engine.flows import isolated_duration_ps
from sst_cdma.engine.records import Record, record


@record
class ClosedFormResult(Record):
    """Layer boundaries (layer, phase, time in ps) and the iteration time."""

    boundaries: list[tuple[str, str, int]] = field(default_factory=list)
    iteration_ps: int = 0
    forward_ps: int = 0
    compute_ps: int = 0


def iterate(ops: list[Any], kernel_ps: Callable[[Any], int],
            transfer_ps: Callable[[Any], int],
            after_sync_ps: Callable[[Any], int] = lambda op: 0,
            on_kernel: Optional[Callable[[int, Any, int], None]] = None,
            gate: Optional[Callable[[int, Any], int]] = None) -> ClosedFormResult:
    """Walk the stream's ops with the kernel and transfer durations given; a kernel issued
    to an idle compute stream (after a synchronization) first waits ``after_sync_ps``.
    ``on_kernel(index, op, end_ps)`` hears when each kernel ends; ``gate(index, op)`` is the
    earliest a kernel or an allocation may be issued (the stream waits for it there, as for a
    ``wait``)."""
    res = ClosedFormResult()
    issue = compute_free = copy_free = 0
    done: dict[str, int] = {}
    forward_end = None
    for index, op in enumerate(ops):
        if forward_end is None and op.phase == "backward":
            forward_end = issue
        if op.op == "compute":
            if gate is not None:
                issue = max(issue, gate(index, op))
            start = max(issue, compute_free)
            duration = kernel_ps(op) + (after_sync_ps(op) if compute_free <= issue else 0)
            compute_free = start + duration
            res.compute_ps += duration
            if on_kernel is not None:
                on_kernel(index, op, compute_free)
        elif op.op in ("offload", "prefetch"):
            start = max(issue, copy_free)
            copy_free = start + transfer_ps(op)
            done[op.name] = copy_free
        elif op.op == "sync":
            issue = max(issue, compute_free, copy_free)
            res.boundaries.append((op.name, op.phase, issue))
        elif op.op == "wait":
            issue = max(issue, done[op.name])
        elif op.op == "alloc" and gate is not None:
            issue = max(issue, gate(index, op))
    res.iteration_ps = issue
    res.forward_ps = forward_end if forward_end is not None else issue
    return res


def from_simulation(simulation: Any, gpu_name: str) -> ClosedFormResult:
    """The closed form for GPU ``gpu_name`` of a built (or finished) simulation, taking every
    number — kernel times, wire sizes, link capacities, latency — from its components: the
    GPU's kernels subcomponent prices the kernels, and the engine is the peer on its ``dma``
    port."""
    gpu = simulation.components[gpu_name]
    dram_bw = gpu.flows.resources[gpu.hbm_resource].capacity
    found = simulation.peer(gpu_name, "dma")
    dma = found[0] if found is not None else None

    def kernel(op: Any) -> int:
        return gpu.kernels.kernel_ps(op.time_ps, op.flops or 0, op.dram or 0, dram_bw)

    def latency(op: Any) -> int:
        return gpu.kernels.after_sync_ps(op.time_ps is None or gpu.workload.modelled_times)

    def transfer(op: Any) -> int:
        if dma is None:  # the GPU's init refuses a stream that moves tensors without one
            raise ValueError(f"{gpu_name}: {op.op} of {op.name!r} needs the engine on port "
                             "'dma', and none is connected")
        raw = gpu.stream.tensors[op.name].bytes
        wire = dma.wire.get(op.name, raw)
        weights = dma.weights(op.op, raw, wire, op.codec != "none")
        pairs = [(gpu.flows.resources[name].capacity, w) for name, w in weights.items()]
        return dma.path.latency_ps + isolated_duration_ps(raw, pairs)

    return iterate(gpu.ops, kernel, transfer, latency)
