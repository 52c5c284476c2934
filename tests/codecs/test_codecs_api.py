"""Public API contract: errors, header layout, stream_info, helpers."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from codec_helpers import ALGS

from sst_cdma import codecs
from sst_cdma.codecs import CodecError, registry


def test_algorithms_constant() -> None:
    assert codecs.ALGORITHMS == ("zvc", "rle", "zlib", "lz4", "zstd", "bplane_zstd")
    assert issubclass(CodecError, ValueError)


@pytest.mark.parametrize("bad", ["ZVC", "brotli", "", None, 3])
def test_unknown_algorithm_names_the_valid_ones(bad: object) -> None:
    x = np.zeros(4, np.float32)
    for fn in (codecs.compress, codecs.compressed_size):
        with pytest.raises(ValueError) as info:
            fn(x, bad)  # type: ignore[arg-type]
        assert not isinstance(info.value, CodecError)
        for name in codecs.ALGORITHMS:
            assert name in str(info.value)


@pytest.mark.parametrize("x", [
    np.zeros(3, np.complex64), np.array(["a"]), np.array([object()]),
    np.zeros(3, "datetime64[s]"), np.zeros(2, [("a", "<f4")]), np.zeros(2, np.longdouble),
])
def test_unsupported_dtypes_raise_type_error(x: np.ndarray) -> None:
    if x.dtype == np.longdouble and np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError):
        codecs.compress(x, "zvc")


def test_non_arrays_raise_type_error() -> None:
    with pytest.raises(TypeError):
        codecs.compress([1.0, 0.0], "zvc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codecs.decompress("SCDC")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codecs.decompress(12345)  # type: ignore[arg-type]


def test_header_layout_is_fixed_little_endian() -> None:
    x = np.zeros((3, 70), np.float32)
    x[1, 5] = 2.0
    blob = codecs.compress(x, "zvc")
    magic, version, alg, code, ndim, count, plen, crc, reserved = struct.unpack_from(
        "<4sBBBBQQII", blob)
    assert (magic, version, alg, code, ndim) == (b"SCDC", 1, 1, 11, 2)
    assert (count, reserved) == (210, 0)
    assert struct.unpack_from("<2Q", blob, 32) == (3, 70)
    assert plen == len(blob) - 48
    assert crc == zlib.crc32(blob[28:], zlib.crc32(blob[:24]))
    # payload: first block mask is 0 (row 0, elements 0..31), ...; element 75 is non-zero.
    payload = blob[48:]
    assert plen == 4 * 7 + 4
    masks_and_values = struct.unpack_from("<IIIII", payload)
    assert masks_and_values[:2] == (0, 0)
    assert masks_and_values[2] == 1 << (75 - 64)
    assert struct.unpack_from("<f", payload, 12)[0] == 2.0


@pytest.mark.parametrize("alg", ALGS)
def test_algorithm_and_dtype_codes(alg: str) -> None:
    codes = {"bool": 1, "int8": 2, "uint8": 3, "int16": 4, "uint16": 5, "int32": 6,
             "uint32": 7, "int64": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12}
    for name, code in codes.items():
        blob = codecs.compress(np.zeros(2, name), alg)
        assert blob[5] == registry.get(alg).format_id == {
            "zvc": 1, "rle": 2, "zlib": 3, "lz4": 4, "zstd": 5, "bplane_zstd": 6}[alg]
        assert blob[6] == code


def test_stream_info() -> None:
    x = np.zeros((4, 5), np.int16)
    x[0, 0] = 3
    blob = codecs.compress(x, "rle")
    info = codecs.stream_info(blob)
    assert info.algorithm == "rle"
    assert info.element_type.name == "int16"
    assert info.shape == (4, 5) and info.count == 20
    assert info.header_len == 48 and info.stream_len == len(blob)
    assert info.payload_len == len(blob) - 48
    bad = bytearray(blob)
    bad[-1] ^= 1
    with pytest.raises(CodecError):
        codecs.stream_info(bytes(bad))


def test_compress_does_not_modify_or_keep_input() -> None:
    x = np.array([0, 1, 0, 2], np.int32)
    before = x.copy()
    blob = codecs.compress(x, "zvc")
    assert np.array_equal(x, before) and x.flags.writeable
    x[:] = 5
    assert codecs.decompress(blob).tolist() == [0, 1, 0, 2]


def test_large_output_is_plain_immutable_bytes() -> None:
    x = np.ones(1 << 20, np.float32)  # 4 MiB stream: written in place into the bytes object
    blob = codecs.compress(x, "zvc")
    assert type(blob) is bytes
    assert hash(blob) == hash(bytes(blob))
    assert blob == codecs.compress(x, "zvc")
    assert np.array_equal(codecs.decompress(blob), x)


def test_module_docstring_example() -> None:
    import doctest

    result = doctest.testmod(codecs, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("alg", ALGS)
def test_a_shape_the_reader_would_refuse_is_refused_when_compressing(alg: str) -> None:
    """An empty array may declare dimensions beyond what a stream header may hold: the writer
    refuses it up front instead of writing a stream its own reader rejects."""
    huge = np.empty((0, 2**50), np.float32)
    for call in (codecs.compress, codecs.compressed_size):
        with pytest.raises(ValueError, match="exceeds 281474976710656 elements"):
            call(huge, alg)
    fits = np.empty((0, 2**40), np.float32)
    assert codecs.decompress(codecs.compress(fits, alg)).shape == fits.shape
