"""The ``summary.json`` contract: every key the Reporter writes, its JSON type, when it is
there and what it means. The README's table is rendered from it (``python -m
components.summary_schema``) and the tests check every summary the Reporter writes
against it, so the three never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from sst_cdma.model.dtypes import DTYPES

__all__ = ["Key", "SUMMARY", "BASELINE", "HOST_LINK", "LAYER", "ALLREDUCE", "PLAN",
           "SYSTEM_SHAPE", "check_summary", "markdown"]

ALWAYS = "always"


@dataclass(frozen=True)
class Key:
    """One key: its name, JSON type(s) (``number`` is int or float), when it is present and
    what it holds."""

    name: str
    types: tuple[str, ...]
    when: str
    doc: str


def _k(name: str, types: str, doc: str, when: str = ALWAYS) -> Key:
    return Key(name, tuple(types.split("|")), when, doc)


ENGINE = "with a cDMA engine"
SEVERAL = "with several GPUs"
LINK = "with a host link"
WHOLE = "when the run and that baseline are complete"

SUMMARY: tuple[Key, ...] = (
    _k("network", "string", "network name"),
    _k("batch", "integer", "batch size"),
    _k("dtype", "string", f"element type ({', '.join(f'`{name}`' for name in DTYPES)})"),
    _k("policy", "string", "memory policy of the main system: vDNN's `none`, `conv`, `all`; "
       "`recompute`, `auto`, `plan` or per-tensor terms such as `recompute-attn+offload-ffn`"),
    _k("algorithm", "string", "cDMA compression algorithm (`none` without an engine)"),
    _k("mode", "string", "bandwidth model: `flow` or `chunk`"),
    _k("optimizer", "string", "optimizer step ending the iteration (`none`, `sgd`, ...)"),
    _k("allocation", "string", "what the main run's schedule did: `liveness`, `network-wide` "
       "(every buffer for the whole iteration: only where the schedule moves no tensor; a "
       "`--allocation network-wide` run that offloads is allocated layer-wise, as vDNN's memory "
       "manager, and says `liveness`), or `stream` for a --workload"),
    _k("complete", "boolean", "true when every main GPU ended its iteration; false for a run "
       "--stop-at or --exit-after cut off (its times are then of the cut-off iteration)"),
    _k("stopped_at_s", "number", "when the run was stopped", "when not complete"),
    _k("system", "string", "one line: GPU model, host link, GPU count"),
    _k("gpu_preset", "string", "GPU preset of the main GPUs"),
    _k("gpu_count", "integer", "GPUs in the main system"),
    _k("hosts", "integer", "host memories the main GPUs offload to (0 without a cDMA engine)"),
    _k("gpus_per_switch", "integer", "most main GPUs sharing one switch uplink (0: none)"),
    _k("host_link", "object", "the GPUs' own host link: see `host_link` below", LINK),
    _k("codec_units", "integer", "compression/decompression units per cDMA engine", ENGINE),
    _k("codec_unit_throughput_Bps", "number", "uncompressed bytes/s each codec unit handles", ENGINE),
    _k("engine_busy", "number", "fraction of the iteration the codec units were busy (the bytes "
       "they (de)compressed at their full throughput; the busiest engine's with several GPUs)",
       "with a cDMA engine that compresses"),
    _k("copy_bounds", "object", "`engine`, `link`, `HBM`: the share of the copies' time each kind "
       "of resource bounded (a copy alone moves at its tightest resource's rate; time other "
       "flows took from it counts to the resource they shared; components/copy_bounds.py)",
       "when the engine copied"),
    _k("density_provenance", "object", "where the densities came from: `profile` (a shipped "
       "name or the path given), its provenance `kind` (`measured`, `estimated`, `derived`) "
       "and `source` (what it rests on), and `real_tensors` compressed from real bytes instead",
       "when an engine read a profile or real tensors"),
    _k("engine", "string", "`blackwell-de`: Blackwell's Decompression Engine decompressed "
       "prefetches, SM kernels compressed offloads (docs/model.md)", "with --engine blackwell-de"),
    _k("sm_codec_time_s", "number", "compute-stream time of the SM (de)compression kernels "
       "(part of `compute_time_s`)", "with --engine blackwell-de"),
    _k("kernel_times", "string", "where kernel times come from: `model fitted on ...`, "
       "`roofline`, `measured on DEVICE (FILE)` followed by how the times reach this GPU "
       "(scaled from the preset the file names, or used unscaled), or a `workload stream`"),
    _k("iteration_time_s", "number", "iteration time"),
    _k("forward_time_s", "number", "forward pass"),
    _k("backward_time_s", "number", "backward pass"),
    _k("update_time_s", "number", "optimizer step (0 without one)"),
    _k("compute_time_s", "number", "time kernels ran"),
    _k("stall_time_s", "number", "time the compute stream waited for copies"),
    _k("offloaded_bytes", "integer", "uncompressed bytes offloaded"),
    _k("wire_bytes", "integer", "bytes that crossed the host link to host"),
    _k("compression_ratio", "number", "offloaded_bytes / wire_bytes (1 when nothing moved)"),
    _k("compression_ratio_by_algorithm", "object", "every registered algorithm's ratio on the "
       "same tensors", "when an engine planned offloads"),
    _k("density_profile_progress", "number", "training progress the densities were taken at",
       "when an engine planned offloads"),
    _k("extra_dram_bytes", "integer", "GPU DRAM traffic of the DMA engine"),
    _k("pcie_bandwidth_Bps", "number", "host link payload bandwidth per direction", LINK),
    _k("pcie_utilization", "object", "`d2h`, `h2d`: busy fraction of the GPU's own host link",
       LINK),
    _k("switch_utilization", "object", "per link GPUs share beyond their own (a PCIe switch's "
       "uplink, a CPU root complex): its `kind` (`switch`, `root complex`), `bandwidth_Bps` and "
       "busy `d2h`, `h2d` fractions", "where GPUs share a link"),
    _k("allreduce", "object", "the data-parallel gradient all-reduce over NVLink: see "
       "`allreduce` below", "with --data-parallel"),
    _k("peak_gpu_memory_bytes", "integer", "peak allocated GPU memory"),
    _k("average_gpu_memory_bytes", "integer", "allocated memory averaged over the iteration, "
       "as vDNN reports it"),
    _k("gpu_memory_capacity_bytes", "integer", "GPU memory capacity"),
    _k("fits_in_memory", "boolean", "peak <= capacity"),
    _k("out_of_memory", "null|object", "null, or the `layer`, `tensor` and `bytes_short` where "
       "memory ran out"),
    _k("functional_checks", "integer", "prefetches whose real compressed bytes were checked bit "
       "for bit against what was offloaded (a mismatch stops the run)", "with --functional"),
    _k("functional_matches", "integer", "of those, the ones that matched", "with --functional"),
    _k("baselines", "object", "`oracle` and `vdnn`: see `baselines.*` below",
       "with baselines"),
    _k("slowdown_vs_oracle", "number", "iteration_time_s / the oracle's", WHOLE),
    _k("speedup_vs_vdnn", "number", "the vDNN baseline's iteration time / iteration_time_s",
       WHOLE),
    _k("no_cdma_speedup", "string", "why there is no cDMA speed-up to show: nothing offloaded, "
       "nothing compressed, or out of memory", "with a vDNN baseline, when so"),
    _k("gpu", "string", "the main GPU's component name", "with one GPU"),
    _k("layers", "array", "per layer boundary: see `layers[]` below", "with one GPU"),
    _k("plan", "object", "what the iteration does with each activation tensor: see `plan` "
       "below", "with one GPU"),
    _k("gpus", "array", "one entry per main GPU, with the one-GPU keys", SEVERAL),
    _k("aggregation", "object", "how each top-level figure combines the GPUs' (`max`, `sum`, "
       "`min`, `mean`, `all`)", SEVERAL),
)

#: keys that describe the system simulated rather than what it measured (sweep reports do not
#: plot them as figures)
SYSTEM_SHAPE = frozenset({"gpu_count", "hosts", "gpus_per_switch", "host_link", "codec_units",
                          "codec_unit_throughput_Bps"})

BASELINE: tuple[Key, ...] = (
    _k("iteration_time_s", "number", "the baseline's iteration time"),
    _k("peak_gpu_memory_bytes", "integer", "its peak GPU memory"),
    _k("average_gpu_memory_bytes", "integer", "its average GPU memory"),
    _k("fits_in_memory", "boolean", "its peak <= capacity (the oracle's memory never runs out)"),
    _k("complete", "boolean", "it ended its iteration"),
    _k("policy", "string", "its offload policy (`none` for the oracle)"),
)

HOST_LINK: tuple[Key, ...] = (
    _k("name", "string", "`pcie3x16`, `nvlink3x25GB/s`, `nvlink_c2c450GB/s`, ..."),
    _k("protocol", "string", "`pcie`, `nvlink` or `nvlink_c2c`"),
    _k("bandwidth_Bps", "number", "payload bandwidth per direction"),
    _k("generation", "integer", "PCIe generation", "PCIe"),
    _k("lanes", "integer", "PCIe lanes", "PCIe"),
    _k("nvlink_links", "integer", "NVLink bricks", "NVLink"),
    _k("nvlink_rate_Bps", "number", "per-brick rate per direction", "NVLink"),
    _k("c2c_rate_Bps", "number", "NVLink-C2C signalling rate per direction", "NVLink-C2C"),
)

ALLREDUCE: tuple[Key, ...] = (
    _k("gpus", "integer", "GPUs in the ring"),
    _k("buckets", "integer", "gradient buckets reduced"),
    _k("bucket_cap_bytes", "integer", "bucket size (`--bucket-size`)"),
    _k("gradient_bytes", "integer", "weight-gradient bytes of one replica"),
    _k("bytes_per_gpu", "integer", "bytes each GPU sent (and received) over NVLink: 2(N-1)/N "
       "of the gradient bytes"),
    _k("bandwidth_Bps", "number", "NVLink payload bandwidth per GPU per direction"),
    _k("step_latency_s", "number", "fixed time of each ring step"),
    _k("time_s", "number", "time a bucket was being reduced"),
    _k("idle_time_s", "number", "the same buckets each alone on an idle node: 2(N-1) x "
       "(step latency + bucket / N / bandwidth)"),
    _k("contention_s", "number", "time_s - idle_time_s: what sharing HBM with kernels and copies "
       "cost it"),
    _k("overlap_s", "number", "all-reduce time before the last weight gradient was ready "
       "(hidden behind the backward pass)"),
    _k("exposed_s", "number", "all-reduce time after it (the iteration waits)"),
    _k("slowed_by_offloads_s", "number", "contention_s minus the oracle's (the same all-reduce "
       "without offloads): what the copies cost it", "with an oracle baseline"),
    _k("offloads_slowed_s", "number", "the other way: the time the copies lost with the GPU's "
       "HBM as their bottleneck, in proportion to the time they ran beside the all-reduce (an "
       "upper bound: kernels share that HBM), on the GPU where it is largest (flow mode)"),
)

LAYER: tuple[Key, ...] = (
    _k("layer", "string", "the layer ending at this boundary"),
    _k("phase", "string", "`forward`, `backward` or `update`"),
    _k("start_ps", "integer", "start"),
    _k("end_ps", "integer", "end"),
    _k("start_s", "number", "start in seconds"),
    _k("end_s", "number", "end in seconds"),
    _k("kernel_ps", "integer", "kernel time within it"),
    _k("kernel_algorithm", "string", "the kernel algorithm(s) the kernel model picked, by pass "
       "(cuDNN's convolution algorithms, `TF32_GEMM`, `FLASH_ATTENTION_2`, ...; the top-level "
       "`algorithm` is the codec's)", "for priced kernels"),
)

PLAN: tuple[Key, ...] = (
    _k("tensors", "object", "activation tensor -> `keep`, `offload` (plain copy), `compress` "
       "(through the codec), `recompute` or `free` (released after its last forward reader: "
       "no backward kernel reads it)"),
    _k("counts", "object", "tensors per choice"),
    _k("bytes", "object", "bytes of the tensors of each choice"),
    _k("recompute_time_s", "number", "time the backward pass spent re-running forward kernels"),
    _k("planner", "object", "`predicted_time_s` (the planner's cost model), "
       "`model_peak_bytes`, `rendered_peak_bytes` (the exact peak of the planned stream), "
       "`rounds`", "under policy auto when memory is short"),
)

_JSON = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
         "object": dict, "array": list, "null": type(None)}


def _check(obj: dict[str, Any], keys: tuple[Key, ...], where: str,
           required: Optional[set[str]] = None) -> list[str]:
    known = {k.name: k for k in keys}
    faults = [f"{where}: unknown key {name!r}" for name in obj if name not in known]
    for name, value in obj.items():
        key = known.get(name)
        if key is None:
            continue
        ok = any(isinstance(value, _JSON[t]) and not (t in ("integer", "number") and
                                                     isinstance(value, bool))
                 for t in key.types)
        if not ok:
            faults.append(f"{where}.{name}: {type(value).__name__} is not {'|'.join(key.types)}")
    for name in sorted(required or ()):
        if name not in obj:
            faults.append(f"{where}: key {name!r} is missing")
    return faults


def check_summary(summary: dict[str, Any]) -> list[str]:
    """Every way ``summary`` departs from the schema (empty when it matches): unknown keys,
    wrong types, keys that are always there but missing; nested entries too."""
    always = {k.name for k in SUMMARY if k.when == ALWAYS}
    several = "gpus" in summary
    faults = _check(summary, SUMMARY, "summary", always)
    for label, base in summary.get("baselines", {}).items():
        faults += _check(base, BASELINE, f"baselines.{label}", {k.name for k in BASELINE})
    if "host_link" in summary:
        faults += _check(summary["host_link"], HOST_LINK, "host_link")
    if "allreduce" in summary:
        faults += _check(summary["allreduce"], ALLREDUCE, "allreduce",
                         {k.name for k in ALLREDUCE if k.when == ALWAYS})
    for layer in summary.get("layers", ()):
        faults += _check(layer, LAYER, "layers[]", {k.name for k in LAYER if k.when == ALWAYS})
    if "plan" in summary:
        faults += _check(summary["plan"], PLAN, "plan", {k.name for k in PLAN if k.when == ALWAYS})
    one_gpu = {k.name for k in SUMMARY if k.when not in (SEVERAL,)}
    for i, entry in enumerate(summary.get("gpus", ())):
        faults += _check(entry, tuple(k for k in SUMMARY if k.name in one_gpu),
                         f"gpus[{i}]", always - {"system", "gpu_count", "hosts",
                                                  "gpus_per_switch"} | {"gpu", "layers"})
    if several and ("gpu" in summary or "layers" in summary):
        faults.append("summary: a several-GPU summary keeps gpu and layers per GPU")
    return faults


def markdown() -> str:
    """The README's tables of every key."""
    out = []
    for title, keys in (("`summary.json`", SUMMARY), ("`baselines.oracle`, `baselines.vdnn`",
                                                      BASELINE),
                        ("`host_link`", HOST_LINK), ("`allreduce`", ALLREDUCE),
                        ("`layers[]`", LAYER), ("`plan`", PLAN)):
        out += [f"| {title} | type | present | meaning |", "|---|---|---|---|"]
        out += [f"| `{k.name}` | {' or '.join(k.types)} | {k.when} | {k.doc} |" for k in keys]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
