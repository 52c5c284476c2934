"""Stream sizes: compressed_size, the documented payload layouts, and ZVC's ratio formula."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from codec_helpers import (
    ALGS,
    DTYPES,
    bit_arrays,
    header_len,
    raw_bits,
    reference_rle_payload,
    reference_zvc_payload,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sst_cdma import codecs

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(x=bit_arrays(), alg=st.sampled_from(ALGS))
def test_compressed_size_equals_stream_length(x: np.ndarray, alg: str) -> None:
    assert codecs.compressed_size(x, alg) == len(codecs.compress(x, alg))


@SETTINGS
@given(x=bit_arrays())
def test_zvc_size_formula(x: np.ndarray) -> None:
    n = x.size
    nnz = int(np.count_nonzero(raw_bits(x)))
    expected = header_len(x.ndim) + 4 * ((n + 31) // 32) + x.dtype.itemsize * nnz
    assert len(codecs.compress(x, "zvc")) == expected
    assert codecs.nonzero_count(x) == nnz


@SETTINGS
@given(x=bit_arrays(max_side=90, max_dims=2))
def test_zvc_payload_matches_reference_layout(x: np.ndarray) -> None:
    blob = codecs.compress(x, "zvc")
    assert blob[header_len(x.ndim):] == reference_zvc_payload(x)


@SETTINGS
@given(x=bit_arrays(max_side=90, max_dims=2))
def test_rle_payload_matches_reference_layout(x: np.ndarray) -> None:
    blob = codecs.compress(x, "rle")
    assert blob[header_len(x.ndim):] == reference_rle_payload(x)


@pytest.mark.parametrize("n_zero,n_lit", [(65535, 0), (65536, 3), (200_000, 1), (0, 65536),
                                          (3, 140_000), (131_071, 131_071)])
def test_rle_long_runs_split_into_tokens(n_zero: int, n_lit: int) -> None:
    x = np.concatenate([np.zeros(n_zero, np.uint8), np.full(n_lit, 9, np.uint8)])
    blob = codecs.compress(x, "rle")
    assert blob[header_len(1):] == reference_rle_payload(x)
    assert codecs.compressed_size(x, "rle") == len(blob)
    y = codecs.decompress(blob)
    assert np.array_equal(x, y)


def test_rle_escape_token_bytes() -> None:
    # 70000 zeros then one literal: (65535, 0) escape, then (4465, 1) + literal.
    x = np.zeros(70_001, np.uint16)
    x[-1] = 0xABCD
    payload = codecs.compress(x, "rle")[header_len(1):]
    assert payload == struct.pack("<HH", 65535, 0) + struct.pack("<HHH", 4465, 1, 0xABCD)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zlib_payload_is_level6_zlib_stream(dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 3000).astype(dtype)
    payload = codecs.compress(x, "zlib")[header_len(1):]
    assert payload == zlib.compress(np.ascontiguousarray(x).tobytes(), 6)


def test_zvc_ratio_analytic() -> None:
    assert codecs.zvc_ratio(0.35) == pytest.approx(32 / (1 + 32 * 0.35))
    assert codecs.zvc_ratio(0.35) == pytest.approx(2.623, abs=1e-3)
    assert codecs.zvc_ratio(0.0) == 32.0
    assert codecs.zvc_ratio(1.0) == pytest.approx(32 / 33)
    assert codecs.zvc_ratio(0.5, itemsize=2) == pytest.approx(64 / (4 + 32))
    with pytest.raises(ValueError):
        codecs.zvc_ratio(1.5)
    with pytest.raises(ValueError):
        codecs.zvc_ratio(0.5, itemsize=3)


@pytest.mark.parametrize("density", [0.0, 0.35, 1.0])
def test_measured_zvc_ratio_matches_analytic_for_large_arrays(density: float) -> None:
    rng = np.random.default_rng(7)
    n = 1 << 21
    x = np.zeros(n, np.float32)
    nz = rng.choice(n, size=int(round(density * n)), replace=False)
    x[nz] = rng.uniform(1, 2, nz.size).astype(np.float32)
    ratio = x.nbytes / codecs.compressed_size(x, "zvc")
    assert ratio == pytest.approx(codecs.zvc_ratio(density), rel=1e-3)
    if density == 0.35:
        assert 2.6 < ratio < 2.65


def test_nonzero_count_and_density_use_bit_patterns() -> None:
    x = np.array([0.0, -0.0, np.nan, 0.0, np.inf, 1e-45], dtype=np.float32)
    assert codecs.nonzero_count(x) == 4  # -0.0, nan, inf, denormal
    assert codecs.density(x) == pytest.approx(4 / 6)
    assert codecs.density(np.zeros(0, np.float32)) == 0.0
    big = np.zeros(3 << 20, np.int16)
    big[::3] = -1
    assert codecs.nonzero_count(big) == 1 << 20


def test_header_size() -> None:
    assert codecs.header_size(0) == 32
    assert codecs.header_size(1) == 40
    scalar = np.array(1.5, np.float32)
    assert len(codecs.compress(scalar, "zvc")) == 32 + 4 + 4
    assert codecs.compress(np.float32(1.5), "zvc") == codecs.compress(scalar, "zvc")


def test_bfloat16_samples_are_bfloat16_words_rounded_to_nearest_even():
    import numpy as np

    from sst_cdma.codecs.sampling import bfloat16_words

    values = np.array([1.0, -2.5, 3.0e38, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 0.0],
                      dtype=np.float32)
    # 1 + 2^-8 is a tie between 1.0 and 1 + 2^-7: it rounds to the even word (1.0);
    # 1 + 3 x 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6: it rounds to 1 + 2^-6
    assert bfloat16_words(values).tolist() == [0x3F80, 0xC020, 0x7F62, 0x3F80, 0x3F82, 0x0000]
