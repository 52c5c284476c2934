"""CRC-32 of streams: ``zlib.crc32`` (CRC-32/ISO-HDLC), parallel for large buffers.

Large buffers are cut into pieces whose CRCs are computed concurrently (``zlib.crc32``
releases the GIL) and joined with :func:`crc32_combine`, the algorithm of zlib's
``crc32_combine`` (multiplication by ``x^(8*len)`` modulo the CRC polynomial).  The result is
bit-identical to one ``zlib.crc32`` call over the whole buffer.  :func:`crc32_start` runs the
same computation in the background while the caller does other work.
"""
from __future__ import annotations

import zlib
from typing import Any, Callable

from sst_cdma.codecs.parallel import PIECES_PER_THREAD, Job, num_threads, split_ranges

__all__ = ["PARALLEL_MIN_BYTES", "crc32", "crc32_start", "crc32_combine"]

PARALLEL_MIN_BYTES = 8 << 20
"""Buffers at least this large are checksummed in pieces on several threads."""

_POLY = 0xEDB88320  # reflected CRC-32 polynomial


def _multmodp(a: int, b: int) -> int:
    """Product of two reflected polynomials modulo the CRC polynomial (zlib ``multmodp``)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


def _x2n_table() -> list[int]:
    table, p = [], 1 << 30  # x^1
    for _ in range(32):
        table.append(p)
        p = _multmodp(p, p)
    return table


_X2N = _x2n_table()  # _X2N[k] = x^(2^k) mod P


def _x2nmodp(n: int, k: int) -> int:
    """``x^(n * 2^k)`` modulo the CRC polynomial."""
    p = 1 << 31  # x^0
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of ``A + B`` given ``crc32(A)``, ``crc32(B)`` and ``len(B)``."""
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


def crc32_start(buf: Any, start: int = 0) -> Callable[[], int]:
    """Begin ``zlib.crc32(buf, start)``; call the returned function to get the result.

    Large buffers are checksummed by pool threads in the background (the buffer must stay
    unchanged until the result is fetched); small ones when the result is fetched.
    """
    mv = memoryview(buf).cast("B")
    n = len(mv)
    threads = num_threads()
    if n < PARALLEL_MIN_BYTES or threads == 1:
        return lambda: zlib.crc32(mv, start)
    ranges = split_ranges(n, threads * PIECES_PER_THREAD)
    # threads - 1 helpers: the caller takes the last share when it asks for the result.
    job = Job([lambda lo=lo, hi=hi: zlib.crc32(mv[lo:hi]) for lo, hi in ranges])  # type: ignore[misc]
    job.start(threads - 1)

    def result() -> int:
        crc = start
        for (lo, hi), piece in zip(ranges, job.wait()):
            crc = crc32_combine(crc, piece, hi - lo)
        return crc

    return result


def crc32(buf: Any, start: int = 0) -> int:
    """``zlib.crc32(buf, start)`` for a contiguous byte buffer, using threads when large."""
    return crc32_start(buf, start)()
