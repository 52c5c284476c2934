"""RLE, zero-run-length encoding with literal runs: its payload layout and its registration
(the numba kernels are in :mod:`.rle_kernels`).

Payload: a sequence of tokens.  A token is one 32-bit little-endian word::

    bits  0..15   z  zero-run length (0 .. 65535)
    bits 16..31   l  literal count   (0 .. 65535)

followed by ``l`` literal elements (full width, little-endian).  It stands for ``z`` zero
elements (zero by bit pattern) then the ``l`` literals.  Runs longer than 65535 are split over
consecutive tokens, which is the escape: ``(65535, 0)`` means "65535 zeros, and the zero run
continues in the next token"; a literal run longer than 65535 continues with a ``(0, l)`` token.

The encoder is greedy: each token takes up to 65535 zeros, then (if the zero run ended at a
non-zero element) up to 65535 literals.  An empty array has an empty payload.  The decoder
accepts any token sequence that decodes to exactly ``count`` elements and consumes the payload
exactly, except tokens with ``z + l == 0``, which are rejected.  Size::

    payload = 4 * tokens + itemsize * nnz

The number of tokens depends on where the zeros are, so the ratio from density is sampled
(the registry's default: the real codec on seeded synthetic data, :mod:`.sampling`).
"""
from __future__ import annotations

from sst_cdma.codecs.registry import register

__all__ = ["MAX_RUN"]

MAX_RUN = 0xFFFF
"""Largest zero run and largest literal count of a single token."""

register("rle", 2, "sst_cdma.codecs.rle_kernels:RLE",
         description="zero-run-length encoding: (zero run, literal count) tokens and literals")
