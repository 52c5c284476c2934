"""Exceptions raised by the workloads layer.

Every error is a :class:`ValueError` subclass so callers that only care about "bad input" can
catch ``ValueError``; the subclasses carry where the problem is (file, layer, line).
"""
from __future__ import annotations

from sst_cdma.engine.file_reads import FileReadError

__all__ = ["WorkloadError", "StreamError", "not_utf8", "read_fault"]


def not_utf8(exc: UnicodeDecodeError) -> str:
    """A file that is not UTF-8, said in one line: ``not UTF-8 text (byte 0xff at offset 7)``."""
    bad = exc.object[exc.start:exc.start + 1]
    return f"not UTF-8 text (byte 0x{bad.hex() or '??'} at offset {exc.start})"


def read_fault(exc: FileReadError, what: str) -> str:
    """A file the workload could not read, said in one line: its text's fault as it is (not
    UTF-8, not strict JSON/YAML), else ``cannot read WHAT: FAULT`` (no such file, a FIFO, too
    large)."""
    if exc.parsing:
        return str(exc)
    return f"cannot read {what}: {exc}"


class WorkloadError(ValueError):
    """A network definition (or a request about one) is invalid.

    The message names the file and, where there is one, the layer:
    ``"alexnet.yaml: layer 'conv2': unknown input 'convv1'"``.
    """

    def __init__(self, message: str, *, file: str | None = None, layer: str | None = None) -> None:
        self.message = message
        self.file = file
        self.layer = layer
        where = []
        if file:
            where.append(file)
        if layer:
            where.append(f"layer '{layer}'")
        super().__init__(": ".join(where + [message]))


class StreamError(WorkloadError):
    """A workload stream line is malformed; ``str()`` reads ``"SOURCE:LINE: message"``."""

    def __init__(self, message: str, *, source: str, line: int) -> None:
        self.source = source
        self.line = line
        ValueError.__init__(self, f"{source}:{line}: {message}")
        self.message = message
        self.file = source
        self.layer = None
