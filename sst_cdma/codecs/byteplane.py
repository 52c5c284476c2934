"""Byte-plane + Zstandard: the elements' bytes regrouped into planes, then one zstd frame.

For floats, the high byte of every element holds the sign and most of the exponent, which
takes few distinct values across an activation tensor, while the low bytes (mantissa) are
close to random.  Interleaved, an entropy coder sees the mix; split into planes, it compresses
the exponent plane well and stores the mantissa planes nearly raw.  This is the byte-shuffle
filter of Blosc, HDF5 (``H5Pset_shuffle``) and numcodecs (``Shuffle``), here with planes
ordered most-significant first (docs/codecs.md cites the libraries).

Payload: one Zstandard frame (as :mod:`.zstdframe`: level 1, content size, no checksum) of the
``count * itemsize`` plane bytes: plane 0 is the most significant byte of every element in C
order, then the next byte of every element, ..., the least significant byte last.  One-byte
elements have one plane, so their payload equals the ``zstd`` codec's.
"""
from __future__ import annotations

import numpy as np

from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.registry import register
from sst_cdma.codecs.zstdframe import check_zstd_sizes, zstd_compress, zstd_decompress

__all__ = ["BYTEPLANE", "to_planes", "from_planes"]


def to_planes(bits: np.ndarray) -> np.ndarray:
    """The bytes of flat little-endian ``bits`` as planes, most significant first (numpy)."""
    k = bits.dtype.itemsize
    return np.ascontiguousarray(bits.view(np.uint8).reshape(-1, k)[:, ::-1].T).reshape(-1)


def from_planes(planes: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
    """Inverse of :func:`to_planes`: ``count`` elements of ``bits_dtype`` (a new array)."""
    k = np.dtype(bits_dtype).itemsize
    out = np.empty(count, bits_dtype)
    out_bytes = out.view(np.uint8).reshape(count, k)
    # One strided column write per plane: several times faster than one transposed copy.
    for plane, row in enumerate(planes.reshape(k, count)):
        out_bytes[:, k - 1 - plane] = row
    return out


class _BytePlane:
    """The byte-plane + zstd codec (see the module docstring for the payload layout)."""

    name = "bplane_zstd"

    def payload_size(self, bits: np.ndarray) -> int:
        """Frame length of the planes; only known by compressing."""
        return len(zstd_compress(to_planes(bits)))

    def prepare(self, bits: np.ndarray) -> Payload:
        """Shuffle and compress now; ``write`` copies the frame into the stream."""
        data = zstd_compress(to_planes(bits))

        def write(out: np.ndarray) -> None:
            out[:] = np.frombuffer(data, np.uint8)

        return Payload(len(data), write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """The claimed raw size must be reachable from ``payload_len`` bytes of frame."""
        check_zstd_sizes(count * itemsize, payload_len, "bplane_zstd")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Decompress the planes and interleave them back into elements."""
        planes = zstd_decompress(payload, count * np.dtype(bits_dtype).itemsize, "bplane_zstd")
        return from_planes(planes, count, bits_dtype)


BYTEPLANE = _BytePlane()
"""The byte-plane + zstd :class:`~sst_cdma.codecs.codec.Codec` instance."""

register("bplane_zstd", 6, BYTEPLANE,
         description="byte planes (most significant first) compressed by Zstandard level 1")
