"""LZ4, Zstandard and byte-plane+zstd: their documented payloads, their own structural
checks, and what they gain on dense float activations (docs/codecs.md, "Dense activations")."""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import lz4.block
import numpy as np
import pytest
import zstandard
from codec_helpers import DTYPES, header_len, make_header, raw_bits, same_bits

from sst_cdma import codecs
from sst_cdma.codecs import CodecError
from sst_cdma.codecs.byteplane import from_planes, to_planes
from sst_cdma.codecs.lz4block import CHUNK_BYTES
from sst_cdma.model.compression import ratio_from_density

FLOAT32, UINT8, BFLOAT16 = 11, 3, 13
LZ4_ID, ZSTD_ID, BPLANE_ID = 4, 5, 6
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_codecs.py"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_codecs", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_planes(x: np.ndarray) -> bytes:
    """The documented plane order, one byte at a time: most significant byte of every
    element first, least significant last."""
    data = np.ascontiguousarray(x).tobytes()
    k = x.dtype.itemsize
    n = len(data) // k
    return bytes(data[i * k + (k - 1 - plane)] for plane in range(k) for i in range(n))


def level1_frame(raw: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=1, write_checksum=False, write_content_size=True,
                                    write_dict_id=False).compress(raw)


def gelu_bf16_words(n: int, seed: int) -> np.ndarray:
    """Dense post-GELU activations as raw bfloat16 words (truncated from float32)."""
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    y = 0.5 * x * (1 + np.tanh(np.float32(0.7978846) * (x + np.float32(0.044715) * x ** 3)))
    return (y.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


# -- payload layouts ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 1000, CHUNK_BYTES // 4, CHUNK_BYTES // 4 + 1, 40_000])
def test_lz4_payload_is_a_size_table_then_one_default_mode_block_per_64k(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.integers(0, 4, n).astype(np.float32)
    raw = x.tobytes()
    blocks = [lz4.block.compress(raw[i:i + CHUNK_BYTES], mode="default", store_size=False)
              for i in range(0, len(raw), CHUNK_BYTES)]
    expected = struct.pack(f"<{len(blocks)}I", *map(len, blocks)) + b"".join(blocks)
    assert codecs.compress(x, "lz4")[header_len(1):] == expected
    assert len(blocks) == -(-4 * n // CHUNK_BYTES)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zstd_payload_is_one_level1_frame_of_the_raw_bytes(dtype: str) -> None:
    x = np.random.default_rng(1).integers(0, 4, 3000).astype(dtype)
    payload = codecs.compress(x, "zstd")[header_len(1):]
    assert payload == level1_frame(np.ascontiguousarray(x).tobytes())
    assert zstandard.frame_content_size(payload) == x.nbytes


@pytest.mark.parametrize("dtype", DTYPES)
def test_bplane_payload_is_a_level1_frame_of_the_planes(dtype: str) -> None:
    x = np.random.default_rng(2).integers(0, 300, 777).astype(dtype)
    payload = codecs.compress(x, "bplane_zstd")[header_len(1):]
    assert payload == level1_frame(reference_planes(x))
    if x.dtype.itemsize == 1:  # one plane: the same bytes as the zstd codec
        assert payload == codecs.compress(x, "zstd")[header_len(1):]


def test_planes_put_the_most_significant_byte_first() -> None:
    x = np.array([1.0, -2.0], np.float32)  # 0x3F800000, 0xC0000000
    assert to_planes(raw_bits(x)).tobytes() == bytes([0x3F, 0xC0, 0x80, 0, 0, 0, 0, 0])
    words = np.array([0x3F80, 0x4049, 0xBF00], np.uint16)  # bfloat16 1.0, 3.14, -0.5
    assert to_planes(words).tobytes() == bytes([0x3F, 0x40, 0xBF, 0x80, 0x49, 0x00])
    back = from_planes(to_planes(words), 3, np.dtype("<u2"))
    assert back.tolist() == words.tolist() and back.flags.writeable


@pytest.mark.parametrize("alg", ["lz4", "zstd", "bplane_zstd"])
def test_bfloat16_words_round_trip_tagged_as_bfloat16(alg: str) -> None:
    words = gelu_bf16_words(5000, 3)
    blob = codecs.compress(words, alg, element_type="bfloat16")
    assert blob[6] == BFLOAT16
    assert codecs.decompress(blob).view(np.uint16).tobytes() == words.tobytes()


@pytest.mark.parametrize("alg", ["lz4", "zstd", "bplane_zstd"])
def test_multi_block_arrays_round_trip(alg: str) -> None:
    x = np.random.default_rng(4).standard_normal(3 * CHUNK_BYTES // 4 + 5).astype(np.float32)
    x[::3] = 0
    blob = codecs.compress(x, alg)
    assert len(blob) == codecs.compressed_size(x, alg)
    assert same_bits(x, codecs.decompress(blob))


# -- structural errors behind a valid CRC ---------------------------------------------------

def _lz4_payload(raw: bytes) -> bytes:
    block = lz4.block.compress(raw, mode="default", store_size=False)
    return struct.pack("<I", len(block)) + block


@pytest.mark.parametrize("payload,count,match", [
    (_lz4_payload(b"\x01" * 16) + b"x", 16, "add up"),                  # trailing byte
    (struct.pack("<I", 0) + lz4.block.compress(b"\x01" * 16, store_size=False), 16, "add up"),
    (_lz4_payload(b"\x01" * 12), 16, "decodes to 12 bytes"),            # block too short
    (_lz4_payload(b"\x01" * 20), 16, "corrupt lz4 block"),              # block too long
    (struct.pack("<I", 4) + b"\xf0\xff\xff\xff", 16, "corrupt lz4 block"),  # bad sequence
    (b"\x00\x00", 1, "too short"),                                     # no room for the table
    (b"abc", 0, "add up"),                                             # bytes after no blocks
])
def test_lz4_structural_errors(payload: bytes, count: int, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        codecs.decompress(make_header(LZ4_ID, UINT8, (count,), count, payload))


def test_lz4_size_table_must_cover_every_chunk() -> None:
    raw = bytes(range(256)) * (CHUNK_BYTES // 256 + 1)  # two chunks
    x = np.frombuffer(raw, np.uint8)
    blob = bytearray(codecs.compress(x, "lz4"))
    first, second = struct.unpack_from("<II", blob, header_len(1))
    struct.pack_into("<II", blob, header_len(1), first + 1, second - 1)  # sums still agree
    from codec_helpers import reseal

    with pytest.raises(CodecError, match="lz4 block"):
        codecs.decompress(reseal(blob))


@pytest.mark.parametrize("alg_id", [ZSTD_ID, BPLANE_ID])
@pytest.mark.parametrize("payload,count,match", [
    (level1_frame(b"\x00" * 12), 16, "holds 12 bytes"),
    (level1_frame(b"\x00" * 20), 16, "holds 20 bytes"),
    (level1_frame(b"\x00" * 16) + b"xy", 16, "unused data|corrupt"),
    (level1_frame(b"\x00" * 16) * 2, 16, "unused data|corrupt"),    # a second frame
    (level1_frame(bytes(range(16)))[:-2], 16, "corrupt"),           # truncated frame
    (zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * 16), 16,
     "holds -1 bytes"),                                             # size not in the header
    (b"\x50\x2a\x4d\x18" + struct.pack("<I", 4) + b"abcd", 16, "corrupt|holds"),  # skippable
    (b"\x00" * 8, 16, "corrupt"),                                   # not a frame at all
    (b"\x28\xb5", 16, "shorter than a frame header"),
])
def test_zstd_structural_errors(alg_id: int, payload: bytes, count: int, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        codecs.decompress(make_header(alg_id, UINT8, (count,), count, payload))


def test_zstd_frame_with_a_checksum_still_decodes() -> None:
    raw = bytes(range(64))
    frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(raw)
    y = codecs.decompress(make_header(ZSTD_ID, UINT8, (64,), 64, frame))
    assert y.tobytes() == raw


# -- what they gain on dense activations ----------------------------------------------------

def test_on_dense_bfloat16_byte_planes_beat_zstd_and_zvc_expands() -> None:
    words = gelu_bf16_words(1 << 17, 5)
    ratio = {alg: words.nbytes / codecs.compressed_size(words, alg, element_type="bfloat16")
             for alg in codecs.ALGORITHMS}
    assert ratio["zvc"] < 1.0 and ratio["rle"] <= 1.0 and ratio["lz4"] <= 1.0
    assert ratio["bplane_zstd"] > ratio["zstd"] > 1.2
    assert ratio["bplane_zstd"] > 1.35


def test_density_estimates_come_from_the_real_codecs() -> None:
    for alg in ("lz4", "zstd", "bplane_zstd"):
        assert ratio_from_density(alg, 0.1) > ratio_from_density(alg, 0.5) > \
            ratio_from_density(alg, 1.0) > 0.9
    # the sample's dense float32 values are positive: their top byte repeats, which the
    # byte planes expose
    assert ratio_from_density("bplane_zstd", 1.0) > ratio_from_density("zstd", 1.0)


def test_dense_report_rows_cover_every_codec_type_and_density() -> None:
    bench = _bench()
    rows = bench.dense_rows(1, 1, 1, 0)
    assert [(t, d) for t, d, _ in rows] == [(t, d) for t in ("float32", "bfloat16")
                                            for d in bench.DENSE_DENSITIES]
    for dtype, density, cells in rows:
        assert list(cells) == [*codecs.ALGORITHMS, "x.copy()"]
        assert all(ratio > 0 and comp > 0 and decomp > 0 for ratio, comp, decomp in
                   cells.values())
        expect = codecs.zvc_ratio(density, 4 if dtype == "float32" else 2)
        assert cells["zvc"][0] == pytest.approx(expect, rel=0.02)


def test_bfloat16_rounding_is_to_nearest_even() -> None:
    bench = _bench()
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 0.0], np.float32)
    # 1 + 2**-8 is halfway between 1.0 and 1 + 2**-7: ties to the even 1.0; 1 + 3 * 2**-8 is
    # halfway between 1 + 2**-7 and 1 + 2**-6: ties to the even 1 + 2**-6
    assert bench.to_bfloat16_words(x).tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0]
