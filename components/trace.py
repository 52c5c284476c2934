"""The run's timeline as a Chrome trace (``trace.json``; opens in Perfetto and
chrome://tracing), drawn from the typed :class:`GPUResult` records the GPUs published and
nothing else: one process per GPU, its compute, copy and stall threads (and, in model-state
runs, the gradient, weight and optimizer-state copies and the host CPU's steps; on a pipeline
its sends to the other stages, from the first byte leaving to the last; with a cluster fabric
its collectives, from its compute stream draining to the group's answer), and its "GPU memory"
counter track."""
from __future__ import annotations

from typing import Any

from .gpu import GPUResult
from .model_state_driver import COPY_STREAMS

__all__ = ["chrome_trace", "memory_counter", "TRACKS", "TRACK_OF"]


#: the threads of a GPU's process, in order (thread id = place + 1): the name each shows and
#: the timeline kinds (:attr:`GPUResult.timeline`) drawn on it. The model-state copy streams
#: come from the driver's own list, so a stream it adds gets its thread here.
TRACKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("compute stream", ("compute",)),
    ("copy stream", ("offload", "prefetch")),
    ("stalls", ("stall",)),
    *((label, (stream,)) for stream, label in COPY_STREAMS.items()),
    ("host CPU steps", ("cpu",)),
    ("sends to other stages", ("send",)),
    ("collectives", ("collective",)),
)
#: timeline kind -> thread id
TRACK_OF = {kind: tid for tid, (_, kinds) in enumerate(TRACKS, start=1) for kind in kinds}
#: the threads named in every process, events or not (the activation-offload run's three)
ALWAYS_NAMED = 3


def chrome_trace(gpus: dict[str, GPUResult], full: bool = True) -> dict[str, Any]:
    """Chrome trace events: one process per GPU, a named thread per :data:`TRACKS` entry it
    has events on (compute, copy and stall threads always), and a "GPU memory" counter (bytes
    allocated) at every time the allocation changed. ``full=False`` leaves out the kernels,
    copies, stalls and model-state traffic (the bulk of the file) and keeps the memory
    counters: what a sweep point keeps unless its spec asks for full traces."""
    events: list[dict[str, Any]] = []
    for pid, (name, rep) in enumerate(sorted(gpus.items()), start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        timeline = rep.timeline if full else []
        used = {TRACK_OF[kind] for kind, *_ in timeline}
        for tid, (tname, _) in enumerate(TRACKS, start=1):
            if tid <= ALWAYS_NAMED or tid in used:
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": tname}})
        for kind, label, start, end in timeline:
            events.append({"name": f"{kind} {label}" if kind != "compute" else label,
                           "cat": kind, "ph": "X", "pid": pid, "tid": TRACK_OF[kind],
                           "ts": start / 1e6, "dur": (end - start) / 1e6})
        events.extend(memory_counter(pid, rep.memory_curve))
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def memory_counter(pid: int, curve: Any) -> list[dict[str, Any]]:
    """The "GPU memory" counter track of process ``pid``: one Chrome trace counter event ("ph":
    "C", args {"bytes": n}) per (time_ps, bytes) point of ``curve``."""
    return [{"name": "GPU memory", "ph": "C", "pid": pid, "ts": t / 1e6, "args": {"bytes": n}}
            for t, n in curve]
