"""The run's timeline as a Chrome trace (``trace.json``; opens in Perfetto and
chrome://tracing), drawn from the typed :class:`GPUResult` records the GPUs published and
nothing else: one process per GPU, its compute, copy and stall threads, and its "GPU memory"
counter track."""
from __future__ import annotations

from typing import Any

from .gpu import GPUResult

__all__ = ["chrome_trace", "memory_counter"]


def chrome_trace(gpus: dict[str, GPUResult], full: bool = True) -> dict[str, Any]:
    """Chrome trace events: one process per GPU, threads compute / copy / stall, and a "GPU
    memory" counter (bytes allocated) at every time the allocation changed. ``full=False``
    leaves out the kernels, copies and stalls (the bulk of the file) and keeps the memory
    counters: what a sweep point keeps unless its spec asks for full traces."""
    events: list[dict[str, Any]] = []
    tids = {"compute": 1, "offload": 2, "prefetch": 2, "stall": 3, "gradients": 4, "weights": 5,
            "cpu": 6}
    for pid, (name, rep) in enumerate(sorted(gpus.items()), start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        for tname, tid in (("compute stream", 1), ("copy stream", 2), ("stalls", 3)):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": tname}})
        for kind, label, start, end in rep.timeline if full else ():
            events.append({"name": f"{kind} {label}" if kind != "compute" else label,
                           "cat": kind, "ph": "X", "pid": pid, "tid": tids[kind],
                           "ts": start / 1e6, "dur": (end - start) / 1e6})
        events.extend(memory_counter(pid, rep.memory_curve))
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def memory_counter(pid: int, curve: Any) -> list[dict[str, Any]]:
    """The "GPU memory" counter track of process ``pid``: one Chrome trace counter event ("ph":
    "C", args {"bytes": n}) per (time_ps, bytes) point of ``curve``."""
    return [{"name": "GPU memory", "ph": "C", "pid": pid, "ts": t / 1e6, "args": {"bytes": n}}
            for t, n in curve]
