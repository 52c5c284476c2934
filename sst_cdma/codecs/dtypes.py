"""Element types a stream can carry, their wire codes, and input/output array normalisation.

Codecs never look at values, only at bit patterns: every input array is viewed as a flat array
of unsigned integers of the element's width (its *bits* view), so ``-0.0`` (``0x80000000``),
NaN payloads, infinities and denormals are all non-zero and round-trip exactly.

bfloat16: numpy has no native bfloat16.  Arrays whose dtype is named ``"bfloat16"`` (e.g.
``ml_dtypes.bfloat16``, as used by JAX) are accepted directly.  Raw bfloat16 words held in a
``uint16``/``int16`` array (e.g. ``torch_tensor.view(torch.int16).numpy()``) can be tagged with
``element_type="bfloat16"``.  Decompressing a bfloat16 stream returns an ``ml_dtypes.bfloat16``
array when ``ml_dtypes`` is importable and otherwise a ``uint16`` array of the raw words.
"""
from __future__ import annotations

import sys

import numpy as np

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = [
    "ElementType",
    "ELEMENT_TYPES",
    "by_code",
    "element_type_of",
    "bits_view",
    "from_bits",
    "require_little_endian_host",
]


@frozen_record
class ElementType(FrozenRecord):
    """One supported element type: its wire ``code``, ``name`` and width in bytes."""

    code: int
    name: str
    itemsize: int

    @property
    def bits_dtype(self) -> np.dtype:
        """Unsigned little-endian integer dtype of the same width (the codecs' working type)."""
        return np.dtype(f"<u{self.itemsize}")

    def output_dtype(self) -> np.dtype:
        """dtype of arrays returned by :func:`~sst_cdma.codecs.decompress` for this type."""
        if self.name == "bfloat16":
            try:
                import ml_dtypes  # type: ignore[import-not-found]
            except ImportError:
                return np.dtype("<u2")
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.name)  # native order, little-endian on supported hosts


ELEMENT_TYPES: tuple[ElementType, ...] = (
    ElementType(1, "bool", 1),
    ElementType(2, "int8", 1),
    ElementType(3, "uint8", 1),
    ElementType(4, "int16", 2),
    ElementType(5, "uint16", 2),
    ElementType(6, "int32", 4),
    ElementType(7, "uint32", 4),
    ElementType(8, "int64", 8),
    ElementType(9, "uint64", 8),
    ElementType(10, "float16", 2),
    ElementType(11, "float32", 4),
    ElementType(12, "float64", 8),
    ElementType(13, "bfloat16", 2),
)
"""Supported element types; ``code`` is the byte stored at header offset 6."""

_BY_CODE = {t.code: t for t in ELEMENT_TYPES}
_BY_NAME = {t.name: t for t in ELEMENT_TYPES}


def by_code(code: int) -> ElementType | None:
    """Element type for a wire code, or ``None`` if the code is unknown."""
    return _BY_CODE.get(code)


def require_little_endian_host() -> None:
    """Raise :class:`NotImplementedError` on big-endian hosts (kernels assume LE order)."""
    if sys.byteorder != "little":
        raise NotImplementedError("sst_cdma.codecs requires a little-endian host")


def element_type_of(array: np.ndarray, element_type: str | None = None) -> ElementType:
    """Resolve the :class:`ElementType` of ``array``.

    ``element_type`` may only be ``None``, the array's own type name, or ``"bfloat16"`` for a
    ``uint16``/``int16`` array of raw bfloat16 words.  Raises :class:`TypeError` for
    unsupported dtypes (object, strings, complex, structured, datetime, ...).
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(array).__name__}")
    dt = array.dtype
    name = "bfloat16" if dt.name == "bfloat16" and dt.itemsize == 2 else dt.name
    et = _BY_NAME.get(name)
    if et is None or (dt.kind not in "biuf" and name != "bfloat16"):
        raise TypeError(
            f"unsupported dtype {dt!r}; supported: {', '.join(t.name for t in ELEMENT_TYPES)}"
        )
    if element_type is None or element_type == et.name:
        return et
    if element_type == "bfloat16" and et.name in ("uint16", "int16"):
        return _BY_NAME["bfloat16"]
    raise TypeError(
        f"element_type={element_type!r} does not fit an array of dtype {dt}; "
        "only 'bfloat16' may be given, for uint16/int16 arrays of raw bfloat16 words"
    )


def bits_view(array: np.ndarray, et: ElementType) -> np.ndarray:
    """Flat, aligned, C-ordered, read-only view of ``array``'s bit patterns as ``et.bits_dtype``.

    Copies only when the array is non-contiguous, misaligned or big-endian.  The result is
    always read-only so every numba kernel sees the same array type (one compiled variant).
    """
    require_little_endian_host()
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    flat = np.require(array, requirements=["C", "A"]).reshape(-1)
    bits = flat.view(et.bits_dtype)
    bits.flags.writeable = False
    return bits


def from_bits(bits: np.ndarray, et: ElementType, shape: tuple[int, ...]) -> np.ndarray:
    """Reinterpret a flat bits array as ``et``'s output dtype with the given ``shape``."""
    return bits.view(et.output_dtype()).reshape(shape)
