"""Composes the run's summary (what ``summary.json`` holds and the console prints) from the
typed result records the elements published, and nothing else: :class:`GPUResult`,
:class:`EngineResult`, :class:`LinkResult` and :class:`AllReduceResult`. No component is read
by its name or its insides.

Roles come from the records: each GPU says which system it belongs to (``main``, ``oracle``,
``vdnn``), each cDMA engine which GPU it served and which links lead from it to the host
memory. The k-th GPU of a baseline system is the baseline of the k-th main GPU, in the order
the topology declared them. Several main GPUs are merged into one top-level summary
(:func:`multi_gpu_summary`) that keeps each GPU's own entry. The keys and their meanings are
listed in :mod:`components.summary_schema`.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

from sst_cdma.engine.config import ConfigError

from .cdma_engine import EngineResult
from .gpu import GPUResult
from .host_cpu import HostCPUResult, host_cpu_fields
from .nvme import NVMeResult, nvme_fields
from .nvswitch import AllReduceResult, allreduce_fields
from .pcie_bridge import LinkResult
from .summary_schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from .nic import NICResult
    from .pipeline_p2p import P2PResult
    from .pipeline_report import PipelineStageResult

__all__ = ["PS", "seconds", "AGGREGATION", "SystemResults", "compose_summary", "gpu_summary",
           "engine_fields", "multi_gpu_summary", "host_link_fields", "shared_link_utilization",
           "system_shape", "describe_system", "no_speedup_reason", "plan_fields",
           "model_state_fields"]

PS = 1e-12


def seconds(ps: int) -> float:
    """Integer picoseconds in seconds, correctly rounded (``100_000_000_000`` ps is ``0.1``,
    where ``ps * 1e-12`` gives ``0.09999999999999999``)."""
    return ps / 10**12


#: how a multi-GPU summary combines each per-GPU figure into its top-level one
AGGREGATION = {
    "iteration_time_s": "max", "forward_time_s": "max", "backward_time_s": "max",
    "update_time_s": "max", "compute_time_s": "max", "stall_time_s": "max",
    "offloaded_bytes": "sum", "wire_bytes": "sum", "extra_dram_bytes": "sum",
    "peak_gpu_memory_bytes": "max", "average_gpu_memory_bytes": "max",
    "gpu_memory_capacity_bytes": "min", "pcie_utilization": "mean", "fits_in_memory": "all",
    "complete": "all",
}

#: the functions that combine a figure over the GPUs, by the names AGGREGATION gives them
_COMBINE: dict[str, Callable[[list[Any]], Any]] = {
    "max": max, "min": min, "sum": sum, "all": all, "mean": lambda xs: sum(xs) / len(xs)}


def _records(results: dict[str, Any], module: str, name: str) -> list[Any]:
    """The results that are records of class ``name`` of this package's ``module``; none where
    that module was never loaded: no element of it ran, so none of its records can be among
    the results (a single GPU's summary loads none of the parallel elements' modules)."""
    loaded = sys.modules.get(f"{__package__}.{module}")
    if loaded is None:
        return []
    cls = getattr(loaded, name)
    return [r for r in results.values() if isinstance(r, cls)]


class SystemResults:
    """The records of one run sorted into roles: main GPUs with their baselines, the engine
    that served each GPU, every link, and the all-reduce fabric of each system."""

    def __init__(self, results: dict[str, Any]) -> None:
        gpus = {n: r for n, r in results.items() if isinstance(r, GPUResult)}
        self.gpus = gpus
        self.main = [n for n, r in gpus.items() if r.system == "main"]
        self.engine_of = {r.gpu: r for r in results.values() if isinstance(r, EngineResult)}
        self.links = {n: r for n, r in results.items() if isinstance(r, LinkResult)}
        self.fabrics = {r.system: r for r in results.values() if isinstance(r, AllReduceResult)}
        self.drives = {n: r for n, r in results.items() if isinstance(r, NVMeResult)}
        self.stages: list[PipelineStageResult] = \
            _records(results, "pipeline_report", "PipelineStageResult")
        self.ports: dict[str, P2PResult] = \
            {r.gpu: r for r in _records(results, "pipeline_p2p", "P2PResult")}
        #: network cards by the GPU link they share
        self.nics: dict[str, NICResult] = \
            {r.gpu_link: r for r in _records(results, "nic", "NICResult") if r.gpu_link}
        #: the host CPUs that stepped a main GPU's optimizer
        self.host_cpus = [r for r in results.values() if isinstance(r, HostCPUResult)
                          and set(r.gpus) & set(self.main)]
        self.baseline_of: dict[str, dict[str, GPUResult]] = {n: {} for n in self.main}
        for label in ("oracle", "vdnn"):
            others = [n for n, r in gpus.items() if r.system == label]
            if others and len(others) != len(self.main):
                raise ConfigError(f"the {label} system has {len(others)} GPU(s) and the main "
                                  f"system {len(self.main)}: a baseline system needs one GPU "
                                  "per main GPU (sst_cdma.builder.baselines.add_baselines builds them)")
            for name, other in zip(self.main, others):
                self.baseline_of[name][label] = gpus[other]

    def host_link(self, gpu: str) -> Optional[LinkResult]:
        """The link next to ``gpu``'s engine on its way to the host (None: no engine)."""
        engine = self.engine_of.get(gpu)
        if engine is None or not engine.path:
            return None
        return self.links.get(engine.path[0])

    def pcie_lost(self) -> dict[str, tuple[float, float]]:
        """Per GPU whose host link a network card shares: (ps the card's traffic lost at the
        PCIe links, ps the GPU's copies lost at its host link)."""
        out = {}
        for gpu, engine in self.engine_of.items():
            link = engine.path[0] if engine.path else ""
            nic = self.nics.get(link)
            if nic is not None:
                copies = sum(engine.copy_lost_ps.get(f"{link}.{d}", 0.0) for d in ("d2h", "h2d"))
                out[gpu] = (nic.pcie_lost_ps, copies)
        return out

    def shared_links(self, gpus: list[str]) -> dict[str, LinkResult]:
        """The links beyond the GPUs' own host links (switch uplinks), by name."""
        out: dict[str, LinkResult] = {}
        for gpu in gpus:
            engine = self.engine_of.get(gpu)
            for name in engine.path[1:] if engine is not None else ():
                if name in self.links:
                    out.setdefault(name, self.links[name])
        return out


def compose_summary(runs: SystemResults, system: str = "", now_ps: int = 0) -> dict[str, Any]:
    """The run's summary: the one main GPU's entry, or the merge of several; the system's
    shape, its all-reduce, its one-line description (``system``, or composed from the records
    when empty) and, for a run cut off before its iteration ended, when it stopped
    (``now_ps``). ``runs`` has at least one main GPU."""
    main = runs.main
    entries = [gpu_summary(n, runs) for n in main]
    summary = dict(entries[0]) if len(entries) == 1 else multi_gpu_summary(entries)
    if len(entries) > 1:
        shared = shared_link_utilization(
            runs, main, max(max(runs.gpus[n].iteration_time_ps for n in main), 1))
        if shared:
            summary["switch_utilization"] = shared
    summary.update(system_shape(runs))
    if "main" in runs.fabrics:
        summary["allreduce"] = allreduce_fields(
            runs.fabrics["main"], runs.fabrics.get("oracle"),
            [runs.engine_of[g].copies for g in main if g in runs.engine_of])
    engines = [runs.engine_of[g] for g in main if g in runs.engine_of]
    drives = list(dict.fromkeys(d for e in engines for d in e.drives if d in runs.drives))
    if drives:
        summary["nvme"] = nvme_fields([runs.drives[d] for d in drives],
                                      next(e.nvme_path for e in engines if e.drives))
    if runs.stages:
        from .pipeline_report import pipeline_fields

        summary["pipeline"] = pipeline_fields(runs.stages, runs.ports, runs.pcie_lost())
    if runs.host_cpus:
        summary["host_cpu"] = host_cpu_fields(runs.host_cpus)
    summary["system"] = describe_system(runs, system)
    if not summary["complete"]:
        summary["stopped_at_s"] = seconds(now_ps)
    summary["schema_version"] = SCHEMA_VERSION
    return summary


def _baseline(r: GPUResult) -> dict[str, Any]:
    return {"iteration_time_s": seconds(r.iteration_time_ps),
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


def gpu_summary(name: str, runs: SystemResults) -> dict[str, Any]:
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
        "iteration_time_s": seconds(r.iteration_time_ps),
        "forward_time_s": seconds(r.forward_time_ps),
        "backward_time_s": seconds(r.backward_time_ps),
        "update_time_s": seconds(r.update_time_ps),
        "optimizer": r.optimizer,
        "compute_time_s": seconds(r.compute_time_ps),
        "stall_time_s": seconds(r.stall_time_ps),
        "offloaded_bytes": r.offloaded_bytes, "wire_bytes": r.wire_bytes,
        "compression_ratio": r.offloaded_bytes / r.wire_bytes if r.wire_bytes else 1.0,
        "extra_dram_bytes": engine.dram_bytes if engine else 0,
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
        out.update(engine_fields(engine, end))
    if engine is not None and engine.engine != "cdma":
        out["engine"] = engine.engine
        out["sm_codec_time_s"] = seconds(r.codec_kernel_time_ps)
    if link is not None:
        out["host_link"] = host_link_fields(link)
        out["pcie_bandwidth_Bps"] = link.bandwidth_Bps
        out["pcie_utilization"] = {d: link.utilization(d, end) for d in ("d2h", "h2d")}
    shared = shared_link_utilization(runs, [name], end)
    if shared:
        out["switch_utilization"] = shared
    if engine is not None and engine.ratio_by_algorithm:
        out["compression_ratio_by_algorithm"] = engine.ratio_by_algorithm
        out["density_profile_progress"] = engine.progress
    _add_baselines(out, runs.baseline_of[name])
    out["layers"] = [{**lay, "start_s": seconds(lay["start_ps"]),
                      "end_s": seconds(lay["end_ps"])} for lay in r.layers]
    out["plan"] = plan_fields(r, engine.algorithm if engine else "none")
    if r.model_states:
        out["model_states"] = model_state_fields(r.model_states)
    return out


def model_state_fields(states: dict[str, Any]) -> dict[str, Any]:
    """``summary.json``'s ``model_states``: the GPU's record with its times in seconds."""
    out: dict[str, Any] = {}
    for key, value in states.items():
        if key.endswith("_ps") and isinstance(value, list):
            out[key[:-3] + "_s"] = [seconds(v) for v in value]
        elif key.endswith("_ps"):
            out[key[:-3] + "_s"] = seconds(value)
        else:
            out[key] = value
    return out


def engine_fields(engine: EngineResult, end_ps: int) -> dict[str, Any]:
    """What an engine's own figures add to its GPU's entry: how busy its codec units were over
    ``end_ps`` (with a codec), which kind of resource bounded its copies (when it copied) and
    where the densities it planned with came from (when it read a profile or real tensors)."""
    out: dict[str, Any] = {}
    if engine.algorithm != "none":
        out["engine_busy"] = engine.codec_busy_ps / end_ps
    total = sum(engine.copy_bounds_ps.values())
    if total:
        out["copy_bounds"] = {kind: ps / total for kind, ps in engine.copy_bounds_ps.items()}
    if engine.density_provenance:
        out["density_provenance"] = dict(engine.density_provenance)
    return out


def _add_baselines(out: dict[str, Any], baseline_of: dict[str, GPUResult]) -> None:
    """Add to a GPU's entry ``out`` its baselines, the slowdown and speed-up against them, and
    why there is no cDMA speed-up to show, if so."""
    baselines = {label: _baseline(other) for label, other in baseline_of.items()}
    if baselines:
        out["baselines"] = baselines
        # a ratio of iterations cut off (stop-at) is no speed-up: only whole ones compare
        if "oracle" in baselines and out["complete"] and baselines["oracle"]["complete"]:
            out["slowdown_vs_oracle"] = out["iteration_time_s"] / \
                baselines["oracle"]["iteration_time_s"]
        if "vdnn" in baselines and out["complete"] and baselines["vdnn"]["complete"]:
            out["speedup_vs_vdnn"] = baselines["vdnn"]["iteration_time_s"] / \
                out["iteration_time_s"]
    reason = no_speedup_reason(out)
    if reason and "vdnn" in baselines:
        out["no_cdma_speedup"] = reason


def shared_link_utilization(runs: SystemResults, gpus: list[str],
                            end_ps: int) -> dict[str, dict[str, Any]]:
    """Busy fraction of each link the GPUs' transfers cross beyond their own host link
    (the upstream ports of PCIe switches, root complexes), with its kind, per direction,
    over ``end_ps``."""
    return {name: {"kind": link.kind, "bandwidth_Bps": link.bandwidth_Bps,
                   "d2h": link.utilization("d2h", end_ps),
                   "h2d": link.utilization("h2d", end_ps)}
            for name, link in runs.shared_links(gpus).items()}


def describe_system(runs: SystemResults, given: str = "") -> str:
    """The one-line system description: ``given`` (the topology's own), or the main GPUs'
    model, host link and count."""
    if given:
        return given
    first = runs.gpus[runs.main[0]]
    link = runs.host_link(runs.main[0])
    return f"{first.gpu_name}, {link.describe() if link else 'no host link'}, " \
           f"{len(runs.main)} GPU(s)"


def no_speedup_reason(entry: dict[str, Any]) -> str:
    """Why a GPU's run has no cDMA speed-up to show ("" when it has one): nothing was
    offloaded, nothing was compressed, or the run did not fit in GPU memory."""
    if entry["policy"] == "none" or not entry["offloaded_bytes"]:
        return "nothing was offloaded (this run's policy is none)" if entry["policy"] == "none" \
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
    for key, how in AGGREGATION.items():
        if key == "pcie_utilization":
            if key in first:
                summary[key] = {d: _COMBINE[how]([e[key][d] for e in entries])
                                for d in ("d2h", "h2d")}
        else:
            summary[key] = _COMBINE[how]([e[key] for e in entries])
    summary["aggregation"] = {k: v for k, v in AGGREGATION.items() if k in summary}
    summary["compression_ratio"] = summary["offloaded_bytes"] / summary["wire_bytes"] \
        if summary["wire_bytes"] else 1.0
    for key in ("pcie_bandwidth_Bps", "compression_ratio_by_algorithm", "host_link", "codec_units",
                "codec_unit_throughput_Bps", "engine"):
        if key in first:
            summary[key] = first[key]  # the same link, engine and network on every GPU
    _merge_baselines(summary, entries)
    summary["out_of_memory"] = next((e["out_of_memory"] for e in entries if e["out_of_memory"]),
                                    None)
    for key in ("density_profile_progress", "density_provenance"):
        if key in first:
            summary[key] = first[key]
    if "engine_busy" in first:  # the busiest engine's
        summary["engine_busy"] = max(e["engine_busy"] for e in entries)
        summary["aggregation"]["engine_busy"] = "max"
    if all("copy_bounds" in e for e in entries):  # the GPUs' shares, averaged
        summary["copy_bounds"] = {kind: sum(e["copy_bounds"][kind] for e in entries) /
                                  len(entries) for kind in first["copy_bounds"]}
        summary["aggregation"]["copy_bounds"] = "mean"
    if "sm_codec_time_s" in first:  # the largest GPU's, as the iteration time
        summary["sm_codec_time_s"] = max(e["sm_codec_time_s"] for e in entries)
    for key in ("functional_checks", "functional_matches"):  # the engines' functional param: every GPU's checks
        if key in first:
            summary[key] = sum(e[key] for e in entries)
            summary["aggregation"][key] = "sum"
    reasons = {e.get("no_cdma_speedup", "") for e in entries} - {""}
    if reasons:
        summary["no_cdma_speedup"] = sorted(reasons)[0]
    summary["gpus"] = entries
    return summary


def _merge_baselines(summary: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Add to a multi-GPU ``summary`` the GPUs' baselines, each figure combined as
    :data:`AGGREGATION` says, and the slowdown and speed-up of the merged figures."""
    first = entries[0]
    labels = first.get("baselines", {})
    if labels:
        summary["baselines"] = {
            label: {**{key: _COMBINE[AGGREGATION[key]]([e["baselines"][label][key]
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


def system_shape(runs: SystemResults) -> dict[str, Any]:
    """What shapes the main system, from its records: how many GPUs and hosts, and how many
    GPUs share a switch uplink (0: none)."""
    hosts = {runs.engine_of[g].host for g in runs.main if g in runs.engine_of}
    sharing: dict[str, int] = {}
    for g in runs.main:
        engine = runs.engine_of.get(g)
        for name in engine.path[1:] if engine is not None else ():
            if runs.links.get(name) is not None and runs.links[name].kind == "switch":
                sharing[name] = sharing.get(name, 0) + 1
    return {"gpu_count": len(runs.main), "hosts": len(hosts),
            "gpus_per_switch": max(sharing.values()) if sharing else 0}


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
                           "recompute_time_s": seconds(r.recompute_time_ps)}
    if r.planner:
        out["planner"] = dict(r.planner)
    return out
