"""An algorithm-aware model of cuDNN/cuBLAS training kernels: the time of one layer's forward,
backward-data and backward-filter kernels on a GPU described by its SM count, peak FLOP/s and
DRAM bandwidth, with a handful of per-architecture parameters fitted to measured kernels
(:mod:`sst_cdma.model.calibration`, ``sst-cdma calibrate``).

What decides a kernel's time, and how the model prices it (docs/kernel_model.md says more):

* **Algorithm.** A convolution pass can run as an implicit GEMM, as Winograd (3x3, stride 1:
  fused F(2x2,3x3) saves 2.25x of the multiplies, non-fused F(4x4,3x3) 4x at the price of
  transformed tensors in DRAM), as FFT (whole planes: pointwise complex products plus
  transforms) or FFT-tiling (32x32 tiles). Each candidate is priced and the fastest one that
  fits the workspace limit is picked, as cuDNN's ``cudnnFind*`` does. A depthwise layer (one
  input channel per group) runs as one direct, memory-bound kernel for all its groups; a 1x1
  filter on a one-pixel plane as the cuBLAS GEMM of a fully connected layer.
* **Tiles and waves.** A GEMM of M x N x K is cut into output tiles (128x128 down to 128x16
  and 16x128); the tiles run in waves of (SMs x tiles per SM), so a layer too small to fill the
  GPU pays for a whole wave. When the tiles cannot fill one wave the reduction is split
  (split-K: 2-16 slices within two waves; backward-filter on a 16-wide tile as many as fill one
  or two waves; never in Winograd's GEMMs, batched over the transform points) and the partial
  sums cost DRAM traffic. Smaller tiles reach a lower share of
  peak (less reuse per operand loaded): efficiency = peak share x I / (I + ``tile_reuse``),
  with I the tile's multiply-adds per operand element loaded.
* **Shared memory.** Backward-filter reduces along both operands' contiguous axis, so its
  tiles are staged through shared memory (32 words per clock per SM): a tile whose threads read
  more words per multiply-add than that feeds runs below peak on a wide SM
  (``Hardware.sm_fp32_lanes``, 128 on Maxwell, GP102 and Hopper) and at peak on a 64-lane one
  (P100, V100, A100).
* **Memory.** Every kernel moves at least its operands through DRAM at
  ``memory_efficiency`` x peak bandwidth; the kernel takes the slower of compute and memory.
  (``memory_efficiency`` absorbs the operands' re-reads, which the ideal byte count leaves
  out.)
* **Planes.** Tensors are NCHW, so a GEMM running over N x plane loads one plane at a time: a
  small plane (7x7, 14x14) loads in short, poorly coalesced runs. The share of peak falls as
  plane / (plane + ``plane_elements``).
* **Launch.** The host enqueues kernels ahead of the GPU, one cuDNN call or GEMM every
  ``launch_s`` (its issue interval): a call costs ``max(work, launch_s)`` (a grouped
  convolution issues one call per group, ``max(work, groups x launch_s)``), so the launch
  costs time only for kernels shorter than the host's issue rate. The first kernel after a
  synchronization waits for the host to issue it: the GPU element adds ``launch_s`` to it
  (components/kernel_times.py ``after_sync_ps``).
* **Backward passes.** Backward-data is a convolution of dY with the flipped filters; a strided
  layer's runs at its own efficiency (``strided_dgrad_efficiency``). Backward-filter is a GEMM
  whose reduction runs over N x P x Q (split-K). Each backward pass has its own efficiency
  factor.

**Tensor cores.** 16-bit convolutions and GEMMs run on tensor cores where the GPU has them
for that type (``Hardware.tensor_flops``, ``tensor_dtypes``), and fp32 ones as TF32 where asked
(``Hardware.tf32_flops``): the same tiles and waves with tensor-core tiles (256x128 down to
64x64), channels padded to 16 bytes, and their own algorithm families (the implicit GEMMs and
the one-pixel GEMM; Winograd and FFT run on tensor cores in no cuDNN here) and their own
constants (:class:`TensorCores`: a :class:`KernelParams` fitted to the T4's tensor-core sheet,
its cuBLAS factor refitted to the best bf16 GEMM of A100s and H100s). Elsewhere 16-bit GEMMs run
at the fp32 rate, or at ``Hardware.fp16_flops`` (the P100's paired half arithmetic). Fused
attention (:func:`price_attention`: FlashAttention-2 or -3) is priced block by block: CTAs of
128 queries (forward) or 128 keys (backward) over 128x128 blocks of the score matrix, a causal
mask skipping the blocks above the diagonal, the CTAs scheduled longest first on the SMs, at
the kernel's fitted share of the tensor peak, which grows with the head dimension
(:class:`AttentionParams`).

Memory-bound kinds (pooling, ReLU, LRN, batchnorm, concat, add, the optimizer step) are not
priced here: the GPU runs them at its HBM's achievable bandwidth, at least ``launch_s``
(``workloads/kernel_pricing.py``).

Everything is vectorized over problems with numpy so one call prices a whole calibration set
(a GEMM's tile and split candidates too, kept by content across a fit's iterations); the
simulator prices each shape and pass once per GPU and constants and keeps the price
(:func:`price_conv`, :func:`price_gemm`, :func:`price_attention`;
:mod:`~sst_cdma.model.price_memo`).
"""
from __future__ import annotations

import functools
import heapq
import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record
from sst_cdma.model.dtypes import DTYPES, HALF_DTYPES  # the model prices these element types
from sst_cdma.model.price_memo import PriceMemo, array_key

__all__ = ["ALGORITHMS", "ALGORITHM_FAMILIES", "PASSES", "ATTENTION_PASSES", "DTYPES", "HALF_DTYPES", "Hardware",
           "KernelParams", "KernelPrice", "ConvProblem", "ModelError", "AttentionParams",
           "TensorCores", "ATTENTION_KERNELS", "conv_times", "gemm_times", "issued",
           "price_attention", "price_conv",
           "price_convs", "price_gemm"]

#: Convolution algorithm families, as cuDNN names them (forward).
ALGORITHMS = ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT",
              "FFT_TILING", "GEMM", "DEPTHWISE")
#: The convolution algorithms :func:`conv_times` prices together.
ALGORITHM_FAMILIES = {"gemm": ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DEPTHWISE"),
                      "winograd": ("WINOGRAD", "WINOGRAD_NONFUSED"),
                      "fft": ("FFT", "FFT_TILING")}
#: The passes of a convolution.
PASSES = ("fwd", "bwd_data", "bwd_filter")
#: The passes of fused attention.
ATTENTION_PASSES = ("fwd", "bwd")
#: The fused attention kernels priced: FlashAttention-2 and FlashAttention-3 (Hopper only).
ATTENTION_KERNELS = ("flash2", "flash3")

# Output tiles (rows x columns) of the GEMM kernels and how many of them one SM holds at once;
# the skinny ones serve problems with a narrow side (few channels, few filters, small batch).
_TILES = ((128, 128, 1), (128, 64, 2), (64, 128, 2), (64, 64, 2), (128, 32, 4), (32, 128, 4),
          (128, 16, 4), (16, 128, 4))
_SPLITS = (1, 2, 4, 8, 16)
_MIN_SPLIT_K = 64           # a split-K slice reduces over at least this many elements
# Backward-filter on a 16-wide tile (a gradient with few filters or few input taps: first layers
# of one to three channels) also splits its long reduction as finely as one or two whole waves
# of the GPU take
_SKINNY = 16
_FILL_WAVES = (1, 2)
_FFT_TILE = 32              # FFT-tiling's tile edge
_ELEMENT = 4                # bytes per float32 element (the calibration data is fp32)
# Shared memory delivers 32 four-byte words per clock per SM (32 banks) on every GPU here; a
# GEMM tile's 256 threads each hold a (tm/16) x (tn/16) block of the output and read that many
# words of each operand per reduction step.
_SMEM_WORDS_PER_CLOCK = 32
_THREAD_GRID = 16
# Output tiles of tensor-core GEMM kernels (cuBLAS/CUTLASS on Ampere and Hopper: 128x256 and
# 256x128 fill an SM's shared memory alone, 128x128 and smaller fit two or more at once).
_TC_TILES = ((128, 256, 1), (256, 128, 1), (128, 128, 2), (128, 64, 2), (64, 128, 2),
             (64, 64, 4))
_ATTENTION_TILE = 128       # queries (forward) or keys (backward) per fused-attention CTA
_TC_CHANNEL_BYTES = 16      # tensor-core convolutions pad channels to 16 bytes (8 fp16, 4 tf32)
# prices of single layers' kernels computed (:func:`price_convs`, :func:`price_gemm`)
_CONV_PRICES = PriceMemo(1 << 16)
_GEMM_PRICES = PriceMemo(1 << 16)
_ATTENTION_PRICES = PriceMemo(1 << 16)
# GEMM candidates computed (by their inputs' contents; a calibration set's are a few MiB)
# convolution batches a fit prices at many constants, with what follows from their shapes
# (:meth:`_Conv.cached`), by the arrays' contents
_PREPARED = PriceMemo(256)
_CANDIDATES = PriceMemo(4096, budget=256 * 2**20,
                        weigh=lambda found: sum(a.nbytes for a in found.values()))


class ModelError(ValueError):
    """A layer shape the kernel model cannot price."""


@frozen_record
class Hardware(FrozenRecord):
    """What the kernel model needs to know about a GPU: SMs, peak FLOP/s (fp32) and DRAM
    bandwidth in bytes per second; for 16-bit types, the dense tensor-core peak (0: no tensor
    cores), the types its tensor cores take, and the float16 rate without tensor cores where it
    beats fp32 (0: none); and the fp32 lanes of one SM (128 on Maxwell, GP102, GeForce Ampere
    and Ada, and Hopper; 64 on P100, V100, Turing and A100), which set how much shared-memory
    bandwidth each FLOP has; and the dense TF32 tensor-core peak (0: no TF32, before Ampere)."""

    sms: int
    peak_flops: float
    dram_bandwidth: float
    tensor_flops: float = 0.0
    tensor_dtypes: tuple[str, ...] = HALF_DTYPES
    fp16_flops: float = 0.0
    sm_fp32_lanes: int = 128
    tf32_flops: float = 0.0

    def on_tensor_cores(self, dtype: str) -> bool:
        """True when GEMMs and attention in ``dtype`` run on this GPU's tensor cores."""
        return self.tensor_flops > 0 and dtype in self.tensor_dtypes

    def simt_flops(self, dtype: str) -> float:
        """Peak FLOP/s of ``dtype`` arithmetic without tensor cores: the fp32 rate, or
        ``fp16_flops`` for float16 where the GPU has it."""
        return self.fp16_flops if dtype == "float16" and self.fp16_flops > 0 else self.peak_flops


@frozen_record
class KernelParams(FrozenRecord):
    """Per-architecture parameters of the kernel model (all dimensionless except ``launch_s``).

    ``gemm_efficiency``: share of peak FLOP/s a large GEMM tile reaches; ``tile_reuse``: how fast
    that share falls for small tiles; ``tile_fill_k``: a tile's fixed prologue and epilogue, in
    reduction steps; ``winograd_efficiency``/``fft_efficiency``: the share of peak the
    transformed algorithms reach on their (reduced) arithmetic;
    ``bwd_data_efficiency``/``bwd_filter_efficiency``: factors on the share for the backward
    kernels, ``strided_dgrad_efficiency`` a further one for strided layers' backward-data;
    ``blas_efficiency``: factor for cuBLAS GEMMs (fully connected layers);
    ``memory_efficiency``: share of peak DRAM bandwidth a convolution's operand traffic reaches
    (its re-reads included); ``launch_s``: the host's issue interval, one cuDNN call or GEMM
    each (a call takes at least this long, :func:`issued`; the first after a synchronization
    waits this long for the host);
    ``plane_elements``: how fast the share falls for small NCHW planes."""

    gemm_efficiency: float = 0.75
    tile_reuse: float = 8.0
    tile_fill_k: float = 32.0
    winograd_efficiency: float = 0.6
    fft_efficiency: float = 0.3
    bwd_data_efficiency: float = 1.0
    strided_dgrad_efficiency: float = 0.5
    bwd_filter_efficiency: float = 0.8
    blas_efficiency: float = 1.0
    memory_efficiency: float = 0.75
    launch_s: float = 5e-6
    plane_elements: float = 16.0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names, in declaration order."""
        return tuple(f.name for f in fields(cls))

    def as_dict(self) -> dict[str, float]:
        """The parameters as a plain mapping."""
        return asdict(self)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "") -> "KernelParams":
        """Parameters from a mapping that must name each one with a positive number."""
        missing = [n for n in cls.names() if n not in values]
        unknown = sorted(set(values) - set(cls.names()))
        prefix = f"{where}: " if where else ""
        if missing or unknown:
            raise ModelError(f"{prefix}kernel parameters: "
                             + (f"missing {missing[0]!r}" if missing else f"unknown {unknown[0]!r}"))
        out = {}
        for n in cls.names():
            v = values[n]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise ModelError(f"{prefix}kernel parameter {n!r} must be a positive number, "
                                 f"got {v!r}")
            out[n] = float(v)
        return cls(**out)


@frozen_record
class AttentionParams(FrozenRecord):
    """A fused attention kernel's constants on one GPU family: its share of the dense tensor
    peak is ``efficiency`` x d / (d + ``head_dim_half``) for head dimension d (per score
    element the softmax costs the same at any d, the two matrix products 4 d FLOPs), forward
    and backward alike (the measurements time the two together). ``fitted_on`` says which
    measurements gave them, or that none did."""

    efficiency: float
    head_dim_half: float
    fitted_on: str = ""

    def share(self, head_dim: int) -> float:
        """Share of the tensor peak at ``head_dim``."""
        return self.efficiency * head_dim / (head_dim + self.head_dim_half)


@dataclass(frozen=True, eq=False)
class TensorCores:
    """The tensor-core path of one GPU family: ``params`` price its convolutions and GEMMs (the
    same fields as the fp32 path's, fitted to tensor-core kernels), ``attention`` its fused
    attention kernels by name (:data:`ATTENTION_KERNELS`; a kernel the family cannot run is
    absent), ``family`` names it and ``fitted_on`` says what the GEMM and convolution
    constants were fitted on. Compared and hashed by identity (one per loaded family)."""

    family: str
    params: KernelParams
    attention: Mapping[str, AttentionParams]
    fitted_on: str = ""


@frozen_record
class ConvProblem(FrozenRecord):
    """One convolution: batch N, input C x H x W, K filters of R x S, padding, stride,
    dilation and groups (Caffe/cuDNN semantics, floor output size)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1

    @property
    def p(self) -> int:
        """Output height."""
        return (self.h + 2 * self.pad_h - self.dilation_h * (self.r - 1) - 1) // self.stride_h + 1

    @property
    def q(self) -> int:
        """Output width."""
        return (self.w + 2 * self.pad_w - self.dilation_w * (self.s - 1) - 1) // self.stride_w + 1

    def check(self, layer: str = "") -> None:
        """Raise :class:`ModelError` (naming ``layer``) unless the model can price this shape."""
        what = f"layer {layer!r}: " if layer else ""
        for name in ("n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "dilation_h",
                     "dilation_w", "groups"):
            if getattr(self, name) < 1:
                raise ModelError(f"{what}convolution {name} must be >= 1, got "
                                 f"{getattr(self, name)}")
        if self.pad_h < 0 or self.pad_w < 0:
            raise ModelError(f"{what}convolution padding must be >= 0")
        if self.c % self.groups or self.k % self.groups:
            raise ModelError(f"{what}{self.groups} groups do not divide {self.c} input and "
                             f"{self.k} output channels")
        if self.p < 1 or self.q < 1:
            raise ModelError(f"{what}a {self.r}x{self.s} filter (dilation "
                             f"{self.dilation_h}x{self.dilation_w}) is larger than its padded "
                             f"{self.h + 2 * self.pad_h}x{self.w + 2 * self.pad_w} input")


@frozen_record
class KernelPrice(FrozenRecord):
    """One kernel's modelled time, the algorithm picked and the workspace it needs."""

    seconds: float
    algorithm: str
    workspace_bytes: int


# -- vectorized building blocks --------------------------------------------------------------

def _gemm_candidates(m: Any, n: Any, k: Any, sms: int, batch: Any = 1,
                     tile_set: Sequence[tuple[int, int, int]] = _TILES,
                     fill_skinny: bool = False, split_k: bool = True,
                     prune: bool = False) -> dict[str, np.ndarray]:
    """Every (tile of ``tile_set``, split) way to run ``batch`` independent GEMMs of m x n x k
    (arrays) on ``sms`` SMs. Per problem and candidate (shape (problems, candidates)): ``flops`` padded to
    whole waves of whole tiles, ``fill`` the same count for one reduction step (the tiles'
    fixed prologue and epilogue cost, priced as ``tile_fill_k`` extra reduction steps),
    ``reuse`` the tile's multiply-adds per operand element loaded, ``extra_bytes`` the DRAM
    traffic of split-K partial sums, ``smem_words`` the shared-memory words a thread reads per
    multiply-add. Splits are 2-16 slices within two waves; ``fill_skinny`` adds, for tiles with
    a 16-wide side, the split counts that fill one and two whole waves; ``split_k=False`` (a
    batched GEMM, which spreads over its batch and tiles only) leaves the reduction whole.

    The candidates do not depend on the fitted constants, so they are kept
    (:mod:`~sst_cdma.model.price_memo`, by the arrays' contents): a fit, which prices the same
    calibration set at many constants, computes them once. The arrays returned are
    read-only. ``prune``: without the candidates another one beats at any constants
    (:func:`_undominated`; the fastest is the same, to the bit), which costs more once and
    less at each pricing after: for a fit."""
    m, n, k, batch = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (m, n, k, batch)))
    key = (sms, tuple(tile_set), fill_skinny, split_k, prune, array_key(m, n, k, batch))
    found = _CANDIDATES.get(key)
    if found is None:
        found = _candidate_arrays(m, n, k, sms, batch, tuple(tile_set), fill_skinny, split_k)
        if prune:
            found = _undominated(found)
        for a in found.values():
            a.flags.writeable = False
        _CANDIDATES.put(key, found)
    return found


def _candidate_arrays(m: np.ndarray, n: np.ndarray, k: np.ndarray, sms: int, batch: np.ndarray,
                      tile_set: tuple[tuple[int, int, int], ...], fill_skinny: bool,
                      split_k: bool) -> dict[str, np.ndarray]:
    """:func:`_gemm_candidates`' arrays, every candidate at once along the last axis (the same
    arithmetic, in the same order, as pricing each candidate alone)."""
    cols: list[tuple[int, Any]] = []   # (tile index, split) per candidate, in order
    tiles_of = [batch * np.ceil(m / tm) * np.ceil(n / tn) for tm, tn, _ in tile_set]
    for t, (tm, tn, per_sm) in enumerate(tile_set):
        cols += [(t, float(split)) for split in (_SPLITS if split_k else (1,))]
        if fill_skinny and min(tm, tn) <= _SKINNY:
            # as many slices as fill the waves, each at least _MIN_SPLIT_K long
            cols += [(t, np.maximum(1.0, np.minimum(np.floor(waves * sms * per_sm / tiles_of[t]),
                                                    np.floor(k / _MIN_SPLIT_K))))
                     for waves in _FILL_WAVES]
    idx = [t for t, _ in cols]
    shape = m.shape + (len(cols),)
    split = np.stack([np.broadcast_to(s, m.shape) for _, s in cols], axis=-1)
    tiles = np.stack(tiles_of, axis=-1)[..., idx]
    tm = np.array([float(tile_set[t][0]) for t in idx])  # type: ignore[assignment]
    tn = np.array([float(tile_set[t][1]) for t in idx])  # type: ignore[assignment]
    slots = np.array([float(sms * tile_set[t][2]) for t in idx])
    m1, n1, k1, b1 = (x[..., None] for x in (m, n, k, batch))
    whole = split == 1
    # a slice reduces over at least _MIN_SPLIT_K elements (short ones are padded), so a longer
    # reduction never prices lower
    kk = np.where(whole, k1, np.maximum(np.ceil(k1 / split), _MIN_SPLIT_K))
    ok = whole | (tiles * split <= 2 * slots)
    per_wave = np.where(ok, np.ceil(tiles * split / slots) * slots * 2.0 * tm * tn, np.inf)
    reuse = np.array([tile_set[t][0] * tile_set[t][1] / (tile_set[t][0] + tile_set[t][1])
                      for t in idx])
    words = np.array([(tile_set[t][0] + tile_set[t][1]) * _THREAD_GRID
                      / (tile_set[t][0] * tile_set[t][1]) for t in idx])
    return {"flops": per_wave * kk, "fill": per_wave,
            "reuse": np.broadcast_to(reuse, shape).copy(),
            "extra_bytes": np.where(whole, 0.0, 2.0 * split * b1 * m1 * n1 * _ELEMENT),
            "smem_words": np.broadcast_to(words, shape).copy()}


def _undominated(c: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The candidates ``c`` (problems x candidates) without those another candidate of the same
    problem dominates: no more FLOPs, fill, split-K bytes or shared-memory words per
    multiply-add, and no less reuse (the first of equal ones is kept). A dominated candidate is
    never faster, at any constants and on any GPU: each of the time's operations is monotone in
    these, and the values differ by far more than a rounding or not at all, so the fastest
    candidate's time is the same to the bit. Each problem's kept candidates are padded to the
    longest row by repeating its first."""
    # smaller is better in every column
    cols = np.stack([c["flops"], c["fill"], c["extra_bytes"], c["smem_words"], -c["reuse"]],
                    axis=-1)
    no_worse = np.all(cols[..., :, None, :] <= cols[..., None, :, :], axis=-1)
    better = np.any(cols[..., :, None, :] < cols[..., None, :, :], axis=-1)
    count = cols.shape[-2]
    earlier = np.arange(count)[:, None] < np.arange(count)[None, :]
    # beaten[..., i, j]: candidate i beats candidate j (or equals it and comes first)
    beaten = no_worse & (better | earlier)
    kept = ~beaten.any(axis=-2)
    width = max(int(kept.sum(axis=-1).max(initial=1)), 1)
    # each row's kept candidates first, in their order, then its first kept one repeated
    order = np.argsort(~kept, axis=-1, kind="stable")[..., :width]
    first = order[..., :1]
    slots = np.arange(width)
    order = np.where(slots < kept.sum(axis=-1, keepdims=True), order, first)
    return {key: np.take_along_axis(a, order, axis=-1) for key, a in c.items()}


def _gemm_time(c: Mapping[str, np.ndarray], hw: Hardware, kp: KernelParams, efficiency: Any,
               dram: Any, peak: Optional[float] = None,
               smem_bound: bool = False) -> np.ndarray:
    """Seconds of the fastest candidate of :func:`_gemm_candidates` at ``efficiency`` x the
    tile's share of ``peak`` (default the fp32 peak), moving ``dram`` bytes of operands: the
    slower of compute and memory. ``smem_bound``: the tile's share is further capped by the
    shared-memory bandwidth its operand reads need (:func:`_smem_share`)."""
    compute, memory = _gemm_bounds(c, hw, kp, efficiency, dram, peak, smem_bound)
    return np.maximum(compute, memory).min(axis=-1)


def _gemm_bounds(c: Mapping[str, np.ndarray], hw: Hardware, kp: KernelParams, efficiency: Any,
                 dram: Any, peak: Optional[float] = None,
                 smem_bound: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_gemm_time`'s compute and memory seconds of every candidate (problems x
    candidates), before the slower of the two and the fastest candidate are taken."""
    tile_reuse, fill_k = kp.tile_reuse, kp.tile_fill_k
    share = np.asarray(efficiency, dtype=float)
    eff = (share[..., None] if share.ndim else share) * c["reuse"] / (c["reuse"] + tile_reuse)
    if smem_bound:
        eff = eff * _smem_share(c["smem_words"], hw)
    compute = (c["flops"] + fill_k * c["fill"]) / ((hw.peak_flops if peak is None else peak)
                                                    * eff)
    memory = (np.asarray(dram, dtype=float)[..., None] + c["extra_bytes"]) / \
        (hw.dram_bandwidth * kp.memory_efficiency)
    return compute, memory


def _smem_share(words_per_fma: np.ndarray, hw: Hardware) -> np.ndarray:
    """The share of peak FLOP/s the shared memory can feed when each multiply-add reads
    ``words_per_fma`` words: 32 words per clock per SM against one multiply-add per lane per
    clock. A wide SM (128 lanes) feeds a 64x64 tile (0.5 words per multiply-add) at half its
    peak; a P100 or V100 SM (64 lanes) feeds it in full."""
    return np.minimum(1.0, _SMEM_WORDS_PER_CLOCK / (hw.sm_fp32_lanes * words_per_fma))


def issued(seconds: Any, kp: KernelParams, launches: Any = 1) -> np.ndarray:
    """The time ``launches`` back-to-back calls of ``seconds`` of work take when the host
    enqueues them ahead of the GPU, one every ``kp.launch_s``: the slower of the work and the
    host's issue rate (the launch is hidden behind any longer kernel)."""
    return np.maximum(seconds, kp.launch_s * np.asarray(launches, dtype=float))


def _memory_s(nbytes: Any, hw: Hardware, kp: KernelParams) -> np.ndarray:
    return np.asarray(nbytes, dtype=float) / (hw.dram_bandwidth * kp.memory_efficiency)


class _Conv:
    """The arrays of a batch of convolution problems (keys n c h w k r s pad_h pad_w stride_h
    stride_w, optional dilation_h, dilation_w, groups) and what follows from them: the padded
    and output planes, channels per group, the tensors' bytes at ``element`` bytes each, and
    which layers Winograd and FFT may serve. ``tensor``: on tensor cores, whose GEMMs take the
    channels padded to 16 bytes (``gcg``/``gkg``, the GEMM's channels per group)."""

    def __init__(self, prob: Mapping[str, Any], element: int = _ELEMENT,
                 tensor: bool = False, prune: bool = False) -> None:
        f = {key: np.asarray(v, dtype=float) for key, v in prob.items()}
        self.one = one = np.ones_like(f["n"])
        self.dh, self.dw, self.g = (f.get(key, one) for key in ("dilation_h", "dilation_w",
                                                               "groups"))
        self.n, self.c, self.h, self.w, self.k, self.r, self.s = (
            f[x] for x in ("n", "c", "h", "w", "k", "r", "s"))
        self.pad_h, self.pad_w = f["pad_h"], f["pad_w"]
        self.sh, self.sw = f["stride_h"], f["stride_w"]
        self.hp, self.wp = self.h + 2 * self.pad_h, self.w + 2 * self.pad_w
        self.p = np.floor((self.hp - self.dh * (self.r - 1) - 1) / self.sh) + 1
        self.q = np.floor((self.wp - self.dw * (self.s - 1) - 1) / self.sw) + 1
        self.cg, self.kg = self.c / self.g, self.k / self.g
        self.element, self.tensor = element, tensor
        #: price the GEMMs' undominated candidates only (:func:`_gemm_candidates`), and keep
        #: what does not depend on the constants (:meth:`cached`)
        self.prune = prune
        self._kept: dict[Any, Any] = {}
        align = _TC_CHANNEL_BYTES // element if tensor else 1
        self.gcg, self.gkg = (np.ceil(x / align) * align for x in (self.cg, self.kg))
        self.x_bytes, self.y_bytes, self.w_bytes = (
            self.n * self.c * self.h * self.w * element,
            self.n * self.k * self.p * self.q * element,
            self.k * self.cg * self.r * self.s * element)
        self.dense = (self.sh == 1) & (self.sw == 1) & (self.dh == 1) & (self.dw == 1) & \
            (self.g == 1)
        self.wino_ok = self.dense & (self.r == 3) & (self.s == 3)

    def is_kept(self, key: Any) -> bool:
        """Whether :meth:`cached` holds ``key``."""
        return key in self._kept

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, which must not depend on the constants; kept under ``key`` (with the
        pass and hardware it depends on) when pricing a fit's problems (``prune``)."""
        if not self.prune:
            return make()
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]


def _conv_batch(prob: Mapping[str, Any], element: int, tensor: bool, prune: bool) -> _Conv:
    """The :class:`_Conv` of ``prob``; for a fit (``prune``) the one kept from the last pricing
    of the same arrays, with what it keeps."""
    if not prune:
        return _Conv(prob, element, tensor)
    names = sorted(prob)
    key = (element, tensor, tuple(names),
           array_key(*(np.asarray(prob[x], dtype=float) for x in names)))
    found = _PREPARED.get(key)
    if found is None:
        found = _Conv(prob, element, tensor, prune=True)
        _PREPARED.put(key, found)
    return found


@record
class _PassShape(Record):
    """One pass of a batch of convolutions as GEMMs: the implicit GEMM's M x N x K and share of
    peak (``eff``, the plane factor included), its DRAM bytes, Winograd's GEMM M x N x K per
    tile, and the plane the GEMM runs over."""

    gm: Any
    gn: Any
    gk: Any
    eff: Any
    dram: Any
    wino: tuple[Any, Any, Any]
    out_h: Any
    out_w: Any


def _pass_shape(cv: _Conv, pass_: str, kp: KernelParams) -> _PassShape:
    """The GEMM shape of ``pass_`` over the convolutions ``cv``."""
    gm, gn, gk, dram, wino, out_h, out_w, plane, strided = cv.cached(
        ("shape", pass_), lambda: _pass_geometry(cv, pass_))
    if pass_ == "fwd":
        eff = 1.0
    elif pass_ == "bwd_data":
        eff = kp.bwd_data_efficiency * np.where(strided, kp.strided_dgrad_efficiency, 1.0)  # type: ignore[assignment]
    else:
        eff = kp.bwd_filter_efficiency
    # NCHW tensors: a GEMM over N x plane reads runs of one plane at a time, so small planes
    # (7x7, 14x14) load in short, poorly coalesced runs
    eff = eff * plane / (plane + kp.plane_elements)
    return _PassShape(gm, gn, gk, eff, dram, wino, out_h, out_w)


def _pass_geometry(cv: _Conv, pass_: str) -> tuple[Any, ...]:
    """What :func:`_pass_shape` takes from the shapes alone: the implicit GEMM's M, N, K, its
    DRAM bytes, Winograd's GEMM M x N x K per tile, the plane the GEMM runs over (height,
    width, elements) and which layers are strided."""
    n, h, w, p, q, cg, kg = cv.n, cv.h, cv.w, cv.p, cv.q, cv.gcg, cv.gkg
    r, s, sh, sw = cv.r, cv.s, cv.sh, cv.sw
    strided = (sh > 1) | (sw > 1)
    if pass_ == "fwd":
        gm, gn, gk = n * p * q, kg, cg * r * s
        dram = cv.x_bytes + cv.w_bytes + cv.y_bytes
        # Winograd GEMMs: tiles of the output, n = filters, reduce over input channels
        wm, wn, wk = n, kg, cg
    elif pass_ == "bwd_data":
        gm, gn, gk = n * h * w, cg, kg * r * s / (sh * sw)
        dram = cv.y_bytes + cv.w_bytes + cv.x_bytes
        wm, wn, wk = n, cg, kg
    else:
        gm, gn, gk = kg, cg * r * s, n * p * q
        dram = cv.x_bytes + cv.y_bytes + cv.w_bytes
        wm, wn, wk = kg, cg, n
    out_h, out_w = (h, w) if pass_ == "bwd_data" else (p, q)
    return gm, gn, gk, dram, (wm, wn, wk), out_h, out_w, out_h * out_w, strided


def conv_times(prob: Mapping[str, Any], pass_: str, hw: Hardware, kp: KernelParams,
               workspace_limit: Any = math.inf, *, tensor_peak: float = 0.0,
               element: int = _ELEMENT, prune: bool = False,
               keep: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """Modelled time of ``pass_`` (``fwd``, ``bwd_data``, ``bwd_filter``) for arrays of
    convolutions (keys n c h w k r s pad_h pad_w stride_h stride_w, optional dilation_h,
    dilation_w, groups). Returns ``seconds`` (fastest algorithm within ``workspace_limit``
    bytes, launches included), ``algorithm`` (index into :data:`ALGORITHMS`), ``workspace``
    (bytes at 4 per element), ``by_algorithm`` (problems x algorithms, inf where the
    algorithm does not apply) and ``work`` (the same before the host's issue interval).
    ``tensor_peak`` > 0: on tensor cores at that dense peak (``kp``
    the tensor-core path's constants), operands of ``element`` bytes; the implicit GEMMs and
    the one-pixel GEMM run there, Winograd and FFT not at all, depthwise at the fp32 rate.
    ``prune``: the same numbers, faster when the same problems are priced at many constants
    (a fit; :func:`_gemm_candidates`); then ``keep`` may give, by algorithm, the ``work`` of
    an earlier result for the same problems, pass and GPU (with ``prune``) at constants that
    leave those algorithms' times as they were: the families of :data:`ALGORITHM_FAMILIES`
    kept whole are not priced again."""
    if pass_ not in PASSES:
        raise ModelError(f"unknown pass {pass_!r} (one of {', '.join(PASSES)})")
    cv = _conv_batch(prob, element, tensor_peak > 0, prune)
    ps = _pass_shape(cv, pass_, kp)
    inf = np.full(cv.n.shape, np.inf)
    zeros = np.zeros(cv.n.shape)
    times = dict.fromkeys(ALGORITHMS, inf)
    space = dict.fromkeys(ALGORITHMS, zeros)
    # an earlier pricing of these problems holds the workspaces (what keep leaves out)
    keep = keep if keep and cv.is_kept(("calls", pass_)) else {}
    pricers = {"gemm": lambda: _price_gemm_algorithms(cv, ps, pass_, hw, kp, times, space,
                                                      tensor_peak),
               "winograd": lambda: _price_winograd(cv, ps, pass_, hw, kp, times, space),
               "fft": lambda: _price_fft(cv, ps, pass_, hw, kp, times, space)}
    for family, price in pricers.items():
        if family != "gemm" and cv.tensor:
            continue
        if all(a in keep for a in ALGORITHM_FAMILIES[family]):
            times.update({a: keep[a] for a in ALGORITHM_FAMILIES[family]})
        else:
            price()
    return _fastest_within(cv, times, space, kp, workspace_limit, pass_)


def _price_gemm_algorithms(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware,
                           kp: KernelParams, times: dict[str, Any],
                           space: dict[str, Any], tensor_peak: float = 0.0) -> None:
    """Price, into ``times`` and ``space``, the GEMM-like algorithms: the implicit GEMMs, the
    explicit GEMM of a one-pixel plane and the direct depthwise kernel (on tensor cores at
    ``tensor_peak`` where it is > 0, the depthwise kernel excepted)."""
    g = cv.g
    # implicit GEMM over the im2col matrix (precomputed offsets: a small index workspace).
    # Backward-filter reduces along both operands' contiguous axis (dY and X over N x plane),
    # so its SIMT tiles are fed from shared memory at the rate the SM's banks allow (tensor
    # cores load their fragments from shared memory in whole matrices)
    tiles = _TC_TILES if cv.tensor else _TILES
    cand = cv.cached(("implicit", pass_, hw.sms), lambda: _gemm_candidates(
        ps.gm, ps.gn, ps.gk, hw.sms, g, tiles, fill_skinny=pass_ == "bwd_filter", prune=cv.prune))
    gemm = _gemm_time(cand, hw, kp,
                      kp.gemm_efficiency * ps.eff, ps.dram, tensor_peak or None,
                      smem_bound=pass_ == "bwd_filter" and not cv.tensor)
    times["IMPLICIT_PRECOMP_GEMM"] = gemm
    # without workspace for its offsets: the model cannot tell it apart, so it is only picked
    # where a zero workspace limit rules the precomputed variant out
    times["IMPLICIT_GEMM"] = gemm * (1 + 1e-9)
    if pass_ == "fwd":
        space["IMPLICIT_PRECOMP_GEMM"] = ps.gk * 8.0

    one_pixel, gemm_shape, dtype = cv.cached(("one_pixel", pass_),
                                             lambda: _one_pixel_gemm(cv, pass_))

    def one_pixel_gemm() -> np.ndarray:
        m, n, k = (x[one_pixel] for x in gemm_shape)
        cand, dram, peak = cv.cached(("one_pixel_gemm", pass_, hw, tensor_peak),
                                     lambda: _gemm_terms(m, n, k, hw, g[one_pixel], dtype,
                                                         tensor_peak if cv.tensor else None,
                                                         cv.prune))
        return _gemm_time(cand, hw, kp, kp.gemm_efficiency * kp.blas_efficiency, dram, peak)

    times["GEMM"] = _where(one_pixel, one_pixel_gemm)
    depthwise, direct_flops = cv.cached("depthwise", lambda: _depthwise(cv))
    times["DEPTHWISE"] = np.where(depthwise, np.maximum(
        direct_flops / (hw.peak_flops * kp.gemm_efficiency * ps.eff),
        _memory_s(ps.dram, hw, kp)), np.inf)


def _where(rows: np.ndarray, values: Callable[[], np.ndarray]) -> np.ndarray:
    """Infinity but at ``rows`` (a mask): ``values()``, computed for those rows alone (the same
    numbers, row by row, as for all of them)."""
    out = np.full(rows.shape, np.inf)
    if rows.any():
        out[rows] = values()
    return out


def _one_pixel_gemm(cv: _Conv, pass_: str) -> tuple[np.ndarray, tuple[Any, Any, Any], str]:
    """Which convolutions of ``cv`` run ``pass_`` as one cuBLAS GEMM per group, its M x N x K
    and element type. A 1x1 filter on a one-pixel plane (a squeeze-and-excitation or classifier
    convolution): NCHW holds the N x C matrix itself, so cuDNN's explicit GEMM needs no im2col
    and the pass is one cuBLAS GEMM per group, with no plane to load in short runs."""
    n, cg, kg = cv.n, cv.gcg, cv.gkg
    one_pixel = (cv.h == 1) & (cv.w == 1) & (cv.r == 1) & (cv.s == 1) & (cv.pad_h == 0) & \
        (cv.pad_w == 0)
    gemm_shape = {"fwd": (n, kg, cg), "bwd_data": (n, cg, kg), "bwd_filter": (kg, cg, n)}[pass_]
    return one_pixel, gemm_shape, "float16" if cv.element == 2 else "float32"


def _depthwise(cv: _Conv) -> tuple[np.ndarray, np.ndarray]:
    """Which convolutions of ``cv`` are depthwise (one input channel per group), and their
    direct FLOPs. A direct kernel, all groups in one launch, each output element running its
    R x S taps; no GEMM tile to pad to 16 or more channels. At 2 R S FLOPs per element in and
    out it is memory-bound on every GPU here."""
    return (cv.cg == 1) & (cv.g > 1), 2.0 * cv.n * cv.k * cv.r * cv.s * cv.p * cv.q


def _price_winograd(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware, kp: KernelParams,
                    times: dict[str, Any], space: dict[str, Any]) -> None:
    """Price, into ``times`` and ``space``, Winograd: F(2x2,3x3) fused (16 GEMMs over 4x4
    tiles) and F(4x4,3x3) non-fused (36 GEMMs over 6x6 tiles, its transformed operands
    round-tripping through DRAM); the GEMMs run batched over the transform points, without
    split-K."""
    rows = cv.wino_ok
    eff, dram = ps.eff[rows], ps.dram[rows]
    for algo, cand, t_in, t_out in cv.cached(("winograd", pass_, hw.sms),
                                             lambda: list(_winograd_gemms(cv, ps, pass_, hw))):
        if algo == "WINOGRAD":
            times[algo] = _where(rows, lambda: _gemm_time(cand, hw, kp,
                                                          kp.winograd_efficiency * eff, dram))
        else:
            # the transforms read the operands and write their transforms; the GEMMs read
            # those and write theirs (their own traffic, in the GEMM's time); the inverse
            # reads them and writes the result
            moved_in, moved_out = t_in[rows], t_out[rows]
            times[algo] = _where(rows, lambda: _gemm_time(
                cand, hw, kp, kp.winograd_efficiency * eff, moved_in + moved_out) +
                _memory_s(dram + moved_in + moved_out, hw, kp))
            space[algo] = t_in + t_out


def _winograd_gemms(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware
                    ) -> Iterator[tuple[str, Optional[dict[str, np.ndarray]], Any, Any]]:
    """Each Winograd algorithm ``pass_`` can run (fused F(2x2,3x3) has no backward-filter): its
    name, the candidates of its GEMMs (batched over the transform points, without split-K) of
    the convolutions Winograd serves (``cv.wino_ok``; None where it serves none) and the bytes
    of its transformed operands in and out (of every convolution)."""
    rows = cv.wino_ok
    n, c, k, cg, kg = cv.n, cv.c, cv.k, cv.cg, cv.kg
    wm, wn, wk = ps.wino
    for algo, out_tile, points in (("WINOGRAD", 2, 16), ("WINOGRAD_NONFUSED", 4, 36)):
        if algo == "WINOGRAD" and pass_ == "bwd_filter":
            continue
        tiles = np.ceil(ps.out_h / out_tile) * np.ceil(ps.out_w / out_tile)
        if pass_ == "bwd_filter":
            mm, nn, kk = wm, wn, wk * tiles
            t_in, t_out = n * tiles * (c + k) * points * _ELEMENT, kg * cg * points * _ELEMENT
        else:
            mm, nn, kk = wm * tiles, wn, wk
            t_in = wm * tiles * wk * points * _ELEMENT + wn * wk * points * _ELEMENT
            t_out = wm * tiles * wn * points * _ELEMENT
        mm, nn, kk = (np.broadcast_to(x, rows.shape)[rows] for x in (mm, nn, kk))
        cand = _gemm_candidates(mm, nn, kk, hw.sms, points, split_k=False,
                                prune=cv.prune) if rows.any() else None
        yield algo, cand, t_in, t_out


def _price_fft(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware, kp: KernelParams,
               times: dict[str, Any], space: dict[str, Any]) -> None:
    """Price, into ``times`` and ``space``, FFT over whole padded planes and over 32x32 tiles
    (FFT-tiling)."""
    for algo, valid, work, moved, bufs in cv.cached(("fft", pass_), lambda: [
            (algo, valid, work[valid], (ps.dram + 2 * bufs)[valid], bufs)
            for algo, work, bufs, valid in _fft_terms(cv)]):
        eff = ps.eff[valid]
        times[algo] = _where(valid, lambda: np.maximum(
            work / (hw.peak_flops * kp.fft_efficiency * eff), _memory_s(moved, hw, kp)))
        space[algo] = bufs


def _fft_terms(cv: _Conv) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """FFT over whole padded planes and over 32x32 tiles: each one's name, FLOPs (transforms
    and pointwise products), bytes of transformed buffers and which convolutions it serves."""
    n, c, k, r, s, hp, wp, one = cv.n, cv.c, cv.k, cv.r, cv.s, cv.hp, cv.wp, cv.one
    tiles_h = np.ceil(cv.p / np.maximum(_FFT_TILE - r + 1, 1))
    tiles_w = np.ceil(cv.q / np.maximum(_FFT_TILE - s + 1, 1))
    for algo, eh, ew, count in (("FFT", hp, wp, one),
                                ("FFT_TILING", one * _FFT_TILE, one * _FFT_TILE,
                                 tiles_h * tiles_w)):
        points = eh * (np.floor(ew / 2) + 1)   # a real transform keeps half the spectrum
        planes = (n * c + n * k) * count + k * c
        bufs = planes * points * 2 * _ELEMENT
        transforms = planes * 2.5 * eh * ew * np.log2(np.maximum(eh * ew, 2))
        products = 8.0 * n * k * c * count * points
        valid = cv.dense & (r > 1) & (r <= eh) & (s <= ew)
        if algo == "FFT":
            valid &= (hp <= 256) & (wp <= 256)
        else:
            valid &= (r <= _FFT_TILE) & (s <= _FFT_TILE) & ((hp > _FFT_TILE) | (wp > _FFT_TILE))
        yield algo, transforms + products, bufs, valid


def _fastest_within(cv: _Conv, times: dict[str, Any], space: dict[str, Any], kp: KernelParams,
                    workspace_limit: Any, pass_: str) -> dict[str, np.ndarray]:
    """:func:`conv_times`' result: every algorithm's time as the host issues it, and the
    fastest whose workspace fits ``workspace_limit``."""
    by_algo = np.stack([times[a] for a in ALGORITHMS], axis=-1)
    launches, ws = cv.cached(("calls", pass_), lambda: _calls_and_workspace(cv, space))
    with_launch = issued(by_algo, kp, launches)
    limit = np.asarray(workspace_limit, dtype=float)
    allowed = np.where(ws <= (limit[..., None] if limit.ndim else limit), with_launch, np.inf)
    pick = np.argmin(allowed, axis=-1)
    return {"seconds": _picked(allowed, pick), "algorithm": pick,
            "workspace": _picked(ws, pick), "by_algorithm": with_launch, "work": by_algo}


def _picked(a: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """``a``'s element ``pick`` along its last axis (``np.take_along_axis``; indexed directly
    for one axis of problems, the common case, which is quicker)."""
    if a.ndim == 2:
        return a[np.arange(a.shape[0]), pick]
    return np.take_along_axis(a, pick[..., None], axis=-1)[..., 0]


def _calls_and_workspace(cv: _Conv, space: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per problem and algorithm (problems x :data:`ALGORITHMS`): the cuDNN calls the host
    issues and the workspace of ``space``. One call per group (the depthwise kernel: one for
    all groups), each issued by the host one launch interval after the last: a multi-kernel
    algorithm's kernels (transforms, GEMMs, inverse) queue back to back behind its call."""
    launches = np.stack([cv.one if a == "DEPTHWISE" else cv.g for a in ALGORITHMS], axis=-1)
    ws = np.stack([np.broadcast_to(space[a], cv.n.shape) for a in ALGORITHMS], axis=-1)
    return launches, ws


def _itemsize(dtype: str) -> int:
    try:
        return DTYPES[dtype]
    except (KeyError, TypeError):
        raise ModelError(f"unknown dtype {dtype!r} (one of {', '.join(DTYPES)})") from None


def _biggest_tile_reuse(tile_set: Sequence[tuple[int, int, int]]) -> float:
    return max(tm * tn / (tm + tn) for tm, tn, _ in tile_set)


@frozen_record
class _GemmKind(FrozenRecord):
    """How a GEMM runs on tensor cores: the dense ``peak``, the constants ``kp`` of the
    tensor-core path and the operands' bytes per element (2 for 16-bit, 4 for TF32)."""

    peak: float
    kp: KernelParams
    element: int


def _tensor_kind(hw: Hardware, dtype: str, tc: Optional[TensorCores],
                 tf32: bool) -> Optional[_GemmKind]:
    """The tensor-core GEMM of ``dtype`` on ``hw`` (``tf32``: fp32 as TF32), or None where it
    runs without tensor cores. A tensor-core GPU priced without its constants is a
    :class:`ModelError`."""
    if hw.on_tensor_cores(dtype):
        peak, element = hw.tensor_flops, DTYPES[dtype]
    elif dtype == "float32" and tf32 and hw.tf32_flops > 0:
        peak, element = hw.tf32_flops, DTYPES[dtype]
    else:
        return None
    if tc is None:
        raise ModelError("a tensor-core kernel needs the tensor-core path's fitted constants "
                         "(tc), and none were given")
    return _GemmKind(peak, tc.params, element)


def _gemm_busy(m: Any, n: Any, k: Any, hw: Hardware, kp: KernelParams, batch: Any,
               dtype: str, kind: Optional[_GemmKind], prune: bool = False) -> np.ndarray:
    """GEMMs' seconds without their launch: on tensor cores (``kind``) or at the fp32 model's
    rate (``hw.simt_flops``) on ``dtype`` operands."""
    cand, dram, peak = _gemm_terms(m, n, k, hw, batch, dtype,
                                   None if kind is None else kind.peak, prune)
    gk = kp if kind is None else kind.kp
    return _gemm_time(cand, hw, gk, gk.gemm_efficiency * gk.blas_efficiency, dram, peak)


def _gemm_terms(m: Any, n: Any, k: Any, hw: Hardware, batch: Any, dtype: str,
                tensor_peak: Optional[float], prune: bool = False
                ) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
    """What :func:`_gemm_busy` prices: the GEMMs' candidates (tensor-core tiles where
    ``tensor_peak`` is given), their operands' DRAM bytes and the peak (``tensor_peak``, else
    ``hw.simt_flops``)."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    dram = (m * k + k * n + m * n) * DTYPES[dtype]
    if not (np.ndim(batch) == 0 and batch == 1):
        dram = dram * np.asarray(batch, dtype=float)
    if tensor_peak is not None:
        return (_gemm_candidates(m, n, k, hw.sms, batch, _TC_TILES, prune=prune), dram,
                tensor_peak)
    return _gemm_candidates(m, n, k, hw.sms, batch, prune=prune), dram, hw.simt_flops(dtype)


def gemm_times(m: Any, n: Any, k: Any, hw: Hardware, kp: KernelParams, *, batch: Any = 1,
               dtype: str = "float32", tc: Optional[TensorCores] = None,
               tf32: bool = False, prune: bool = False) -> np.ndarray:
    """Modelled seconds of cuBLAS GEMMs C[m x n] = A[m x k] B[k x n] (arrays), ``batch`` of
    them in one (strided-batched) call, in ``dtype``: on tensor cores where ``hw`` has them
    for ``dtype`` (or, ``tf32``, TF32 for float32), at the constants of ``tc``, else at the fp32
    model's rate (``hw.simt_flops``); each call at least the host's issue interval
    (:func:`issued`). ``prune``: as :func:`conv_times`'."""
    _itemsize(dtype)
    kind = _tensor_kind(hw, dtype, tc, tf32)
    return issued(_gemm_busy(m, n, k, hw, kp, batch, dtype, kind, prune),
                  kp if kind is None else kind.kp)


# -- one layer at a time (the simulator) -----------------------------------------------------

def price_convs(problems: Sequence[ConvProblem], pass_: str, hw: Hardware, kp: KernelParams,
                itemsize: int = 4, workspace_limit: Any = None,
                layers: Optional[Sequence[str]] = None, *, dtype: str = "",
                tc: Optional[TensorCores] = None, tf32: bool = False) -> list[KernelPrice]:
    """Many convolutions' ``pass_`` at once (one vectorized evaluation): time, algorithm and
    workspace of each. ``dtype`` 16-bit on a GPU with tensor cores for it (or float32 with
    ``tf32`` on one with TF32): on tensor cores at the constants of ``tc``; otherwise at the
    fp32 rate on fp32 operands, as before; the workspace scales with ``itemsize``.
    ``workspace_limit`` (bytes; None: no limit) is one limit for all or one per problem.
    ``layers`` name the problems in errors. Each price is kept per (shape, pass, limit, dtype,
    GPU, constants): a problem priced before is not priced again (the same result, bit for
    bit); the others are priced together."""
    names = list(layers) if layers is not None else [""] * len(problems)
    for problem, name in zip(problems, names):
        problem.check(name)
    if not problems:
        return []
    if workspace_limit is None:
        limit: Any = math.inf
    elif np.ndim(workspace_limit):
        limit = np.array([math.inf if x is None else float(x) for x in workspace_limit])
    else:
        limit = float(workspace_limit)
    kind = _tensor_kind(hw, dtype, tc, tf32) if dtype else None
    limits = np.broadcast_to(np.asarray(limit, dtype=float), (len(problems),))
    keys = [(problem, pass_, float(lim), itemsize, dtype, tf32, hw, kp, tc)
            for problem, lim in zip(problems, limits)]
    out = [_CONV_PRICES.get(key) for key in keys]
    todo = [i for i, found in enumerate(out) if found is None]
    if todo:
        priced = _price_convs_once([problems[i] for i in todo], pass_, hw, kp, itemsize,
                                   limits[todo], [names[i] for i in todo], kind)
        for i, price in zip(todo, priced):
            out[i] = price
            _CONV_PRICES.put(keys[i], price)
    return out


def _price_convs_once(problems: Sequence[ConvProblem], pass_: str, hw: Hardware,
                      kp: KernelParams, itemsize: int, limit: np.ndarray, names: Sequence[str],
                      kind: Optional[_GemmKind]) -> list[KernelPrice]:
    """:func:`price_convs` of problems not priced before (``limit`` one per problem, on
    tensor cores where ``kind`` says)."""
    arrays = {key: np.array([float(getattr(pr, key)) for pr in problems])
              for key in ConvProblem.__dataclass_fields__}
    if kind is None:
        res = conv_times(arrays, pass_, hw, kp, limit * _ELEMENT / itemsize)
    else:
        res = conv_times(arrays, pass_, hw, kind.kp, limit * _ELEMENT / itemsize,
                         tensor_peak=kind.peak, element=kind.element)
    out = []
    for i, name in enumerate(names):
        seconds = float(res["seconds"][i])
        if not math.isfinite(seconds):
            raise ModelError(f"layer {name!r}: no convolution algorithm fits a workspace "
                             f"limit of {limit[i]:.0f} bytes")
        out.append(KernelPrice(seconds, ALGORITHMS[int(res["algorithm"][i])],
                               int(res["workspace"][i] * itemsize / _ELEMENT)))
    return out


def price_conv(problem: ConvProblem, pass_: str, hw: Hardware, kp: KernelParams,
               itemsize: int = 4, workspace_limit: Optional[int] = None,
               layer: str = "", *, dtype: str = "", tc: Optional[TensorCores] = None,
               tf32: bool = False) -> KernelPrice:
    """One convolution pass: its time, algorithm and workspace (see :func:`price_convs`)."""
    return price_convs([problem], pass_, hw, kp, itemsize, workspace_limit, [layer],
                       dtype=dtype, tc=tc, tf32=tf32)[0]


def _check_positive(what: str, **values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ModelError(f"{what}: {name} must be a positive integer, got {v!r}")


def price_gemm(m: int, n: int, k: int, hw: Hardware, kp: KernelParams, *, batch: int = 1,
               dtype: str = "float32", tc: Optional[TensorCores] = None,
               tf32: bool = False) -> KernelPrice:
    """One GEMM of m x n x k (a fully connected or linear layer's), or ``batch`` of them in one
    batched call (attention's per-head products), in ``dtype`` (float32 as TF32 where
    ``tf32``). The algorithm is ``TENSOR_GEMM`` on tensor cores (``TF32_GEMM`` as TF32), else
    ``GEMM``. Each price is kept per (shape, dtype, GPU, constants): a shape priced before is
    not priced again (the same result, bit for bit)."""
    _check_positive("GEMM", m=m, n=n, k=k, batch=batch)
    key = (int(m), int(n), int(k), int(batch), dtype, tf32, hw, kp, tc)
    found = _GEMM_PRICES.get(key)
    if found is None:
        found = _price_gemm_once(m, n, k, hw, kp, batch, dtype, tc, tf32)
        _GEMM_PRICES.put(key, found)
    return found


def _price_gemm_once(m: int, n: int, k: int, hw: Hardware, kp: KernelParams, batch: int,
                     dtype: str, tc: Optional[TensorCores], tf32: bool) -> KernelPrice:
    """:func:`price_gemm` of a shape not priced before."""
    seconds = float(gemm_times([m], [n], [k], hw, kp, batch=batch, dtype=dtype, tc=tc,
                               tf32=tf32)[0])
    kind = _tensor_kind(hw, dtype, tc, tf32)
    name = "GEMM" if kind is None else "TF32_GEMM" if dtype == "float32" else "TENSOR_GEMM"
    return KernelPrice(seconds, name, 0)


def _attention_blocks(seq_q: int, seq_k: int, causal: bool) -> np.ndarray:
    """Which blocks (query tile x key tile) of the score matrix a fused kernel computes: all of
    them, or with a causal mask (aligned to the bottom right when ``seq_k > seq_q``, as
    FlashAttention 2 aligns it) those not wholly above the diagonal."""
    t = _ATTENTION_TILE
    rows, cols = math.ceil(seq_q / t), math.ceil(seq_k / t)
    if not causal:
        return np.ones((rows, cols), dtype=bool)
    last_query = np.minimum((np.arange(rows) + 1) * t, seq_q) - 1
    return (np.arange(cols) * t)[None, :] <= (last_query + (seq_k - seq_q))[:, None]


@functools.lru_cache(maxsize=256)
def _makespan(work: tuple[int, ...], copies: int, slots: int) -> int:
    """Finish time, in blocks, of ``copies`` x each CTA of ``work`` (its blocks) on ``slots``
    SMs, longest first, each CTA to the SM that frees first (list scheduling)."""
    todo = sorted((w for w in work if w > 0), reverse=True)
    if not todo:
        return 0
    if todo[0] == todo[-1]:  # equal CTAs: whole waves
        return math.ceil(len(todo) * copies / slots) * todo[0]
    free = [0] * slots
    for w in todo:
        for _ in range(copies):
            heapq.heapreplace(free, free[0] + w)
    return max(free)


def price_attention(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, pass_: str,
                    hw: Hardware, kp: KernelParams, *, causal: bool = True,
                    dtype: str = "bfloat16", tc: Optional[TensorCores] = None,
                    kernel: str = "flash2") -> KernelPrice:
    """A fused attention kernel's ``pass_`` (``fwd`` or ``bwd``) over ``batch`` x ``heads``
    heads of ``seq_q`` queries and ``seq_k`` keys of ``head_dim``: ``kernel`` FlashAttention-2
    or -3 (:data:`ATTENTION_KERNELS`), at its constants in ``tc``.

    Forward: a CTA per 128 queries runs over the 128-key blocks it needs (4 x 128 x 128 x d
    FLOPs each: Q K^T and P V) and writes the output and the row statistics (fp32). Backward: a
    CTA per 128 keys runs over the query blocks that see them, 2.5 x the forward's FLOPs per
    block (Q K^T recomputed, dV, dP, dQ, dK), accumulating dQ in fp32 (its workspace); the
    small kernels before and after (dO . O, dQ's conversion) queue behind the one launch. A
    causal mask skips the blocks above the diagonal (about half). CTAs run one per SM, longest
    first, at the kernel's share of the tensor peak (:meth:`AttentionParams.share`); without
    tensor cores for ``dtype`` at the fp32 model's 128x128-tile share of ``hw.simt_flops``.
    DRAM moves each tensor of a head once per pass (L2 serves the re-reads of the head's CTAs,
    which run side by side). The slower of compute and memory, at least one launch interval
    (:func:`issued`). Algorithm ``FLASH_ATTENTION_2`` or ``FLASH_ATTENTION_3``. Each price is
    kept, as :func:`price_gemm`'s are."""
    _check_positive("attention", batch=batch, heads=heads, seq_q=seq_q, seq_k=seq_k,
                    head_dim=head_dim)
    key = (int(batch), int(heads), int(seq_q), int(seq_k), int(head_dim), pass_, causal, dtype,
           kernel, hw, kp, tc)
    found = _ATTENTION_PRICES.get(key)
    if found is None:
        found = _price_attention_once(batch, heads, seq_q, seq_k, head_dim, pass_, hw, kp,
                                      causal, dtype, tc, kernel)
        _ATTENTION_PRICES.put(key, found)
    return found


def _price_attention_once(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int,
                          pass_: str, hw: Hardware, kp: KernelParams, causal: bool, dtype: str,
                          tc: Optional[TensorCores], kernel: str) -> KernelPrice:
    """:func:`price_attention` of a shape not priced before."""
    if pass_ not in ATTENTION_PASSES:
        raise ModelError(f"attention: unknown pass {pass_!r} (one of "
                         f"{', '.join(ATTENTION_PASSES)})")
    if kernel not in ATTENTION_KERNELS:
        raise ModelError(f"attention: unknown kernel {kernel!r} (one of "
                         f"{', '.join(ATTENTION_KERNELS)})")
    size = _itemsize(dtype)
    t, d, heads_total = _ATTENTION_TILE, head_dim, batch * heads
    blocks = _attention_blocks(seq_q, seq_k, causal)
    per_cta = blocks.sum(axis=1 if pass_ == "fwd" else 0)
    steps = _makespan(tuple(int(x) for x in per_cta), heads_total, hw.sms)
    block_flops = 4.0 * t * t * d * (1.0 if pass_ == "fwd" else 2.5)
    kind = _tensor_kind(hw, dtype, tc, False)
    if kind is not None:
        if tc is None or kernel not in tc.attention:
            raise ModelError(f"attention: {kernel} does not run on the "
                             f"{tc.family if tc else 'given'} tensor cores")
        peak, share, mem_kp = kind.peak, tc.attention[kernel].share(d), kind.kp
    else:
        reuse = t * t / (t + t)
        peak, mem_kp = hw.simt_flops(dtype), kp
        share = kp.gemm_efficiency * kp.blas_efficiency * reuse / (reuse + kp.tile_reuse)
    compute = steps * block_flops * hw.sms / (peak * share)
    # the CTAs of one head run side by side, so L2 serves their re-reads of the head's tensors
    # and DRAM moves each once per pass
    if pass_ == "fwd":  # Q, K, V in; O and the row statistics out
        nbytes = heads_total * ((2 * seq_q + 2 * seq_k) * d * size + seq_q * _ELEMENT)
        workspace = 0
    else:  # Q, K, V, O, dO and the statistics in; dQ (through fp32), dK, dV out
        q_side = seq_q * (3 * d * size + 2 * _ELEMENT + 2 * d * _ELEMENT)
        nbytes = heads_total * (q_side + 4 * seq_k * d * size)
        workspace = heads_total * math.ceil(seq_q / t) * t * (d + 1) * _ELEMENT
    seconds = float(issued(max(compute, float(_memory_s(nbytes, hw, mem_kp))), mem_kp))
    return KernelPrice(seconds, "FLASH_ATTENTION_" + kernel[-1], workspace)
