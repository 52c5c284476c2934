"""GPU and system presets (DESIGN.md section 6, with sources there): peak fp32 FLOP/s, DRAM
bandwidth and capacity, SM count and the host link the topologies give each GPU."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    """What the model needs to know about a GPU."""

    name: str
    sms: int
    peak_flops: float     # fp32 FLOP/s
    dram_bandwidth: str   # text with units
    dram_capacity: str
    host_link: str        # e.g. "pcie3x16", "pcie4x16", "pcie5x16", "nvlink2x3"


GPUS = {
    "maxwell": GPUSpec("Titan X (Maxwell GM200)", 24, 6.6e12, "336.5GB/s", "12GiB", "pcie3x16"),
    "pascal": GPUSpec("Tesla P100 SXM2", 56, 10.6e12, "732GB/s", "16GiB", "pcie3x16"),
    "titanxp": GPUSpec("Titan Xp", 30, 12.1e12, "547.7GB/s", "12GiB", "pcie3x16"),
    "volta": GPUSpec("Tesla V100 SXM2", 80, 15.7e12, "900GB/s", "16GiB", "nvlink2x3"),
    "ampere": GPUSpec("A100 SXM4 40GB", 108, 19.5e12, "1555GB/s", "40GiB", "pcie4x16"),
    "hopper": GPUSpec("H100 SXM5", 132, 67e12, "3.35TB/s", "80GiB", "pcie5x16"),
    "h200": GPUSpec("H200 SXM", 132, 67e12, "4.8TB/s", "141GB", "pcie5x16"),
}
