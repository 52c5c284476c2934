"""Real text found on any machine: the Python standard library's own source files, as bytes.

The corpus is every ``*.py`` file directly in ``sysconfig.get_paths()["stdlib"]`` (not its
sub-packages), in sorted file-name order, each file's bytes followed by a newline. Every
20th file (indices 19, 39, ...) is held out for validation; the rest are training text.
"""
from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, read_bytes

__all__ = ["HOLDOUT_EVERY", "TextCorpus", "load_corpus", "stdlib_files"]

HOLDOUT_EVERY = 20
#: one source file of the corpus (the standard library's largest is under 1 MiB)
CORPUS_FILE = FileKind("a corpus file", 64 * MIB)


@dataclass(frozen=True)
class TextCorpus:
    """Training and validation bytes (``uint8`` arrays) and where they came from."""

    train: np.ndarray
    valid: np.ndarray
    description: str

    def batch(self, generator: torch.Generator, size: int, seq: int) -> tuple[torch.Tensor,
                                                                              torch.Tensor]:
        """``size`` random training windows: inputs and next-byte targets, each ``(size, seq)``."""
        starts = torch.randint(0, len(self.train) - seq - 1, (size,), generator=generator)
        return _windows(self.train, starts.tolist(), seq)

    def held_out(self, count: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` validation windows spread evenly over the validation text (fixed)."""
        span = len(self.valid) - seq - 1
        if span < count:
            raise ValueError(f"validation text of {len(self.valid)} bytes is too short for "
                             f"{count} windows of {seq}")
        starts = [i * span // count for i in range(count)]
        return _windows(self.valid, starts, seq)


def _windows(data: np.ndarray, starts: list[int], seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = np.stack([data[s:s + seq + 1] for s in starts]).astype(np.int64)
    tokens = torch.from_numpy(rows)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def stdlib_files(root: str | Path | None = None) -> list[Path]:
    """The corpus files: ``*.py`` directly in the standard library folder, sorted by name."""
    folder = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    files = sorted(folder.glob("*.py"), key=lambda p: p.name)
    if len(files) < 2 * HOLDOUT_EVERY:
        raise ValueError(f"{folder}: only {len(files)} *.py files; the corpus needs at least "
                         f"{2 * HOLDOUT_EVERY}")
    return files


def load_corpus(root: str | Path | None = None) -> TextCorpus:
    """The standard-library corpus, split by file into training and validation text."""
    files = stdlib_files(root)
    train: list[bytes] = []
    valid: list[bytes] = []
    for i, path in enumerate(files):
        try:
            data = read_bytes(path, CORPUS_FILE)
        except FileReadError as exc:
            raise ValueError(f"{path}: {exc}") from None
        (valid if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 else train).append(data + b"\n")
    tr, va = b"".join(train), b"".join(valid)
    description = (f"Python {sys.version.split()[0]} standard library sources: the "
                   f"{len(files)} *.py files directly in {files[0].parent} in sorted order, "
                   f"byte-level tokens; every {HOLDOUT_EVERY}th file held out "
                   f"({len(valid)} files, {len(va)} bytes), {len(tr)} training bytes")
    return TextCorpus(np.frombuffer(tr, dtype=np.uint8), np.frombuffer(va, dtype=np.uint8),
                      description)
