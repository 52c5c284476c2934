"""Input batches for the capture command: seeded synthetic tensors or arrays from ``.npz``."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, open_regular
from sst_cdma.tools.capture.errors import CaptureError

#: ``--inputs``: an ``.npz`` of input batches
INPUTS_FILE = FileKind("an --inputs file", 16 * GIB)

__all__ = ["parse_shape", "synthetic_batches", "npz_batches", "FILLS"]

FILLS = ("randn", "rand", "zeros")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` -> ``(1, 3, 224, 224)``; every dimension a positive integer."""
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise CaptureError(f"--input-shape: expected comma-separated positive integers such as "
                           f"1,3,224,224, got {text!r}") from None
    if not shape or any(d < 1 for d in shape):
        raise CaptureError(f"--input-shape: every dimension must be a positive integer, "
                           f"got {text!r}")
    return shape


def synthetic_batches(shape: tuple[int, ...], batches: int, fill: str, seed: int,
                      dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """``batches`` tensors of ``shape``: standard normal, uniform [0, 1) or zeros, seeded."""
    if fill not in FILLS:
        raise CaptureError(f"--fill: expected one of {', '.join(FILLS)}, got {fill!r}")
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(batches):
        if fill == "randn":
            out.append(torch.randn(shape, generator=generator, dtype=dtype))
        elif fill == "rand":
            out.append(torch.rand(shape, generator=generator, dtype=dtype))
        else:
            out.append(torch.zeros(shape, dtype=dtype))
    return out


def npz_batches(path: str, key: str | None, batch_size: int | None) -> Iterator[np.ndarray]:
    """Batches from one array of an ``.npz`` file, split along its first axis.

    The array is ``key``, or the only array in the file. ``batch_size`` of ``None`` gives the
    whole array as one batch.
    """
    try:
        fh = open_regular(path, INPUTS_FILE)
    except FileReadError as exc:
        raise CaptureError(f"--inputs: no such file {path!r}" if exc.missing else
                           f"--inputs: {path}: {exc}") from None
    try:
        with fh, np.load(fh, allow_pickle=False) as data:
            keys = list(data.files)
            if key is None:
                if len(keys) != 1:
                    raise CaptureError(f"--inputs: {path} holds {len(keys)} arrays "
                                       f"({', '.join(keys) or 'none'}); choose one with "
                                       f"--input-key")
                key = keys[0]
            if key not in keys:
                raise CaptureError(f"--input-key: {path} has no array {key!r} "
                                   f"(it has: {', '.join(keys)})")
            array = data[key]
    except CaptureError:
        raise
    except Exception as exc:
        raise CaptureError(f"--inputs: cannot read {path!r} as .npz: {exc}") from None
    if array.ndim < 1 or len(array) == 0:
        raise CaptureError(f"--inputs: array {key!r} in {path} is empty or a scalar")
    size = batch_size or len(array)
    for start in range(0, len(array), size):
        yield array[start:start + size]
