"""zlib: the standard library's DEFLATE over the raw little-endian element bytes.

Payload: one zlib stream (RFC 1950: 2-byte header, DEFLATE data, Adler-32) produced by
``zlib.compress(raw, level=6, wbits=15)`` from the elements' little-endian bytes in C order.
Decoding requires the zlib stream to end exactly at the payload end and to yield exactly
``count * itemsize`` bytes.  DEFLATE's size is only known by compressing, so the ratio from
density is sampled (the registry's default, :mod:`.sampling`).
"""
from __future__ import annotations

import zlib

import numpy as np

from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.registry import register

__all__ = ["ZLIB", "LEVEL", "MAX_DEFLATE_RATIO"]

LEVEL = 6
"""zlib compression level used by the encoder (zlib's default speed/ratio trade-off)."""

MAX_DEFLATE_RATIO = 1032
"""DEFLATE cannot expand data by more than ~1032:1; used to reject impossible headers."""


class _Zlib:
    """The zlib codec (see the module docstring for the payload layout)."""

    name = "zlib"

    def payload_size(self, bits: np.ndarray) -> int:
        """Compressed length; DEFLATE output size is only known by compressing."""
        return len(zlib.compress(bits, LEVEL))  # type: ignore[arg-type]

    def prepare(self, bits: np.ndarray) -> Payload:
        """Compress now; ``write`` copies the result into the stream."""
        data = zlib.compress(bits, LEVEL)  # type: ignore[arg-type]

        def write(out: np.ndarray) -> None:
            out[:] = np.frombuffer(data, np.uint8)

        return Payload(len(data), write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """The claimed raw size must be reachable from ``payload_len`` bytes of DEFLATE."""
        if payload_len == 0:
            raise CodecError("empty zlib payload")
        if count * itemsize > MAX_DEFLATE_RATIO * payload_len + 64:
            raise CodecError(
                f"zlib payload of {payload_len} bytes cannot expand to {count} elements"
            )

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Inflate with an output cap of ``count * itemsize + 1`` bytes."""
        expected = count * np.dtype(bits_dtype).itemsize
        d = zlib.decompressobj()
        try:
            # Cap one byte above the expected size: enough to let zlib reach the stream end
            # and to notice a stream that would produce too much, never more.
            raw = d.decompress(payload, expected + 1)  # type: ignore[arg-type]
        except zlib.error as exc:
            raise CodecError(f"corrupt zlib payload: {exc}") from None
        if len(raw) != expected or not d.eof or d.unconsumed_tail or d.unused_data:
            raise CodecError(
                f"zlib payload does not decode to exactly {expected} bytes"
            )
        return np.frombuffer(raw, bits_dtype).copy()


ZLIB = _Zlib()
"""The zlib :class:`~sst_cdma.codecs.codec.Codec` instance."""

register("zlib", 3, ZLIB, description="DEFLATE (zlib level 6) over the raw element bytes")
