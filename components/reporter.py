"""Composes the run's summary from the result records the elements published: the console
summary, ``summary.json`` and a Chrome-trace timeline (opens in Perfetto).

Roles come from the records, not from component names: each GPU says which system it belongs
to (``main``, ``oracle``, ``vdnn``), each cDMA engine which GPU it served and which links lead
from it to the host memory. The k-th GPU of a baseline system is the baseline of the k-th
main GPU, in the order the topology declared them.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Optional

from sst_cdma.config import ConfigError
from sst_cdma.element import Component, Param

from .cdma_engine import EngineResult
from .gpu import GPUResult
from .nvswitch import AllReduceResult, allreduce_fields, allreduce_line
from .pcie_bridge import LinkResult

PS = 1e-12

#: how a multi-GPU summary combines each per-GPU figure into its top-level one
AGGREGATION = {
    "iteration_time_s": "max", "forward_time_s": "max", "backward_time_s": "max",
    "update_time_s": "max", "compute_time_s": "max", "stall_time_s": "max",
    "offloaded_bytes": "sum", "wire_bytes": "sum", "extra_dram_bytes": "sum",
    "peak_gpu_memory_bytes": "max", "average_gpu_memory_bytes": "max",
    "gpu_memory_capacity_bytes": "min", "pcie_utilization": "mean", "fits_in_memory": "all",
    "complete": "all",
}


def _baseline(r: GPUResult) -> dict[str, Any]:
    return {"iteration_time_s": r.iteration_time_ps * PS,
            "peak_gpu_memory_bytes": r.peak_gpu_memory_bytes,
            "average_gpu_memory_bytes": r.average_gpu_memory_bytes,
            "fits_in_memory": r.fits_in_memory, "complete": r.completed, "policy": r.policy}


def host_link_fields(link: LinkResult) -> dict[str, Any]:
    """``summary.json``'s ``host_link``: the link's name, protocol and what sets its
    bandwidth (generation and lanes, NVLink bricks and rate, or the NVLink-C2C rate)."""
    out: dict[str, Any] = {"name": link.describe(), "protocol": link.protocol,
                           "bandwidth_Bps": link.bandwidth_Bps}
    if link.protocol == "pcie":
        out.update(generation=link.generation, lanes=link.lanes)
    elif link.protocol == "nvlink_c2c":
        out.update(c2c_rate_Bps=link.c2c_rate_Bps)
    else:
        out.update(nvlink_links=link.nvlink_links, nvlink_rate_Bps=link.nvlink_rate_Bps)
    return out


class SystemResults:
    """The records of one run sorted into roles: main GPUs with their baselines, the engine
    that served each GPU, and every link."""

    def __init__(self, results: dict[str, Any]) -> None:
        gpus = {n: r for n, r in results.items() if isinstance(r, GPUResult)}
        self.gpus = gpus
        self.main = [n for n, r in gpus.items() if r.system == "main"]
        self.engine_of = {r.gpu: r for r in results.values() if isinstance(r, EngineResult)}
        self.links = {n: r for n, r in results.items() if isinstance(r, LinkResult)}
        self.baseline_of: dict[str, dict[str, GPUResult]] = {n: {} for n in self.main}
        for label in ("oracle", "vdnn"):
            others = [n for n, r in gpus.items() if r.system == label]
            if others and len(others) != len(self.main):
                raise ConfigError(f"the {label} system has {len(others)} GPU(s) and the main "
                                  f"system {len(self.main)}: a baseline system needs one GPU "
                                  "per main GPU (sst_cdma.baselines.add_baselines builds them)")
            for name, other in zip(self.main, others):
                self.baseline_of[name][label] = gpus[other]

    def host_link(self, gpu: str) -> Optional[LinkResult]:
        """The link next to ``gpu``'s engine on its way to the host (None: no engine)."""
        engine = self.engine_of.get(gpu)
        if engine is None or not engine.path:
            return None
        return self.links.get(engine.path[0])

    def shared_links(self, gpus: list[str]) -> dict[str, LinkResult]:
        """The links beyond the GPUs' own host links (switch uplinks), by name."""
        out: dict[str, LinkResult] = {}
        for gpu in gpus:
            engine = self.engine_of.get(gpu)
            for name in engine.path[1:] if engine is not None else ():
                if name in self.links:
                    out.setdefault(name, self.links[name])
        return out


class Reporter(Component):
    """Writes the run's summary: console text, summary.json and trace.json, composed from the
    result records the GPUs, engines and links published."""

    FINISH_LAST = True
    PARAMS = (
        Param("console", "bool", "true", "print the summary on standard output"),
        Param("trace", "bool", "true", "write trace.json (Chrome trace format) with the output"),
        Param("system", "str", "", "a one-line description of the simulated system (default: "
              "composed from the GPUs' presets and the host link)"),
    )

    def gpu_summary(self, name: str, runs: SystemResults) -> dict[str, Any]:
        """The summary.json entry of one main-system GPU, with its baselines."""
        r = runs.gpus[name]
        engine = runs.engine_of.get(name)
        end = max(r.iteration_time_ps, 1)
        link = runs.host_link(name)
        out: dict[str, Any] = {
            "gpu": name, "gpu_preset": r.preset, "network": r.network, "batch": r.batch,
            "dtype": r.dtype, "policy": r.policy, "complete": r.completed,
            "algorithm": engine.algorithm if engine else "none",
            "mode": engine.mode if engine else "flow",
            "iteration_time_s": r.iteration_time_ps * PS,
            "forward_time_s": r.forward_time_ps * PS,
            "backward_time_s": r.backward_time_ps * PS,
            "update_time_s": r.update_time_ps * PS,
            "optimizer": r.optimizer,
            "compute_time_s": r.compute_time_ps * PS,
            "stall_time_s": r.stall_time_ps * PS,
            "offloaded_bytes": r.offloaded_bytes, "wire_bytes": r.wire_bytes,
            "compression_ratio": r.offloaded_bytes / r.wire_bytes if r.wire_bytes else 1.0,
            "extra_dram_bytes": r.offloaded_bytes + r.prefetched_bytes,
            "peak_gpu_memory_bytes": r.peak_gpu_memory_bytes,
            "gpu_memory_capacity_bytes": r.gpu_memory_capacity_bytes,
            "fits_in_memory": r.fits_in_memory, "out_of_memory": r.out_of_memory,
            "allocation": r.allocation, "average_gpu_memory_bytes": r.average_gpu_memory_bytes,
            "kernel_times": r.kernel_times,
        }
        if engine is not None and engine.functional_checks is not None:
            out["functional_checks"] = engine.functional_checks
            out["functional_matches"] = engine.functional_matches
        if engine is not None:
            out["codec_units"] = engine.codec_units
            out["codec_unit_throughput_Bps"] = engine.codec_unit_throughput_Bps
        if link is not None:
            out["host_link"] = host_link_fields(link)
            out["pcie_bandwidth_Bps"] = link.bandwidth_Bps
            out["pcie_utilization"] = {d: link.utilization(d, end) for d in ("d2h", "h2d")}
        shared = self.shared_link_utilization(runs, [name], end)
        if shared:
            out["switch_utilization"] = shared
        if engine is not None and engine.ratio_by_algorithm:
            out["compression_ratio_by_algorithm"] = engine.ratio_by_algorithm
            out["density_profile_progress"] = engine.progress
        baselines = {label: _baseline(other) for label, other in runs.baseline_of[name].items()}
        if baselines:
            out["baselines"] = baselines
            # a ratio of cut-off iterations (--stop-at) is no speed-up: only whole ones compare
            if "oracle" in baselines and out["complete"] and baselines["oracle"]["complete"]:
                out["slowdown_vs_oracle"] = out["iteration_time_s"] / \
                    baselines["oracle"]["iteration_time_s"]
            if "vdnn" in baselines and out["complete"] and baselines["vdnn"]["complete"]:
                out["speedup_vs_vdnn"] = baselines["vdnn"]["iteration_time_s"] / \
                    out["iteration_time_s"]
        reason = no_speedup_reason(out)
        if reason and "vdnn" in baselines:
            out["no_cdma_speedup"] = reason
        out["layers"] = [{**l, "start_s": l["start_ps"] * PS, "end_s": l["end_ps"] * PS}
                         for l in r.layers]
        out["plan"] = plan_fields(r, engine.algorithm if engine else "none")
        return out

    @staticmethod
    def shared_link_utilization(runs: SystemResults, gpus: list[str],
                                end_ps: int) -> dict[str, dict[str, float]]:
        """Busy fraction of each link the GPUs' transfers cross beyond their own host link
        (the upstream ports of PCIe switches, root complexes), with its kind, per direction,
        over ``end_ps``."""
        return {name: {"kind": link.kind, "bandwidth_Bps": link.bandwidth_Bps,
                       "d2h": link.utilization("d2h", end_ps),
                       "h2d": link.utilization("h2d", end_ps)}
                for name, link in runs.shared_links(gpus).items()}

    def describe_system(self, runs: SystemResults) -> str:
        """The one-line system description: the main GPUs' model, host link and count."""
        if self.params["system"]:
            return self.params["system"]
        first = runs.gpus[runs.main[0]]
        link = runs.host_link(runs.main[0])
        return f"{first.gpu_name}, {link.describe() if link else 'no host link'}, " \
               f"{len(runs.main)} GPU(s)"

    def finish(self) -> None:
        """Build the summary and write it where the run asked."""
        try:
            runs = SystemResults(self.simulation.results)
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        main = runs.main
        if not main:
            return
        entries = [self.gpu_summary(n, runs) for n in main]
        summary = dict(entries[0]) if len(entries) == 1 else multi_gpu_summary(entries)
        if len(entries) > 1:
            shared = self.shared_link_utilization(
                runs, main, max(max(runs.gpus[n].iteration_time_ps for n in main), 1))
            if shared:
                summary["switch_utilization"] = shared
        summary.update(system_shape(runs))
        fabrics = {r.system: r for r in self.simulation.results.values()
                   if isinstance(r, AllReduceResult)}
        if "main" in fabrics:
            summary["allreduce"] = allreduce_fields(
                fabrics["main"], fabrics.get("oracle"),
                [runs.engine_of[g].copies for g in main if g in runs.engine_of])
        summary["system"] = self.describe_system(runs)
        if not summary["complete"]:
            summary["stopped_at_s"] = self.sim.now * PS
        self.simulation.reports["summary"] = summary
        if self.params["console"]:
            print(console_summary(summary), file=self.simulation.console or sys.stdout)
        out = self.simulation.output_directory
        if out is not None:
            (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n",
                                              encoding="utf-8")
            if self.params["trace"]:
                (out / "trace.json").write_text(json.dumps(chrome_trace(
                    runs.gpus, self.simulation.full_trace)) + "\n",
                                                encoding="utf-8")


def no_speedup_reason(entry: dict[str, Any]) -> str:
    """Why a GPU's run has no cDMA speed-up to show ("" when it has one): nothing was
    offloaded, nothing was compressed, or the run did not fit in GPU memory."""
    if entry["policy"] == "none" or not entry["offloaded_bytes"]:
        return "nothing was offloaded (vDNN policy none)" if entry["policy"] == "none" \
            else "nothing was offloaded"
    if entry["algorithm"] == "none":
        return "nothing was compressed (cDMA algorithm none)"
    if not entry["fits_in_memory"]:
        return "this run ran out of GPU memory"
    vdnn = entry.get("baselines", {}).get("vdnn")
    if vdnn is not None and not vdnn["fits_in_memory"]:
        return "the vDNN baseline ran out of GPU memory"
    return ""


def multi_gpu_summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The top-level summary of several main GPUs: the shared settings, each figure combined
    as :data:`AGGREGATION` says (named in the summary's ``aggregation``), the baselines
    combined the same way, and every GPU's own entry under ``gpus``."""
    first = entries[0]
    summary = {k: first[k] for k in ("network", "batch", "dtype", "policy", "algorithm", "mode",
                                     "optimizer", "allocation", "kernel_times", "gpu_preset")}
    combine = {"max": max, "min": min, "sum": sum, "all": all,
               "mean": lambda xs: sum(xs) / len(xs)}
    for key, how in AGGREGATION.items():
        if key == "pcie_utilization":
            if key in first:
                summary[key] = {d: combine[how]([e[key][d] for e in entries])
                                for d in ("d2h", "h2d")}
        else:
            summary[key] = combine[how]([e[key] for e in entries])
    summary["aggregation"] = {k: v for k, v in AGGREGATION.items() if k in summary}
    summary["compression_ratio"] = summary["offloaded_bytes"] / summary["wire_bytes"] \
        if summary["wire_bytes"] else 1.0
    for key in ("pcie_bandwidth_Bps", "compression_ratio_by_algorithm", "host_link", "codec_units",
                "codec_unit_throughput_Bps"):
        if key in first:
            summary[key] = first[key]  # the same link, engine and network on every GPU
    labels = first.get("baselines", {})
    if labels:
        summary["baselines"] = {
            label: {**{key: combine[AGGREGATION[key]]([e["baselines"][label][key]
                                                        for e in entries])
                       for key in ("iteration_time_s", "peak_gpu_memory_bytes",
                                   "average_gpu_memory_bytes", "fits_in_memory", "complete")},
                    "policy": first["baselines"][label]["policy"]}
            for label in labels}
    complete = summary["complete"]
    for key, label, ratio in (("slowdown_vs_oracle", "oracle", lambda b: summary[
            "iteration_time_s"] / b), ("speedup_vs_vdnn", "vdnn", lambda b: b / summary[
            "iteration_time_s"])):
        base = summary.get("baselines", {}).get(label)
        if base is not None and complete and base["complete"]:
            summary[key] = ratio(base["iteration_time_s"])
    summary["out_of_memory"] = next((e["out_of_memory"] for e in entries if e["out_of_memory"]),
                                    None)
    if "density_profile_progress" in first:
        summary["density_profile_progress"] = first["density_profile_progress"]
    for key in ("functional_checks", "functional_matches"):  # --functional: every GPU's checks
        if key in first:
            summary[key] = sum(e[key] for e in entries)
            summary["aggregation"][key] = "sum"
    reasons = {e.get("no_cdma_speedup", "") for e in entries} - {""}
    if reasons:
        summary["no_cdma_speedup"] = sorted(reasons)[0]
    summary["gpus"] = entries
    return summary


def system_shape(runs: SystemResults) -> dict[str, Any]:
    """What shapes the main system, from its records: how many GPUs and hosts, and how many
    GPUs share a switch uplink (0: none)."""
    hosts = {runs.engine_of[g].host for g in runs.main if g in runs.engine_of}
    sharing = {}
    for g in runs.main:
        engine = runs.engine_of.get(g)
        for name in engine.path[1:] if engine is not None else ():
            if runs.links.get(name) is not None and runs.links[name].kind == "switch":
                sharing[name] = sharing.get(name, 0) + 1
    return {"gpu_count": len(runs.main), "hosts": len(hosts),
            "gpus_per_switch": max(sharing.values()) if sharing else 0}


def chrome_trace(gpus: dict[str, GPUResult], full: bool = True) -> dict[str, Any]:
    """Chrome trace events: one process per GPU, threads compute / copy / stall, and a "GPU
    memory" counter (bytes allocated) at every time the allocation changed. ``full=False``
    leaves out the kernels, copies and stalls (the bulk of the file) and keeps the memory
    counters: what a sweep point keeps unless its spec asks for full traces."""
    events: list[dict[str, Any]] = []
    tids = {"compute": 1, "offload": 2, "prefetch": 2, "stall": 3}
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


def functional_line(summary: dict[str, Any]) -> str:
    """The console line of a summary's functional checks."""
    checks, matches = summary["functional_checks"], summary["functional_matches"]
    if not checks:
        return _row("functional", "no prefetch checked (no real tensor was compressed and "
                    "brought back)")
    verdict = "all matched" if checks == matches else f"{matches} matched"
    return _row("functional", f"{checks} prefetch{'es' if checks != 1 else ''} checked bit for "
                f"bit, {verdict}")


def plan_fields(r: GPUResult, codec: str = "none") -> dict[str, Any]:
    """``summary.json``'s ``plan``: what the iteration does with each activation tensor, how
    many tensors and bytes took each choice, the recomputation time and, under policy auto,
    the planner's prediction. Through an engine whose ``codec`` is ``none`` every offload is a
    plain copy, reported as ``offload``."""
    def reported(choice: str) -> str:
        return "offload" if choice == "compress" and codec == "none" else choice

    choices = {t: reported(c) for t, c in r.choices.items()}
    counts = {c: 0 for c in r.choice_bytes}
    sizes = {c: 0 for c in r.choice_bytes}
    for c, size in r.choice_bytes.items():
        sizes[reported(c)] += size
    for choice in choices.values():
        counts[choice] = counts.get(choice, 0) + 1
    out: dict[str, Any] = {"tensors": choices, "counts": counts, "bytes": sizes,
                           "recompute_time_s": r.recompute_time_ps * PS}
    if r.planner:
        out["planner"] = dict(r.planner)
    return out


def plan_line(plan: dict[str, Any]) -> str:
    """The console's plan line: tensors and bytes per choice, and the recomputation time."""
    shown = [c for c, count in plan["counts"].items() if count]
    sizes = dict(zip(shown, _sizes(*(plan["bytes"][c] for c in shown))))
    parts = [f"{plan['counts'][c]} {c} ({sizes[c]})" for c in shown]
    text = ", ".join(parts) + f"; recompute {plan['recompute_time_s'] * 1e3:.3f} ms"
    planner = plan.get("planner")
    if planner:
        text += f"; planner predicted {planner['predicted_time_s'] * 1e3:.3f} ms"
    return _row("tensors", text)


def _row(label: str, text: str) -> str:
    """One console line: the label and a colon, padded so values line up."""
    return f"{label + ':':<16} {text}"


def console_summary(s: dict[str, Any]) -> str:
    """The ten-second summary a person reads after a run."""
    ms = 1e3
    it = s["iteration_time_s"]
    complete = s.get("complete", True)
    n = len(s.get("gpus", ()))
    # what a multi-GPU figure is: the slowest GPU's, the total over GPUs, the largest GPU's
    slowest, total, largest = (f" (slowest of {n} GPUs)", f" (total of {n} GPUs)",
                               " (largest GPU)") if n else ("", "", "")
    lines = [
        f"== sst-cdma: {s['network']} batch {s['batch']} {s.get('dtype', '')}, "
        f"{'vDNN ' if s['policy'] in ('none', 'all', 'conv') else ''}policy {s['policy']}, "
        + (f"{s['allocation']} allocation, " if s.get("allocation") else "")
        + f"cDMA {s['algorithm']} ({s.get('mode', 'flow')} model) ==",
    ]
    if s.get("system"):
        lines.append(f"system:          {s['system']}")
    if s.get("kernel_times") == "roofline":
        lines.append("kernel times:    roofline (peak FLOP/s x the GPU's compute_efficiency, "
                     "against DRAM bandwidth)")
    elif s.get("kernel_times"):
        lines.append(f"kernel times:    {s['kernel_times']}")
    if not complete:
        stopped = s.get("stopped_at_s", it)
        raw, wire = _sizes(s["offloaded_bytes"], s["wire_bytes"])
        lines += [
            f"STOPPED:         the run was stopped at {stopped * ms:.3f} ms (--stop-at) before "
            "the iteration ended: no iteration time, stall, speed-up or slowdown",
            _row(f"offloaded{total}", f"{raw} raw, {wire} on the wire so far"),
            _row(f"peak GPU memory{largest}", f"{_sizes(s['peak_gpu_memory_bytes'])[0]} so far"),
        ]
        return "\n".join(lines)
    raw, wire = _sizes(s["offloaded_bytes"], s["wire_bytes"])
    lines += [
        _row(f"iteration{slowest}", f"{it * ms:.3f} ms  (forward {s['forward_time_s'] * ms:.3f} ms, "
        f"backward {s['backward_time_s'] * ms:.3f} ms"
        + (f", {s['optimizer']} update {s['update_time_s'] * ms:.3f} ms"
           if s.get("update_time_s") else "") + ")"),
        _row(f"compute / stall{slowest}", f"{s['compute_time_s'] * ms:.3f} ms / "
             f"{s['stall_time_s'] * ms:.3f} ms ({100 * s['stall_time_s'] / it if it else 0:.1f}% "
             "stalled)") if "compute_time_s" in s
        else f"stall:           {s['stall_time_s'] * ms:.3f} ms",
        _row(f"offloaded{total}", f"{raw} raw, {wire} on the wire "
             f"(ratio {s['compression_ratio']:.2f}x)"),
    ]
    if "compression_ratio_by_algorithm" in s:
        r = s["compression_ratio_by_algorithm"]
        lines.append("ratio by algo:   " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
    if "pcie_utilization" in s:
        u = s["pcie_utilization"]
        lines.append(f"host link:       {s['pcie_bandwidth_Bps'] / 1e9:.2f} GB/s per direction, "
                     f"busy {100 * u['d2h']:.1f}% to host, {100 * u['h2d']:.1f}% to GPU"
                     + (f" (mean of {n} GPUs)" if n else ""))
    shared = s.get("switch_utilization") or {}
    # one line per kind of shared link, in the order the GPUs' paths meet them
    for kind in dict.fromkeys(u.get("kind", "switch") for u in shared.values()):
        links = {n: u for n, u in shared.items() if u.get("kind", "switch") == kind}
        name, u = max(links.items(), key=lambda kv: max(kv[1]["d2h"], kv[1]["h2d"]))
        lines.append(_row("switch uplink" if kind == "switch" else kind,
                          f"{len(links)} shared, busiest {name} ({u['bandwidth_Bps'] / 1e9:.2f} "
                          f"GB/s) busy {100 * u['d2h']:.1f}% to host, {100 * u['h2d']:.1f}% to "
                          "GPU"))
    plans = [s["plan"]] if "plan" in s else [g["plan"] for g in s.get("gpus", ()) if "plan" in g]
    if plans and plans[0]["tensors"] and s["policy"] not in ("none", "all", "conv"):
        # several GPUs: their plans, each its own GPU's, are one line when they agree
        lines.append(plan_line(plans[0]) + ("" if len(plans) == 1 else
                                            f" (each of {len(plans)} GPUs)"
                                            if all(p == plans[0] for p in plans) else
                                            " (gpu0; the GPUs' plans differ)"))
    if "allreduce" in s:
        lines.append(allreduce_line(s["allreduce"]))
    if "extra_dram_bytes" in s:
        lines.append(_row(f"DMA DRAM traffic{total}", f"{_sizes(s['extra_dram_bytes'])[0]} "
                          "read+written by the engine"))
    cap = s.get("gpu_memory_capacity_bytes")
    fits = "fits" if s["fits_in_memory"] else "DOES NOT FIT"
    peak, cap_text, avg = _sizes(s["peak_gpu_memory_bytes"], cap or 0,
                                 s.get("average_gpu_memory_bytes", 0))
    lines.append(_row(f"peak GPU memory{largest}", peak
                      + (f" of {cap_text} ({fits})" if cap else f" ({fits})")
                      + (f", average {avg}" if "average_gpu_memory_bytes" in s else "")))
    if "functional_checks" in s:
        lines.append(functional_line(s))
    oom = s.get("out_of_memory")
    if oom:
        over = s["peak_gpu_memory_bytes"] - cap if cap else 0
        lines.append(f"out of memory:   first at layer {oom['layer']} ({oom['tensor']}), "
                     f"{_sizes(oom['bytes_short'])[0]} short"
                     + (f"; the peak needs {_sizes(over)[0]} more" if over > 0 else ""))
    b = s.get("baselines", {})
    for label, name in (("oracle", "oracle"), ("vdnn", "vDNN baseline")):
        if label in b and not b[label].get("complete", True):
            lines.append(f"{name + ':':<16} stopped (--stop-at) before its iteration ended: "
                         "no comparison")
    if "oracle" in b and b["oracle"].get("complete", True):
        o = b["oracle"]
        lines.append(_row(f"oracle{slowest}", f"{o['iteration_time_s'] * ms:.3f} ms, needs "
                          f"{_sizes(o['peak_gpu_memory_bytes'])[0]}{' per GPU' if n else ''} "
                          f"({'fits' if o['fits_in_memory'] else 'does not fit'} on this GPU); "
                          f"this run is {it / o['iteration_time_s']:.2f}x the oracle"))
    if "vdnn" in b and b["vdnn"].get("complete", True):
        v = b["vdnn"]
        policy = f", policy {v['policy']}" if v.get("policy") else ""
        reason = s.get("no_cdma_speedup")
        lines.append(_row(f"vDNN (no comp.{policy}){slowest}",
                          f"{v['iteration_time_s'] * ms:.3f} ms; "
                          + (f"no cDMA speed-up: {reason}" if reason else
                             f"cDMA speed-up {v['iteration_time_s'] / it:.2f}x")))
    for g in s.get("gpus", []):
        lines.append(f"  {g['gpu']}: {g['iteration_time_s'] * ms:.3f} ms, stall "
                     f"{g['stall_time_s'] * ms:.3f} ms")
    return "\n".join(lines)
