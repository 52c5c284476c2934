"""AVX-512 compress/expand primitives for the ZVC kernels, and the switch that enables them.

:func:`compress_store` loads ``lanes(w)`` consecutive elements, stores the non-zero ones packed
at a payload position (``vpcompress``) and returns their bit mask; :func:`expand_load` is the
inverse (``vpexpand``).  Both are emitted as LLVM's generic ``llvm.masked.compressstore`` /
``llvm.masked.expandload`` intrinsics, so the IR is valid on every target, but they are only
*fast* where the CPU has them natively.  :func:`enabled` therefore selects them only when:

* numba compiles for the host CPU (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` unset),
* the host has AVX-512F (plus AVX-512BW/VL/VBMI2 for 1- and 2-byte elements),
* the CPU is not AMD Zen 4/5, where the memory forms of these instructions are microcoded,
* and ``SST_CDMA_CODECS_SIMD`` is not set to ``0``.

Lane counts per element width: 32 (1 byte, 256-bit vectors), 32 (2 bytes), 16 (4 bytes) and
8 (8 bytes), so a 32-element ZVC block takes 1, 1, 2 or 4 operations.
"""
from __future__ import annotations

import os
from typing import Any

import numba
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = ["lanes", "compress_store", "expand_load", "enabled", "host_support"]

_SLOW_COMPRESS_CPUS = ("znver4", "znver5")


def _lanes_for(bits: int) -> int:
    return 32 if bits <= 16 else 512 // bits


def host_support() -> dict[int, bool]:
    """Per element size in bytes: can this host run the SIMD kernels at full speed?"""
    if numba.config.CPU_NAME or numba.config.CPU_FEATURES:
        return {1: False, 2: False, 4: False, 8: False}
    try:
        name = llvm.get_host_cpu_name()
        feats = llvm.get_host_cpu_features()
    except Exception:  # noqa: BLE001 - no feature information: stay scalar
        return {1: False, 2: False, 4: False, 8: False}
    wide = bool(feats.get("avx512f")) and name not in _SLOW_COMPRESS_CPUS
    narrow = wide and all(feats.get(f) for f in ("avx512bw", "avx512vl", "avx512vbmi2"))
    return {1: narrow, 2: narrow, 4: wide, 8: wide}


_SUPPORT = host_support()


def enabled(itemsize: int) -> bool:
    """Whether ZVC uses the SIMD kernels for elements of ``itemsize`` bytes."""
    if os.environ.get("SST_CDMA_CODECS_SIMD", "1") == "0":
        return False
    return _SUPPORT.get(itemsize, False)


def lanes(w: Any) -> int:
    """Elements handled by one :func:`compress_store` on an array like ``w``."""
    return _lanes_for(w.dtype.itemsize * 8)


@overload(lanes, inline="always")
def _ov_lanes(w: Any) -> Any:
    n = _lanes_for(w.dtype.bitwidth)

    def impl(w: Any) -> Any:
        return n

    return impl


def _index(context: Any, builder: Any, value: Any, ty: Any) -> Any:
    return context.cast(builder, value, ty, types.intp)


def _element_ptr(context: Any, builder: Any, aryty: Any, ary: Any, idx: Any, to: Any) -> Any:
    """Pointer to unit ``idx`` of array ``ary``, cast to pointer-to-``to``."""
    data = context.make_array(aryty)(context, builder, ary).data
    return builder.bitcast(builder.gep(data, [idx], inbounds=True), to.as_pointer())


def _check(src: Any, dst: Any) -> int | None:
    if not (isinstance(src, types.Array) and isinstance(dst, types.Array)):
        return None
    if not (isinstance(src.dtype, types.Integer) and isinstance(dst.dtype, types.Integer)):
        return None
    return int(src.dtype.bitwidth)


@intrinsic
def compress_store(typingctx: Any, w: Any, i: Any, q: Any, k: Any) -> Any:
    """Store the non-zero elements of ``w[i:i+lanes]`` packed at unit ``k`` of ``q``.

    Returns the ``uint32`` bit mask of the non-zero lanes.  Writes exactly
    ``popcount(mask)`` elements; the caller guarantees ``w[i:i+lanes]`` is in bounds.
    """
    bits = _check(w, q)
    if bits is None:
        return None
    sig = types.uint32(w, i, q, k)
    n = _lanes_for(bits)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wty, ity, qty, kty = signature.args
        elt = ir.IntType(bits)
        vec = ir.VectorType(elt, n)
        mty = ir.VectorType(ir.IntType(1), n)
        src = _element_ptr(context, builder, wty, args[0], _index(context, builder, args[1], ity),
                           vec)
        value = builder.load(src, align=bits // 8)
        mask = builder.icmp_unsigned("!=", value, ir.Constant(vec, None))
        dst = _element_ptr(context, builder, qty, args[2], _index(context, builder, args[3], kty),
                           elt)
        fnty = ir.FunctionType(ir.VoidType(), [vec, elt.as_pointer(), mty])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            f"llvm.masked.compressstore.v{n}i{bits}")
        builder.call(fn, [value, dst, mask])
        return builder.zext(builder.bitcast(mask, ir.IntType(n)), ir.IntType(32))

    return sig, codegen


@intrinsic
def expand_load(typingctx: Any, q: Any, k: Any, out: Any, i: Any, mask: Any) -> Any:
    """Write ``out[i:i+lanes]``: lane ``j`` gets the next packed element from unit ``k`` of
    ``q`` if bit ``j`` of ``mask`` is set, else 0.  Reads exactly ``popcount(mask)`` elements.
    """
    bits = _check(out, q)
    if bits is None or not isinstance(mask, types.Integer):
        return None
    sig = types.void(q, k, out, i, mask)
    n = _lanes_for(bits)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        qty, kty, oty, ity, mty_ = signature.args
        elt = ir.IntType(bits)
        vec = ir.VectorType(elt, n)
        mty = ir.VectorType(ir.IntType(1), n)
        src = _element_ptr(context, builder, qty, args[0], _index(context, builder, args[1], kty),
                           elt)
        raw = context.cast(builder, args[4], mty_, types.uint32)
        lane_mask = builder.bitcast(builder.trunc(raw, ir.IntType(n)) if n < 32 else raw, mty)
        fnty = ir.FunctionType(vec, [elt.as_pointer(), mty, vec])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            f"llvm.masked.expandload.v{n}i{bits}")
        value = builder.call(fn, [src, lane_mask, ir.Constant(vec, None)])
        dst = _element_ptr(context, builder, oty, args[2], _index(context, builder, args[3], ity),
                           vec)
        builder.store(value, dst, align=bits // 8)
        return context.get_dummy_value()

    return sig, codegen
