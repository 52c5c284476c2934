"""Ratio from density for codecs without a formula: compress a synthetic sample.

A codec whose size depends on where the zeros are and on the values (RLE, zlib, LZ4, zstd,
bplane_zstd) cannot turn a density into a size.  Its ratio is estimated by running the real
codec on :data:`SAMPLE_ELEMENTS` elements of the tensor's element type, with zeros placed
independently at that density, seeded by the algorithm, the density and the type (so runs are
reproducible).  Independent placement is the
pessimistic case: real activations cluster their zeros.  Densities are taken on a grid of
``1 / DENSITY_STEPS`` (ratios are smooth in density), which lets the model cache the samples of
the shipped codecs in a table (``sst_cdma/model/ratio_table.json``).
"""
from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np

from sst_cdma.model.dtypes import DTYPES as SIMULATED_DTYPES
from sst_cdma.codecs import registry
from sst_cdma.codecs.registry import CodecSpec

__all__ = ["SAMPLE_ELEMENTS", "DENSITY_STEPS", "DTYPES", "itemsize_of", "density_step",
           "sample_ratio", "sampled_ratio", "forget", "estimate_ratio"]

SAMPLE_ELEMENTS = 1 << 15
DENSITY_STEPS = 200
DTYPES = {name: np.uint16 if name == "bfloat16" else np.dtype(name).type
          for name in SIMULATED_DTYPES}
"""Element types sampled as themselves (bfloat16 as its raw 16-bit words); others as float32."""


def itemsize_of(dtype: str) -> int:
    """Bytes per element of a simulated element type (float32's for types not in DTYPES)."""
    return np.dtype(DTYPES.get(dtype, np.float32)).itemsize


def density_step(density: float) -> int:
    """Index of ``density`` on the sampling grid."""
    return int(round(density * DENSITY_STEPS))


@lru_cache(maxsize=4096)
def sample_ratio(algorithm: str, step: int, dtype: str) -> float:
    """Raw/compressed ratio of ``algorithm`` on the seeded sample at density
    ``step / DENSITY_STEPS`` of element type ``dtype``."""
    from sst_cdma.codecs.api import compressed_size

    density = step / DENSITY_STEPS
    seed = zlib.crc32(f"{algorithm}:{step}:{dtype}".encode())
    rng = np.random.default_rng(seed)
    values = np.abs(rng.standard_normal(SAMPLE_ELEMENTS)).astype(np.float32) + 1e-3
    values[rng.random(SAMPLE_ELEMENTS) >= density] = 0.0
    np_dtype = DTYPES.get(dtype, np.float32)
    sample = bfloat16_words(values) if np_dtype is np.uint16 else values.astype(np_dtype)
    return sample.nbytes / compressed_size(sample, algorithm)


def bfloat16_words(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` rounded to bfloat16 (to nearest, ties to even), as the raw 16-bit
    words the codecs take: the upper half of each float32's bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def sampled_ratio(algorithm: str, density: float, dtype: str = "float32") -> float:
    """:func:`sample_ratio` at the grid point nearest ``density``."""
    return sample_ratio(algorithm, density_step(density), dtype)


def forget(algorithm: str = "") -> None:
    """Drop cached samples (after ``algorithm`` is unregistered, another codec may take its
    name): called on every change of the registry."""
    sample_ratio.cache_clear()


registry.watch(forget)


def estimate_ratio(spec: CodecSpec, density: float, dtype: str = "float32") -> float:
    """Estimated raw/compressed ratio of the codec ``spec`` on a tensor of element type
    ``dtype`` (a name, e.g. ``"float16"``) whose non-zero fraction is ``density``: its size
    formula where it has one, else a sample compressed."""
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density {density} is not in [0, 1]")
    if spec.ratio_formula is not None:
        return spec.ratio_formula(density, itemsize_of(dtype))
    return sampled_ratio(spec.name, density, dtype)
