"""GPU and system presets: SM count, peak fp32 FLOP/s, dense fp16/bf16 tensor-core peak, DRAM
bandwidth and capacity, the host link the topologies give each GPU, and the calibration set whose
fitted kernel-model parameters price its kernels (docs/kernel_model.md; sources of the figures in
docs/gpus.md).

Seven presets were measured (``calibration`` names their set in the DeepBench kernel
measurements). The others take the parameters fitted on all seven pooled (family ``Pooled``),
scaled by their own SMs, peak FLOP/s (SMs x cores x clock) and DRAM bandwidth; their tensor-core
kernels take their ``tensor_family``'s fitted constants. A preset of a superchip (GH200) also
names its host memory (Grace's LPDDR5X); ``topologies/gb200_cdma.py`` gives the B200 its Grace
instead."""
from __future__ import annotations

from typing import Optional

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.engine.units import parse_bandwidth
from sst_cdma.model.dtypes import HALF_DTYPES


@frozen_record
class GPUSpec(FrozenRecord):
    """What the model needs to know about a GPU."""

    name: str
    sms: int
    peak_flops: float     # fp32 FLOP/s
    dram_bandwidth: str   # text with units
    dram_capacity: str
    host_link: str        # e.g. "pcie3x16", "pcie4x16", "pcie5x16", "nvlink2x3", "nvlink_c2c"
    #: the calibration set whose fitted kernel parameters this GPU uses; ``Pooled``: the fit on
    #: every measured GPU pooled, for GPUs without measurements (docs/kernel_model.md, "GPUs
    #: without measurements": it predicts a held-out architecture better than the P100's)
    kernel_family: str = "Pooled"
    #: the calibration set this GPU was itself measured in, if any
    calibration: Optional[str] = None
    #: the host memory of the system this GPU comes in (``cdma.HostMemory``'s ``bandwidth``
    #: and ``pinned_capacity``); empty: the element's defaults (a DDR4 server socket)
    host_memory_bandwidth: str = ""
    host_memory_capacity: str = ""
    #: dense (no sparsity) fp16/bf16 tensor-core peak FLOP/s; 0: no tensor cores (Maxwell,
    #: Pascal)
    tensor_flops: float = 0.0
    #: the 16-bit element types the tensor cores multiply (Volta's take float16 only)
    tensor_dtypes: tuple[str, ...] = HALF_DTYPES
    #: float16 FLOP/s without tensor cores where it beats fp32 (the P100's paired half2
    #: arithmetic, 2x); 0: float16 arithmetic runs at the fp32 rate
    fp16_flops: float = 0.0
    #: fp32 lanes (CUDA cores) per SM: 128 on Maxwell, GP102 and Hopper, 64 on P100, V100 and
    #: A100 (NVIDIA's architecture whitepapers); with the SM count and peak they give the clock
    #: and how much shared-memory bandwidth each FLOP has
    sm_fp32_lanes: int = 128
    #: the tensor-core family whose fitted constants price its tensor-core kernels (Volta,
    #: Turing, Ampere, Hopper, Blackwell: ``tensor_core_params.json``); empty: no tensor cores
    tensor_family: str = ""
    #: dense TF32 tensor-core FLOP/s (Ampere and later); 0: no TF32
    tf32_flops: float = 0.0
    #: the architecture of a measured GPU (Maxwell, Pascal, Turing): the calibration's leave-
    #: one-architecture-out figures hold out every GPU of one
    architecture: str = ""

    @property
    def dram_bandwidth_Bps(self) -> float:
        """DRAM bandwidth in bytes per second."""
        return parse_bandwidth(self.dram_bandwidth)

    @property
    def measured(self) -> bool:
        """True when the kernel parameters were fitted to this GPU's own measurements."""
        return self.calibration is not None


GPUS = {
    "maxwell": GPUSpec("Titan X (Maxwell GM200)", 24, 6.6e12, "336.5GB/s", "12GiB", "pcie3x16",
                       "TitanX", "TitanX", architecture="Maxwell"),
    "pascal": GPUSpec("Tesla P100 SXM2", 56, 10.6e12, "732GB/s", "16GiB", "pcie3x16",
                      "P100", "P100", fp16_flops=21.2e12, sm_fp32_lanes=64,
                      architecture="Pascal"),
    "titanx_pascal": GPUSpec("Titan X (Pascal GP102)", 28, 11.0e12, "480GB/s", "12GiB",
                             "pcie3x16", "TitanX_Pascal", "TitanX_Pascal",
                             architecture="Pascal"),
    "titanxp": GPUSpec("Titan Xp", 30, 12.1e12, "547.7GB/s", "12GiB", "pcie3x16",
                       "TitanXp", "TitanXp", architecture="Pascal"),
    "volta": GPUSpec("Tesla V100 SXM2", 80, 15.7e12, "900GB/s", "16GiB", "nvlink2x3", "Pooled",
                     tensor_flops=125e12, tensor_dtypes=("float16",), sm_fp32_lanes=64,
                     tensor_family="Volta"),
    "ampere": GPUSpec("A100 SXM4 40GB", 108, 19.5e12, "1555GB/s", "40GiB", "pcie4x16", "Pooled",
                      tensor_flops=312e12, sm_fp32_lanes=64, tensor_family="Ampere",
                      tf32_flops=156e12),
    "hopper": GPUSpec("H100 SXM5", 132, 67e12, "3.35TB/s", "80GiB", "pcie5x16", "Pooled",
                      tensor_flops=989.4e12, tensor_family="Hopper", tf32_flops=494.5e12),
    "h100_pcie": GPUSpec("H100 PCIe", 114, 51e12, "2TB/s", "80GiB", "pcie5x16", "Pooled",
                         tensor_flops=756.5e12, tensor_family="Hopper", tf32_flops=378e12),
    "h200": GPUSpec("H200 SXM", 132, 67e12, "4.8TB/s", "141GB", "pcie5x16", "Pooled",
                    tensor_flops=989.4e12, tensor_family="Hopper", tf32_flops=494.5e12),
    "gh200": GPUSpec("GH200 (H100 96GB HBM3)", 132, 67e12, "4TB/s", "96GiB", "nvlink_c2c",
                     "Pooled", host_memory_bandwidth="500GB/s", host_memory_capacity="480GB",
                     tensor_flops=989.4e12, tensor_family="Hopper", tf32_flops=494.5e12),
    "a100_80gb": GPUSpec("A100 SXM4 80GB", 108, 19.5e12, "2039GB/s", "80GiB", "pcie4x16",
                         "Pooled", tensor_flops=312e12, sm_fp32_lanes=64, tensor_family="Ampere",
                         tf32_flops=156e12),
    "a100_pcie": GPUSpec("A100 PCIe 80GB", 108, 19.5e12, "1935GB/s", "80GiB", "pcie4x16",
                         "Pooled", tensor_flops=312e12, sm_fp32_lanes=64, tensor_family="Ampere",
                         tf32_flops=156e12),
    "b200": GPUSpec("B200 (HGX B200)", 148, 75e12, "8TB/s", "192GB", "pcie5x16", "Pooled",
                    tensor_flops=2.25e15, tensor_family="Blackwell", tf32_flops=1.125e15),
    "m40": GPUSpec("Tesla M40 (Maxwell GM200)", 24, 6.84e12, "288GB/s", "12GiB", "pcie3x16",
                   "M40", "M40", architecture="Maxwell"),
    "gtx1080ti": GPUSpec("GeForce GTX 1080 Ti (Pascal GP102)", 28, 11.34e12, "484GB/s",
                         "11GiB", "pcie3x16", "GTX1080Ti", "GTX1080Ti",
                         architecture="Pascal"),
    "t4": GPUSpec("T4 (Turing TU104)", 40, 8.14e12, "320GB/s", "16GiB", "pcie3x16", "T4",
                  "T4", tensor_flops=65e12, tensor_dtypes=("float16",), sm_fp32_lanes=64,
                  architecture="Turing", tensor_family="Turing"),
}

#: other names of presets: the product a preset named for its architecture models (``h100``:
#: the H100 SXM5 of ``hopper``; ``h100_pcie`` is a preset of its own)
GPU_ALIASES = {"h100": "hopper", "h100_sxm": "hopper", "v100": "volta", "p100": "pascal"}


def gpu_preset(name: str) -> str:
    """The preset ``name`` names: itself, or the preset an alias of :data:`GPU_ALIASES`
    stands for (an argparse ``type``: the option's choices then check the preset)."""
    return GPU_ALIASES.get(name, name)


def gpu_choices() -> str:
    """Every preset and alias, sorted: the metavar of the option that picks a GPU."""
    return "{" + ",".join(sorted([*GPUS, *GPU_ALIASES])) + "}"

