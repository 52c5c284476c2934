"""The table "pcie-switch": the PCIe switch a GPU shares with its network card. Stages whose
data-parallel and pipeline traffic crosses nodes, with and without their activations offloaded
over the same GPU link: what each side loses to the other there, and the step."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .registry import Table, register
from .runs import GIB, pipeline_run, simulate

__all__ = ["CLUSTERS", "COMMON", "LAYOUTS", "SwitchRun", "switch_run", "pcie_switch"]

#: (row label, topology script): DGX H100 nodes (PCIe gen5 x16 GPU links, NDR cards) and DGX
#: A100 nodes (gen4 x16, HDR cards), docs/clusters.md
CLUSTERS = (("DGX H100", "topologies/dgx_h100_cluster.py"),
            ("DGX A100", "topologies/dgx_a100_cluster.py"))
#: Llama 3 8B in bfloat16, tp 8 (a node's GPUs), pp 2 and dp 2: 4 nodes, every pipeline and
#: data-parallel neighbour on another node; 4 micro-batches of one 2048-token sequence
COMMON = ("--network", "llama3_8b", "--tp", "8", "--pp", "2", "--dp", "2",
          "--micro-batches", "4", "--batch", "1", "--seq-len", "2048", "--dtype", "bfloat16")
#: (ZeRO stage, activations label, options); each ZeRO stage's first row keeps everything
LAYOUTS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "keep", ("--policy", "none")),
    (1, "offload all, plain copy", ("--policy", "all", "--algorithm", "none")),
    (3, "keep", ("--policy", "none")),
    (3, "offload all, plain copy", ("--policy", "all", "--algorithm", "none")),
    (3, "offload all, byte-plane Zstd", ("--policy", "all", "--algorithm", "bplane_zstd")),
)
HEADER = ("nodes", "ZeRO", "activations", "step ms", "x keep", "tokens/s",
          "DP exposed / hidden ms, per stage", "network lost to copies, ms per stage",
          "copies lost to network, ms per stage", "peak GiB per stage")


@dataclass(frozen=True)
class SwitchRun:
    """What the table reads of one cluster run: the step and tokens/s, and per stage its
    exposed and hidden data-parallel time, what its network flows lost to its offload copies at
    the GPU's PCIe link and what the copies lost to them, and its peak GPU memory."""

    step_s: float
    tokens_per_s: float
    dp_exposed_s: tuple[float, ...]
    dp_hidden_s: tuple[float, ...]
    network_lost_s: tuple[float, ...]
    copies_lost_s: tuple[float, ...]
    peaks: tuple[int, ...]


def switch_run(summary: dict[str, Any]) -> SwitchRun:
    """The figures of a cluster run's summary (its ``pipeline`` section's stages)."""
    stages = summary["pipeline"]["stages"]
    run = pipeline_run(summary)

    def each(key: str) -> tuple[float, ...]:
        return tuple(float(s.get(key, 0.0)) for s in stages)

    return SwitchRun(step_s=run.step_s, tokens_per_s=run.tokens_per_s,
                     dp_exposed_s=each("dp_comm_time_s"), dp_hidden_s=each("dp_hidden_time_s"),
                     network_lost_s=each("network_lost_time_s"),
                     copies_lost_s=each("copies_lost_time_s"), peaks=run.peaks)


def _ms(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v * 1e3:.1f}" for v in values)


def _cells(nodes: str, zero: int, label: str, run: SwitchRun, keep: SwitchRun) -> tuple[str, ...]:
    return (nodes, str(zero), label, f"{run.step_s * 1e3:.1f}", f"{run.step_s / keep.step_s:.2f}",
            f"{run.tokens_per_s:,.0f}",
            ", ".join(f"{e * 1e3:.1f} / {h * 1e3:.1f}"
                      for e, h in zip(run.dp_exposed_s, run.dp_hidden_s)),
            _ms(run.network_lost_s), _ms(run.copies_lost_s),
            ", ".join(f"{p / GIB:.1f}" for p in run.peaks))


@register("pcie-switch", "inter-node traffic and activation offloads sharing each GPU's PCIe "
          "link to its switch and NIC (Llama 3 8B, tp 8 x pp 2 x dp 2, DGX H100 and A100)")
def pcie_switch() -> Table:
    """One row per cluster, ZeRO stage and activation policy: the step against the same ZeRO
    stage keeping every activation, tokens/s, each stage's exposed and hidden data-parallel
    time, the time its network traffic and its offload copies lost to each other at the GPU's
    PCIe link, and its peak memory."""
    rows = []
    for nodes, script in CLUSTERS:
        keep: dict[int, SwitchRun] = {}
        for zero, label, options in LAYOUTS:
            run = switch_run(simulate(script, (*COMMON, "--zero", str(zero), *options)))
            keep.setdefault(zero, run)
            rows.append(_cells(nodes, zero, label, run, keep[zero]))
    return Table(HEADER, tuple(rows))
