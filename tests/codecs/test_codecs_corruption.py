"""Corrupt, truncated, hostile and foreign input must raise CodecError, fast and safely."""
from __future__ import annotations

import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest
from codec_helpers import ALGS, bit_arrays, make_header, reseal, same_bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sst_cdma import codecs
from sst_cdma.codecs import CodecError

ALG_ID = {"zvc": 1, "rle": 2, "zlib": 3, "lz4": 4, "zstd": 5, "bplane_zstd": 6}
FLOAT32 = 11
UINT8 = 3


def small_streams() -> list[tuple[str, bytes]]:
    """A few small streams per codec: 1-D with a partial block, 2-D, int8, empty."""
    x1 = np.array([0, 1.5, 0, 0, -2.0, 0, 0, 3.25, 0, 0, 0, 1e-30, 0] * 3, dtype=np.float32)
    x2 = np.array([[0, 7, 0], [9, 0, 0]], dtype=np.int8)
    x3 = np.zeros(0, dtype=np.float16)
    return [(f"{alg}-{i}", codecs.compress(x, alg))
            for alg in ALGS for i, x in enumerate((x1, x2, x3))]


STREAMS = small_streams()


@pytest.mark.parametrize("name,blob", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_single_bit_flip_is_detected(name: str, blob: bytes) -> None:
    for pos in range(len(blob)):
        for bit in range(8):
            bad = bytearray(blob)
            bad[pos] ^= 1 << bit
            with pytest.raises(CodecError):
                codecs.decompress(bytes(bad))


@pytest.mark.parametrize("name,blob", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_byte_change_is_detected(name: str, blob: bytes) -> None:
    for pos in range(len(blob)):
        for delta in (0xFF, 0x80, 0x01 if blob[pos] != 0xFF else 0x02):
            bad = bytearray(blob)
            bad[pos] = (bad[pos] + delta) & 0xFF
            with pytest.raises(CodecError):
                codecs.decompress(bytes(bad))


@pytest.mark.parametrize("name,blob", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_truncation_and_extension_is_detected(name: str, blob: bytes) -> None:
    for cut in range(len(blob)):
        with pytest.raises(CodecError):
            codecs.decompress(blob[:cut])
    for extra in (b"\x00", b"\x00" * 8, b"SCDC"):
        with pytest.raises(CodecError):
            codecs.decompress(blob + extra)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(x=bit_arrays(max_side=40, max_dims=2), alg=st.sampled_from(ALGS), data=st.data())
def test_resealed_payload_mutations_never_crash(x: np.ndarray, alg: str,
                                                data: st.DataObject) -> None:
    """With the CRC recomputed, only structural validation stands between a mutated payload
    and the decoder: it must raise CodecError or decode to the announced dtype and shape."""
    blob = bytearray(codecs.compress(x, alg))
    hlen = codecs.header_size(x.ndim)
    if len(blob) == hlen:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(hlen, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    try:
        y = codecs.decompress(reseal(blob))
    except CodecError:
        return
    assert y.dtype == x.dtype and y.shape == x.shape


@pytest.mark.parametrize("data", [
    b"", b"S", b"SCD", b"SCDC", b"\x00" * 64, b"PK\x03\x04" + b"\x00" * 60,
    zlib.compress(b"hello world" * 10), zlib.compress(np.zeros(100, np.float32).tobytes()),
    b"\x89PNG\r\n\x1a\n" + b"\x00" * 40,
])
def test_foreign_input_is_rejected(data: bytes) -> None:
    with pytest.raises(CodecError):
        codecs.decompress(data)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), magic=st.booleans())
def test_random_bytes_are_rejected(data: bytes, magic: bool) -> None:
    with pytest.raises(CodecError):
        codecs.decompress((b"SCDC" + data) if magic else data)


def _raises_fast_without_allocating(blob: bytes) -> None:
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(CodecError):
            codecs.decompress(blob)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5
    assert peak < 1 << 20  # nothing sized by the claimed element count


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("count", [1 << 40, (1 << 48) - 1, 1 << 48, 1 << 63, (1 << 64) - 1])
def test_huge_claimed_element_count(alg: str, count: int) -> None:
    payload = b"\x00" * 64
    _raises_fast_without_allocating(make_header(ALG_ID[alg], FLOAT32, (count,), count, payload))


@pytest.mark.parametrize("alg", ALGS)
def test_huge_dimension_with_zero_count(alg: str) -> None:
    blob = make_header(ALG_ID[alg], FLOAT32, (0, 1 << 50), 0, b"")
    _raises_fast_without_allocating(blob)


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("shape", [(1 << 32, 1 << 32, 0), (0, 1 << 40, 1 << 40),
                                   (1 << 24, 1 << 24, 2, 0)])
def test_empty_shape_too_large_to_index_is_a_codec_error(alg: str, shape: tuple) -> None:
    # count 0 == prod(shape) and every dimension <= 2**48: only the non-zero dimensions'
    # product tells that numpy cannot build the array; that must be a CodecError, as
    # documented, and stream_info must agree with decompress.
    blob = make_header(ALG_ID[alg], FLOAT32, shape, 0, b"")
    for reader in (codecs.decompress, codecs.stream_info):
        with pytest.raises(CodecError, match="non-zero dimensions"):
            reader(blob)


def test_empty_shape_at_the_limit_still_decodes() -> None:
    y = codecs.decompress(make_header(1, FLOAT32, (1 << 24, 1 << 24, 0), 0, b""))
    assert y.shape == (1 << 24, 1 << 24, 0) and y.dtype == np.float32


def test_zvc_all_zero_claim_bounded_by_payload() -> None:
    # 64 bytes of zero masks describe at most 16 blocks = 512 elements, not 2**30.
    _raises_fast_without_allocating(make_header(1, FLOAT32, (1 << 30,), 1 << 30, b"\x00" * 64))
    y = codecs.decompress(make_header(1, FLOAT32, (512,), 512, b"\x00" * 64))
    assert y.shape == (512,) and not y.any()


def test_rle_expansion_claim_bounded_by_payload() -> None:
    # One token can stand for at most 2 * 65535 elements.
    token = struct.pack("<HH", 65535, 0)
    _raises_fast_without_allocating(make_header(2, UINT8, (200_000,), 200_000, token))
    y = codecs.decompress(make_header(2, UINT8, (65535,), 65535, token))
    assert y.shape == (65535,) and not y.any()


@pytest.mark.parametrize("mutate,reason", [
    (lambda h: b"SCDX" + h[4:], "bad magic"),
    (lambda h: h[:4] + bytes([2]) + h[5:], "version"),
    (lambda h: h[:5] + bytes([9]) + h[6:], "algorithm"),
    (lambda h: h[:6] + bytes([99]) + h[7:], "dtype"),
    (lambda h: h[:7] + bytes([65]) + h[8:], "ndim"),
    (lambda h: h[:28] + b"\x01\x00\x00\x00" + h[32:], "reserved"),
])
def test_header_fields_are_validated_even_with_valid_crc(mutate, reason: str) -> None:  # type: ignore[no-untyped-def]
    blob = codecs.compress(np.arange(10, dtype=np.float32), "zvc")
    with pytest.raises(CodecError):
        codecs.decompress(reseal(mutate(blob)))


def test_count_shape_mismatch() -> None:
    payload = codecs.compress(np.ones(8, np.float32), "zvc")[40:]
    with pytest.raises(CodecError, match="shape"):
        codecs.decompress(make_header(1, FLOAT32, (4, 2), 9, payload))
    assert same_bits(codecs.decompress(make_header(1, FLOAT32, (4, 2), 8, payload)),
                     np.ones((4, 2), np.float32))


def test_zvc_stray_mask_bits_after_last_element() -> None:
    # 3 elements, mask has bit 5 set -> invalid even though the value count fits.
    payload = struct.pack("<I", 0b100001) + struct.pack("<ff", 1.0, 2.0)
    with pytest.raises(CodecError, match="beyond the last element"):
        codecs.decompress(make_header(1, FLOAT32, (3,), 3, payload))


def test_zvc_masks_disagree_with_payload_length() -> None:
    # Two blocks; first mask claims 32 values but the payload only holds 2 values.
    payload = struct.pack("<I", 0xFFFFFFFF) + struct.pack("<I", 0) + b"\x00" * 8
    with pytest.raises(CodecError):
        codecs.decompress(make_header(1, FLOAT32, (64,), 64, payload))
    # Mask claims too few values: leftover bytes.
    payload = struct.pack("<I", 1) + struct.pack("<ff", 1.0, 2.0)
    with pytest.raises(CodecError):
        codecs.decompress(make_header(1, FLOAT32, (32,), 32, payload))


@pytest.mark.parametrize("tokens,count,match", [
    (struct.pack("<HH", 0, 0), 0, "too long"),
    (struct.pack("<HH", 0, 0) + struct.pack("<HH", 2, 0), 2, "empty token"),
    (struct.pack("<HH", 5, 0), 3, "more elements"),
    (struct.pack("<HH", 2, 0), 3, "fewer elements"),
    (struct.pack("<HH", 0, 3) + b"\x01\x02", 3, "past the end"),
    (struct.pack("<HH", 1, 0) + b"\x07", 1, "past the end"),
])
def test_rle_structural_errors(tokens: bytes, count: int, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        codecs.decompress(make_header(2, UINT8, (count,), count, tokens))


def test_rle_accepts_non_greedy_but_valid_token_split() -> None:
    payload = struct.pack("<HH", 2, 0) + struct.pack("<HH", 1, 1) + b"\x05"
    y = codecs.decompress(make_header(2, UINT8, (4,), 4, payload))
    assert y.tolist() == [0, 0, 0, 5]


@pytest.mark.parametrize("payload,count", [
    (zlib.compress(b"\x00" * 12), 4),        # decodes to 12 bytes, header says 16
    (zlib.compress(b"\x00" * 20), 4),        # decodes to 20 bytes, header says 16
    (zlib.compress(b"\x00" * 16) + b"x", 4),  # trailing garbage after the zlib stream
    (zlib.compress(b"\x00" * 16)[:-3], 4),   # truncated zlib stream
    (b"\x78\x9c\xff\xff", 4),                # invalid DEFLATE
])
def test_zlib_structural_errors(payload: bytes, count: int) -> None:
    with pytest.raises(CodecError):
        codecs.decompress(make_header(3, FLOAT32, (count,), count, payload))


def test_crc_mismatch_message() -> None:
    blob = bytearray(codecs.compress(np.arange(100, dtype=np.float32), "zvc"))
    blob[-1] ^= 0x10
    with pytest.raises(CodecError, match="CRC"):
        codecs.decompress(bytes(blob))


def test_large_stream_corruption_detected_with_background_crc() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal(3 << 20).astype(np.float32)
    x[rng.random(x.size) < 0.6] = 0
    for alg in ("zvc", "rle"):
        blob = bytearray(codecs.compress(x, alg))
        pos = len(blob) // 2
        blob[pos] ^= 0x01  # lands in a value or a mask: either way the CRC catches it
        with pytest.raises(CodecError):
            codecs.decompress(bytes(blob))


LARGE = (1 << 20) + 5  # above the parallel threshold: validated by the chain walk (_scan)


def test_large_zvc_broken_mask_chain() -> None:
    x = np.zeros(LARGE, np.float32)
    x[::7] = 1.0
    blob = bytearray(codecs.compress(x, "zvc"))
    blob[40:44] = b"\xff\xff\xff\xff"  # first block now claims 32 values
    with pytest.raises(CodecError):
        codecs.decompress(reseal(blob))


def test_large_zvc_stray_tail_bits() -> None:
    n = LARGE
    nb = (n + 31) // 32
    # All-zero payload except the last mask, which sets bit 31 of a 5-element block.
    payload = b"\x00" * (4 * (nb - 1)) + struct.pack("<I", 1 << 31) + struct.pack("<f", 1.0)
    with pytest.raises(CodecError, match="beyond the last element"):
        codecs.decompress(make_header(1, FLOAT32, (n,), n, payload))
    ok = b"\x00" * (4 * (nb - 1)) + struct.pack("<I", 1 << 4) + struct.pack("<f", 1.0)
    y = codecs.decompress(make_header(1, FLOAT32, (n,), n, ok))
    assert y[-1] == 1.0 and np.count_nonzero(y) == 1


@pytest.mark.parametrize("simd_flag", [False, True])
def test_chunk_decoder_survives_payload_changed_after_scan(simd_flag: bool) -> None:
    from sst_cdma.codecs import zvc_kernels as zvc

    x = np.zeros(LARGE, np.float32)
    x[::3] = 2.0
    payload = bytearray(codecs.compress(x, "zvc")[40:])
    q = np.frombuffer(payload, np.uint32)
    out = np.empty(LARGE, np.uint32)
    offs = np.empty(zvc._chunk_count(LARGE) + 1, np.int64)
    assert zvc._scan(q, LARGE, offs, out)[0] == 0
    q[0] = 0xFFFFFFFF  # after validation: the first block now overruns its chunk
    chunks = offs.size - 1
    assert zvc._decode_chunks(q, out, offs, simd_flag, 0, chunks) == 4
    # A stray bit beyond the short last block is clipped, not followed (following it would
    # read one value too many and report 4).
    last_mask = q.size - 1 - int(np.count_nonzero(x[(LARGE // 32) * 32:]))
    q[last_mask] |= np.uint32(1 << 31)
    assert zvc._decode_chunks(q, out, offs, simd_flag, chunks - 1, chunks) == 0
    assert np.array_equal(out[-5:], x.view(np.uint32)[-5:])


BOMB_SCRIPT = r"""
import resource, struct, sys, zlib
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
from sst_cdma import codecs
from sst_cdma.codecs import CodecError
claimed = 3 << 30
# a frame header claiming 3 GiB (single segment, 8-byte content size) and blocks of junk
frame = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", claimed) + bytes(200_000)
head = struct.pack("<4sBBBBQQII", b"SCDC", 1, int(sys.argv[2]), 3, 1, claimed, len(frame), 0,
                   0) + struct.pack("<Q", claimed)
body = head + frame
blob = body[:24] + struct.pack("<I", zlib.crc32(body[28:], zlib.crc32(body[:24]))) + body[28:]
try:
    codecs.decompress(blob)
except CodecError as exc:
    print("CodecError:", exc)
"""


@pytest.mark.parametrize("alg_id", [ALG_ID["zstd"], ALG_ID["bplane_zstd"]])
def test_a_frame_claiming_gigabytes_raises_codec_error_under_a_memory_limit(alg_id: int) -> None:
    """A decompression bomb: the header claims 3 GiB that its blocks do not hold; decoding
    must not allocate the claim first (MemoryError under a 1.5 GiB address-space limit)."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    run = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, root, str(alg_id)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("CodecError:"), run.stdout
