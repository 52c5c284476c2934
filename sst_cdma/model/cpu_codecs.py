"""The host CPU's codecs: how fast one core compresses and decompresses model states with each
of the project's codecs (``state_compression=host``: the host CPU decompresses the gradients
before its optimizer step and compresses the weights after it).

Measured on this project's machine (a 2-vCPU AMD EPYC VM, shared) with one codec thread::

    NUMBA_NUM_THREADS=1 python benchmarks/bench_state_codecs.py

on 16 MiB of float32 N(0, 0.02) values (dense, as the model-state profile measures weights and
gradients to be) and the same values rounded to float16 and bfloat16; best of 3 runs (zlib's
compress: one), uncompressed bytes per second. docs/workloads.md section 9 prints the table.
"""
from __future__ import annotations

import math

__all__ = ["CPU_CODEC_THROUGHPUT", "CPU_CODEC_SOURCE", "CpuCodecError", "cpu_codec_rates",
           "cpu_codec_ps"]

PS_PER_S = 10 ** 12

#: where :data:`CPU_CODEC_THROUGHPUT` comes from
CPU_CODEC_SOURCE = ("benchmarks/bench_state_codecs.py, one codec thread, 2-vCPU AMD EPYC VM, "
                    "2026-12-02")

#: (codec, element type) -> (compress, decompress) uncompressed bytes per second on one core
CPU_CODEC_THROUGHPUT: dict[tuple[str, str], tuple[float, float]] = {
    ("zvc", "float32"): (861e6, 707e6),
    ("rle", "float32"): (301e6, 653e6),
    ("zlib", "float32"): (14e6, 157e6),
    ("lz4", "float32"): (566e6, 535e6),
    ("zstd", "float32"): (482e6, 537e6),
    ("bplane_zstd", "float32"): (329e6, 619e6),
    ("zvc", "float16"): (877e6, 745e6),
    ("rle", "float16"): (438e6, 1178e6),
    ("zlib", "float16"): (28e6, 181e6),
    ("lz4", "float16"): (1194e6, 1609e6),
    ("zstd", "float16"): (482e6, 546e6),
    ("bplane_zstd", "float16"): (583e6, 642e6),
    ("zvc", "bfloat16"): (1052e6, 898e6),
    ("rle", "bfloat16"): (445e6, 978e6),
    ("zlib", "bfloat16"): (10e6, 160e6),
    ("lz4", "bfloat16"): (994e6, 1477e6),
    ("zstd", "bfloat16"): (525e6, 410e6),
    ("bplane_zstd", "bfloat16"): (223e6, 463e6),
}


class CpuCodecError(ValueError):
    """A codec or element type the CPU codec table has no measurement of."""


def cpu_codec_rates(codec: str, dtype: str) -> tuple[float, float]:
    """(compress, decompress) bytes per second one core runs ``codec`` at on ``dtype`` data;
    a pair not measured is a one-line :class:`CpuCodecError` saying what is."""
    try:
        return CPU_CODEC_THROUGHPUT[(codec, dtype)]
    except KeyError:
        codecs = sorted({c for c, _ in CPU_CODEC_THROUGHPUT})
        dtypes = sorted({d for _, d in CPU_CODEC_THROUGHPUT})
        raise CpuCodecError(f"the host CPU's codec throughput is not measured for {codec!r} on "
                            f"{dtype} (measured: codecs {', '.join(codecs)} on "
                            f"{', '.join(dtypes)})") from None


def cpu_codec_ps(codec: str, dtype: str, decompress_bytes: int, compress_bytes: int,
                 cores: int) -> int:
    """Picoseconds ``cores`` cores take to decompress ``decompress_bytes`` and compress
    ``compress_bytes`` (uncompressed sizes) of ``dtype`` data with ``codec``."""
    if not decompress_bytes and not compress_bytes:
        return 0
    compress, decompress = cpu_codec_rates(codec, dtype)
    seconds = (decompress_bytes / decompress + compress_bytes / compress) / cores
    return math.ceil(seconds * PS_PER_S)
