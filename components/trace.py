"""The run's timeline as a Chrome trace (``trace.json``; opens in Perfetto and
chrome://tracing), drawn from the typed result records the elements published and nothing
else: one process per GPU, its compute, copy and stall threads (and, in model-state runs, the
gradient, weight and optimizer-state copies and the host CPU's steps), and its "GPU memory"
counter track.

A parallel run (:class:`ParallelRecords`, from the pipeline stages', ports' and cluster
fabric's records) adds: each GPU's process named with its global rank and its (tp, pp, dp)
coordinates and sorted by rank; its sends to the other stages (from the first byte leaving
to the last) and its recvs (from the stream reaching the recv to its taking the message) on
threads of their own, each send joined to the recv that took it by a flow arrow (flow events
``s`` and ``f`` sharing an id); and its collectives (from its compute stream draining to the
group's answer) with the op, the group, the bytes and the group's ranks and GPUs in their
args, one event per member. A run without them draws what it always drew, byte for byte."""
from __future__ import annotations

from dataclasses import field
import sys
from typing import TYPE_CHECKING, Any, Mapping, Optional

from .collective_ops import CollectiveOpsResult
from .gpu import GPUResult
from .model_state_driver import COPY_STREAMS
from .pipeline_p2p import P2PMessage, P2PResult
from .pipeline_report import PipelineStageResult

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

if TYPE_CHECKING:
    from .cluster_fabric import ClusterFabricResult, CollectiveRecord

__all__ = ["chrome_trace", "memory_counter", "TRACKS", "TRACK_OF", "RankCoords",
           "ParallelRecords", "parallel_records"]


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
    ("recvs from other stages", ("recv",)),
)
#: timeline kind -> thread id
TRACK_OF = {kind: tid for tid, (_, kinds) in enumerate(TRACKS, start=1) for kind in kinds}
#: the threads named in every process, events or not (the activation-offload run's three)
ALWAYS_NAMED = 3
#: the name and category of the flow events joining a send to its recv
FLOW_NAME, FLOW_CAT = "p2p message", "p2p"


@frozen_record
class RankCoords(FrozenRecord):
    """A GPU's global ``rank`` and its index in its tp, pp and dp groups."""

    rank: int
    tp: int
    pp: int
    dp: int


@record
class ParallelRecords(Record):
    """What a parallel run's elements published that the trace draws beside the GPUs'
    timelines: each GPU's rank and coordinates (``ranks``), its ports' messages
    (``messages``), its collectives as its fabric port recorded them (``collectives``: op,
    group, seq, tensor, bytes, start, end) and the fabric's record of each group's collective
    (``groups``), and each copied tp twin's simulated GPU (``twin_of``:
    components/rank_twins.py). Empty for a run with none of them."""

    ranks: dict[str, RankCoords] = field(default_factory=dict)
    messages: dict[str, list[P2PMessage]] = field(default_factory=dict)
    collectives: dict[str, list[tuple[str, str, int, str, int, int, int]]] = \
        field(default_factory=dict)
    groups: list[CollectiveRecord] = field(default_factory=list)
    twin_of: dict[str, str] = field(default_factory=dict)


def _coords(stage: PipelineStageResult) -> RankCoords:
    """A pipeline stage GPU's rank and coordinates, in Megatron-LM's rank order (tp fastest,
    then dp, then pp: docs/parallel.md, section 2): rank = tp + TP (dp + DP pp)."""
    dp = max(stage.dp, 1)
    rank = stage.tp_rank + stage.tp * (stage.dp_rank + dp * stage.stage)
    return RankCoords(rank, stage.tp_rank, stage.stage, stage.dp_rank)


def parallel_records(results: Mapping[str, object]) -> ParallelRecords:
    """The :class:`ParallelRecords` among a run's published records (by element name)."""
    out = ParallelRecords()
    fabric = _fabric_result_class()
    for result in results.values():
        if isinstance(result, PipelineStageResult):
            out.ranks[result.gpu] = _coords(result)
            if result.twin_of:
                out.twin_of[result.gpu] = result.twin_of
        elif isinstance(result, P2PResult):
            out.messages[result.gpu] = result.messages
        elif isinstance(result, CollectiveOpsResult):
            out.collectives[result.gpu] = result.collectives
        elif fabric is not None and isinstance(result, fabric):
            out.groups.extend(result.collectives)
    return out


def _fabric_result_class() -> Optional[type["ClusterFabricResult"]]:
    """``ClusterFabricResult`` where its module is loaded, else None: a run without a cluster
    fabric publishes none, and a single GPU's job need not import the fabric to know it."""
    module = sys.modules.get(f"{__package__}.cluster_fabric")
    found: Optional[type[ClusterFabricResult]] = getattr(module, "ClusterFabricResult", None)
    return found


def chrome_trace(gpus: dict[str, GPUResult], full: bool = True,
                 parallel: Optional[ParallelRecords] = None) -> dict[str, Any]:
    """Chrome trace events: one process per GPU, a named thread per :data:`TRACKS` entry it
    has events on (compute, copy and stall threads always), and a "GPU memory" counter (bytes
    allocated) at every time the allocation changed; with ``parallel``, the parts the module
    docstring lists. ``full=False`` leaves out the kernels, copies, stalls, model-state
    traffic, messages and collectives (the bulk of the file) and keeps the memory counters:
    what a sweep point keeps unless its spec asks for full traces."""
    par = parallel or ParallelRecords()
    order = sorted(gpus, key=lambda n: (0, par.ranks[n].rank, n) if n in par.ranks
                   else (1, 0, n))
    pids = {name: pid for pid, name in enumerate(order, start=1)}
    groups = {(g.group, g.seq, rank): g for g in par.groups for rank in g.ranks}
    gpu_of = {c.rank: gpu for gpu, c in par.ranks.items()}
    events: list[dict[str, Any]] = []
    for name in order:
        rep, pid = gpus[name], pids[name]
        events += _process_header(name, pid, par.ranks.get(name))
        timeline, kinds = _drawn_timeline(name, rep, par) if full else ([], set())
        used = {TRACK_OF[kind] for kind in kinds}
        for tid, (tname, _) in enumerate(TRACKS, start=1):
            if tid <= ALWAYS_NAMED or tid in used:
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": tname}})
        for kind, label, start, end in timeline:
            events.append({"name": f"{kind} {label}" if kind != "compute" else label,
                           "cat": kind, "ph": "X", "pid": pid, "tid": TRACK_OF[kind],
                           "ts": start / 1e6, "dur": (end - start) / 1e6})
        if full:
            events += _message_events(name, pid, par) + \
                _collective_events(name, pid, par, groups, gpu_of)
        events.extend(memory_counter(pid, rep.memory_curve))
    if full:
        events += _flows(pids, par)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _process_header(name: str, pid: int, coords: Optional[RankCoords]) -> list[dict[str, Any]]:
    """A GPU's process name (with its rank and coordinates when it has them) and, for a rank,
    its sort index (the viewers order processes by it)."""
    if coords is None:
        return [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}]
    label = f"{name}: rank {coords.rank} (tp {coords.tp}, pp {coords.pp}, dp {coords.dp})"
    return [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}},
            {"name": "process_sort_index", "ph": "M", "pid": pid,
             "args": {"sort_index": coords.rank}}]


def _drawn_timeline(name: str, rep: GPUResult, par: ParallelRecords
                    ) -> tuple[list[tuple[str, str, int, int]], set[str]]:
    """The GPU's timeline events drawn as they are (its sends and collectives are drawn from
    its ports' records instead where it has them: the same times, with their args), and the
    kinds of all its events, those records' included (each names its thread)."""
    skip = {kind for kind, records in (("send", par.messages), ("collective", par.collectives))
            if name in records}
    timeline = [event for event in rep.timeline if event[0] not in skip]
    kinds = {kind for kind, *_ in timeline} | {m.direction for m in par.messages.get(name, [])}
    if par.collectives.get(name):
        kinds.add("collective")
    return timeline, kinds


def _message_events(name: str, pid: int, par: ParallelRecords) -> list[dict[str, Any]]:
    """The GPU's sends and recvs, each an event on its thread with the message in its args."""
    out = []
    for m in par.messages.get(name, []):
        arrow = f"-> stage {m.dst}" if m.direction == "send" else f"<- stage {m.src}"
        out.append({"name": f"{m.direction} {m.tensor} {arrow}", "cat": m.direction,
                    "ph": "X", "pid": pid, "tid": TRACK_OF[m.direction],
                    "ts": m.start_ps / 1e6, "dur": (m.end_ps - m.start_ps) / 1e6,
                    "args": {"tensor": m.tensor, "from_stage": m.src, "to_stage": m.dst,
                             "phase": m.phase, "seq": m.seq, "bytes": m.nbytes}})
    return out


def _collective_events(name: str, pid: int, par: ParallelRecords,
                       group_of: Mapping[tuple[str, int, int], CollectiveRecord],
                       gpu_of: Mapping[int, str]) -> list[dict[str, Any]]:
    """The GPU's collectives, each an event with its op, group, bytes and (where its group is
    known, :func:`_group_record`; ``group_of`` the fabric's records by (group kind, seq,
    member rank)) the group's index, ranks and their GPUs (``gpu_of``, by rank) in its
    args."""
    out = []
    for op, group, seq, tensor, nbytes, start, end in par.collectives.get(name, []):
        args: dict[str, Any] = {"op": op, "group": group, "seq": seq, "tensor": tensor,
                                "bytes": nbytes}
        found = _group_record(name, group, seq, par, group_of)
        if found is not None:
            index, ranks = found
            args.update(group_index=index, ranks=list(ranks),
                        gpus=[gpu_of.get(r, f"rank {r}") for r in ranks])
        out.append({"name": f"collective {op} {tensor} group={group}", "cat": "collective",
                    "ph": "X", "pid": pid, "tid": TRACK_OF["collective"], "ts": start / 1e6,
                    "dur": (end - start) / 1e6, "args": args})
    return out


def _group_record(name: str, group: str, seq: int, par: ParallelRecords,
                  group_of: Mapping[tuple[str, int, int], CollectiveRecord]
                  ) -> Optional[tuple[int, tuple[int, ...]]]:
    """The index and ranks of the group of ``name``'s collective ``seq`` over ``group``: the
    fabric's record of it, or for a copied tp twin whose group the fabric did not price (a
    group of twins only: its dp or embedding group), its simulated GPU's group shifted by the
    twin's tp rank ``t``, ranks and index alike: in Megatron-LM's rank order (tp fastest) the
    group of tp rank t of a kind other than tp holds tp rank 0's ranks plus t, and its number
    is tp rank 0's plus t (workloads/parallel/ranks.py's ``process_groups``). None where
    neither is known."""
    coords = par.ranks.get(name)
    if coords is None:
        return None
    record = group_of.get((group, seq, coords.rank))
    if record is not None:
        return record.index, record.ranks
    sim = par.ranks.get(par.twin_of.get(name, ""))
    if sim is None or sim.tp != 0:
        return None
    record = group_of.get((group, seq, sim.rank))
    if record is None:
        return None
    shift = coords.rank - sim.rank
    return record.index + shift, tuple(r + shift for r in record.ranks)


def _flows(pids: Mapping[str, int], par: ParallelRecords) -> list[dict[str, Any]]:
    """A flow arrow from each send to the recv that took it (the receiver is the GPU of the
    sender's tp and dp coordinates on the stage it sent to; the recv names the sender's
    stage, phase and seq): an ``s`` event at the send's start and an ``f`` event bound to the
    recv's slice, inside it and not before the send began (a recv the stream reached before
    its message left is drawn from then), one id each. A send no recv took has no arrow."""
    gpu_at = {(c.tp, c.pp, c.dp): gpu for gpu, c in par.ranks.items()}
    recvs = {(gpu, m.src, m.phase, m.seq): m for gpu, messages in par.messages.items()
             for m in messages if m.direction == "recv"}
    out: list[dict[str, Any]] = []
    for sender in sorted(par.messages, key=lambda g: pids.get(g, 0)):
        coords = par.ranks.get(sender)
        if coords is None:
            continue
        for m in par.messages[sender]:
            receiver = gpu_at.get((coords.tp, m.dst, coords.dp))
            recv = recvs.get((receiver, m.src, m.phase, m.seq)) if receiver else None
            if m.direction != "send" or recv is None or receiver is None or \
                    receiver not in pids:
                continue
            flow = len(out) // 2 + 1
            out += [{"name": FLOW_NAME, "cat": FLOW_CAT, "ph": "s", "id": flow,
                     "pid": pids[sender], "tid": TRACK_OF["send"], "ts": m.start_ps / 1e6},
                    {"name": FLOW_NAME, "cat": FLOW_CAT, "ph": "f", "bp": "e", "id": flow,
                     "pid": pids[receiver], "tid": TRACK_OF["recv"],
                     "ts": max(recv.start_ps, m.start_ps) / 1e6}]
    return out


def memory_counter(pid: int, curve: Any) -> list[dict[str, Any]]:
    """The "GPU memory" counter track of process ``pid``: one Chrome trace counter event ("ph":
    "C", args {"bytes": n}) per (time_ps, bytes) point of ``curve``."""
    return [{"name": "GPU memory", "ph": "C", "pid": pid, "ts": t / 1e6, "args": {"bytes": n}}
            for t, n in curve]
