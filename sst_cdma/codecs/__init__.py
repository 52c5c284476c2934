"""Lossless compression codecs for GPU activation data: ZVC, RLE, zlib, LZ4, Zstandard and
byte-plane+Zstandard, and any other codec registered in :mod:`.registry` (the one list of
algorithms; ``docs/codecs.md``, "Adding a codec").

Every codec works on bit patterns (an element is zero only if all its bits are zero, so
``-0.0`` and NaN payloads survive) and produces a self-describing stream: a fixed
little-endian header (magic ``b"SCDC"``, version, algorithm, dtype, shape, element count,
payload length, CRC-32) followed by the algorithm's payload.  See ``docs/codecs.md``.

>>> import numpy as np
>>> from sst_cdma import codecs
>>> x = np.array([0.0, 1.5, -0.0, 0.0], dtype=np.float32)
>>> blob = codecs.compress(x, "zvc")
>>> len(blob) == codecs.compressed_size(x, "zvc") == 40 + 4 + 4 * 2
True
>>> y = codecs.decompress(blob)
>>> y.dtype, y.shape, y.tobytes() == x.tobytes()
(dtype('float32'), (4,), True)

Public API: :func:`compress`, :func:`decompress`, :func:`compressed_size`,
:func:`nonzero_count`, :func:`density`, :func:`zvc_ratio`, :func:`stream_info`,
:data:`ALGORITHMS` (the registered names, in order, always current),
:func:`algorithm_names`, :class:`CodecError`.
"""
from __future__ import annotations

import importlib
from typing import Any

# The built-in codecs register themselves on import, in the order users see.
from sst_cdma.codecs import zvc, rle, deflate, lz4block, zstdframe, byteplane  # noqa: F401  (isort: skip)
from sst_cdma.codecs.dtypes import ELEMENT_TYPES
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.registry import ALGORITHM_NAMES as ALGORITHMS
from sst_cdma.codecs.registry import algorithm_choices, algorithm_names
from sst_cdma.codecs.zvc import zvc_ratio

__all__ = [
    "ALGORITHMS",
    "algorithm_names",
    "algorithm_choices",
    "CodecError",
    "Header",
    "compress",
    "decompress",
    "compressed_size",
    "nonzero_count",
    "density",
    "zvc_ratio",
    "stream_info",
    "header_size",
    "SUPPORTED_DTYPES",
]

SUPPORTED_DTYPES: tuple[str, ...] = tuple(t.name for t in ELEMENT_TYPES)
"""Element type names a stream can carry."""

_IN_API = {"Header", "compress", "decompress", "compressed_size", "nonzero_count", "density",
           "stream_info", "header_size"}


def __getattr__(name: str) -> Any:
    """The codec functions, loaded from :mod:`.api` on first use: it JIT-loads the numba
    kernels (about a third of a second), which a simulation that only needs
    :func:`zvc_ratio` never pays."""
    if name in _IN_API:
        value = getattr(importlib.import_module(".api", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

