"""Collects every GPU's results after the run: the console summary, ``summary.json``, the
resolved configuration and a Chrome-trace timeline (opens in Perfetto)."""
from __future__ import annotations

import json
import sys
from typing import Any

from sst_cdma.element import Component, Param
from sst_cdma.flows import FlowNetwork
from sst_cdma.model.compression import wire_bytes

from .cdma_engine import CDMAEngine
from .pcie_bridge import DuplexLink

PS = 1e-12


def _seconds(report: dict[str, Any], key: str) -> float:
    return report[key] * PS


def _baseline(report: dict[str, Any]) -> dict[str, Any]:
    return {"iteration_time_s": _seconds(report, "iteration_time_ps"),
            "peak_gpu_memory_bytes": report["peak_gpu_memory_bytes"],
            "average_gpu_memory_bytes": report["average_gpu_memory_bytes"],
            "fits_in_memory": report["fits_in_memory"], "complete": report["completed"]}


class Reporter(Component):
    """Writes the run's summary: console text, summary.json, config.json and trace.json."""

    FINISH_LAST = True
    PARAMS = (
        Param("console", "bool", "true", "print the summary on standard output"),
        Param("trace", "bool", "true", "write trace.json (Chrome trace format) with the output"),
        Param("system", "str", "", "a one-line description of the simulated system"),
        Param("kernel_times", "str", "roofline", "where kernel times come from: roofline, or "
              "measured (the layer-times file and its device)"),
    )

    def gpu_summary(self, name: str, gpus: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The summary.json entry of one main-system GPU, with its baselines."""
        r = gpus[name]
        engine = self.engine.components.get(f"{name}.dma")
        flows = FlowNetwork.of(self.sim)
        end = max(r["iteration_time_ps"], 1)
        pcie = self.engine.components.get(f"{name}.pcie")
        out: dict[str, Any] = {
            "gpu": name, "network": r["network"], "batch": r["batch"], "dtype": r["dtype"],
            "policy": r["policy"], "complete": r["completed"],
            "algorithm": engine.params["algorithm"] if isinstance(engine, CDMAEngine) else "none",
            "mode": engine.params["mode"] if isinstance(engine, CDMAEngine) else "flow",
            "iteration_time_s": _seconds(r, "iteration_time_ps"),
            "forward_time_s": _seconds(r, "forward_time_ps"),
            "backward_time_s": _seconds(r, "backward_time_ps"),
            "update_time_s": _seconds(r, "update_time_ps"),
            "optimizer": r["optimizer"],
            "compute_time_s": _seconds(r, "compute_time_ps"),
            "stall_time_s": _seconds(r, "stall_time_ps"),
            "offloaded_bytes": r["offloaded_bytes"], "wire_bytes": r["wire_bytes"],
            "compression_ratio": r["offloaded_bytes"] / r["wire_bytes"] if r["wire_bytes"] else 1.0,
            "extra_dram_bytes": r["offloaded_bytes"] + r["prefetched_bytes"],
            "peak_gpu_memory_bytes": r["peak_gpu_memory_bytes"],
            "gpu_memory_capacity_bytes": r["gpu_memory_capacity_bytes"],
            "fits_in_memory": r["fits_in_memory"], "out_of_memory": r["out_of_memory"],
        }
        out["allocation"] = r["allocation"]
        out.update(engine.functional_results() if isinstance(engine, CDMAEngine) else {})
        out["average_gpu_memory_bytes"] = r["average_gpu_memory_bytes"]
        if pcie is not None:
            out["pcie_bandwidth_Bps"] = pcie.bandwidth
            out["pcie_utilization"] = {d: flows.utilization(f"{pcie.name}.{d}", end)
                                       for d in ("d2h", "h2d")}
        shared = self.shared_link_utilization([name], end)
        if shared:
            out["switch_utilization"] = shared
        if isinstance(engine, CDMAEngine) and engine.ratios:
            tensors = self.engine.components[name].stream.tensors
            raw = {t: tensors[t].bytes for t in engine.ratios if t in tensors and tensors[t].bytes}
            total = sum(raw.values())
            bypass = engine.params["bypass_incompressible"]
            out["compression_ratio_by_algorithm"] = {
                algo: total / sum(wire_bytes(raw[t], engine.ratios[t][algo], bypass) for t in raw)
                if total else 1.0 for algo in ("zvc", "rle", "zlib")}
            out["density_profile_progress"] = engine.params["progress"]
        baselines = {}
        for label in ("oracle", "vdnn"):
            other = gpus.get(f"{label}.{name}")
            if other is not None:
                baselines[label] = _baseline(other)
        if baselines:
            out["baselines"] = baselines
            # a ratio of cut-off iterations (--stop-at) is no speed-up: only whole ones compare
            if "oracle" in baselines and out["complete"] and baselines["oracle"]["complete"]:
                out["slowdown_vs_oracle"] = out["iteration_time_s"] / \
                    baselines["oracle"]["iteration_time_s"]
            if "vdnn" in baselines and out["complete"] and baselines["vdnn"]["complete"]:
                out["speedup_vs_vdnn"] = baselines["vdnn"]["iteration_time_s"] / \
                    out["iteration_time_s"]
        out["layers"] = [{**l, "start_s": l["start_ps"] * PS, "end_s": l["end_ps"] * PS}
                         for l in r["layers"]]
        return out

    def shared_link_utilization(self, gpus: list[str], end_ps: int) -> dict[str, dict[str, float]]:
        """Busy fraction of each link the GPUs' transfers cross beyond their own bridge (the
        upstream ports of PCIe switches), per direction, over ``end_ps``."""
        flows = FlowNetwork.of(self.sim)
        out: dict[str, dict[str, float]] = {}
        for gpu in gpus:
            engine = self.engine.components.get(f"{gpu}.dma")
            if not isinstance(engine, CDMAEngine) or engine.path is None:
                continue
            for link in engine.path.link_names[1:]:
                comp = self.engine.components.get(link)
                if isinstance(comp, DuplexLink) and link not in out:
                    out[link] = {"bandwidth_Bps": comp.bandwidth,
                                 "d2h": flows.utilization(comp.d2h.name, end_ps),
                                 "h2d": flows.utilization(comp.h2d.name, end_ps)}
        return out

    def finish(self) -> None:
        """Build the summary and write it where the run asked."""
        gpus = self.engine.reports.get("gpus", {})
        main = [n for n in gpus if "." not in n]
        if not main:
            return
        entries = [self.gpu_summary(n, gpus) for n in main]
        summary = dict(entries[0]) if len(entries) == 1 else {
            k: entries[0][k] for k in ("network", "batch", "dtype", "policy", "algorithm", "mode")}
        if len(entries) > 1:
            summary["complete"] = all(e["complete"] for e in entries)
            summary["optimizer"] = entries[0]["optimizer"]
            for key in ("iteration_time_s", "forward_time_s", "backward_time_s", "update_time_s",
                        "compute_time_s", "stall_time_s"):
                summary[key] = max(e[key] for e in entries)
            for key in ("offloaded_bytes", "wire_bytes", "extra_dram_bytes"):
                summary[key] = sum(e[key] for e in entries)
            summary["compression_ratio"] = summary["offloaded_bytes"] / summary["wire_bytes"] \
                if summary["wire_bytes"] else 1.0
            summary["peak_gpu_memory_bytes"] = max(e["peak_gpu_memory_bytes"] for e in entries)
            summary["average_gpu_memory_bytes"] = max(e["average_gpu_memory_bytes"]
                                                      for e in entries)
            summary["allocation"] = entries[0]["allocation"]
            summary["gpu_memory_capacity_bytes"] = min(e["gpu_memory_capacity_bytes"]
                                                       for e in entries)
            for key in ("pcie_bandwidth_Bps", "compression_ratio_by_algorithm"):
                if key in entries[0]:
                    summary[key] = entries[0][key]  # the same link and network on every GPU
            if "pcie_utilization" in entries[0]:
                summary["pcie_utilization"] = {
                    d: sum(e["pcie_utilization"][d] for e in entries) / len(entries)
                    for d in ("d2h", "h2d")}
            shared = self.shared_link_utilization(
                main, max(max(gpus[n]["iteration_time_ps"] for n in main), 1))
            if shared:
                summary["switch_utilization"] = shared
            summary["fits_in_memory"] = all(e["fits_in_memory"] for e in entries)
            summary["baselines"] = {
                label: {"iteration_time_s": max(e["baselines"][label]["iteration_time_s"]
                                                for e in entries),
                        "peak_gpu_memory_bytes": max(e["baselines"][label]["peak_gpu_memory_bytes"]
                                                     for e in entries),
                        "average_gpu_memory_bytes": max(
                            e["baselines"][label]["average_gpu_memory_bytes"] for e in entries),
                        "fits_in_memory": all(e["baselines"][label]["fits_in_memory"]
                                              for e in entries),
                        "complete": all(e["baselines"][label]["complete"] for e in entries)}
                for label in entries[0].get("baselines", {})}
            summary["gpus"] = entries
        summary["system"] = self.params["system"]
        summary["kernel_times"] = self.params["kernel_times"]
        if not summary["complete"]:
            summary["stopped_at_s"] = self.sim.now * PS
        self.engine.reports["summary"] = summary
        if self.params["console"]:
            print(console_summary(summary), file=self.engine.console or sys.stdout)
        out = self.engine.output_directory
        if out is not None:
            (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n",
                                              encoding="utf-8")
            (out / "config.json").write_text(json.dumps(resolved_config(self.engine), indent=2)
                                             + "\n", encoding="utf-8")
            if self.params["trace"]:
                (out / "trace.json").write_text(json.dumps(chrome_trace(
                    gpus, self.engine.full_trace)) + "\n",
                                                encoding="utf-8")


def resolved_config(engine: Any) -> dict[str, Any]:
    """Every component with every param resolved (defaults included), and every link."""
    comps = []
    for name, comp in engine.components.items():
        comps.append({"name": name, "type": comp.type_name(),
                      "params": {k: v for k, v in comp.params.items()}})
    graph = engine.graph.to_json()
    return {"components": comps, "links": graph["links"],
            "statistics_options": graph["statistics_options"]}


def chrome_trace(gpus: dict[str, dict[str, Any]], full: bool = True) -> dict[str, Any]:
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
        for kind, label, start, end in rep["timeline"] if full else ():
            events.append({"name": f"{kind} {label}" if kind != "compute" else label,
                           "cat": kind, "ph": "X", "pid": pid, "tid": tids[kind],
                           "ts": start / 1e6, "dur": (end - start) / 1e6})
        events.extend(memory_counter(pid, rep.get("memory_curve", ())))
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def memory_counter(pid: int, curve: Any) -> list[dict[str, Any]]:
    """The "GPU memory" counter track of process ``pid``: one Chrome trace counter event ("ph":
    "C", args {"bytes": n}) per (time_ps, bytes) point of ``curve``."""
    return [{"name": "GPU memory", "ph": "C", "pid": pid, "ts": t / 1e6, "args": {"bytes": n}}
            for t, n in curve]


def _gb(n: float) -> str:
    """Bytes in GB, or MB/kB for small networks (decimal units)."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(n) >= scale / 10 or unit == "kB":
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def console_summary(s: dict[str, Any]) -> str:
    """The ten-second summary a person reads after a run."""
    ms = 1e3
    it = s["iteration_time_s"]
    complete = s.get("complete", True)
    lines = [
        f"== sst-cdma: {s['network']} batch {s['batch']} {s.get('dtype', '')}, vDNN policy "
        f"{s['policy']}, "
        + (f"{s['allocation']} allocation, " if s.get("allocation") else "")
        + f"cDMA {s['algorithm']} ({s.get('mode', 'flow')} model) ==",
    ]
    if s.get("system"):
        lines.append(f"system:          {s['system']}")
    if s.get("kernel_times", "roofline") != "roofline":
        lines.append(f"kernel times:    {s['kernel_times']}")
    if not complete:
        stopped = s.get("stopped_at_s", it)
        lines += [
            f"STOPPED:         the run was stopped at {stopped * ms:.3f} ms (--stop-at) before "
            "the iteration ended: no iteration time, stall, speed-up or slowdown",
            f"offloaded:       {_gb(s['offloaded_bytes'])} raw, {_gb(s['wire_bytes'])} on the "
            "wire so far",
            f"peak GPU memory: {_gb(s['peak_gpu_memory_bytes'])} so far",
        ]
        return "\n".join(lines)
    lines += [
        f"iteration:       {it * ms:.3f} ms  (forward {s['forward_time_s'] * ms:.3f} ms, "
        f"backward {s['backward_time_s'] * ms:.3f} ms"
        + (f", {s['optimizer']} update {s['update_time_s'] * ms:.3f} ms"
           if s.get("update_time_s") else "") + ")",
        f"compute / stall: {s['compute_time_s'] * ms:.3f} ms / {s['stall_time_s'] * ms:.3f} ms "
        f"({100 * s['stall_time_s'] / it if it else 0:.1f}% stalled)" if "compute_time_s" in s
        else f"stall:           {s['stall_time_s'] * ms:.3f} ms",
        f"offloaded:       {_gb(s['offloaded_bytes'])} raw, {_gb(s['wire_bytes'])} on the wire "
        f"(ratio {s['compression_ratio']:.2f}x)",
    ]
    if "compression_ratio_by_algorithm" in s:
        r = s["compression_ratio_by_algorithm"]
        lines.append("ratio by algo:   " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
    if "pcie_utilization" in s:
        u = s["pcie_utilization"]
        lines.append(f"host link:       {s['pcie_bandwidth_Bps'] / 1e9:.2f} GB/s per direction, "
                     f"busy {100 * u['d2h']:.1f}% to host, {100 * u['h2d']:.1f}% to GPU")
    if s.get("switch_utilization"):
        name, u = max(s["switch_utilization"].items(), key=lambda kv: max(kv[1]["d2h"],
                                                                          kv[1]["h2d"]))
        lines.append(f"switch uplink:   {len(s['switch_utilization'])} shared, busiest {name} "
                     f"({u['bandwidth_Bps'] / 1e9:.2f} GB/s) busy {100 * u['d2h']:.1f}% to host, "
                     f"{100 * u['h2d']:.1f}% to GPU")
    if "extra_dram_bytes" in s:
        lines.append(f"DMA DRAM traffic: {_gb(s['extra_dram_bytes'])} read+written by the engine")
    cap = s.get("gpu_memory_capacity_bytes")
    fits = "fits" if s["fits_in_memory"] else "DOES NOT FIT"
    lines.append(f"peak GPU memory: {_gb(s['peak_gpu_memory_bytes'])}"
                 + (f" of {_gb(cap)} ({fits})" if cap else f" ({fits})")
                 + (f", average {_gb(s['average_gpu_memory_bytes'])}"
                    if "average_gpu_memory_bytes" in s else ""))
    if "functional_checks" in s:
        lines.append(CDMAEngine.functional_line(s))
    oom = s.get("out_of_memory")
    if oom:
        lines.append(f"out of memory:   at layer {oom['layer']} ({oom['tensor']}), "
                     f"{_gb(oom['bytes_short'])} short")
    b = s.get("baselines", {})
    for label, name in (("oracle", "oracle"), ("vdnn", "vDNN baseline")):
        if label in b and not b[label].get("complete", True):
            lines.append(f"{name + ':':<16} stopped (--stop-at) before its iteration ended: "
                         "no comparison")
    if "oracle" in b and b["oracle"].get("complete", True):
        o = b["oracle"]
        lines.append(f"oracle:          {o['iteration_time_s'] * ms:.3f} ms, needs "
                     f"{_gb(o['peak_gpu_memory_bytes'])} "
                     f"({'fits' if o['fits_in_memory'] else 'does not fit'} on this GPU); "
                     f"this run is {it / o['iteration_time_s']:.2f}x the oracle")
    if "vdnn" in b and b["vdnn"].get("complete", True):
        v = b["vdnn"]
        lines.append(f"vDNN (no comp.): {v['iteration_time_s'] * ms:.3f} ms; cDMA speed-up "
                     f"{v['iteration_time_s'] / it:.2f}x")
    for g in s.get("gpus", []):
        lines.append(f"  {g['gpu']}: {g['iteration_time_s'] * ms:.3f} ms, stall "
                     f"{g['stall_time_s'] * ms:.3f} ms")
    return "\n".join(lines)
