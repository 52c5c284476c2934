"""ZVC's implementation as numba kernels, and its :class:`~sst_cdma.codecs.codec.Codec`
object ``ZVC`` (registered, with the payload layout, in :mod:`.zvc`).

Encoding runs in two passes over independent chunks of :data:`CHUNK_BLOCKS` blocks: count the
non-zeros per chunk (giving every chunk's output offset), then write; both passes run chunk
ranges on several threads for large arrays (:mod:`.parallel`).  Block offsets are only known by
walking the masks, so decoding small payloads is one sequential pass that bounds-checks every
block before expanding it; large payloads are first walked (validating the whole chain and
recording chunk offsets), then expanded chunk by chunk on several threads.  Full blocks use
AVX-512 compress/expand where available (:mod:`.simd`), portable scalar code otherwise.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from sst_cdma.codecs.bitops import (
    ctz32,
    elem_units,
    field_units,
    load_elem,
    load_u32,
    popcount32,
    store_elem,
    store_u32,
)
from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.parallel import PARALLEL_MIN_ITEMS, num_threads, run_ranges
from sst_cdma.codecs.simd import compress_store, enabled as simd_enabled, expand_load, lanes
from sst_cdma.codecs.zvc import BLOCK, size_formula

__all__ = ["ZVC", "BLOCK", "CHUNK_BLOCKS", "unit_dtype", "nonzero_count", "size_formula"]

CHUNK_BLOCKS = 4096
"""Blocks per independently processed chunk (a unit of parallel work)."""

_CHUNK_ELEMS = BLOCK * CHUNK_BLOCKS


def unit_dtype(bits_dtype: np.dtype) -> np.dtype:
    """Payload unit dtype for elements of ``bits_dtype``: u1, u2, u4, u4 for 1/2/4/8 bytes."""
    return np.dtype(f"<u{min(np.dtype(bits_dtype).itemsize, 4)}")


def unit_view(payload: np.ndarray, bits_dtype: np.dtype) -> np.ndarray:
    """A read-only view of a byte payload in the codec's word type (``unit_dtype``), copied
    first when the caller's buffer is not aligned for it."""
    udt = unit_dtype(bits_dtype)
    if payload.ctypes.data % udt.itemsize:
        payload = payload.copy()  # misaligned caller buffer
    q = payload.view(udt)
    q.flags.writeable = False
    return q


# ---------------------------------------------------------------------------------------------
# kernels (each works on chunk range [c0, c1) so ranges can run on separate threads)


@njit(nogil=True, cache=True)
def _count_chunks(w, counts, c0, c1):  # type: ignore[no-untyped-def]
    n = w.size
    for c in range(c0, c1):
        seg = w[c * _CHUNK_ELEMS:min(n, (c + 1) * _CHUNK_ELEMS)]
        t = 0
        for i in range(seg.size):
            t += seg[i] != 0
        counts[c] = t
    return 0


@njit(nogil=True, cache=True)
def _encode_block(w, start, stop, q, o, mu, r):  # type: ignore[no-untyped-def]
    """Encode elements ``w[start:stop]`` (one block) with plain branches; returns next offset."""
    m = np.uint32(0)
    k = o + mu
    for i in range(stop - start):
        v = w[start + i]
        if v != 0:
            store_elem(q, k, v)
            k += r
            m = np.uint32(m | (np.uint32(1) << np.uint32(i)))
    store_u32(q, o, m)
    return k


@njit(nogil=True, cache=True)
def _encode_chunks(w, q, offs, simd, c0, c1):  # type: ignore[no-untyped-def]
    """Encode chunks ``[c0, c1)``; chunk ``c`` starts at unit ``offs[c]`` of ``q``.

    ``simd``: use :func:`compress_store` (AVX-512 ``vpcompress``) for full blocks; otherwise
    branch-free scalar compaction.
    """
    n = w.size
    nb = (n + BLOCK - 1) // BLOCK
    mu = field_units(q)
    r = elem_units(q, w)
    width = lanes(w)
    for c in range(c0, c1):
        o = offs[c]
        b1 = min(nb, (c + 1) * CHUNK_BLOCKS)
        for b in range(c * CHUNK_BLOCKS, b1):
            base = b * BLOCK
            if simd and base + BLOCK <= n:
                m = np.uint32(0)
                k = o + mu
                for h in range(BLOCK // width):
                    mh = compress_store(w, base + h * width, q, k)
                    k += r * popcount32(mh)
                    m = np.uint32(m | (mh << np.uint32(h * width)))
                store_u32(q, o, m)
                o = k
            elif not simd and b + 2 < b1:
                # Store every element, advance only past non-zeros.  The one stray store
                # lands at the start of block b+1 (same chunk), which rewrites it; b+2 < b1
                # keeps even a 2-unit stray inside this chunk and inside ``seg``.
                blk = w[base:base + BLOCK]
                seg = q[o:o + mu + (BLOCK + 1) * r]
                m = np.uint32(0)
                k = mu
                for i in range(BLOCK):
                    v = blk[i]
                    nz = np.uint32(v != 0)
                    store_elem(seg, k, v)
                    k += r * nz
                    m = np.uint32(m | (nz << np.uint32(i)))
                store_u32(seg, 0, m)
                o += k
            else:
                o = _encode_block(w, base, min(n, base + BLOCK), q, o, mu, r)
    return 0


@njit(nogil=True, cache=True)
def _decode(q, out, simd):  # type: ignore[no-untyped-def]
    """Validate and expand the whole payload in one pass. 0 = ok, >0 = error code.

    Every block is bounds-checked (its mask and values must lie inside ``q``) before it is
    expanded, so a malformed payload can never cause an out-of-bounds access.  ``simd``: use
    :func:`expand_load` (AVX-512 ``vpexpand``) for full blocks; otherwise zero the block and
    scatter the values to the set mask bits.
    """
    n = out.size
    size = q.size
    nb = (n + BLOCK - 1) // BLOCK
    mu = field_units(q)
    r = elem_units(q, out)
    width = lanes(out)
    low = np.uint32(0xFFFFFFFF >> (32 - width))
    o = 0
    for b in range(nb):
        base = b * BLOCK
        if o + mu > size:
            return 1
        m = load_u32(q, o)
        o += mu
        if o + r * popcount32(m) > size:
            return 1
        stop = min(n, base + BLOCK)
        if simd and stop == base + BLOCK:
            for h in range(BLOCK // width):
                mh = np.uint32((m >> np.uint32(h * width)) & low)
                expand_load(q, o, out, base + h * width, mh)
                o += r * popcount32(mh)
        else:
            if stop < base + BLOCK and (m >> np.uint32(stop - base)) != 0:
                return 2
            blk = out[base:stop]
            for i in range(blk.size):
                blk[i] = 0
            while m != 0:
                blk[ctz32(m)] = load_elem(q, o, out)
                o += r
                m = np.uint32(m & (m - np.uint32(1)))
    if o != size:
        return 3
    return 0


@njit(nogil=True, cache=True)
def _scan(q, n, offs, like):  # type: ignore[no-untyped-def]
    """Validate the whole mask chain without expanding; ``offs[c]`` = start of chunk ``c``.

    Returns ``(status, junk)``: status 0 if the payload is well-formed (same checks and codes
    as :func:`_decode`); ``junk`` is meaningless.
    Walking the masks is a dependent chain of loads but touches a fraction of the work
    of expanding, so large payloads are scanned first and then expanded in parallel.
    """
    size = q.size
    nb = (n + BLOCK - 1) // BLOCK
    mu = field_units(q)
    r = elem_units(q, like)
    ahead = 512 * mu  # 2 KiB: touching it early turns the chain's L2 hits into L1 hits
    last = size - 1
    touched = np.uint32(0)
    o = 0
    m = np.uint32(0)
    for b in range(nb):
        if b % CHUNK_BLOCKS == 0:
            offs[b // CHUNK_BLOCKS] = o
        if o + mu > size:
            return 1, touched
        touched ^= q[min(o + ahead, last)]
        m = load_u32(q, o)
        o += mu + r * popcount32(m)
    offs[offs.size - 1] = o
    status = 0
    if o > size:
        status = 1
    elif n % BLOCK != 0 and (m >> np.uint32(n % BLOCK)) != 0:
        status = 2
    elif o != size:
        status = 3
    return status, touched  # returning ``touched`` keeps the look-ahead loads alive


@njit(nogil=True, cache=True)
def _decode_chunks(q, out, offs, simd, c0, c1):  # type: ignore[no-untyped-def]
    """Expand chunks ``[c0, c1)`` of a payload validated by :func:`_scan`.

    Each block is still checked against its chunk's end (and a short final block's mask is
    clipped), so even a buffer changed by another thread after the scan cannot cause an
    out-of-bounds access; such a change yields error code 4.
    """
    n = out.size
    nb = (n + BLOCK - 1) // BLOCK
    mu = field_units(q)
    r = elem_units(q, out)
    width = lanes(out)
    low = np.uint32(0xFFFFFFFF >> (32 - width))
    for c in range(c0, c1):
        o = offs[c]
        end = offs[c + 1]
        for b in range(c * CHUNK_BLOCKS, min(nb, (c + 1) * CHUNK_BLOCKS)):
            base = b * BLOCK
            if o + mu > end:
                return 4
            m = load_u32(q, o)
            o += mu
            stop = min(n, base + BLOCK)
            if stop < base + BLOCK:
                m = np.uint32(m & np.uint32((1 << (stop - base)) - 1))
            if o + r * popcount32(m) > end:
                return 4
            if simd and stop == base + BLOCK:
                for h in range(BLOCK // width):
                    mh = np.uint32((m >> np.uint32(h * width)) & low)
                    expand_load(q, o, out, base + h * width, mh)
                    o += r * popcount32(mh)
            else:
                blk = out[base:stop]
                for i in range(blk.size):
                    blk[i] = 0
                while m != 0:
                    blk[ctz32(m)] = load_elem(q, o, out)
                    o += r
                    m = np.uint32(m & (m - np.uint32(1)))
    return 0


_DECODE_ERRORS = {
    1: "truncated ZVC payload: a block's mask or values lie past the end",
    2: "corrupt ZVC payload: mask bits set beyond the last element",
    3: "corrupt ZVC payload: masks and payload length disagree",
    4: "ZVC payload changed while it was being decoded",
}


# ---------------------------------------------------------------------------------------------
# Python-level driver


def _chunk_count(n: int) -> int:
    return (n + _CHUNK_ELEMS - 1) // _CHUNK_ELEMS


def _chunk_nonzeros(bits: np.ndarray) -> np.ndarray:
    counts = np.empty(_chunk_count(bits.size), np.int64)
    run_ranges(_count_chunks, counts.size, bits.size, bits, counts)
    return counts


def nonzero_count(bits: np.ndarray) -> int:
    """Number of elements of a flat bits array whose bit pattern is not all zeros."""
    if bits.size == 0:
        return 0
    return int(_chunk_nonzeros(bits).sum())


class _ZVC:
    """The ZVC codec (see the module docstring for the payload layout)."""

    name = "zvc"

    def payload_size(self, bits: np.ndarray) -> int:
        """``4 * ceil(n / 32) + itemsize * nnz``, with ``nnz`` counted by bit pattern."""
        return size_formula(bits.size, nonzero_count(bits), bits.itemsize)

    def prepare(self, bits: np.ndarray) -> Payload:
        """Count non-zeros per chunk, derive chunk offsets; writing happens in ``write``."""
        n = bits.size
        if n == 0:
            return Payload(0, lambda out: None)
        udt = unit_dtype(bits.dtype)
        counts = _chunk_nonzeros(bits)
        blocks = np.full(counts.size, CHUNK_BLOCKS, np.int64)
        blocks[-1] = (n + BLOCK - 1) // BLOCK - CHUNK_BLOCKS * (counts.size - 1)
        units = blocks * (4 // udt.itemsize) + counts * (bits.itemsize // udt.itemsize)
        offs = np.zeros(counts.size + 1, np.int64)
        np.cumsum(units, out=offs[1:])
        size = int(offs[-1]) * udt.itemsize

        def write(out: np.ndarray) -> None:
            q = out.view(udt)
            simd = simd_enabled(bits.itemsize)
            run_ranges(_encode_chunks, counts.size, n, bits, q, offs, simd)

        return Payload(size, write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """Payload must lie in ``[4*blocks, 4*blocks + itemsize*count]`` and fit whole items."""
        masks = 4 * ((count + BLOCK - 1) // BLOCK)
        if payload_len < masks:
            raise CodecError(
                f"ZVC payload of {payload_len} bytes cannot hold {count} elements "
                f"(needs at least {masks} bytes of masks)"
            )
        if payload_len > masks + itemsize * count:
            raise CodecError(f"ZVC payload of {payload_len} bytes too long for {count} elements")
        if (payload_len - masks) % itemsize:
            raise CodecError("ZVC payload length is not a whole number of elements")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Validate and expand the payload into a new array.

        Small payloads: one fused validate-and-expand pass.  Large ones (and more than one
        thread): validate the mask chain first, then expand chunks in parallel.
        """
        out = np.empty(count, bits_dtype)
        if count == 0:
            return out
        q = unit_view(payload, bits_dtype)
        simd = simd_enabled(out.itemsize)
        if count < PARALLEL_MIN_ITEMS or num_threads() == 1:
            status = _decode(q, out, simd)
        else:
            offs = np.empty(_chunk_count(count) + 1, np.int64)
            status, _ = _scan(q, count, offs, out)
            if not status:
                status = max(run_ranges(_decode_chunks, offs.size - 1, count, q, out, offs,
                                        simd))
        if status:
            raise CodecError(_DECODE_ERRORS[status])
        return out


ZVC = _ZVC()
"""The ZVC :class:`~sst_cdma.codecs.codec.Codec` instance."""
