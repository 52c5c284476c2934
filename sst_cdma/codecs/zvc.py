"""ZVC, zero-value compression (Rhu et al., HPCA 2018): its payload layout, its size and ratio
formulas, and its registration (the numba kernels are in :mod:`.zvc_kernels`).

Payload: the elements are cut into blocks of 32 (the last one may be shorter).  Each block is a
32-bit little-endian mask, bit ``i`` set iff element ``i`` of the block is non-zero *by bit
pattern*, followed by the block's non-zero elements in order, each in its full width,
little-endian.  Mask bits beyond the end of a short final block must be 0.  Size::

    payload = 4 * ceil(n / 32) + itemsize * nnz

The size depends on the number of non-zeros alone, so the ratio from density is exact for a
large array (:func:`zvc_ratio`).
"""
from __future__ import annotations

from sst_cdma.codecs.registry import register

__all__ = ["BLOCK", "size_formula", "zvc_ratio"]

BLOCK = 32
"""Elements per ZVC block (one 32-bit mask each)."""


def size_formula(count: int, nnz: int, itemsize: int) -> int:
    """ZVC payload bytes: ``4 * ceil(count / 32) + itemsize * nnz``."""
    return 4 * ((count + BLOCK - 1) // BLOCK) + itemsize * nnz


def zvc_ratio(density: float, itemsize: int = 4) -> float:
    """Analytical ZVC compression ratio of a large array at non-zero fraction ``density``.

    ``32 * itemsize / (4 + 32 * itemsize * density)``: uncompressed bytes of a 32-element
    block over its 4-byte mask plus the packed non-zeros (header ignored).  For float32 this
    is ``32 / (1 + 32 * density)``: 2.6x at density 0.35, 32x for all zeros, 32/33 dense.
    """
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be within [0, 1], got {density}")
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"itemsize must be 1, 2, 4 or 8, got {itemsize}")
    return BLOCK * itemsize / (4 + BLOCK * itemsize * density)


register("zvc", 1, "sst_cdma.codecs.zvc_kernels:ZVC", ratio_formula=zvc_ratio,
         description="zero-value compression: a 32-bit mask per 32 elements, then the non-zeros")
