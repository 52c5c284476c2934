"""How many bytes a tensor takes on the wire for each algorithm, when only its density is known
(from a density profile) or when its real contents are known (functional mode).

With only a density, ZVC's size follows from its format exactly (a 32-bit mask per 32
elements plus the non-zero values). RLE and zlib depend on where the zeros are, so their ratio
is estimated by running the real codec on a synthetic sample of the tensor's element type with
zeros placed independently at that density (seeded, so runs are reproducible). Independent
placement is the pessimistic case for both: real activations cluster their zeros.

Those samples are the same on every run, so their ratios are computed once, on the density
grid, by ``python -m sst_cdma.model.compression --write`` into ``ratio_table.json`` beside this
module; a run looks them up instead of loading the codecs (which costs a second of JIT start-up
per process). ``--check`` recomputes every entry and reports any that differ; the tests check a
spread of them. Element types outside the table are sampled live.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

ALGORITHMS = ("none", "zvc", "rle", "zlib")
SAMPLE_ELEMENTS = 1 << 15
DENSITY_STEPS = 200  # densities are estimated on a grid of 0.005: ratios are smooth in density
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}
TABLE_PATH = Path(__file__).with_name("ratio_table.json")
SAMPLED = ("rle", "zlib")


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
    if algorithm in SAMPLED:
        step = int(round(density * DENSITY_STEPS))
        table = _ratio_table()
        if table is not None and dtype in table[algorithm]:
            return table[algorithm][dtype][step]
        return _sampled_ratio(algorithm, step, dtype)
    raise ValueError(f"unknown algorithm {algorithm!r} (one of {', '.join(ALGORITHMS)})")


def wire_bytes(raw: int, ratio: float, bypass_incompressible: bool = True) -> int:
    """Bytes on the wire for ``raw`` bytes compressed at ``ratio``; with the bypass, data that
    would grow is sent raw (the engine flags the chunk as uncompressed)."""
    if raw <= 0:
        return 0
    if bypass_incompressible and ratio <= 1.0:
        return raw
    return max(1, math.ceil(raw / ratio))


def compute_table() -> dict[str, Any]:
    """Every sampled ratio on the density grid, as ``ratio_table.json`` holds them."""
    return {"sample_elements": SAMPLE_ELEMENTS, "density_steps": DENSITY_STEPS,
            "zlib_version": zlib.ZLIB_RUNTIME_VERSION,
            "ratios": {algo: {dtype: [_sampled_ratio(algo, step, dtype)
                                      for step in range(DENSITY_STEPS + 1)]
                              for dtype in DTYPES}
                       for algo in SAMPLED}}


@lru_cache(maxsize=1)
def _ratio_table() -> Optional[dict[str, dict[str, list[float]]]]:
    """The shipped table, or None when it is missing or was made for other sampling settings."""
    try:
        data = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("sample_elements") != SAMPLE_ELEMENTS or \
            data.get("density_steps") != DENSITY_STEPS:
        return None
    return data["ratios"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``--write`` regenerates ratio_table.json; ``--check`` compares it with fresh samples."""
    ap = argparse.ArgumentParser(prog="python -m sst_cdma.model.compression",
                                 description="the RLE/zlib ratio table on the density grid")
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate the table")
    action.add_argument("--check", action="store_true", help="recompute and compare every entry")
    args = ap.parse_args(argv)
    fresh = compute_table()
    if args.write:
        TABLE_PATH.write_text(json.dumps(fresh, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {TABLE_PATH}")
        return 0
    shipped = _ratio_table()
    if shipped is None:
        print(f"{TABLE_PATH}: missing or made for other sampling settings")
        return 1
    bad = [(algo, dtype, step) for algo in SAMPLED for dtype in DTYPES
           for step, value in enumerate(fresh["ratios"][algo][dtype])
           if shipped[algo][dtype][step] != value]
    for algo, dtype, step in bad:
        print(f"{algo} {dtype} density {step / DENSITY_STEPS:.3f}: table "
              f"{shipped[algo][dtype][step]!r}, sample {fresh['ratios'][algo][dtype][step]!r}")
    print(f"{len(bad)} of {len(SAMPLED) * len(DTYPES) * (DENSITY_STEPS + 1)} entries differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
