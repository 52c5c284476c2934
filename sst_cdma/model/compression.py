"""How many bytes a tensor takes on the wire for each algorithm, when only its density is known
(from a density profile) or when its real contents are known (functional mode).

With only a density, ZVC's size follows from its format exactly (a 32-bit mask per 32
elements plus the non-zero values). RLE and zlib depend on where the zeros are, so their ratio
is estimated by running the real codec on a synthetic sample of the tensor's element type with
zeros placed independently at that density (seeded, so runs are reproducible). Independent
placement is the pessimistic case for both: real activations cluster their zeros.
"""
from __future__ import annotations

import math
import zlib
from functools import lru_cache

import numpy as np

ALGORITHMS = ("none", "zvc", "rle", "zlib")
SAMPLE_ELEMENTS = 1 << 15
DENSITY_STEPS = 200  # densities are estimated on a grid of 0.005: ratios are smooth in density
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


@lru_cache(maxsize=4096)
def _sampled_ratio(algorithm: str, density_step: int, dtype: str) -> float:
    from .. import codecs

    density = density_step / DENSITY_STEPS
    seed = zlib.crc32(f"{algorithm}:{density_step}:{dtype}".encode())
    rng = np.random.default_rng(seed)
    values = np.abs(rng.standard_normal(SAMPLE_ELEMENTS)).astype(np.float32) + 1e-3
    values[rng.random(SAMPLE_ELEMENTS) >= density] = 0.0
    np_dtype = DTYPES.get(dtype, np.float32)
    sample = values.astype(np.float16).view(np.uint16) if np_dtype is np.uint16 else \
        values.astype(np_dtype)
    return sample.nbytes / codecs.compressed_size(sample, algorithm)


def ratio_from_density(algorithm: str, density: float, dtype: str = "float32") -> float:
    """Estimated raw/compressed ratio of ``algorithm`` on a tensor of ``density``."""
    if algorithm == "none":
        return 1.0
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density {density} is not in [0, 1]")
    itemsize = np.dtype(DTYPES.get(dtype, np.float32)).itemsize
    if algorithm == "zvc":
        from ..codecs import zvc_ratio  # the format's exact size: mask words + non-zeros

        return zvc_ratio(density, itemsize)
    if algorithm in ("rle", "zlib"):
        return _sampled_ratio(algorithm, int(round(density * DENSITY_STEPS)), dtype)
    raise ValueError(f"unknown algorithm {algorithm!r} (one of {', '.join(ALGORITHMS)})")


def wire_bytes(raw: int, ratio: float, bypass_incompressible: bool = True) -> int:
    """Bytes on the wire for ``raw`` bytes compressed at ``ratio``; with the bypass, data that
    would grow is sent raw (the engine flags the chunk as uncompressed)."""
    if raw <= 0:
        return 0
    if bypass_incompressible and ratio <= 1.0:
        return raw
    return max(1, math.ceil(raw / ratio))
