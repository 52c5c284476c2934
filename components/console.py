"""The ten-second summary a person reads after a run: the console text of a summary dict (what
:mod:`components.summary` composed from the typed result records, or a summary.json read back),
one labelled line per figure. Bytes moved (offloads, wire, DRAM traffic) are decimal, every
size of a line in one unit; memory sizes and capacities are binary (a 16 GiB GPU reads
"16 GiB"), each in the unit that suits it, so that a size reads the same on every line."""
from __future__ import annotations

import math
from typing import Any

from sst_cdma.model.element_params import network_word
from sst_cdma.model.policies import VDNN_POLICIES

from .nvswitch import allreduce_line

__all__ = ["console_summary", "plan_line", "functional_line", "binary_size", "engine_line",
           "density_line", "no_offload_hint", "fits_hint", "states_moved", "model_state_lines"]

MS = 1e3
#: how the heading names an engine other than the paper's cDMA
ENGINE_NAMES = {"blackwell-de": "Blackwell DE"}


def _unit(largest: float) -> tuple[float, str]:
    """The decimal unit (scale, name) for sizes up to ``largest`` bytes: GB, MB or kB."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(largest) >= scale / 10:
            return scale, unit
    return 1e3, "kB"


def _sizes(*values: float) -> list[str]:
    """``values`` in bytes, formatted in one decimal unit (the one that suits the largest), so
    that a console line never mixes units."""
    if not any(values):
        return ["0 B"] * len(values)
    scale, unit = _unit(max(abs(v) for v in values))
    out = []
    for v in values:
        x = v / scale
        # two decimals, or three significant digits where two decimals would show 0.00
        digits = 2 if abs(x) >= 0.01 or x == 0 else 2 - math.floor(math.log10(abs(x)))
        out.append(f"{x:.{digits}f} {unit}")
    return out


_BINARY = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def binary_size(n: float) -> str:
    """A memory size in the largest binary unit it fills at least once: ``16 GiB`` for an exact
    multiple, else two decimals (``6.81 GiB``); bytes below 1 KiB as ``N B``."""
    for scale, unit in _BINARY:
        if abs(n) >= scale:
            whole, part = divmod(int(n), scale) if float(n).is_integer() else (0, 1)
            return f"{whole} {unit}" if not part else f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def _row(label: str, text: str) -> str:
    """One console line: the label and a colon, padded so values line up."""
    return f"{label + ':':<16} {text}"


def functional_line(summary: dict[str, Any]) -> str:
    """The console line of a summary's functional checks."""
    checks, matches = summary["functional_checks"], summary["functional_matches"]
    if not checks:
        return _row("functional", "no prefetch checked (no real tensor was compressed and "
                    "brought back)")
    verdict = "all matched" if checks == matches else f"{matches} matched"
    return _row("functional", f"{checks} prefetch{'es' if checks != 1 else ''} checked bit for "
                f"bit, {verdict}")


def plan_line(plan: dict[str, Any]) -> str:
    """The console's plan line: tensors and bytes per choice, and the recomputation time."""
    shown = [c for c, count in plan["counts"].items() if count]
    sizes = dict(zip(shown, _sizes(*(plan["bytes"][c] for c in shown))))
    parts = [f"{plan['counts'][c]} {c} ({sizes[c]})" for c in shown]
    text = ", ".join(parts) + f"; recompute {plan['recompute_time_s'] * 1e3:.3f} ms"
    planner = plan.get("planner")
    if planner:
        text += f"; planner's predicted passes {planner['predicted_time_s'] * 1e3:.3f} ms"
    return _row("tensors", text)


def planner_states_line(verdicts: list[dict[str, Any]]) -> str:
    """The console's line of the placements policy auto weighed for the model states: the
    chosen one and its predicted step (the passes, the update and the model-state traffic:
    not the plan line's predicted passes), then why each other was not."""
    chosen = next(v for v in verdicts if v["chosen"])
    parts = [f"chose {chosen['placement']} (the fastest that fits: predicted step "
             f"{chosen['predicted_step_s'] * MS:.3f} ms)"]
    parts += [f"{v['placement']}: {v['reason']}" for v in verdicts if not v["chosen"]]
    return _row("state placement", "; ".join(parts))


class _Scope:
    """What a figure of a summary of ``n`` GPUs is (``n`` 0: one GPU, no labels): the slowest
    GPU's, the total over GPUs, the largest GPU's."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.slowest, self.total, self.largest = (
            f" (slowest of {n} GPUs)", f" (total of {n} GPUs)", " (largest GPU)") if n \
            else ("", "", "")


def console_summary(s: dict[str, Any]) -> str:
    """The ten-second summary a person reads after a run."""
    scope = _Scope(len(s.get("gpus", ())))
    lines = _heading_lines(s)
    if not s.get("complete", True):
        return "\n".join(lines + _stopped_lines(s, scope))
    lines += _time_lines(s, scope)
    lines += _link_lines(s, scope)
    lines += [line for line in (engine_line(s), density_line(s)) if line]
    lines += _plan_lines(s)
    lines += _memory_lines(s, scope)
    if "model_states" in s:
        lines += model_state_lines(s["model_states"])
    elif any("model_states" in g for g in s.get("gpus", ())):
        lines += _gpus_model_state_lines(s["gpus"], s.get("hosts", 1))
    lines += _baseline_lines(s, scope)
    lines += [_gpu_line(g) for g in s.get("gpus", [])]
    return "\n".join(lines)


def _gpu_line(g: dict[str, Any]) -> str:
    """One GPU's line of a several-GPU run: its iteration and where it went."""
    m = g.get("model_states", {})
    if "host_cpu_wait_s" in m:
        return f"  {g['gpu']}: {g['iteration_time_s'] * MS:.3f} ms, " + _split_text(g, m)
    return (f"  {g['gpu']}: {g['iteration_time_s'] * MS:.3f} ms, stall "
            f"{g['stall_time_s'] * MS:.3f} ms")


def _run_states(s: dict[str, Any]) -> dict[str, Any]:
    """The run's model states: its own, or (several GPUs) the first GPU's ({} without)."""
    gpus = s.get("gpus") or [{}]
    return s.get("model_states") or gpus[0].get("model_states") or {}


#: the model states, by their key in a placement and as the console names them
_ROLES = (("optimizer_states", "optimizer states"), ("gradients", "gradients"),
          ("weights", "weights"))


def states_moved(placement: dict[str, Any]) -> str:
    """Where the model states kept off the GPU are (``optimizer states and gradients on host,
    weights on nvme``; "" with every one on the GPU)."""
    tiers: dict[str, list[str]] = {}
    for key, word in _ROLES:
        if placement[key] != "gpu":
            tiers.setdefault(placement[key], []).append(word)
    return ", ".join(f"{' and '.join(words)} on {tier}" for tier, words in tiers.items())


def _what_moved(s: dict[str, Any]) -> tuple[str, str]:
    """The heading's parts on what the run moves and through what: the activation policy and,
    with model states off the GPU, where they are and what the policy offloaded; the engine and
    its codec, or that it only copied (nothing compressed)."""
    vdnn = "vDNN " if s["policy"] in VDNN_POLICIES else ""
    engine = f"{ENGINE_NAMES.get(s.get('engine', ''), 'cDMA')} {s['algorithm']}"
    m = _run_states(s)
    moved = states_moved(m["placement"]) if m else ""
    if not moved:
        return f"{vdnn}policy {s['policy']}", engine
    step = " (host CPU step)" if "cpu_step_time_s" in m else ""
    none = " offloaded none" if not s["offloaded_bytes"] and s["policy"] != "none" else ""
    if not s["offloaded_bytes"] and "state_compression" not in m:
        engine = f"{ENGINE_NAMES.get(s.get('engine', ''), 'cDMA')} plain copies (no codec used)"
    return f"{moved}{step}, activations: {vdnn}policy {s['policy']}{none}", engine


def _heading_lines(s: dict[str, Any]) -> list[str]:
    """The heading (network, what moves, allocation, engine), the system and the kernel
    times."""
    moved, engine = _what_moved(s)
    lines = [
        f"== sst-cdma: {s['network']} batch {s['batch']} {s.get('dtype', '')}, {moved}, "
        + (f"{s['allocation']} allocation, " if s.get("allocation") else "")
        + f"{engine} ({s.get('mode', 'flow')} model) ==",
    ]
    if s.get("system"):
        lines.append(f"system:          {s['system']}")
    if s.get("kernel_times") == "roofline":
        lines.append("kernel times:    roofline (peak FLOP/s x the GPU's compute_efficiency, "
                     "against DRAM bandwidth)")
    elif s.get("kernel_times"):
        lines.append(f"kernel times:    {s['kernel_times']}")
    if "sm_codec_time_s" in s:
        lines.append(f"SM codec:        {s['sm_codec_time_s'] * MS:.3f} ms of SM (de)compression "
                     "kernels on the compute stream")
    return lines


def _stopped_lines(s: dict[str, Any], scope: _Scope) -> list[str]:
    """What a run cut off before its iteration ended can say: when, and what it moved so far."""
    stopped = s.get("stopped_at_s", s["iteration_time_s"])
    raw, wire = _sizes(s["offloaded_bytes"], s["wire_bytes"])
    return [
        f"STOPPED:         the run was stopped at {stopped * MS:.3f} ms (its stop-at time) before "
        "the iteration ended: no iteration time, stall, speed-up or slowdown",
        _row(f"offloaded{scope.total}", f"{raw} raw, {wire} on the wire so far"),
        _row(f"peak GPU memory{scope.largest}",
             f"{binary_size(s['peak_gpu_memory_bytes'])} so far"),
    ]


def _update_word(s: dict[str, Any]) -> str:
    """What the time after the backward pass is: the GPU's update kernels, or the update on
    the host (the model-state copies and the host CPU's step the GPU waits for)."""
    return "update on the host" if "cpu_step_time_s" in _run_states(s) else "update"


def _split_text(g: dict[str, Any], m: dict[str, Any]) -> str:
    """Where a GPU's iteration went with the optimizer step on the host: its kernels, its
    stall on copies, and its wait for the host CPU (not a stall: the host's step)."""
    it, host = g["iteration_time_s"], m["host_cpu_wait_s"]
    copies = max(0.0, g["stall_time_s"] - host)
    return (f"compute {g['compute_time_s'] * MS:.3f} ms, stalled on copies {copies * MS:.3f} ms "
            f"({100 * copies / it if it else 0:.1f}%), waiting for the host CPU "
            f"{host * MS:.3f} ms ({100 * host / it if it else 0:.1f}%)")


def _slowest(s: dict[str, Any]) -> dict[str, Any]:
    """The GPU entry whose iteration is the run's (the slowest; the run itself on one GPU)."""
    return max(s.get("gpus") or [s], key=lambda g: g["iteration_time_s"])


def _time_lines(s: dict[str, Any], scope: _Scope) -> list[str]:
    """The iteration and its passes, compute against stall (with the step on the host: against
    the stall on copies and the wait for the host CPU), and the bytes offloaded."""
    it = s["iteration_time_s"]
    raw, wire = _sizes(s["offloaded_bytes"], s["wire_bytes"])
    slowest = _slowest(s)
    m = slowest.get("model_states", {})
    if "host_cpu_wait_s" in m:
        split = _row(f"GPU time{scope.slowest}", _split_text(slowest, m))
    elif "compute_time_s" in s:
        share = 100 * s["stall_time_s"] / it if it else 0
        split = _row(f"compute / stall{scope.slowest}", f"{s['compute_time_s'] * MS:.3f} ms / "
                     f"{s['stall_time_s'] * MS:.3f} ms ({share:.1f}% stalled)")
    else:
        split = f"stall:           {s['stall_time_s'] * MS:.3f} ms"
    return [
        _row(f"iteration{scope.slowest}", f"{it * MS:.3f} ms  (forward "
             f"{s['forward_time_s'] * MS:.3f} ms, backward {s['backward_time_s'] * MS:.3f} ms"
             + (f", {s['optimizer']} {_update_word(s)} {s['update_time_s'] * MS:.3f} ms"
                if s.get("update_time_s") else "") + ")"),
        split,
        _row(f"offloaded{scope.total}", f"{raw} raw, {wire} on the wire "
             f"(ratio {s['compression_ratio']:.2f}x)"),
    ]


def _link_lines(s: dict[str, Any], scope: _Scope) -> list[str]:
    """The ratio of every algorithm, the host link's bandwidth and busy time, and one line per
    kind of shared link, in the order the GPUs' paths meet them."""
    lines = []
    if "compression_ratio_by_algorithm" in s and s["algorithm"] != "none":
        r = s["compression_ratio_by_algorithm"]
        lines.append("ratio by algo:   " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
    if "pcie_utilization" in s:
        u = s["pcie_utilization"]
        lines.append(f"host link:       {s['pcie_bandwidth_Bps'] / 1e9:.2f} GB/s per direction, "
                     f"busy {100 * u['d2h']:.1f}% to host, {100 * u['h2d']:.1f}% to GPU"
                     + (f" (mean of {scope.n} GPUs)" if scope.n else ""))
    shared = s.get("switch_utilization") or {}
    for kind in dict.fromkeys(u.get("kind", "switch") for u in shared.values()):
        links = {n: u for n, u in shared.items() if u.get("kind", "switch") == kind}
        name, u = max(links.items(), key=lambda kv: max(kv[1]["d2h"], kv[1]["h2d"]))
        lines.append(_row("switch uplink" if kind == "switch" else kind,
                          f"{len(links)} shared, busiest {name} ({u['bandwidth_Bps'] / 1e9:.2f} "
                          f"GB/s) busy {100 * u['d2h']:.1f}% to host, {100 * u['h2d']:.1f}% to "
                          "GPU"))
    return lines


def _plan_lines(s: dict[str, Any]) -> list[str]:
    """The per-tensor plan (not under vDNN's own policies) and the all-reduce."""
    lines = []
    plans = [s["plan"]] if "plan" in s else [g["plan"] for g in s.get("gpus", ()) if "plan" in g]
    if plans and plans[0]["tensors"] and s["policy"] not in VDNN_POLICIES:
        # several GPUs: their plans, each its own GPU's, are one line when they agree
        lines.append(plan_line(plans[0]) + ("" if len(plans) == 1 else
                                            f" (each of {len(plans)} GPUs)"
                                            if all(p == plans[0] for p in plans) else
                                            " (gpu0; the GPUs' plans differ)"))
    planner = plans[0].get("planner", {}) if plans else {}
    if planner.get("model_states"):
        lines.append(planner_states_line(planner["model_states"]))
    if "allreduce" in s:
        lines.append(allreduce_line(s["allreduce"]))
    if "nvme" in s:
        lines.append(nvme_line(s["nvme"]))
    if "pipeline" in s:
        from .pipeline_report import pipeline_lines  # loaded for a pipeline's summary only

        lines += pipeline_lines(s["pipeline"])
    if "host_cpu" in s:
        lines.append(host_cpu_line(s["host_cpu"]))
    return lines


def _adam_origin(cpu: dict[str, Any]) -> str:
    """Which measurement the host CPU's rate is and how it was scaled, in brackets ("" for a
    given rate)."""
    how = cpu["adam_scaling"]
    if how == "given":
        return ""
    what = cpu["adam_implementation"]
    if how == "unscaled":
        return f" ({what} measured on another CPU, unscaled)"
    if cpu["adam_scale"] == 1:
        return f" ({what}, as measured)"
    recorded = ", by its recorded width and clock" if how.startswith("recorded") else ""
    return f" ({what} measured x{cpu['adam_scale']:.3f}{recorded})"


def host_cpu_line(cpu: dict[str, Any]) -> str:
    """The console line of the host CPU: its platform, cores and per-core Adam rate (scaled
    from the measured one), and what they reach on the DRAM."""
    bound = "DRAM-bound" if cpu["dram_bound"] else "bound by the cores"
    return _row("host CPU", f"{cpu['platform']}: {cpu['cores']} cores at "
                f"{cpu['adam_per_core_params_per_s'] / 1e6:.0f} M Adam parameters/s each"
                f"{_adam_origin(cpu)}, {cpu['adam_params_per_s'] / 1e9:.2f} G/s together on "
                f"{cpu['dram_bandwidth_Bps'] / 1e9:g} GB/s of DRAM: {bound}")


def nvme_line(nvme: dict[str, Any]) -> str:
    """The console line of the NVMe SSDs: how many of which drive, on what link and path,
    what they wrote, read and held against their capacity."""
    written, read, peak = _sizes(nvme["bytes_written"], nvme["bytes_read"],
                                 nvme["peak_stored_bytes"])
    return _row("nvme", f"{nvme['drives']} x {nvme['model']}, {nvme['link']}, {nvme['path']}: "
                f"{written} written, {read} read, peak {peak} of "
                f"{nvme['capacity_bytes'] / 1e12:.2f} TB")


def _memory_lines(s: dict[str, Any], scope: _Scope) -> list[str]:
    """The engine's DRAM traffic, the peak and average GPU memory against the capacity, the
    functional checks, and where memory ran out."""
    lines = []
    if "extra_dram_bytes" in s:
        lines.append(_row(f"DMA DRAM traffic{scope.total}", f"{_sizes(s['extra_dram_bytes'])[0]} "
                          "read+written by the engine"))
    cap = s.get("gpu_memory_capacity_bytes")
    fits = "fits" if s["fits_in_memory"] else "DOES NOT FIT"
    peak, cap_text, avg = (binary_size(x) for x in (s["peak_gpu_memory_bytes"], cap or 0,
                                                     s.get("average_gpu_memory_bytes", 0)))
    lines.append(_row(f"peak GPU memory{scope.largest}", peak
                      + (f" of {cap_text} ({fits})" if cap else f" ({fits})")
                      + (f", average {avg}" if "average_gpu_memory_bytes" in s else "")))
    if "functional_checks" in s:
        lines.append(functional_line(s))
    oom = s.get("out_of_memory")
    if oom:
        over = s["peak_gpu_memory_bytes"] - cap if cap else 0
        lines.append(f"out of memory:   first at layer {oom['layer']} ({oom['tensor']}), "
                     f"{binary_size(oom['bytes_short'])} short"
                     + (f"; the peak needs {binary_size(over)} more" if over > 0 else ""))
    hint = no_offload_hint(s)
    if hint:
        lines.append(_row("hint", hint))
    return lines


def _nvme_traffic(m: dict[str, Any]) -> str:
    """ZeRO-Infinity's part of the host CPU step's line: what the steps read from and wrote
    to the SSDs ('' with nothing there)."""
    if "states_from_nvme_bytes" not in m:
        return ""
    read, written, weights = _sizes(m["states_from_nvme_bytes"], m["states_to_nvme_bytes"],
                                    m["weights_to_nvme_bytes"])
    parts = [f"states {read} from nvme, {written} to nvme"] if m["states_from_nvme_bytes"] \
        else []
    if m["weights_to_nvme_bytes"]:
        parts.append(f"{weights} of weights to nvme")
    return "".join(f"; {p}" for p in parts)


def _placement_line(m: dict[str, Any], suffix: str = "") -> str:
    """The console line of where the model states are and how many gradient buckets."""
    p = m["placement"]
    return _row("model states", f"optimizer states {p['optimizer_states']}, gradients "
                f"{p['gradients']}, weights {p['weights']}"
                + (", delayed update" if p["delayed_update"] else "")
                + (f"; {m['buckets']} gradient bucket(s)" if "buckets" in m else "") + suffix)


def _gpu_state_rows(m: dict[str, Any]) -> list[tuple[str, str]]:
    """One GPU's model-state figures as (label, text): the host CPU's step and what it moved,
    the state compression and the micro-batches."""
    rows = []
    if "cpu_step_time_s" in m:
        rows.append(("host CPU step", f"{m['cpu_step_time_s'] * MS:.3f} ms ("
                     f"{m['cpu_step_alone_s'] * MS:.3f} ms alone); "
                     f"{_sizes(m['gradients_to_host_bytes'])[0]} of gradients to host, "
                     + (f"{_sizes(m['gradients_to_gpu_bytes'])[0]} of accumulated gradients "
                        "back, " if "gradients_to_gpu_bytes" in m else "")
                     + f"{_sizes(m['weights_to_gpu_bytes'])[0]} of weights back"
                     + _nvme_traffic(m)))
    if "state_compression" in m:
        c = m["state_compression"]
        rows.append(("state compression", f"{c['mode']} ({c['codec']}, {c['dtype']}): "
                     f"{_sizes(m['gradients_wire_bytes'])[0]} of gradients and "
                     f"{_sizes(m['weights_wire_bytes'])[0]} of weights on the link; "
                     f"CPU codec {m['cpu_codec_time_s'] * MS:.3f} ms"))
    if m["micro_batches"] > 1:
        times = m["micro_batch_time_s"]
        rows.append(("micro-batches", f"{m['micro_batches']} of "
                     f"{sum(times) / len(times) * MS:.3f} ms each (mean) in the "
                     f"{m['step_time_s'] * MS:.3f} ms iteration"))
    return rows


def _tier_line(tier: str, t: dict[str, Any], suffix: str = "") -> str:
    """One memory tier's console line: its peak against its capacity, and its average."""
    peak, cap, avg = (binary_size(x) for x in (t["peak_bytes"], t["capacity_bytes"],
                                                t["average_bytes"]))
    oom = t["out_of_memory"]
    return _row(f"{tier} tier{suffix}", f"peak {peak} of {cap}, average {avg}"
                + ("" if oom is None else
                   f"; DOES NOT FIT: {_sizes(oom['bytes_short'])[0]} short at "
                   f"{oom['tensor']}"))


def model_state_lines(m: dict[str, Any]) -> list[str]:
    """Where the model states are, the host CPU's step, the micro-batches and the memory of
    each tier."""
    return [_placement_line(m)] + [_row(label, text) for label, text in _gpu_state_rows(m)] \
        + [_tier_line(tier, t) for tier, t in m["tiers"].items()]


def _gpus_model_state_lines(gpus: list[dict[str, Any]], hosts: int) -> list[str]:
    """The model-state lines of several GPUs: the placement once where every GPU has the same,
    each GPU's host CPU step (and compression, micro-batches) on a line of its own unless
    every GPU's reads the same, and each tier's largest peak (a host tier: the largest of the
    ``hosts`` hosts' pools, each shared by its GPUs)."""
    states = [(g["gpu"], g["model_states"]) for g in gpus if "model_states" in g]
    n = len(states)
    each = f" (each of {n} GPUs)"
    placements = [_placement_line(m) for _, m in states]
    lines = [placements[0] + each] if len(set(placements)) == 1 else \
        [_placement_line(m, f" ({name})") for name, m in states]
    rows = {name: _gpu_state_rows(m) for name, m in states}
    labels = list(dict.fromkeys(label for r in rows.values() for label, _ in r))
    for label in labels:
        texts = {name: dict(r)[label] for name, r in rows.items() if label in dict(r)}
        if len(set(texts.values())) == 1 and len(texts) == n:
            lines.append(_row(label + each, next(iter(texts.values()))))
        else:
            lines += [_row(f"{label} ({name})", text) for name, text in texts.items()]
    tiers = list(dict.fromkeys(tier for _, m in states for tier in m["tiers"]))
    for tier in tiers:
        entries = [m["tiers"][tier] for _, m in states if tier in m["tiers"]]
        suffix = f" (largest of {n} GPUs)" if tier == "gpu" else \
            f" (largest of {hosts} hosts)" if hosts > 1 else ""
        lines.append(_tier_line(tier, max(entries, key=lambda t: t["peak_bytes"]), suffix))
    return lines


def _baseline_lines(s: dict[str, Any], scope: _Scope) -> list[str]:
    """The oracle and the vDNN baseline: cut off, or compared with this run."""
    lines = []
    it = s["iteration_time_s"]
    b = s.get("baselines", {})
    for label, name in (("oracle", "oracle"), ("vdnn", "vDNN baseline")):
        if label in b and not b[label].get("complete", True):
            lines.append(f"{name + ':':<16} stopped (the run's stop-at time) before its iteration ended: "
                         "no comparison")
    if "oracle" in b and b["oracle"].get("complete", True):
        o = b["oracle"]
        lines.append(_row(f"oracle{scope.slowest}", f"{o['iteration_time_s'] * MS:.3f} ms, needs "
                          f"{binary_size(o['peak_gpu_memory_bytes'])}"
                          f"{' per GPU' if scope.n else ''} "
                          f"({'fits' if o['fits_in_memory'] else 'does not fit'} on this GPU); "
                          f"this run is {it / o['iteration_time_s']:.2f}x the oracle"))
    hint = fits_hint(s)
    if hint:
        lines.append(_row("hint", hint))
    if "vdnn" in b and b["vdnn"].get("complete", True):
        v = b["vdnn"]
        policy = f", policy {v['policy']}" if v.get("policy") else ""
        reason = s.get("no_cdma_speedup")
        lines.append(_row(f"vDNN (no comp.{policy}){scope.slowest}",
                          f"{v['iteration_time_s'] * MS:.3f} ms; "
                          + (f"no cDMA speed-up: {reason}" if reason else
                             f"cDMA speed-up {v['iteration_time_s'] / it:.2f}x")))
    return lines


def engine_line(s: dict[str, Any]) -> str:
    """The engine's line: its codec units and their throughput, how busy they were, and which
    kind of resource (engine, link, HBM) bounded the copies, the tightest first ("" without an
    engine)."""
    if "codec_units" not in s:
        return ""
    name = ENGINE_NAMES.get(s.get("engine", ""), "cDMA")
    if s["algorithm"] == "none":
        text = "plain copy engine (no codec)"
    else:
        units, each = s["codec_units"], s["codec_unit_throughput_Bps"]
        text = (f"{units} {s['algorithm']} unit{'s' if units != 1 else ''} x "
                f"{each / 1e9:.2f} GB/s = {units * each / 1e9:.2f} GB/s")
        if s.get("engine") == "blackwell-de" and s["algorithm"] == "lz4":
            text += " (lz4: the DE's default codec; it decodes lz4 and zlib, not zvc)"
        if "engine_busy" in s:
            text += f", busy {100 * s['engine_busy']:.1f}% of the iteration"
    bounds = s.get("copy_bounds")
    if not bounds:
        return _row(f"{name} engine", text + "; it copied nothing")
    ranked = sorted(((k, v) for k, v in bounds.items() if v >= 0.0005), key=lambda kv: -kv[1])
    text += "; copies bound by " + ", ".join(f"{kind} {100 * share:.1f}%"
                                             for kind, share in ranked) + " of their time"
    if s["algorithm"] != "none" and bounds.get("engine", 0.0) == 0.0:
        text += " (the codec units held no copy back: more would change nothing)"
    return _row(f"{name} engine", text)


def density_line(s: dict[str, Any]) -> str:
    """Where the densities behind the compression came from: the profile, whether it is
    measured, estimated or derived, and what it says it rests on ("" with compression off or
    no profile read)."""
    prov = s.get("density_provenance")
    if not prov or s["algorithm"] == "none":
        return ""
    real = prov.get("real_tensors", 0)
    parts = [f"{real} tensor{'s' if real != 1 else ''} compressed from real bytes"] if real \
        else []
    if "profile" in prov:
        kind = {"estimated": "ESTIMATED, not measured"}.get(prov["kind"], prov["kind"])
        parts.append(f"profile {prov['profile']} at progress "
                     f"{s.get('density_profile_progress', 0.5):g}, {kind}: "
                     f"{_first_sentence(prov['source'], prov['kind'])}")
    return _row("densities", "; ".join(parts))


def _first_sentence(source: str, kind: str) -> str:
    """What a profile's provenance says it rests on, short: its first clause, without the
    parenthesised detail (an estimate's source opens with "Estimate, not a measurement.",
    which the line says already; summary.json keeps the whole text)."""
    text = source.removeprefix("Estimate, not a measurement. ") if kind == "estimated" \
        else source
    depth, out = 0, []
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch in ".:;" and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            break
        if depth == 0 and ch != ")":
            out.append(ch)
    short = " ".join("".join(out).split()).replace(" ,", ",")
    return short[:1].lower() + short[1:] if short[1:2].islower() else short


#: the policies that offload for any network, and what each does
_OFFLOADING = (("auto", "the planner picks offloads, compression and recomputation to fit"),
               ("all", "offload every layer's input"))


def no_offload_hint(s: dict[str, Any]) -> str:
    """A hint where the run offloaded nothing and does not fit in GPU memory: the policies
    that would offload ("" otherwise, and for pipeline stages, which take no policy yet)."""
    if s["offloaded_bytes"] or s["fits_in_memory"] or not s.get("complete", True) \
            or "pipeline" in s:
        return ""
    others = [f"{network_word('policy', name)} ({what})" for name, what in _OFFLOADING
              if name != s["policy"]]
    why = " (it offloads convolutions' inputs only)" if s["policy"] == "conv" else ""
    return (f"policy {s['policy']}{why} moved nothing, and the run does not fit in GPU memory; "
            f"{' or '.join(others)} would offload")


def fits_hint(s: dict[str, Any]) -> str:
    """A hint where the run offloads or recomputes activations though everything fits: the
    oracle (the same run with nothing offloaded) fits in GPU memory and is faster, so
    policy ``none`` (and ``auto``, which moves nothing when everything fits) would give the
    oracle's time ("" otherwise; also where model states are off the GPU, which the oracle
    keeps on it)."""
    oracle = s.get("baselines", {}).get("oracle")
    if not oracle or s["policy"] in ("none", "auto") or not s.get("complete", True) \
            or not oracle.get("complete", True) or not s["fits_in_memory"] \
            or not oracle["fits_in_memory"] or states_moved(_run_states(s).get(
                "placement", {k: "gpu" for k, _ in _ROLES})):
        return ""
    it, best = s["iteration_time_s"], oracle["iteration_time_s"]
    plans = [s["plan"]] if "plan" in s else [g["plan"] for g in s.get("gpus", ()) if "plan" in g]
    recomputes = any(p["recompute_time_s"] for p in plans)
    if not (s["offloaded_bytes"] or recomputes) or not best or f"{it / best:.2f}" == "1.00":
        return ""
    moves = " and ".join(w for w, did in (("offloads", s["offloaded_bytes"]),
                                          ("recomputes", recomputes)) if did)
    return (f"policy {s['policy']} {moves} though the oracle fits: "
            f"{network_word('policy', 'none')} (or auto, "
            f"which then moves nothing) would take the oracle's {best * MS:.3f} ms, "
            f"{it / best:.2f}x faster")
