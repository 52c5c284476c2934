"""What a simulated pipeline reports: each stage's record (:class:`PipelineStageResult`, which
``cdma.PipelineStageWorkload`` publishes), the summary's ``pipeline`` section composed from
them, and its console lines (docs/parallel.md, "The simulated pipeline")."""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from sst_cdma.engine.records import Record, record

if TYPE_CHECKING:  # the summary loads this module only for a pipeline, the ports' with it
    from .pipeline_p2p import P2PResult

__all__ = ["PipelineStageResult", "pipeline_fields", "pipeline_lines", "planner_line"]


@record
class PipelineStageResult(Record):
    """What one pipeline stage ran: its GPU, ``stage`` of ``pp`` (``vpp`` chunks each) under
    ``schedule`` with ``micro_batches``; when its last pass ended (``end_ps``), the time its
    kernels ran (``busy_ps``) and the most (micro-batch, chunk) passes whose activations it
    held at once (``in_flight``: each from its first forward kernel's start to its last
    backward kernel's end, as simulated); its peak GPU memory (``peak_memory_bytes``) against
    the capacity (``memory_capacity_bytes``) and where it first ran out (``out_of_memory``:
    the GPU memory's record, with its ``time_ps``; None if it never did). With tensor
    parallelism: ``tp`` ranks a stage, this GPU's ``tp_rank``, and its collectives over its tp
    group (``tp_collectives``) with the time its stream spent in them (``tp_comm_ps``). With
    data parallelism: ``dp`` replicas, this GPU's ``dp_rank`` and its collectives over its dp
    group (``dp_collectives``, ``dp_comm_ps``: the time its stream waited in them, and
    ``dp_hidden_ps``: the time they ran beside its kernels). For tokens/s and MFU: the tokens of one
    micro-batch (``tokens``), the whole network's parameters (``model_params``) and the GPU's
    peak FLOP/s in the run's dtype (``peak_flops``); zeros for a chain of identical layers.
    With the optimizer states on the host (ZeRO-Offload), ``host``: its host CPU's time on
    this rank's partition (``cpu_step_ps``, and ``cpu_step_alone_ps`` had the CPU been its
    alone), the GPU's idle time while a step of its was at the CPU (``cpu_wait_ps``), the
    bytes its gradient and weight copies moved, its CPU's name and the GPUs sharing it."""

    gpu: str
    stage: int
    pp: int
    vpp: int
    schedule: str
    micro_batches: int
    end_ps: int
    busy_ps: int
    in_flight: int
    peak_memory_bytes: int
    memory_capacity_bytes: int
    out_of_memory: Optional[dict[str, Any]]
    tp: int = 1
    tp_rank: int = 0
    tp_collectives: int = 0
    tp_comm_ps: int = 0
    dp: int = 1
    dp_rank: int = 0
    dp_collectives: int = 0
    dp_comm_ps: int = 0
    tokens: int = 0
    model_params: int = 0
    peak_flops: float = 0.0
    dp_hidden_ps: int = 0
    host: dict[str, Any] = field(default_factory=dict)
    #: policy auto: what the stage's planner chose and why (None under other policies)
    planner: Optional[dict[str, Any]] = None
    #: a tp rank not simulated: the GPU of its stage's simulated tp rank, whose record this
    #: is a copy of (components/rank_twins.py); "" for a simulated GPU's own
    twin_of: str = ""


def pipeline_fields(stages: Sequence[PipelineStageResult],
                    ports: Mapping[str, P2PResult],
                    pcie_lost: Optional[Mapping[str, tuple[float, float]]] = None
                    ) -> dict[str, Any]:
    """The summary's ``pipeline``: the layout, the step time (when the last stage's last pass
    ended) and each stage's busy and idle time, its bubble share (idle over the step), the
    micro-batches it held at once, its peak memory and whether it fits and, from its GPU's
    ports (``ports``, by GPU), the bytes it sent and the time its stream waited in recvs; and
    the stage that ran out of memory first (None: none did). With tensor parallelism each
    stage has tp GPUs running the same shard stream: its figures are the most of any of them
    (its first GPU named), with its GPUs (``tp_gpus``) and the time in its tp collectives
    (``tp_comm_time_s``), which is neither busy nor bubble. With data parallelism, the time
    in its dp collectives (``dp_comm_time_s``), the layout's ``dp``, and ``ranks``: every
    rank of tp x pp x dp with its coordinates and the simulated GPU whose figures are its
    own (itself, or with one replica simulated its dp-0 twin: docs/parallel.md,
    "Symmetry"); with a network, ``tokens_per_s`` and ``mfu``. Where a network card shares
    each GPU's link to its PCIe switch (``pcie_lost``, by GPU: the ps its network traffic and
    its offload copies lost there), each stage's ``network_lost_time_s`` and
    ``copies_lost_time_s``."""
    by_stage: dict[int, list[PipelineStageResult]] = {}
    for r in sorted(stages, key=lambda r: (r.stage, r.dp_rank, r.tp_rank)):
        by_stage.setdefault(r.stage, []).append(r)
    step = max(r.end_ps for r in stages)
    first = by_stage[min(by_stage)][0]
    entries = [_stage_entry(ranks, step, ports, pcie_lost or {})
               for ranks in by_stage.values()]
    worked = sum(e.pop("_worked_ps") for e in entries)
    out = {
        "pp": first.pp, "vpp": first.vpp, "schedule": first.schedule,
        "micro_batches": first.micro_batches, "step_time_s": step / 10**12,
        "bubble_share": (step * len(entries) - worked) / (step * len(entries)) if step else 0.0,
        "out_of_memory": _first_out_of_memory(stages),
        "stages": entries}
    if first.tp > 1:
        out["tp"] = first.tp
    if first.dp > 1:
        out["dp"] = first.dp
        out["ranks"] = rank_entries(stages)
    if first.tokens and step:
        out.update(throughput(first, step))
    return out


def throughput(r: PipelineStageResult, step_ps: int) -> dict[str, float]:
    """Tokens per second (the global batch's tokens, micro-batches x tokens of one x dp, over
    the step) and MFU (6 x parameters x tokens/s over the GPUs' peak, tp x pp x dp x the
    preset's peak FLOP/s in the run's dtype): docs/parallel.md, "The cluster topology"."""
    tokens_per_s = r.micro_batches * r.tokens * r.dp / (step_ps / 10**12)
    gpus = r.tp * r.pp * r.dp
    return {"tokens_per_s": tokens_per_s,
            "mfu": 6 * r.model_params * tokens_per_s / (gpus * r.peak_flops)}


def rank_entries(stages: Sequence[PipelineStageResult]) -> list[dict[str, Any]]:
    """Every rank of the layout, in rank order (tp fastest, then dp, then pp): its
    coordinates and the simulated GPU its figures are (its own, its dp-0 twin's when only
    that replica ran, its stage's tp rank 0's when only that tp rank ran)."""
    first = stages[0]
    tp, pp, dp = first.tp, first.pp, first.dp
    ran = {(r.stage, r.dp_rank, r.tp_rank): r.twin_of or r.gpu for r in stages}
    return [{"rank": t + d * tp + s * tp * dp, "tp": t, "pp": s, "dp": d,
             "gpu": ran.get((s, d, t)) or ran[(s, 0, t)]}
            for s in range(pp) for d in range(dp) for t in range(tp)]


def _stage_entry(ranks: Sequence[PipelineStageResult], step: int,
                 ports: Mapping[str, P2PResult],
                 pcie_lost: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """One stage's entry from its tp ranks' records (each figure the most of any rank), with
    ``_worked_ps`` (its busy and tp-collective time) for the pipeline's bubble share."""
    r = ranks[0]
    busy = max(x.busy_ps for x in ranks)
    comm = max(x.tp_comm_ps for x in ranks)
    dp_comm = max(x.dp_comm_ps for x in ranks)
    idle = step - busy - comm - dp_comm
    entry: dict[str, Any] = {
        "stage": r.stage, "gpu": r.gpu, "busy_time_s": busy / 10**12,
        "idle_time_s": idle / 10**12, "bubble_share": idle / step if step else 0.0,
        "in_flight_max": max(x.in_flight for x in ranks),
        "peak_memory_bytes": max(x.peak_memory_bytes for x in ranks),
        "fits_in_memory": all(x.out_of_memory is None for x in ranks),
        **_port_fields([ports[x.gpu] for x in ranks if x.gpu in ports]),
        "_worked_ps": busy + comm + dp_comm}
    if r.tp > 1:
        entry.update(tp_gpus=[x.gpu for x in ranks if x.dp_rank == 0],
                     tp_comm_time_s=comm / 10**12)
    if r.dp > 1:
        entry["dp_comm_time_s"] = dp_comm / 10**12
        entry["dp_hidden_time_s"] = max(x.dp_hidden_ps for x in ranks) / 10**12
    lost = [pcie_lost[x.gpu] for x in ranks if x.gpu in pcie_lost]
    if lost:
        entry["network_lost_time_s"] = max(net for net, _ in lost) / 10**12
        entry["copies_lost_time_s"] = max(copies for _, copies in lost) / 10**12
    if r.host:
        entry["host"] = _host_entry(ranks)
    if r.planner is not None:
        entry["planner"] = dict(r.planner)
    return entry


def _host_entry(ranks: Sequence[PipelineStageResult]) -> dict[str, Any]:
    """A stage's ZeRO-Offload figures, of its rank that waited longest for its host CPU (its
    GPU named): the CPU's time on the rank's partition as it ran beside the other GPUs on
    that CPU and alone, the GPU's idle time while its steps were at the CPU (queued behind
    the other GPUs' or running), the copies' bytes, and the CPU with how many GPUs share
    it."""
    r = max(ranks, key=lambda x: (x.host["cpu_wait_ps"], x.host["cpu_step_ps"], -x.tp_rank))
    h = r.host
    return {"gpu": r.gpu, "cpu": h["cpu"], "gpus_on_cpu": h["gpus_on_cpu"],
            "cpu_step_time_s": h["cpu_step_ps"] / 10**12,
            "cpu_step_alone_s": h["cpu_step_alone_ps"] / 10**12,
            "cpu_step_span_s": h["cpu_step_span_ps"] / 10**12,
            "cpu_wait_time_s": h["cpu_wait_ps"] / 10**12,
            "gradients_to_host_bytes": h["gradients_to_host_bytes"],
            "weights_to_gpu_bytes": h["weights_to_gpu_bytes"]}


def _first_out_of_memory(stages: Sequence[PipelineStageResult]) -> Optional[dict[str, Any]]:
    """The stage whose GPU ran out of memory first (the earliest allocation past capacity,
    the lower stage on a tie): its stage, GPU, when, the layer and the bytes short."""
    short = [(oom["time_ps"], r.stage, r.gpu, oom) for r in stages
             if (oom := r.out_of_memory) is not None]
    if not short:
        return None
    _, stage, gpu, oom = min(short, key=lambda entry: (entry[0], entry[1]))
    return {"stage": stage, "gpu": gpu, "time_s": oom["time_ps"] / 10**12,
            "layer": oom["layer"], "bytes_short": oom["bytes_short"]}


def _port_fields(ports: Sequence[P2PResult]) -> dict[str, Any]:
    """A stage's p2p figures: the bytes it sent and its time waiting in recvs, the most of its
    GPUs' ports ({} without ports)."""
    if not ports:
        return {}
    return {"sent_bytes": max(p.sent_bytes for p in ports),
            "recv_wait_time_s": max(p.recv_wait_ps for p in ports) / 10**12}


def pipeline_lines(p: dict[str, Any]) -> list[str]:
    """The console lines of the ``pipeline`` section: the layout and step, then one line per
    stage."""
    ms = 1e3
    chunks = f", {p['vpp']} chunks a stage" if p["vpp"] > 1 else ""
    stages = f"{p['pp']} stages" if p["pp"] != 1 else "1 stage"
    if "tp" in p:
        stages += f" x tp {p['tp']}"
    if "dp" in p:
        stages += f" x dp {p['dp']}"
    lines = [f"{'pipeline:':<16} {stages}, {p['schedule']}{chunks}, "
             f"{p['micro_batches']} micro-batches: step {p['step_time_s'] * ms:.3f} ms, "
             f"bubble {p['bubble_share']:.1%} of the stages' time"]
    if "tokens_per_s" in p:
        lines.append(f"  {p['tokens_per_s']:,.0f} tokens/s, MFU {p['mfu']:.1%}")
    if "ranks" in p:
        ran = len({entry["gpu"] for entry in p["ranks"]})
        lines.append(f"  {len(p['ranks'])} ranks, {ran} simulated" + _twins_note(p, ran))
    held = "micro-batch(es)" if p["vpp"] == 1 else "(micro-batch, chunk) passes"
    oom = p["out_of_memory"]
    if oom is not None:
        lines.append(f"  out of memory first on stage {oom['stage']} ({oom['gpu']}) at "
                     f"{oom['time_s'] * ms:.3f} ms, layer {oom['layer']}, "
                     f"{oom['bytes_short'] / 2**20:.1f} MiB short")
    for s in p["stages"]:
        gpus = ", ".join(s.get("tp_gpus", [s["gpu"]]))
        lines.append(f"  stage {s['stage']} ({gpus}): busy {s['busy_time_s'] * ms:.3f} ms, "
                     + (f"{s['tp_comm_time_s'] * ms:.3f} ms in TP collectives, "
                        if "tp_comm_time_s" in s else "")
                     + (f"{s['dp_comm_time_s'] * ms:.3f} ms in DP collectives "
                        f"({s['dp_hidden_time_s'] * ms:.3f} ms more hidden), "
                        if "dp_comm_time_s" in s else "")
                     + f"bubble {s['bubble_share']:.1%}, at most {s['in_flight_max']} {held} "
                     "in flight, peak memory "
                     f"{s['peak_memory_bytes'] / 2**20:.1f} MiB"
                     + (f", {s['recv_wait_time_s'] * ms:.3f} ms waiting in recv, "
                        f"{s['sent_bytes'] / 1e6:.1f} MB sent" if "sent_bytes" in s else "")
                     + (f"; at its PCIe switch the network lost "
                        f"{s['network_lost_time_s'] * ms:.3f} ms to offload copies, the copies "
                        f"{s['copies_lost_time_s'] * ms:.3f} ms"
                        if "network_lost_time_s" in s else ""))
        if "host" in s:
            lines.append(_host_line(s["host"]))
        if "planner" in s:
            lines.append(planner_line(s["stage"], s["planner"]))
    short = [s for s in p["stages"] if "planner" in s and not s["planner"]["fits"]]
    if short:
        worst = max(short, key=lambda s: s["planner"]["bytes_short"])
        lines.append(f"  planner: no plan fits stage(s) {', '.join(str(s['stage']) for s in short)}"
                     f"; stage {worst['stage']} is the most short, by "
                     f"{worst['planner']['bytes_short'] / 2**30:.2f} GiB")
    return lines


def _twins_note(p: Mapping[str, Any], ran: int) -> str:
    """What the simulated ranks stand for: one replica, each stage's tp rank 0, or both."""
    if ran == len(p["ranks"]):
        return ""
    own = [e for e in p["ranks"] if e["gpu"].startswith(f"gpu{e['rank']}-")]
    one_tp = p.get("tp", 1) > 1 and all(e["tp"] == 0 for e in own)
    one_replica = all(e["dp"] == 0 for e in own)
    if one_tp and one_replica:
        return " (tp rank 0 of each stage of one data-parallel replica; the others are its twins)"
    if one_tp:
        return " (tp rank 0 of each stage of every replica; the other tp ranks are its twins)"
    return " (one data-parallel replica; the others are its twins)"


def planner_line(stage: int, plan: Mapping[str, Any]) -> str:
    """What stage ``stage``'s planner (policy auto) chose and why: the passes it holds at
    once, the room its model states leave, its choices, whether its plan fits and, where it
    placed them (optimizer_states auto), where the optimizer states went and why."""
    gib = 2**30
    c = plan["choices"]
    why = (f"    stage {stage} plan: {plan['in_flight']} in flight ({plan['waiting']} waiting), "
           f"model states {plan['model_state_bytes'] / gib:.2f} of "
           f"{plan['capacity_bytes'] / gib:.2f} GiB: ")
    total = sum(c.values())
    if c["keep"] == total:
        chose = f"keeps all {total} activations"
    else:
        chose = (f"offload {c['offload']}, compress {c['compress']} ({plan['codec']}), "
                 f"recompute {c['recompute']}, keep {c['keep']} of {total} activations")
    fits = (f"peak {plan['peak_bytes'] / gib:.2f} GiB, fits" if plan["fits"] else
            f"no plan fits: {plan['bytes_short'] / gib:.2f} GiB short")
    states = plan.get("optimizer_states")
    placed = "" if states is None else \
        f"; optimizer states on the {states['placement']} ({states['reason']})"
    return f"{why}{chose}; {fits}{placed}"


def _host_line(h: dict[str, Any]) -> str:
    """A stage's ZeRO-Offload line: its rank's CPU step against alone, the GPU's wait, the
    copies and the sharing."""
    ms = 1e3
    return (f"    host ({h['gpu']}): CPU Adam {h['cpu_step_time_s'] * ms:.3f} ms over "
            f"{h['cpu_step_span_s'] * ms:.3f} ms on {h['cpu']} (alone "
            f"{h['cpu_step_alone_s'] * ms:.3f} ms; shared by {h['gpus_on_cpu']} GPUs), GPU idle "
            f"{h['cpu_wait_time_s'] * ms:.3f} ms waiting for it, "
            f"{h['gradients_to_host_bytes'] / 1e6:.1f} MB gradients to the host, "
            f"{h['weights_to_gpu_bytes'] / 1e6:.1f} MB weights back")
