"""The codecs' public functions (the package re-exports them; see its docstring). They load
the numba kernels, which is why the package imports this module only when one is first used."""
from __future__ import annotations

from typing import Union

import numpy as np

from sst_cdma.codecs import format as _format
from sst_cdma.codecs import registry
from sst_cdma.codecs.checksum import PARALLEL_MIN_BYTES
from sst_cdma.codecs.codec import Codec
from sst_cdma.codecs.dtypes import bits_view, element_type_of, from_bits
from sst_cdma.codecs.format import Header, as_byte_array, parse_header, start_crc_check, verify_crc
from sst_cdma.codecs.zvc_kernels import nonzero_count as _bits_nonzero_count

BytesLike = Union[bytes, bytearray, memoryview]


def _as_array(array: np.ndarray) -> np.ndarray:
    return np.asarray(array) if isinstance(array, np.generic) else array


def _codec(algorithm: str) -> Codec:
    """The registered codec ``algorithm``; ValueError naming the registered ones if none."""
    return registry.get(algorithm).codec


def header_size(ndim: int) -> int:
    """Bytes of stream header for an array of ``ndim`` dimensions: ``32 + 8 * ndim``."""
    return _format.header_size(ndim)


def compress(array: np.ndarray, algorithm: str, *, element_type: str | None = None) -> bytes:
    """Compress ``array`` losslessly into a self-describing stream.

    ``algorithm`` is a registered codec (:func:`~.registry.algorithm_names`; else
    :class:`ValueError` naming them).  ``array`` is any numpy array (or numpy scalar, taken as
    a 0-d array) of a supported dtype (:data:`SUPPORTED_DTYPES`; others raise
    :class:`TypeError`), any shape including 0-d and empty, any memory order; it is encoded in
    C order.
    ``element_type="bfloat16"`` tags a ``uint16``/``int16`` array of raw bfloat16 words.
    Large arrays are processed on several threads.
    """
    codec = _codec(algorithm)
    array = _as_array(array)
    et = element_type_of(array, element_type)
    _format.check_shape(array.shape)
    bits = bits_view(array, et)
    payload = codec.prepare(bits)
    return _format.build_stream(algorithm, et, tuple(array.shape), payload.size, payload.write)


def decompress(data: BytesLike) -> np.ndarray:
    """Decode a stream made by :func:`compress`; the result is bit-exact.

    Returns a new, writable, C-contiguous array with the original dtype (in little-endian
    byte order) and shape.  Any corrupt, truncated, inconsistent or foreign input raises
    :class:`CodecError`: the header is validated and the payload length checked against
    the element count before anything is allocated, the CRC-32 is verified, and the payload
    is decoded with every index bounds-checked.  Non-buffer inputs raise :class:`TypeError`.
    """
    buf = as_byte_array(data)
    header = parse_header(buf)
    codec = _codec(header.algorithm)
    et = header.element_type
    codec.check_sizes(header.count, et.itemsize, header.payload_len)
    if buf.size < PARALLEL_MIN_BYTES:
        verify_crc(buf, header)
        bits = codec.decode(buf[header.header_len:], header.count, et.bits_dtype)
    else:
        # Large stream: checksum in the background while decoding (which validates the
        # structure on its own, so decoding a corrupt payload is safe), then check it.
        finish_crc = start_crc_check(buf, header)
        bits = codec.decode(buf[header.header_len:], header.count, et.bits_dtype)
        finish_crc()
    return from_bits(bits, et, header.shape)


def stream_info(data: BytesLike) -> Header:
    """Validated header of a stream (structure and CRC), without decoding the payload."""
    buf = as_byte_array(data)
    header = parse_header(buf)
    _codec(header.algorithm).check_sizes(
        header.count, header.element_type.itemsize, header.payload_len
    )
    verify_crc(buf, header)
    return header


def compressed_size(
    array: np.ndarray, algorithm: str, *, element_type: str | None = None
) -> int:
    """Exactly ``len(compress(array, algorithm))``, computed without building the stream.

    Each codec sizes its payload as cheaply as it can: ZVC ``4 * ceil(n / 32) + itemsize *
    nnz`` from one counting pass, RLE one token-counting pass, zlib compresses (DEFLATE size
    cannot be predicted).
    """
    codec = _codec(algorithm)
    array = _as_array(array)
    et = element_type_of(array, element_type)
    _format.check_shape(array.shape)
    bits = bits_view(array, et)
    return _format.header_size(array.ndim) + codec.payload_size(bits)


def nonzero_count(array: np.ndarray) -> int:
    """Number of elements whose bit pattern is not all zeros (``-0.0`` and NaN count)."""
    array = _as_array(array)
    et = element_type_of(array)
    return _bits_nonzero_count(bits_view(array, et))


def density(array: np.ndarray) -> float:
    """Fraction of elements that are non-zero by bit pattern (0.0 for an empty array)."""
    return nonzero_count(array) / array.size if array.size else 0.0


