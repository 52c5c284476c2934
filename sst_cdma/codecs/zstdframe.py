"""Zstandard: one zstd frame (level 1) over the raw little-endian element bytes.

Payload: a single Zstandard frame (RFC 8878) with the content size in its header and no
checksum or dictionary id (the stream's CRC-32 covers it), made by ``zstandard``'s
``ZstdCompressor(level=LEVEL)``, single-threaded, so the output is a fixed function of the
input and the libzstd version.  Level 1 is the fastest of zstd's regular levels (1-22), the one
for compression in a data path; on activations it keeps libzstd's default level 3's ratio to
within 2% at 1.6-5x its speed (docs/codecs.md).  Decoding requires the frame's
content size to equal ``count * itemsize`` and the frame to end exactly at the payload end.
The size is only known by compressing, so the ratio from density is sampled
(:mod:`.sampling`).  :mod:`.byteplane` uses the same frame functions on shuffled bytes.
"""
from __future__ import annotations

import numpy as np

from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.registry import register

__all__ = ["ZSTD", "LEVEL", "MAX_ZSTD_RATIO", "zstd_compress", "zstd_decompress",
           "check_zstd_sizes"]

LEVEL = 1
"""Zstandard compression level (the fastest standard level)."""

MAX_ZSTD_RATIO = 1 << 15
"""A zstd frame cannot expand by more than 32768:1 (an RLE block: 4 bytes for 128 KiB)."""


def _zstd():  # type: ignore[no-untyped-def]
    """The ``zstandard`` module, imported on first use."""
    import zstandard

    return zstandard


def zstd_compress(raw: np.ndarray) -> bytes:
    """One level-:data:`LEVEL` frame of the bytes of ``raw`` (content size, no checksum)."""
    zstd = _zstd()
    cctx = zstd.ZstdCompressor(level=LEVEL, write_checksum=False, write_content_size=True,
                               write_dict_id=False)
    return cctx.compress(raw)


#: payload bytes fed to the decoder per step: the output grows with what the frame really
#: holds, never to the size its header claims before the data is there
_INPUT_STEP = 1 << 20


def zstd_decompress(payload: np.ndarray, expected: int, what: str) -> np.ndarray:
    """The ``expected`` bytes of the single frame that is ``payload``, as ``uint8``;
    :class:`CodecError` (naming ``what``) for anything else. The frame is decoded in steps,
    so a header that claims more than its blocks hold allocates only what they do hold."""
    zstd = _zstd()
    try:
        size = zstd.frame_content_size(payload)
        if size != expected:
            raise CodecError(f"{what} frame holds {size} bytes, expected {expected}")
        decoder = zstd.ZstdDecompressor().decompressobj()
        view = memoryview(payload).cast("B")  # type: ignore[arg-type]
        raw = bytearray()
        for start in range(0, len(view), _INPUT_STEP):
            raw += decoder.decompress(view[start:start + _INPUT_STEP])
            if len(raw) > expected:
                break
        if not decoder.eof:
            raise CodecError(f"corrupt {what} payload: truncated frame")
        if decoder.unused_data:
            raise CodecError(f"corrupt {what} payload: {len(decoder.unused_data)} bytes of "
                             "unused data after its frame")
    except zstd.ZstdError as exc:
        raise CodecError(f"corrupt {what} payload: {exc}") from None
    except MemoryError:
        raise CodecError(f"{what} payload of {len(payload)} bytes claims {expected} raw "
                         "bytes, more than this process can hold") from None
    if len(raw) != expected:
        raise CodecError(f"{what} payload decodes to {len(raw)} bytes, expected {expected}")
    return np.frombuffer(raw, np.uint8)


def check_zstd_sizes(raw_len: int, payload_len: int, what: str) -> None:
    """Reject a frame of ``payload_len`` bytes that claims ``raw_len`` raw bytes it cannot
    hold (a frame header alone takes at least 6 bytes)."""
    if payload_len < 6:
        raise CodecError(f"{what} payload of {payload_len} bytes is shorter than a frame header")
    if raw_len > MAX_ZSTD_RATIO * payload_len:
        raise CodecError(f"{what} payload of {payload_len} bytes cannot expand to "
                         f"{raw_len} bytes")


class _Zstd:
    """The Zstandard codec (see the module docstring for the payload layout)."""

    name = "zstd"

    def payload_size(self, bits: np.ndarray) -> int:
        """Frame length; zstd's output size is only known by compressing."""
        return len(zstd_compress(bits))

    def prepare(self, bits: np.ndarray) -> Payload:
        """Compress now; ``write`` copies the frame into the stream."""
        data = zstd_compress(bits)

        def write(out: np.ndarray) -> None:
            out[:] = np.frombuffer(data, np.uint8)

        return Payload(len(data), write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """The claimed raw size must be reachable from ``payload_len`` bytes of frame."""
        check_zstd_sizes(count * itemsize, payload_len, "zstd")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Decompress the frame to exactly ``count`` elements."""
        raw = zstd_decompress(payload, count * np.dtype(bits_dtype).itemsize, "zstd")
        return raw.copy().view(bits_dtype)


ZSTD = _Zstd()
"""The Zstandard :class:`~sst_cdma.codecs.codec.Codec` instance."""

register("zstd", 5, ZSTD, description="Zstandard (level 1) over the raw element bytes")
