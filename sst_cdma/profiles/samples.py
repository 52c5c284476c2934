"""Activation samples on disk: real tensors captured from a model, for moving real bytes.

A sample directory holds ``index.json`` and one ``.npz`` file per tensor::

    {"format": "sst-cdma-activation-samples", "version": 1, "network": "digits_cnn",
     "tensors": {"relu1": {"file": "relu1.npz", "shape": [32, 16, 8, 8], "dtype": "float32",
                           "element_type": "float32"}}}

Each ``.npz`` holds one array, ``activation``, with the tensor's batch as captured. ``network``
(the network definition the tensor names belong to) and ``element_type`` (the tensor's element
type; ``bfloat16`` for raw ``uint16`` words) are optional, so indexes written before they
existed still load. This module needs only numpy, so the simulator can read samples without
torch.

:func:`load_sample_set` reads a folder or a plain ``.npz`` file with what is known about each
tensor, and :meth:`SampleSet.check` refuses a sample that is not the simulated tensor (another
network, dtype, shape or batch), naming the file and the tensor.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from sst_cdma.engine.file_reads import GIB, MIB, FileKind, FileReadError, load_json, open_regular
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.profiles.errors import ProfileError

__all__ = ["SAMPLES_FORMAT", "Sample", "SampleSet", "save_samples", "load_samples",
           "load_sample_set", "read_npz", "sample_file_name"]

SAMPLES_FORMAT = "sst-cdma-activation-samples"
#: a samples folder's index.json: an entry per tensor
SAMPLES_INDEX = FileKind("a samples index", 64 * MIB)
#: one tensor's sample (its first batch), compressed
SAMPLE_FILE = FileKind("a sample file", 16 * GIB)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sample_file_name(name: str, taken: set[str]) -> str:
    """A file name for tensor ``name`` made of safe characters and not in ``taken``."""
    base = _SAFE.sub("_", name).strip("._") or "tensor"
    candidate, n = f"{base}.npz", 1
    while candidate in taken:
        candidate, n = f"{base}_{n}.npz", n + 1
    return candidate


def save_samples(directory: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], *,
                 network: str | None = None,
                 element_types: Mapping[str, str] | None = None) -> Path:
    """Write ``arrays`` (tensor name -> array) to ``directory``; returns the index path.

    ``network`` records the network definition the tensor names belong to (checked when the
    samples are simulated); ``element_types`` the element type of tensors whose array dtype
    does not say it (``"bfloat16"`` for raw ``uint16`` words). Each entry's ``element_type``
    defaults to its array's dtype.
    """
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ProfileError(f"{root}: exists and is not a folder: the samples go into a folder "
                           "(give a new name, or an existing folder)")
    root.mkdir(parents=True, exist_ok=True)
    index: dict[str, dict[str, object]] = {}
    taken: set[str] = set()
    for name, array in arrays.items():
        file = sample_file_name(name, taken)
        taken.add(file)
        np.savez_compressed(root / file, activation=array)
        element_type = (element_types or {}).get(name, str(array.dtype))
        index[name] = {"file": file, "shape": list(array.shape), "dtype": str(array.dtype),
                       "element_type": element_type}
    path = root / "index.json"
    doc: dict[str, object] = {"format": SAMPLES_FORMAT, "version": 1}
    if network is not None:
        doc["network"] = network
    doc["tensors"] = index
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def read_npz(path: str | os.PathLike[str], keys: Sequence[str] | None = None
             ) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path`` (or only ``keys``), read at once.

    A file that cannot be read as an ``.npz`` (missing, truncated, corrupt, not a zip archive,
    holding pickled objects) or lacks one of ``keys`` raises one-line :class:`ProfileError`
    naming the file.
    """
    where = os.fspath(path)
    try:
        fh = open_regular(where, SAMPLE_FILE)
    except FileReadError as exc:
        raise ProfileError(f"{where}: cannot read: {exc}") from None
    try:
        with fh, np.load(fh, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ProfileError(f"{where}: not an .npz archive (a single .npy array)")
            names = list(data.files) if keys is None else list(keys)
            missing = [k for k in names if k not in data.files]
            if missing:
                raise ProfileError(f"{where}: holds no array {missing[0]!r} (it has: "
                                   f"{', '.join(data.files) or 'none'})")
            return {k: data[k] for k in names}
    except ProfileError:
        raise
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # zipfile.BadZipFile, EOFError, zlib.error, ValueError, ...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ProfileError(f"{where}: not a readable .npz file (truncated or corrupt?): "
                           f"{reason}") from None


@frozen_record
class Sample(FrozenRecord):
    """One real tensor: its ``array``, its ``element_type`` (``"bfloat16"`` for raw ``uint16``
    words) and the ``file`` it was read from (named in messages)."""

    array: np.ndarray
    element_type: str
    file: str


@frozen_record
class SampleSet(FrozenRecord):
    """Real tensors read from a samples folder or an ``.npz`` file.

    ``network`` is the network the samples were captured for when the index records it
    (``None`` for older indexes and plain ``.npz`` files, whose shapes and dtypes are still
    checked); ``index`` is the file that records it.
    """

    source: str
    index: str | None
    network: str | None
    samples: dict[str, Sample]

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """Tensor name -> array."""
        return {name: s.array for name, s in self.samples.items()}

    def check_network(self, network: str) -> None:
        """:class:`ProfileError` naming the index unless the samples are ``network``'s (or do
        not say)."""
        if self.network is not None and self.network != network:
            raise ProfileError(f"{self.index}: network: samples captured for "
                               f"{self.network!r}, not {network!r}")

    def check(self, name: str, *, dtype: str, shape: Sequence[int] | None,
              nbytes: int) -> None:
        """:class:`ProfileError` naming the file and tensor ``name`` unless its sample is the
        simulated tensor: element type ``dtype``, ``shape`` (batch first) when known, and
        ``nbytes`` bytes."""
        sample = self.samples[name]
        array = sample.array
        where = f"{sample.file}: tensor {name!r}"
        ok_type = sample.element_type == dtype or (
            dtype == "bfloat16" and sample.element_type == "uint16")  # raw bfloat16 words
        if not ok_type:
            raise ProfileError(f"{where}: element type {sample.element_type}, but the run "
                               f"simulates {dtype}")
        if shape is not None and tuple(array.shape) != tuple(shape):
            got, want = list(array.shape), list(shape)
            batch = ""
            if len(got) == len(want) and got[1:] == want[1:] and got:
                batch = f" (batch {got[0]}, not {want[0]})"
            raise ProfileError(f"{where}: shape {got} does not match the simulated tensor's "
                               f"{want}{batch}")
        if array.nbytes != nbytes:
            raise ProfileError(f"{where}: {array.nbytes} bytes ({list(array.shape)}), but the "
                               f"simulated tensor has {nbytes}")


def _index(root: Path) -> tuple[Path, dict]:
    index_path = root / "index.json"
    try:
        doc = load_json(index_path, SAMPLES_INDEX)
    except FileReadError as exc:
        if exc.missing:
            raise ProfileError(f"{index_path}: no such file: {root} is not a samples folder "
                               "(what 'sst-cdma capture --samples DIR' writes)") from None
        what = "not valid JSON" if exc.parsing else "cannot read"
        raise ProfileError(f"{index_path}: {what}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SAMPLES_FORMAT or doc.get("version") != 1:
        raise ProfileError(f"{index_path}: not an {SAMPLES_FORMAT} version 1 index")
    network = doc.get("network")
    if network is not None and (not isinstance(network, str) or not network):
        raise ProfileError(f"{index_path}: network: expected a non-empty string")
    if not isinstance(doc.get("tensors", {}), dict):
        raise ProfileError(f"{index_path}: tensors: expected an object")
    return index_path, doc


def _load_folder(root: Path) -> SampleSet:
    index_path, doc = _index(root)
    out: dict[str, Sample] = {}
    for name, entry in doc.get("tensors", {}).items():
        if not isinstance(entry, dict):
            raise ProfileError(f"{index_path}: tensors[{name!r}]: expected an object")
        file = root / str(entry.get("file", ""))
        if file.parent != root:
            raise ProfileError(f"{index_path}: tensors[{name!r}].file: must be a plain file name")
        if not os.path.lexists(file):
            raise ProfileError(f"{index_path}: tensors[{name!r}].file: {file.name} is not in "
                               f"{root}: the folder is incomplete (copied in part?); copy the "
                               "whole folder, or capture the samples again with "
                               "'sst-cdma capture ... --samples DIR'")
        try:
            arrays = read_npz(file)
            array = read_npz(file, ["activation"])["activation"] if "activation" not in arrays \
                else arrays.pop("activation")
            if arrays:
                raise ProfileError(f"{file}: holds more arrays than 'activation' "
                                   f"({', '.join(sorted(arrays))}): a sample file holds one")
        except ProfileError as exc:
            raise ProfileError(f"{exc} (the sample of tensor {name!r})") from None
        if list(array.shape) != entry.get("shape") or str(array.dtype) != entry.get("dtype"):
            raise ProfileError(f"{file}: holds {array.dtype}{list(array.shape)}, index says "
                               f"{entry.get('dtype')}{entry.get('shape')}")
        element_type = entry.get("element_type", str(array.dtype))
        if not isinstance(element_type, str):
            raise ProfileError(f"{index_path}: tensors[{name!r}].element_type: expected a string")
        out[name] = Sample(array, element_type, str(file))
    return SampleSet(str(root), str(index_path), doc.get("network"), out)


def load_sample_set(source: str | os.PathLike[str]) -> SampleSet:
    """Real tensors from a samples folder (``index.json``) or a plain ``.npz`` file whose arrays
    are named like the tensors; every fault is one-line :class:`ProfileError` naming the file."""
    path = Path(source)
    if path.is_dir():
        return _load_folder(path)
    arrays = read_npz(path)
    return SampleSet(str(path), None, None,
                     {name: Sample(a, str(a.dtype), str(path)) for name, a in arrays.items()})


def load_samples(directory: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every sample of ``directory`` (tensor name -> array) and check it against the index."""
    return _load_folder(Path(directory)).arrays
