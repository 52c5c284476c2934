"""LZ4: the LZ4 block format over the raw little-endian element bytes, in 64 KiB chunks.

Payload: ``c = ceil(count * itemsize / CHUNK_BYTES)`` little-endian u32 compressed sizes, then
the ``c`` LZ4 blocks (raw block format, no frame, no stored size), each compressing one
``CHUNK_BYTES`` slice of the raw bytes (the last one shorter).  The blocks are made by LZ4's
default (fast, acceleration 1) compressor, ``LZ4_compress_default``, as the ``lz4`` package's
``lz4.block.compress(mode="default", store_size=False)`` calls it.  Independent fixed-size
chunks are how GPU LZ4 implementations work (nvCOMP's batched LZ4 API); 64 KiB is LZ4's match
window.  The stream's CRC-32 replaces LZ4's optional checksums.  The size is only known by
compressing, so the ratio from density is sampled (:mod:`.sampling`).
"""
from __future__ import annotations

import numpy as np

from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.registry import register

__all__ = ["LZ4", "CHUNK_BYTES", "MAX_LZ4_RATIO", "chunk_count"]

CHUNK_BYTES = 1 << 16
"""Raw bytes per LZ4 block (LZ4's 64 KiB match window)."""

MAX_LZ4_RATIO = 255
"""An LZ4 block cannot expand by more than ~255:1 (one length byte per 255 matched bytes)."""


def chunk_count(raw_len: int) -> int:
    """Number of LZ4 blocks of a payload holding ``raw_len`` raw bytes."""
    return -(-raw_len // CHUNK_BYTES)


def _lz4_block():  # type: ignore[no-untyped-def]
    """The ``lz4.block`` module, imported on first use (a simulation that only estimates
    ratios never needs it)."""
    import lz4.block

    return lz4.block


def _compress_chunks(bits: np.ndarray) -> list[bytes]:
    """One LZ4 block per :data:`CHUNK_BYTES` slice of the raw bytes."""
    block = _lz4_block()
    raw = bits.view(np.uint8)
    return [block.compress(raw[i:i + CHUNK_BYTES], mode="default", store_size=False)
            for i in range(0, raw.size, CHUNK_BYTES)]


class _LZ4:
    """The LZ4 codec (see the module docstring for the payload layout)."""

    name = "lz4"

    def payload_size(self, bits: np.ndarray) -> int:
        """Size table plus compressed blocks; LZ4's output size is only known by compressing."""
        return self.prepare(bits).size

    def prepare(self, bits: np.ndarray) -> Payload:
        """Compress now; ``write`` copies the size table and the blocks into the stream."""
        blocks = _compress_chunks(bits)
        sizes = np.array([len(b) for b in blocks], dtype="<u4")
        table = 4 * len(blocks)

        def write(out: np.ndarray) -> None:
            out[:table] = sizes.view(np.uint8)
            pos = table
            for b in blocks:
                out[pos:pos + len(b)] = np.frombuffer(b, np.uint8)
                pos += len(b)

        return Payload(table + int(sizes.sum()), write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """The size table must fit, and the raw size must be reachable from the blocks."""
        raw = count * itemsize
        chunks = chunk_count(raw)
        if payload_len < 5 * chunks:
            raise CodecError(f"lz4 payload of {payload_len} bytes is too short for the "
                             f"{chunks} blocks of {count} elements")
        if raw > MAX_LZ4_RATIO * (payload_len - 4 * chunks) + 64:
            raise CodecError(
                f"lz4 payload of {payload_len} bytes cannot expand to {count} elements")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Decompress every block to exactly its chunk's length."""
        raw_len = count * np.dtype(bits_dtype).itemsize
        chunks = chunk_count(raw_len)
        sizes = payload[:4 * chunks].view("<u4").astype(np.int64)
        if (chunks and sizes.min() < 1) or 4 * chunks + int(sizes.sum()) != payload.size:
            raise CodecError("lz4 block sizes do not add up to the payload length")
        out = np.empty(raw_len, np.uint8)
        block = _lz4_block()
        pos = 4 * chunks
        for i, size in enumerate(sizes.tolist()):
            want = min(CHUNK_BYTES, raw_len - i * CHUNK_BYTES)
            try:
                data = block.decompress(payload[pos:pos + size], uncompressed_size=want)
            except block.LZ4BlockError as exc:
                raise CodecError(f"corrupt lz4 block {i}: {exc}") from None
            if len(data) != want:
                raise CodecError(f"lz4 block {i} decodes to {len(data)} bytes, not {want}")
            out[i * CHUNK_BYTES:i * CHUNK_BYTES + want] = np.frombuffer(data, np.uint8)
            pos += size
        return out.view(bits_dtype)


LZ4 = _LZ4()
"""The LZ4 :class:`~sst_cdma.codecs.codec.Codec` instance."""

register("lz4", 4, LZ4,
         description="LZ4 (default fast mode) over the raw element bytes, 64 KiB blocks")
