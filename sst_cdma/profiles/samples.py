"""Activation samples on disk: real tensors captured from a model, for moving real bytes.

A sample directory holds ``index.json`` and one ``.npz`` file per tensor::

    {"format": "sst-cdma-activation-samples", "version": 1,
     "tensors": {"relu1": {"file": "relu1.npz", "shape": [32, 16, 8, 8], "dtype": "float32"}}}

Each ``.npz`` holds one array, ``activation``, with the tensor's batch as captured. This module
needs only numpy, so the simulator can read samples without torch.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import ProfileError

__all__ = ["SAMPLES_FORMAT", "save_samples", "load_samples", "sample_file_name"]

SAMPLES_FORMAT = "sst-cdma-activation-samples"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sample_file_name(name: str, taken: set[str]) -> str:
    """A file name for tensor ``name`` made of safe characters and not in ``taken``."""
    base = _SAFE.sub("_", name).strip("._") or "tensor"
    candidate, n = f"{base}.npz", 1
    while candidate in taken:
        candidate, n = f"{base}_{n}.npz", n + 1
    return candidate


def save_samples(directory: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` (tensor name -> array) to ``directory``; returns the index path."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    index: dict[str, dict[str, object]] = {}
    taken: set[str] = set()
    for name, array in arrays.items():
        file = sample_file_name(name, taken)
        taken.add(file)
        np.savez_compressed(root / file, activation=array)
        index[name] = {"file": file, "shape": list(array.shape), "dtype": str(array.dtype)}
    path = root / "index.json"
    doc = {"format": SAMPLES_FORMAT, "version": 1, "tensors": index}
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def load_samples(directory: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every sample of ``directory`` (tensor name -> array) and check it against the index."""
    root = Path(directory)
    index_path = root / "index.json"
    try:
        doc = json.loads(index_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{index_path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{index_path}: not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != SAMPLES_FORMAT or doc.get("version") != 1:
        raise ProfileError(f"{index_path}: not an {SAMPLES_FORMAT} version 1 index")
    out: dict[str, np.ndarray] = {}
    for name, entry in doc.get("tensors", {}).items():
        file = root / str(entry.get("file", ""))
        if file.parent != root:
            raise ProfileError(f"{index_path}: tensors[{name!r}].file: must be a plain file name")
        try:
            with np.load(file, allow_pickle=False) as data:
                array = data["activation"]
        except (OSError, KeyError, ValueError) as exc:
            raise ProfileError(f"{file}: cannot read sample of tensor {name!r}: {exc}") from None
        if list(array.shape) != entry.get("shape") or str(array.dtype) != entry.get("dtype"):
            raise ProfileError(f"{file}: holds {array.dtype}{list(array.shape)}, index says "
                               f"{entry.get('dtype')}{entry.get('shape')}")
        out[name] = array
    return out
