"""scikit-learn's digits data set (ships inside scikit-learn: no download), split and scaled."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["DigitsSplit", "load_digits_split", "DATA_DESCRIPTION"]

DATA_DESCRIPTION = "scikit-learn load_digits (1797 8x8 images, pixels/16)"


@dataclass(frozen=True)
class DigitsSplit:
    """Training and held-out tensors: images ``N x 1 x 8 x 8`` in [0, 1], labels ``N``."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    held_x: torch.Tensor
    held_y: torch.Tensor


def load_digits_split(seed: int = 0, held_out: int = 297) -> DigitsSplit:
    """The 1797 digits, shuffled with ``seed``, the last ``held_out`` kept aside.

    Raises ``ImportError`` with an install hint when scikit-learn is missing.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError("the digits data set needs scikit-learn: "
                          "pip install 'sst-cdma[capture]'", name="sklearn") from exc
    digits = load_digits()
    images = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    if not 0 < held_out < len(labels):
        raise ValueError(f"held_out must be in 1..{len(labels) - 1}, got {held_out}")
    order = np.random.default_rng(seed).permutation(len(labels))
    train, held = order[:-held_out], order[-held_out:]
    return DigitsSplit(torch.from_numpy(images[train]), torch.from_numpy(labels[train]),
                       torch.from_numpy(images[held]), torch.from_numpy(labels[held]))
