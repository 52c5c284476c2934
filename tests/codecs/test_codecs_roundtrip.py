"""Lossless, bit-exact round trips for every codec, dtype, shape and special value."""
from __future__ import annotations

import numpy as np
import pytest
from codec_helpers import ALGS, DTYPES, bit_arrays, raw_bits, same_bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sst_cdma import codecs

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(x=bit_arrays(), alg=st.sampled_from(ALGS))
def test_roundtrip_is_bit_exact(x: np.ndarray, alg: str) -> None:
    blob = codecs.compress(x, alg)
    assert isinstance(blob, bytes)
    y = codecs.decompress(blob)
    assert same_bits(x, y)
    assert y.flags.c_contiguous and y.flags.writeable


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("n", [0, 1, 2, 31, 32, 33, 63, 64, 65, 95, 96, 97, 1000, 4097])
@pytest.mark.parametrize("fill", ["zeros", "dense", "mixed"])
def test_lengths_around_block_edges(alg: str, n: int, fill: str) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32) + np.float32(3.0)  # never zero
    if fill == "zeros":
        x[:] = 0
    elif fill == "mixed":
        x[rng.random(n) < 0.5] = 0
    y = codecs.decompress(codecs.compress(x, alg))
    assert same_bits(x, y)


SPECIAL_F32 = [
    0x00000000, 0x80000000,              # +0.0, -0.0
    0x7F800000, 0xFF800000,              # +inf, -inf
    0x7FC00000, 0x7FC00001, 0xFFC12345,  # quiet NaNs with distinct payloads
    0x7F800001, 0x7FBFFFFF,              # signalling NaNs
    0x00000001, 0x807FFFFF, 0x00400000,  # denormals
    0x3F800000, 0xBF800000,              # +-1.0
]


@pytest.mark.parametrize("alg", ALGS)
def test_float32_special_values_survive(alg: str) -> None:
    words = np.array(SPECIAL_F32 * 5, dtype=np.uint32)  # 70 elements: a partial last block
    x = words.view(np.float32)
    y = codecs.decompress(codecs.compress(x, alg))
    assert y.dtype == np.float32
    assert raw_bits(y).tolist() == words.tolist()


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("dtype,words", [
    ("float16", [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E01, 0x7C01, 0x0001, 0x83FF]),
    ("float64", [0, 1 << 63, 0x7FF0000000000000, 0x7FF8000000000001, 0xFFF0000000000001, 1,
                 0x000FFFFFFFFFFFFF]),
])
def test_other_float_special_values_survive(alg: str, dtype: str, words: list[int]) -> None:
    bits = np.array(words * 7, dtype=f"<u{np.dtype(dtype).itemsize}")
    x = bits.view(dtype)
    y = codecs.decompress(codecs.compress(x, alg))
    assert y.dtype == np.dtype(dtype)
    assert raw_bits(y).tolist() == bits.tolist()


def test_negative_zero_is_nonzero_for_zvc() -> None:
    x = np.array([-0.0, 0.0] * 16, dtype=np.float32)
    blob = codecs.compress(x, "zvc")
    assert len(blob) == codecs.header_size(1) + 4 + 4 * 16  # the 16 -0.0 are stored
    assert np.signbit(codecs.decompress(blob)[::2]).all()


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("shape", [(), (0,), (0, 5), (3, 0, 2), (1,), (2, 3, 4, 5), (7, 33)])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64"])
def test_shapes_including_empty_and_scalar(alg: str, shape: tuple[int, ...], dtype: str) -> None:
    rng = np.random.default_rng(1)
    n = int(np.prod(shape))
    x = (rng.integers(0, 3, n) * 7).astype(dtype).reshape(shape)
    y = codecs.decompress(codecs.compress(x, alg))
    assert same_bits(x, y)
    assert y.shape == shape


@pytest.mark.parametrize("alg", ALGS)
def test_non_contiguous_and_fortran_input(alg: str) -> None:
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 50)).astype(np.float32)
    base[rng.random((40, 50)) < 0.6] = 0
    for x in (base[::2, 1::3], base.T, np.asfortranarray(base)):
        y = codecs.decompress(codecs.compress(x, alg))
        assert y.flags.c_contiguous
        assert np.array_equal(raw_bits(np.ascontiguousarray(x)), raw_bits(y))
        assert y.shape == x.shape


@pytest.mark.parametrize("alg", ALGS)
def test_big_endian_input_round_trips_by_value(alg: str) -> None:
    x = np.array([0.0, 1.5, -2.25, 0.0, np.inf], dtype=">f4")
    y = codecs.decompress(codecs.compress(x, alg))
    assert y.dtype == np.dtype("<f4")
    assert np.array_equal(y, x.astype("<f4"))


@pytest.mark.parametrize("alg", ALGS)
def test_misaligned_input_array(alg: str) -> None:
    raw = np.random.default_rng(5).integers(0, 256, 4 * 100 + 1, dtype=np.uint8)
    raw[1:201] = 0  # first 50 elements zero
    x = np.frombuffer(raw.data, dtype=np.float32, count=100, offset=1)  # misaligned view
    assert not x.flags.aligned
    assert 0 < np.count_nonzero(raw_bits(np.ascontiguousarray(x))) < 100
    y = codecs.decompress(codecs.compress(x, alg))
    assert same_bits(np.ascontiguousarray(x), y)


@pytest.mark.parametrize("alg", ALGS)
def test_bfloat16_words_tagged_explicitly(alg: str) -> None:
    words = np.array([0, 0x3F80, 0x8000, 0x7FC1, 0, 0xFF80] * 11, dtype=np.uint16)
    blob = codecs.compress(words, alg, element_type="bfloat16")
    info = codecs.stream_info(blob)
    assert info.element_type.name == "bfloat16"
    y = codecs.decompress(blob)
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        assert y.dtype == np.uint16
    else:
        assert y.dtype.name == "bfloat16"
    assert raw_bits(y).tolist() == words.tolist()


def test_element_type_rejects_mismatch() -> None:
    with pytest.raises(TypeError):
        codecs.compress(np.zeros(4, np.float32), "zvc", element_type="bfloat16")
    with pytest.raises(TypeError):
        codecs.compress(np.zeros(4, np.uint16), "zvc", element_type="float16")


@pytest.mark.parametrize("alg", ALGS)
def test_decompress_accepts_any_bytes_like(alg: str) -> None:
    x = np.array([0, 5, 0, 7], dtype=np.int32)
    blob = codecs.compress(x, alg)
    for data in (blob, bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)):
        y = codecs.decompress(data)
        assert same_bits(x, y)
    # The result owns its memory: changing it does not touch the input buffer.
    buf = bytearray(blob)
    y = codecs.decompress(buf)
    y[:] = 99
    assert bytes(buf) == blob


# zlib's large-array path does not depend on the dtype: two dtypes suffice there.
LARGE_CASES = [(a, d) for a in ALGS for d in DTYPES if a != "zlib" or d in ("float32", "int8")]


@pytest.mark.slow  # arrays large enough for the parallel path
@pytest.mark.parametrize("alg,dtype", LARGE_CASES)
def test_large_arrays_use_the_parallel_path(alg: str, dtype: str, kernel_path: str) -> None:
    rng = np.random.default_rng(3)
    n = (1 << 20) + 77  # above the parallel threshold, partial final block and chunk
    k = np.dtype(dtype).itemsize
    bits = rng.integers(0, 256, n * k, dtype=np.uint8).view(f"<u{k}")
    bits[rng.random(n) < 0.65] = 0
    x = bits.view(dtype)
    blob = codecs.compress(x, alg)
    assert len(blob) == codecs.compressed_size(x, alg)
    assert same_bits(x, codecs.decompress(blob))


@settings(max_examples=60, deadline=None)
@given(x=bit_arrays(max_side=300, max_dims=1))
def test_simd_and_scalar_kernels_write_identical_streams(x: np.ndarray) -> None:
    import os

    from sst_cdma.codecs import simd

    old = os.environ.get("SST_CDMA_CODECS_SIMD")
    try:
        os.environ["SST_CDMA_CODECS_SIMD"] = "0"
        scalar = codecs.compress(x, "zvc")
        assert not simd.enabled(x.dtype.itemsize)
        assert same_bits(x, codecs.decompress(scalar))
        os.environ["SST_CDMA_CODECS_SIMD"] = "1"
        fast = codecs.compress(x, "zvc")
        assert same_bits(x, codecs.decompress(fast))
    finally:
        if old is None:
            os.environ.pop("SST_CDMA_CODECS_SIMD", None)
        else:
            os.environ["SST_CDMA_CODECS_SIMD"] = old
    assert fast == scalar


def test_concurrent_calls_from_several_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4)
    arrays = []
    for i in range(6):
        x = rng.standard_normal((1 << 20) + i).astype(np.float32)
        x[rng.random(x.size) < 0.6] = 0
        arrays.append(x)

    def work(x: np.ndarray) -> bool:
        return all(same_bits(x, codecs.decompress(codecs.compress(x, a))) for a in ("zvc", "rle"))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, arrays))
