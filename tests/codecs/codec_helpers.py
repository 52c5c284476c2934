"""Helpers for the codec tests: reference encoders, stream surgery, array strategies.

(A uniquely named module rather than ``conftest`` so imports cannot pick up another
folder's ``conftest.py``.)
"""
from __future__ import annotations

import struct
import zlib

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sst_cdma import codecs

# dtype name -> numpy dtype used to build test arrays (bfloat16 is tested separately).
DTYPES = [
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
    "int64", "uint64", "float16", "float32", "float64",
]
# Every registered codec, so the round-trip, fuzzing and corruption tests cover a new codec
# module as soon as the package registers it (docs/codecs.md, "Adding a codec").
ALGS = list(codecs.algorithm_names())


def raw_bits(x: np.ndarray) -> np.ndarray:
    """Flat unsigned view of the bit patterns of ``x`` (C order)."""
    x = np.ascontiguousarray(x)
    return x.reshape(-1).view(f"<u{x.dtype.itemsize}")


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """dtype, shape and every bit equal."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


def header_len(ndim: int) -> int:
    """Independent restatement of the documented header size."""
    return 32 + 8 * ndim


def reference_zvc_payload(x: np.ndarray) -> bytes:
    """ZVC payload written straight from the documented format, one element at a time."""
    bits = raw_bits(x)
    k = x.dtype.itemsize
    out = bytearray()
    for start in range(0, bits.size, 32):
        block = bits[start:start + 32]
        mask = 0
        values = bytearray()
        for i, v in enumerate(block.tolist()):
            if v != 0:
                mask |= 1 << i
                values += int(v).to_bytes(k, "little")
        out += struct.pack("<I", mask) + values
    return bytes(out)


def reference_rle_payload(x: np.ndarray) -> bytes:
    """RLE payload from the documented greedy tokenisation."""
    bits = raw_bits(x).tolist()
    k = x.dtype.itemsize
    out = bytearray()
    i, n = 0, len(bits)
    while i < n:
        z = 0
        while i < n and z < 0xFFFF and bits[i] == 0:
            i += 1
            z += 1
        lits = []
        while i < n and len(lits) < 0xFFFF and bits[i] != 0:
            lits.append(bits[i])
            i += 1
        out += struct.pack("<HH", z, len(lits))
        for v in lits:
            out += int(v).to_bytes(k, "little")
    return bytes(out)


def reseal(stream: bytes | bytearray) -> bytes:
    """Recompute the CRC field of a (possibly tampered) stream so only structure is tested."""
    s = bytearray(stream)
    s[24:28] = struct.pack("<I", zlib.crc32(bytes(s[28:]), zlib.crc32(bytes(s[:24]))))
    return bytes(s)


def make_header(alg_id: int, dtype_code: int, shape: tuple[int, ...], count: int,
                payload: bytes, reserved: int = 0, version: int = 1) -> bytes:
    """Hand-built stream with a valid CRC (for crafting hostile headers)."""
    head = struct.pack("<4sBBBBQQII", b"SCDC", version, alg_id, dtype_code, len(shape), count,
                       len(payload), 0, reserved) + struct.pack(f"<{len(shape)}Q", *shape)
    return reseal(head + payload)


@st.composite
def bit_arrays(draw: st.DrawFn, dtypes: list[str] = DTYPES, max_side: int = 70,
               max_dims: int = 3) -> np.ndarray:
    """Arrays of any listed dtype with arbitrary bit patterns (NaN payloads, -0.0, inf,
    denormals all reachable) and a drawn share of exact zeros, any shape including empty."""
    name = draw(st.sampled_from(dtypes))
    k = np.dtype(name).itemsize
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side))
    word = st.integers(0, 2 ** (8 * k) - 1)
    zero_heavy = st.one_of(st.just(0), st.just(0), word)
    udt = np.dtype(f"<u{k}")
    bits = draw(hnp.arrays(udt, shape, elements=draw(st.sampled_from([word, zero_heavy]))))
    if name == "bool":
        return (bits != 0) if draw(st.booleans()) else bits.view(np.bool_)
    return bits.view(np.dtype(name).newbyteorder("<"))
