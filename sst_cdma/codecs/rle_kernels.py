"""RLE's implementation as numba kernels, and its :class:`~sst_cdma.codecs.codec.Codec`
object ``RLE`` (registered, with the payload layout, in :mod:`.rle`)."""
from __future__ import annotations

import numpy as np
from numba import njit

from sst_cdma.codecs.bitops import elem_units, field_units, load_elem, load_u32, store_elem, store_u32
from sst_cdma.codecs.codec import Payload
from sst_cdma.codecs.errors import CodecError
from sst_cdma.codecs.rle import MAX_RUN
from sst_cdma.codecs.zvc_kernels import unit_dtype, unit_view

__all__ = ["RLE", "MAX_RUN", "token_count"]


@njit(nogil=True, cache=True)
def _token_count(w):  # type: ignore[no-untyped-def]
    """(tokens, literals) the greedy encoder emits for ``w``, in one branch-free pass.

    Every literal run opens a token (a token's zero run is folded into the literal run that
    ends it), a trailing zero run closes one more, and each further 65535 elements of any
    run force one extra token.
    """
    n = w.size
    literals = 0
    literal_runs = 0
    extra = 0
    run = 0
    prev = np.int64(-1)
    for i in range(n):
        nz = np.int64(w[i] != 0)
        start = np.int64(nz != prev)
        literals += nz
        literal_runs += start & nz
        run = run * (1 - start) + 1
        over = np.int64(run > MAX_RUN)
        extra += over
        run -= over * MAX_RUN
        prev = nz
    trailing_zeros = np.int64(n > 0 and prev == 0)
    return literal_runs + trailing_zeros + extra, literals


@njit(nogil=True, cache=True)
def _encode(w, q):  # type: ignore[no-untyped-def]
    n = w.size
    tu = field_units(q)
    r = elem_units(q, w)
    i = 0
    o = 0
    while i < n:
        z = 0
        while i < n and z < MAX_RUN and w[i] == 0:
            i += 1
            z += 1
        start = i
        while i < n and i - start < MAX_RUN and w[i] != 0:
            i += 1
        store_u32(q, o, np.uint32(z | ((i - start) << 16)))
        o += tu
        for t in range(start, i):
            store_elem(q, o, w[t])
            o += r
    return o


@njit(nogil=True, cache=True)
def _decode(q, out):  # type: ignore[no-untyped-def]
    """Decode into ``out``; 0 = ok, >0 = error code."""
    n = out.size
    size = q.size
    tu = field_units(q)
    r = elem_units(q, out)
    i = 0
    o = 0
    while o < size:
        if o + tu > size:
            return 1
        t = load_u32(q, o)
        o += tu
        z = np.int64(t & np.uint32(0xFFFF))
        lit = np.int64(t >> np.uint32(16))
        if z + lit == 0:
            return 2
        if i + z + lit > n:
            return 3
        if o + lit * r > size:
            return 1
        for j in range(i, i + z):
            out[j] = 0
        i += z
        for j in range(i, i + lit):
            out[j] = load_elem(q, o, out)
            o += r
        i += lit
    if i != n:
        return 4
    return 0


_DECODE_ERRORS = {
    1: "truncated RLE payload: a token or its literals lie past the end",
    2: "corrupt RLE payload: empty token (zero run and literal count both 0)",
    3: "corrupt RLE payload: tokens describe more elements than the header",
    4: "corrupt RLE payload: tokens describe fewer elements than the header",
}


def token_count(bits: np.ndarray) -> tuple[int, int]:
    """``(tokens, literals)`` of the greedy RLE encoding of a flat bits array."""
    if bits.size == 0:
        return 0, 0
    tokens, literals = _token_count(bits)
    return int(tokens), int(literals)


class _RLE:
    """The RLE codec (see the module docstring for the payload layout)."""

    name = "rle"

    def payload_size(self, bits: np.ndarray) -> int:
        """``4 * tokens + itemsize * literals`` from one counting pass."""
        tokens, literals = token_count(bits)
        return 4 * tokens + bits.itemsize * literals

    def prepare(self, bits: np.ndarray) -> Payload:
        """Count tokens and literals; writing happens in ``write``."""
        size = self.payload_size(bits)
        udt = unit_dtype(bits.dtype)

        def write(out: np.ndarray) -> None:
            if size:
                _encode(bits, out.view(udt))

        return Payload(size, write)

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """Each 4-byte token covers at most ``2 * 65535`` elements; lengths must be whole."""
        if count > (payload_len // 4) * 2 * MAX_RUN:
            raise CodecError(
                f"RLE payload of {payload_len} bytes cannot describe {count} elements"
            )
        if payload_len > 4 * count + itemsize * count:
            raise CodecError(f"RLE payload of {payload_len} bytes too long for {count} elements")
        if payload_len % min(itemsize, 4):
            raise CodecError("RLE payload length is not a whole number of units")

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Decode tokens into a new array, validating every token against both lengths."""
        out = np.empty(count, bits_dtype)
        if count == 0 and payload.size == 0:
            return out
        q = unit_view(payload, bits_dtype)
        status = _decode(q, out)
        if status:
            raise CodecError(_DECODE_ERRORS[status])
        return out


RLE = _RLE()
"""The RLE :class:`~sst_cdma.codecs.codec.Codec` instance."""
