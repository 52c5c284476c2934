"""The self-describing stream container shared by all codecs: header layout and validation.

Layout (all integers little-endian; ``H = 32 + 8 * ndim``)::

    offset  size  field
    0       4     magic            b"SCDC"
    4       1     version          1
    5       1     algorithm        the codec's registered format id (1 = zvc, 2 = rle, 3 = zlib)
    6       1     dtype code       see sst_cdma.codecs.dtypes.ELEMENT_TYPES
    7       1     ndim             0 .. 64
    8       8     count            number of elements (= product of shape)
    16      8     payload length   bytes after the header
    24      4     crc32            zlib.crc32 of the whole stream with these 4 bytes omitted
    28      4     reserved         must be 0
    32      8*nd  shape            one u64 per dimension, C order
    H       ...   payload          algorithm specific

The CRC covers every byte except its own field, so any corruption of up to 32 consecutive bits
anywhere in the stream (in particular every single-bit flip and every changed byte) is detected.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sst_cdma.codecs.buffers import OutputBuffer
from sst_cdma.codecs.checksum import crc32, crc32_start
from sst_cdma.codecs.dtypes import ElementType, by_code
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.registry import by_format_id, get, specs

__all__ = [
    "MAGIC",
    "VERSION",
    "FIXED_HEADER_SIZE",
    "MAX_NDIM",
    "check_shape",
    "MAX_ELEMENTS",
    "Header",
    "header_size",
    "as_byte_array",
    "parse_header",
    "verify_crc",
    "start_crc_check",
    "build_stream",
]

MAGIC = b"SCDC"
VERSION = 1
FIXED_HEADER_SIZE = 32
MAX_NDIM = 64
MAX_ELEMENTS = 1 << 48
"""Upper bound on ``count`` and on every dimension accepted from a header."""

_FIXED = struct.Struct("<4sBBBBQQII")
_CRC_OFFSET = 24
_CRC_END = 28


@dataclass(frozen=True)
class Header:
    """Decoded stream header (see the module docstring for the byte layout)."""

    algorithm: str
    element_type: ElementType
    shape: tuple[int, ...]
    count: int
    payload_len: int
    crc: int

    @property
    def header_len(self) -> int:
        """Bytes taken by the header, ``32 + 8 * ndim``."""
        return header_size(len(self.shape))

    @property
    def stream_len(self) -> int:
        """Total stream length: header plus payload."""
        return self.header_len + self.payload_len


def header_size(ndim: int) -> int:
    """Header size in bytes for an array of ``ndim`` dimensions."""
    return FIXED_HEADER_SIZE + 8 * ndim


def as_byte_array(data: Any) -> np.ndarray:
    """Read-only flat ``uint8`` view of a bytes-like object (no copy).

    Raises :class:`TypeError` for objects without a C-contiguous buffer (e.g. ``str``).
    """
    if isinstance(data, str):
        raise TypeError("expected a bytes-like object, got str")
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"expected a bytes-like object, got {type(data).__name__}") from None
    if not mv.c_contiguous:
        raise TypeError("the buffer must be C-contiguous")
    arr = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, np.uint8)
    arr.flags.writeable = False
    return arr


def check_shape(shape: tuple[int, ...]) -> None:
    """ValueError unless a stream of an array of ``shape`` can be read back: at most
    :data:`MAX_NDIM` dimensions, none over :data:`MAX_ELEMENTS`, nor the product of the
    non-zero ones (an empty array can declare huge dimensions that :func:`parse_header`
    refuses)."""
    if len(shape) > MAX_NDIM:
        raise ValueError(f"arrays with more than {MAX_NDIM} dimensions are not supported")
    extent = 1
    for dim in shape:
        extent *= dim or 1
    if max(shape, default=0) > MAX_ELEMENTS or extent > MAX_ELEMENTS:
        raise ValueError(f"shape {tuple(shape)}: a dimension, or the product of the non-zero "
                         f"ones, exceeds {MAX_ELEMENTS} elements")


def parse_header(buf: np.ndarray) -> Header:
    """Parse and structurally validate the header of ``buf`` (from :func:`as_byte_array`).

    Checks magic, version, algorithm, dtype code, ndim, the reserved field, every dimension,
    the element count and the product of the non-zero dimensions (which numpy needs to index
    even an empty array) against :data:`MAX_ELEMENTS`, ``count == prod(shape)``, and that
    the buffer holds exactly header + payload.  Does not read the payload or check the CRC.
    """
    n = buf.size
    if n < len(MAGIC) and bytes(buf) == MAGIC[:n] and n:
        raise CodecError(f"truncated stream: {n} bytes, header needs {FIXED_HEADER_SIZE}")
    if n < len(MAGIC) or bytes(buf[:4]) != MAGIC:
        raise CodecError("not an sst_cdma codec stream (bad magic)")
    if n < FIXED_HEADER_SIZE:
        raise CodecError(f"truncated stream: {n} bytes, header needs {FIXED_HEADER_SIZE}")
    _, version, alg, code, ndim, count, payload_len, crc, reserved = _FIXED.unpack(
        bytes(buf[:FIXED_HEADER_SIZE])
    )
    if version != VERSION:
        raise CodecError(f"unsupported format version {version} (this reader: {VERSION})")
    spec = by_format_id(alg)
    if spec is None:
        raise CodecError(f"unknown algorithm id {alg} in the stream header (registered: "
                         f"{', '.join(f'{s.name} = {s.format_id}' for s in specs())})")
    algorithm = spec.name
    et = by_code(code)
    if et is None:
        raise CodecError(f"unknown dtype code {code}")
    if ndim > MAX_NDIM:
        raise CodecError(f"ndim {ndim} exceeds {MAX_NDIM}")
    if reserved != 0:
        raise CodecError(f"reserved header field is {reserved:#x}, expected 0")
    hlen = header_size(ndim)
    if n < hlen:
        raise CodecError(f"truncated stream: {n} bytes, header needs {hlen}")
    shape = struct.unpack(f"<{ndim}Q", bytes(buf[FIXED_HEADER_SIZE:hlen]))
    product = 1
    extent = 1  # product of the non-zero dimensions: what numpy needs to fit in an index
    for dim in shape:
        if dim > MAX_ELEMENTS:
            raise CodecError(f"dimension {dim} exceeds {MAX_ELEMENTS}")
        product *= dim
        if dim:
            extent *= dim
    if count > MAX_ELEMENTS:
        raise CodecError(f"element count {count} exceeds {MAX_ELEMENTS}")
    if product != count:
        raise CodecError(f"element count {count} does not match shape {shape}")
    if extent > MAX_ELEMENTS:
        raise CodecError(f"shape {shape}: the product of its non-zero dimensions exceeds "
                         f"{MAX_ELEMENTS}")
    if payload_len > n - hlen:
        raise CodecError(
            f"truncated stream: {n} bytes, header announces {hlen + payload_len}"
        )
    if payload_len < n - hlen:
        raise CodecError(
            f"{n - hlen - payload_len} trailing bytes after the announced payload"
        )
    return Header(algorithm, et, tuple(shape), count, payload_len, crc)


def _stream_crc(buf: np.ndarray) -> int:
    return crc32(buf[_CRC_END:], crc32(buf[:_CRC_OFFSET]))


def start_crc_check(buf: np.ndarray, header: Header) -> Callable[[], None]:
    """Begin verifying the stream CRC (in the background for large streams).

    Returns a function that waits for the result and raises :class:`CodecError` if the
    CRC-32 of the stream does not match the header field.
    """
    pending = crc32_start(buf[_CRC_END:], crc32(buf[:_CRC_OFFSET]))

    def finish() -> None:
        actual = pending()
        if actual != header.crc:
            raise CodecError(
                f"CRC mismatch (stored {header.crc:#010x}, computed {actual:#010x}): "
                "the stream is corrupt"
            )

    return finish


def verify_crc(buf: np.ndarray, header: Header) -> None:
    """Raise :class:`CodecError` unless the stream's CRC-32 matches its header field."""
    start_crc_check(buf, header)()


def build_stream(
    algorithm: str,
    et: ElementType,
    shape: tuple[int, ...],
    payload_size: int,
    write_payload: Any,
) -> bytes:
    """Assemble a stream: header, then ``write_payload(out)`` fills ``payload_size`` bytes.

    ``write_payload`` receives a writable, 8-byte-aligned ``uint8`` array of exactly
    ``payload_size`` bytes.  The CRC is computed last, over the finished stream.
    """
    ndim = len(shape)
    check_shape(shape)
    hlen = header_size(ndim)
    count = 1
    for dim in shape:
        count *= dim
    out = OutputBuffer(hlen + payload_size)
    view = out.view
    write_payload(view[hlen:])
    head = _FIXED.pack(
        MAGIC, VERSION, get(algorithm).format_id, et.code, ndim, count, payload_size, 0, 0
    ) + struct.pack(f"<{ndim}Q", *shape)
    view[:hlen] = np.frombuffer(head, np.uint8)
    crc = _stream_crc(view)
    view[_CRC_OFFSET:_CRC_END] = np.frombuffer(struct.pack("<I", crc), np.uint8)
    return out.finish()
