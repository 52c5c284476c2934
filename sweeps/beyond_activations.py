"""Beyond activations (EVALUATION.md): where the model states of a 7B and a 13B model trained
with Adam live, and what sets the step time, on one H100 PCIe (ZeRO-Offload on a DDR5 host too), one
GH200 and one B200, and the 13B-on-one-V100 case ZeRO-Offload is known for.

    python sweeps/beyond_activations.py [--only llama_7b] [--list]

Every case is one in-process run of a topology script (``sst TOPOLOGY -- OPTIONS``, printed with
``--list``), each once. A table per model: the step time, the GPU's peak against its capacity,
the host's peak, and the four figures the summary holds that can set the step time: the GPU's
compute (forward, backward, recomputation, update kernels), the busier direction of the host
link (its utilization times the step), the host CPU's optimizer step and the SSDs' busier side
(bytes read or written over the drives' rate). ``set by`` names the largest. A run the planner refuses shows its one-line reason.
"""
from __future__ import annotations

import argparse
import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst_cdma import run  # noqa: E402
from sst_cdma.engine.runner import RunError  # noqa: E402

#: Every run: bf16 mixed precision (fp16 on the V100, which has no bf16 tensor cores), Adam,
#: one sequence of 1024 tokens (docs/workloads.md, section 9), fused attention, a plain copy
#: engine.
COMMON = ("--batch", "1", "--seq-len", "1024", "--attention", "fused", "--optimizer", "adam",
          "--algorithm", "none")
ZERO_OFFLOAD = ("--optimizer-states", "host", "--gradients", "host")
#: ZeRO-Infinity: the fp32 states (and the 16-bit weights) on the SSDs (docs/storage.md's
#: default drive), read into host buffers for the CPU's step, the gradients to the host.
INFINITY_STATES = ("--optimizer-states", "nvme", "--gradients", "host", "--policy", "none")
INFINITY_ALL = ("--optimizer-states", "nvme", "--weights", "nvme", "--gradients", "host",
                "--policy", "none")

#: The gradient and weight copies through the engine's codec (docs/workloads.md, "Compressed
#: model-state copies"): bplane_zstd, the best codec on the shipped model-state profile; the
#: host end a hardware codec (``engine``) or the host CPU's (``host``).
ENGINE_COMPRESSED = ("--algorithm", "bplane_zstd", "--state-compression", "engine")
HOST_COMPRESSED = ("--algorithm", "bplane_zstd", "--state-compression", "host")

#: (label, options) of each placement, as the tables' rows.
PLACEMENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GPU only, every activation kept", ("--policy", "none")),
    ("GPU only, full recomputation", ("--policy", "recompute")),
    ("planner: states and activations placed", ("--policy", "auto")),
    ("ZeRO-Offload", (*ZERO_OFFLOAD, "--policy", "none")),
    ("ZeRO-Offload, delayed update", (*ZERO_OFFLOAD, "--delayed-update", "--policy", "none")),
    ("ZeRO-Offload + recomputation", (*ZERO_OFFLOAD, "--policy", "recompute")),
    ("ZeRO-Offload + recomputation, delayed update",
     (*ZERO_OFFLOAD, "--delayed-update", "--policy", "recompute")),
    ("ZeRO-Offload, copies compressed by the engine (bplane_zstd)",
     (*ZERO_OFFLOAD, *ENGINE_COMPRESSED, "--policy", "none")),
    ("ZeRO-Offload, copies compressed, the host CPU's codec at its end",
     (*ZERO_OFFLOAD, *HOST_COMPRESSED, "--policy", "none")),
    ("ZeRO-Infinity, states on 1 NVMe", INFINITY_STATES + ("--nvme", "1")),
    ("ZeRO-Infinity, states on 4 NVMe", INFINITY_STATES + ("--nvme", "4")),
    ("ZeRO-Infinity, states and weights on 1 NVMe", INFINITY_ALL + ("--nvme", "1")),
    ("ZeRO-Infinity, states and weights on 4 NVMe", INFINITY_ALL + ("--nvme", "4")),
)

#: (column label, topology script, its options) of the three systems.
SYSTEMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("H100 PCIe", "topologies/hopper_pcie5_cdma.py", ("--dtype", "bfloat16")),
    ("GH200", "topologies/gh200_cdma.py", ("--dtype", "bfloat16")),
    ("B200 (GB200)", "topologies/gb200_cdma.py", ("--dtype", "bfloat16", "--gpus", "1")),
)
#: The H100 PCIe again on a current DDR5 host, the `epyc-9654` platform (2x AMD EPYC 9654, one
#: socket's 96 cores beside its 12 channels of DDR5-4800; docs/host_cpu.md, "Host platforms")
#: instead of its topology's `ddr4-2400-socket` default: ZeRO-Offload rows only.
DDR5_HOST = ("H100 PCIe, a DDR5 host (2x EPYC 9654)", "topologies/hopper_pcie5_cdma.py",
             ("--dtype", "bfloat16", "--cpu", "epyc-9654"))
NETWORKS = ("llama_7b", "llama_13b")

#: The V100 SXM3 32GB of ZeRO-Offload's DGX-2 on PCIe gen3 x16: the `volta` preset (16 GiB) with
#: its HBM's capacity set to 32 GiB, in float16.
V100 = ("V100 32GB, PCIe gen3", "topologies/pascal_cdma.py",
        ("--gpu", "volta", "--link", "pcie3x16", "--dtype", "float16"))
V100_OVERRIDES = {"gpu0.hbm": {"capacity": "32GiB"}}
V100_PLACEMENTS = (PLACEMENTS[2], *PLACEMENTS[3:9])


@dataclass(frozen=True)
class Case:
    """One run: its table, row and system, the topology script and its options."""

    network: str
    row: str
    system: str
    script: str
    options: tuple[str, ...]
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def command(self) -> str:
        """The ``sst`` command line of the case (and its param overrides, if any)."""
        line = f"sst {self.script} -- {' '.join(self.options)}"
        return line + (f"   # params {self.overrides}" if self.overrides else "")


def cases(networks: Sequence[str] = NETWORKS) -> list[Case]:
    """Every case, table by table (network), row by row, system by system."""
    out = []
    for network in networks:
        for row, placement in PLACEMENTS:
            systems = SYSTEMS + ((DDR5_HOST,) if placement[:2] == ZERO_OFFLOAD[:2] else ())
            for system, script, system_options in systems:
                out.append(Case(network, row, system, script,
                                ("--network", network, *COMMON, *system_options, *placement)))
    if "llama_13b" in networks:
        system, script, system_options = V100
        for row, placement in V100_PLACEMENTS:
            out.append(Case("llama_13b on one V100", row, system, script,
                            ("--network", "llama_13b", *COMMON, *system_options, *placement),
                            V100_OVERRIDES))
    return out


def nvme_busy_s(summary: dict[str, Any]) -> float:
    """Seconds the SSDs' busier side (reads or writes, separate resources) needs for the bytes
    the run moved, spread evenly over the drives (0 without drives)."""
    nvme = summary.get("nvme")
    if not nvme:
        return 0.0
    drives = nvme["drives"]
    return max(nvme["bytes_read"] / (nvme["read_rate_Bps"] * drives),
               nvme["bytes_written"] / (nvme["write_rate_Bps"] * drives))


def bound_by(summary: dict[str, Any]) -> tuple[float, float, float, float, str]:
    """(GPU compute, busier host-link direction, host CPU step, NVMe) seconds and which is
    largest."""
    step = summary["iteration_time_s"]
    link = max(summary["pcie_utilization"].values(), default=0.0) * step
    cpu = (summary.get("model_states") or {}).get("cpu_step_time_s") or 0.0
    figures = {"GPU compute": summary["compute_time_s"], "host link": link, "host CPU": cpu,
               "NVMe": nvme_busy_s(summary)}
    return (figures["GPU compute"], link, cpu, figures["NVMe"],
            max(figures, key=lambda k: figures[k]))


def row_cells(summary: dict[str, Any]) -> list[str]:
    """The table cells of one run's summary after its row and system labels."""
    gb = 1e-9
    peak, capacity = summary["peak_gpu_memory_bytes"], summary["gpu_memory_capacity_bytes"]
    fit = "" if peak <= capacity else f" (over by {(peak - capacity) * gb:.1f})"
    host = ((summary.get("model_states") or {}).get("tiers") or {}).get("host")
    host_cell = f"{host['peak_bytes'] * gb:.1f} of {host['capacity_bytes'] * gb:.1f}" if host \
        else "-"
    gpu, link, cpu, nvme, by = bound_by(summary)
    return [f"{summary['iteration_time_s']:.3f}", f"{peak * gb:.1f} of {capacity * gb:.1f}{fit}",
            host_cell, f"{gpu:.3f}", f"{link:.3f}", f"{cpu:.3f}", f"{nvme:.3f}", by]


HEADER = ("placement", "system", "step s", "GPU peak of capacity, GB", "host peak of capacity, GB",
          "GPU compute s", "host link s", "host CPU s", "NVMe s", "set by")


def simulate(case: Case) -> Optional[dict[str, Any]] | str:
    """The case's summary, or the one-line reason the run was refused."""
    try:
        with_output = run(REPO / case.script, list(case.options), console=io.StringIO(),
                          record_statistics=False, overrides=case.overrides or None)
    except RunError as exc:
        return str(exc).splitlines()[0]
    summary: dict[str, Any] = with_output.reports["summary"]
    return summary


def refused_cells(reason: str) -> list[str]:
    """The cells of a refused run: its reason, shortened to the bytes the planner lacked."""
    lacked = re.search(r"(\d+) bytes \([\d.]+ GiB\) short", reason)
    short = f"{int(lacked.group(1)) * 1e-9:.1f} GB short with the least-memory plan" \
        if lacked else reason
    return [f"refused: {short}"] + [""] * (len(HEADER) - 3)


def print_tables(selected: Sequence[Case]) -> None:
    """Run every case once and print one markdown table per network."""
    table = None
    for case in selected:
        if case.network != table:
            table = case.network
            print(f"\n{table}\n\n| {' | '.join(HEADER)} |\n|{'---|' * len(HEADER)}")
        result = simulate(case)
        cells = refused_cells(result) if isinstance(result, str) else row_cells(result or {})
        print(f"| {case.row} | {case.system} | {' | '.join(cells)} |", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the tables (or, with ``--list``, the command of every case)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=NETWORKS, action="append",
                    help="this network's table only (repeatable)")
    ap.add_argument("--list", action="store_true", help="print every case's command, run none")
    args = ap.parse_args(argv)
    selected = cases(args.only or NETWORKS)
    if args.list:
        print("\n".join(c.command() for c in selected))
        return 0
    print_tables(selected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
