"""Lossless compression codecs for GPU activation data: ZVC, RLE and zlib.

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
:data:`ALGORITHMS`, :class:`CodecError`.
"""
from __future__ import annotations

import importlib
from typing import Any

from .dtypes import ELEMENT_TYPES
from .errors import CodecError

__all__ = [
    "ALGORITHMS",
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

ALGORITHMS: tuple[str, ...] = ("zvc", "rle", "zlib")
"""Names accepted by :func:`compress` and :func:`compressed_size`."""

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


def zvc_ratio(density: float, itemsize: int = 4) -> float:
    """Analytical ZVC compression ratio of a large array at non-zero fraction ``density``.

    ``32 * itemsize / (4 + 32 * itemsize * density)``: uncompressed bytes of a 32-element
    block over its 4-byte mask plus the packed non-zeros (header ignored).  For float32 this
    is ``32 / (1 + 32 * density)``: 2.6x at density 0.35, 32x for all zeros, 32/33 dense.
    """
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be within [0, 1], got {density}")
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"itemsize must be 1, 2, 4 or 8, got {itemsize}")
    return 32 * itemsize / (4 + 32 * itemsize * density)
