"""How many bytes a tensor takes on the wire for each algorithm, when only its density is known
(from a density profile) or when its real contents are known (functional mode).

With only a density, each codec estimates its own ratio (``sst_cdma.codecs.registry``):
ZVC's size follows from its format exactly (a 32-bit mask per 32 elements plus the non-zero
values); RLE, zlib, LZ4, zstd and bplane_zstd depend on where the zeros are, so their ratio is
estimated by running the real codec on a synthetic sample of the tensor's element type with
zeros placed independently at that density (seeded, so runs are reproducible;
``sst_cdma.codecs.sampling``). Independent placement is the pessimistic case: real activations
cluster their zeros.

Those samples are the same on every run, so the ratios of the registered sampled codecs are
computed once, on the density grid, by :func:`write_table` into ``ratio_table.json`` beside
this module; a run looks them up instead of loading the codecs (which costs a second of JIT
start-up per process). :func:`table_differences` recomputes every entry and names any that
differ; the tests check a spread of them. Both are run as ``python -m
sst_cdma.tools.ratio_table``. Element types and codecs outside
the table are sampled live.
"""
from __future__ import annotations

import json
import math
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from sst_cdma.codecs import registry
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.codecs.sampling import (DENSITY_STEPS, DTYPES, SAMPLE_ELEMENTS, density_step,
                               estimate_ratio, sample_ratio)

__all__ = ["DECOMPRESSION_ENGINE", "ALGORITHMS", "DENSITY_STEPS", "DTYPES", "SAMPLE_ELEMENTS",
           "TABLE_PATH", "algorithm_choices", "sampled_algorithms", "ratio_from_density", "wire_bytes",
           "compute_table", "library_versions", "write_table", "table_differences"]

#: Blackwell's Decompression Engine as the codec's ``engine`` ``blackwell-de`` builds it: one block of 600 GB/s
#: (nvCOMP documentation, "Decompression Engine"; docs/model.md) and LZ4 unless asked otherwise
DECOMPRESSION_ENGINE: dict[str, Any] = {"codec_units": 1, "codec_unit_throughput": "600GB/s",
                                        "algorithm": "lz4"}

TABLE_PATH = Path(__file__).with_name("ratio_table.json")
#: the shipped table of compression ratios (72 KiB)
RATIO_TABLE = FileKind("a ratio table", 16 * MIB)
ALGORITHMS = registry.ALGORITHM_CHOICES
"""``"none"`` and every registered codec, always current (a live sequence)."""
algorithm_choices = registry.algorithm_choices


def sampled_algorithms() -> tuple[str, ...]:
    """The registered codecs whose ratio is sampled (the ones the table caches)."""
    return tuple(s.name for s in registry.specs() if s.sampled)


def ratio_from_density(algorithm: str, density: float, dtype: str = "float32") -> float:
    """Estimated raw/compressed ratio of ``algorithm`` on a tensor of ``density``: the codec's
    own estimate, from the shipped table where it holds the entry."""
    if algorithm == registry.NONE:
        return 1.0
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density {density} is not in [0, 1]")
    spec = registry.get(algorithm)
    if spec.sampled:
        cached = _table_entry(_ratio_table(), algorithm, dtype, density_step(density))
        if cached is not None:
            return cached
    return estimate_ratio(spec, density, dtype)


def _table_entry(table: Optional[dict[str, dict[str, list[float]]]], algorithm: str, dtype: str,
                 step: int) -> Optional[float]:
    """The table's ratio for ``algorithm`` and ``dtype`` at grid ``step``, or None."""
    entries = table.get(algorithm, {}).get(dtype) if table is not None else None
    return entries[step] if entries is not None else None


def wire_bytes(raw: int, ratio: float, bypass_incompressible: bool = True) -> int:
    """Bytes on the wire for ``raw`` bytes compressed at ``ratio``; with the bypass, data that
    would grow is sent raw (the engine flags the chunk as uncompressed)."""
    if raw <= 0:
        return 0
    if bypass_incompressible and ratio <= 1.0:
        return raw
    # a ratio taken from exact sizes (raw / size) divides back to size plus a float ulp or two,
    # which must not round up to a byte more
    return max(1, math.ceil(raw / ratio - 1e-6))


def library_versions() -> dict[str, str]:
    """Versions of the compression libraries whose output the table records (zlib, LZ4,
    libzstd): another version may compress the samples to other sizes."""
    import lz4
    import zstandard

    return {"zlib_version": zlib.ZLIB_RUNTIME_VERSION,
            "lz4_version": lz4.library_version_string(),
            "zstd_version": ".".join(map(str, zstandard.ZSTD_VERSION))}


def compute_table() -> dict[str, Any]:
    """Every sampled ratio on the density grid, as ``ratio_table.json`` holds them."""
    return {"sample_elements": SAMPLE_ELEMENTS, "density_steps": DENSITY_STEPS,
            **library_versions(),
            "ratios": {algo: {dtype: [sample_ratio(algo, step, dtype)
                                      for step in range(DENSITY_STEPS + 1)]
                              for dtype in DTYPES}
                       for algo in sampled_algorithms()}}


@lru_cache(maxsize=1)
def _ratio_table() -> Optional[dict[str, dict[str, list[float]]]]:
    """The shipped table, or None when it is missing or was made for other sampling settings."""
    try:
        data = load_json(TABLE_PATH, RATIO_TABLE)
    except FileReadError:
        return None
    if data.get("sample_elements") != SAMPLE_ELEMENTS or \
            data.get("density_steps") != DENSITY_STEPS:
        return None
    return data["ratios"]


def write_table() -> Path:
    """Regenerate ratio_table.json from fresh samples; its path."""
    TABLE_PATH.write_text(json.dumps(compute_table(), indent=1) + "\n", encoding="utf-8")
    return TABLE_PATH


def table_differences() -> Optional[tuple[list[str], int]]:
    """Every entry of ratio_table.json that a fresh sample does not reproduce, one line each,
    with the number of entries compared; None where the shipped table is missing or was made
    for other sampling settings."""
    shipped = _ratio_table()
    if shipped is None:
        return None
    fresh = compute_table()
    sampled = sampled_algorithms()
    bad = [(algo, dtype, step) for algo in sampled for dtype in DTYPES
           for step, value in enumerate(fresh["ratios"][algo][dtype])
           if _table_entry(shipped, algo, dtype, step) != value]
    lines = [f"{algo} {dtype} density {step / DENSITY_STEPS:.3f}: table "
             f"{_table_entry(shipped, algo, dtype, step)!r}, sample "
             f"{fresh['ratios'][algo][dtype][step]!r}" for algo, dtype, step in bad]
    return lines, len(sampled) * len(DTYPES) * (DENSITY_STEPS + 1)
