"""Numba building blocks shared by the ZVC and RLE kernels.

Payloads are handled as arrays of *units*: ``uint8`` for 1-byte elements, ``uint16`` for 2-byte
elements and ``uint32`` for 4- and 8-byte elements.  Every 32-bit wire field (a ZVC mask, an RLE
token) therefore occupies ``field_units(q)`` units and every element ``elem_units(q, w)`` units;
both are compile-time constants, so each kernel specialises to straight-line code per element
width.  All stores are little-endian, which is the host order (the package refuses big-endian
hosts, see :mod:`sst_cdma.codecs.dtypes`).

Note for developers: numba's on-disk cache keys a kernel on its own source file only, so after
editing this module or :mod:`.simd`, clear ``sst_cdma/codecs/__pycache__`` (or touch the
kernel modules ``zvc.py`` and ``rle.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

__all__ = [
    "popcount32",
    "ctz32",
    "field_units",
    "elem_units",
    "load_u32",
    "store_u32",
    "load_elem",
    "store_elem",
]


@intrinsic
def popcount32(typingctx: Any, x: Any) -> Any:
    """Number of set bits of a ``uint32`` (LLVM ``ctpop``), returned as ``int64``."""
    if not (isinstance(x, types.Integer) and x.bitwidth == 32):
        return None
    sig = types.int64(x)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.zext(builder.ctpop(args[0]), ir.IntType(64))

    return sig, codegen


@intrinsic
def ctz32(typingctx: Any, x: Any) -> Any:
    """Index of the lowest set bit of a non-zero ``uint32`` (LLVM ``cttz``), as ``int64``.

    The result is undefined for ``x == 0``; callers loop ``while m != 0``.
    """
    if not (isinstance(x, types.Integer) and x.bitwidth == 32):
        return None
    sig = types.int64(x)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        tz = builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))
        return builder.zext(tz, ir.IntType(64))

    return sig, codegen


def field_units(q: np.ndarray) -> int:
    """Units of ``q`` taken by one 32-bit wire field (4, 2 or 1)."""
    return 32 // (q.dtype.itemsize * 8)


def elem_units(q: np.ndarray, w: np.ndarray) -> int:
    """Units of ``q`` taken by one element of ``w`` (1, or 2 for 64-bit elements)."""
    return w.dtype.itemsize // q.dtype.itemsize


def load_u32(q: np.ndarray, pos: int) -> int:
    """Read the little-endian 32-bit field starting at unit ``pos`` of ``q``."""
    b = q[pos:pos + field_units(q)].tobytes()
    return int.from_bytes(b, "little")


def store_u32(q: np.ndarray, pos: int, value: int) -> None:
    """Write ``value`` as a little-endian 32-bit field starting at unit ``pos`` of ``q``."""
    n = field_units(q)
    q[pos:pos + n] = np.frombuffer(int(value).to_bytes(4, "little"), dtype=q.dtype.newbyteorder("<"))


def load_elem(q: np.ndarray, pos: int, like: np.ndarray) -> int:
    """Read one element of ``like``'s dtype starting at unit ``pos`` of ``q``."""
    n = elem_units(q, like)
    return int.from_bytes(q[pos:pos + n].tobytes(), "little")


def store_elem(q: np.ndarray, pos: int, value: Any) -> None:
    """Write one element (a numpy integer of the element's width) starting at unit ``pos``."""
    width = np.asarray(value).dtype.itemsize
    n = width // q.dtype.itemsize
    data = int(value).to_bytes(width, "little", signed=int(value) < 0)
    q[pos:pos + n] = np.frombuffer(data, dtype=q.dtype.newbyteorder("<"))


@overload(field_units, inline="always")
def _ov_field_units(q: Any) -> Any:
    units = 32 // q.dtype.bitwidth

    def impl(q: Any) -> Any:
        return units

    return impl


@overload(elem_units, inline="always")
def _ov_elem_units(q: Any, w: Any) -> Any:
    units = w.dtype.bitwidth // q.dtype.bitwidth

    def impl(q: Any, w: Any) -> Any:
        return units

    return impl


@overload(load_u32, inline="always")
def _ov_load_u32(q: Any, pos: Any) -> Any:
    bits = q.dtype.bitwidth
    if bits == 32:
        def impl(q: Any, pos: Any) -> Any:
            return np.uint32(q[pos])
    elif bits == 16:
        def impl(q: Any, pos: Any) -> Any:
            return np.uint32(np.uint32(q[pos]) | (np.uint32(q[pos + 1]) << np.uint32(16)))
    elif bits == 8:
        def impl(q: Any, pos: Any) -> Any:
            return np.uint32(
                np.uint32(q[pos])
                | (np.uint32(q[pos + 1]) << np.uint32(8))
                | (np.uint32(q[pos + 2]) << np.uint32(16))
                | (np.uint32(q[pos + 3]) << np.uint32(24))
            )
    else:
        return None
    return impl


@overload(store_u32, inline="always")
def _ov_store_u32(q: Any, pos: Any, value: Any) -> Any:
    bits = q.dtype.bitwidth
    if bits == 32:
        def impl(q: Any, pos: Any, value: Any) -> None:
            q[pos] = np.uint32(value)
    elif bits == 16:
        def impl(q: Any, pos: Any, value: Any) -> None:
            v = np.uint32(value)
            q[pos] = np.uint16(v & np.uint32(0xFFFF))
            q[pos + 1] = np.uint16(v >> np.uint32(16))
    elif bits == 8:
        def impl(q: Any, pos: Any, value: Any) -> None:
            v = np.uint32(value)
            q[pos] = np.uint8(v & np.uint32(0xFF))
            q[pos + 1] = np.uint8((v >> np.uint32(8)) & np.uint32(0xFF))
            q[pos + 2] = np.uint8((v >> np.uint32(16)) & np.uint32(0xFF))
            q[pos + 3] = np.uint8(v >> np.uint32(24))
    else:
        return None
    return impl


@overload(load_elem, inline="always")
def _ov_load_elem(q: Any, pos: Any, like: Any) -> Any:
    qb, eb = q.dtype.bitwidth, like.dtype.bitwidth
    if qb == eb:
        def impl(q: Any, pos: Any, like: Any) -> Any:
            return q[pos]
    elif qb == 32 and eb == 64:
        def impl(q: Any, pos: Any, like: Any) -> Any:
            return np.uint64(q[pos]) | (np.uint64(q[pos + 1]) << np.uint64(32))
    else:
        return None
    return impl


@overload(store_elem, inline="always")
def _ov_store_elem(q: Any, pos: Any, value: Any) -> Any:
    qb, eb = q.dtype.bitwidth, value.bitwidth
    if qb == eb:
        def impl(q: Any, pos: Any, value: Any) -> None:
            q[pos] = value
    elif qb == 32 and eb == 64:
        def impl(q: Any, pos: Any, value: Any) -> None:
            q[pos] = np.uint32(value & np.uint64(0xFFFFFFFF))
            q[pos + 1] = np.uint32(value >> np.uint64(32))
    else:
        return None
    return impl
