"""Turning hooked torch tensors into numpy arrays the codecs accept."""
from __future__ import annotations

import numpy as np
import torch

from sst_cdma.model.dtypes import HALF_DTYPES

__all__ = ["to_numpy", "nonzero_bits", "dtype_name", "CONVERSIONS", "convert"]

CONVERSIONS = HALF_DTYPES
"""Element types a captured float32 tensor can also be measured in (:func:`convert`)."""


def dtype_name(tensor: torch.Tensor) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(tensor.dtype).removeprefix("torch.")


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy *copy* of ``tensor`` in logical (e.g. NCHW) element order.

    The copy is taken at once, so an in-place ReLU or any later in-place operation on the same
    storage cannot change what was captured. bfloat16, which numpy lacks, is returned as its
    raw 16-bit patterns (``uint16``).
    """
    data = tensor.detach()
    if data.dtype == torch.bfloat16:
        data = data.view(torch.int16)
        return np.array(data.cpu().numpy(), copy=True, order="C").view(np.uint16)
    return np.array(data.cpu().numpy(), copy=True, order="C")


def nonzero_bits(array: np.ndarray) -> int:
    """Number of elements whose bit pattern is not all zeros (so -0.0 and NaN count)."""
    size = array.dtype.itemsize
    if size not in (1, 2, 4, 8):
        raise ValueError(f"unsupported element size {size}")
    words = np.ascontiguousarray(array).view(f"u{size}")
    return int(np.count_nonzero(words))


def convert(array: np.ndarray, element_type: str) -> tuple[np.ndarray, str | None]:
    """float32 ``array`` rounded to ``element_type`` (to nearest, ties to even), and the
    ``element_type`` tag the codecs need for it: bfloat16 as its raw 16-bit words
    (:func:`sst_cdma.codecs.sampling.bfloat16_words`), float16 as numpy float16."""
    from sst_cdma.codecs.sampling import bfloat16_words

    if array.dtype != np.float32:
        raise ValueError(f"only float32 tensors are converted, got {array.dtype}")
    if element_type == "bfloat16":
        return bfloat16_words(array), "bfloat16"
    if element_type == "float16":
        return array.astype(np.float16), None
    raise ValueError(f"cannot convert to {element_type!r} (expected one of "
                     f"{', '.join(CONVERSIONS)})")
