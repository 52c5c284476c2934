"""Files the project reads, each opened one way.

A path is opened first (``O_NONBLOCK``, so opening a FIFO cannot block) and then checked on the
open descriptor (``fstat``, so nothing can swap the file between a check and the open): only a
regular file is read; a folder, a FIFO, a device (``/dev/zero``), a socket is refused. A file
is read up to the size limit of its kind (:class:`FileKind`, stated by each reader beside its
code), and a larger one is refused with its size and the limit: a file that grows while it is
read is refused too. JSON and YAML are then parsed by :mod:`sst_cdma.engine.strict_parsing`.

Every fault is a :class:`FileReadError` whose message is one line *without* the file's name
(the caller's error names the file, as it names the file of a parse error)."""
from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, Union

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads, yaml_loads

if TYPE_CHECKING:
    import hashlib

__all__ = ["FileKind", "FileReadError", "KIB", "MIB", "GIB", "open_regular", "read_bytes",
           "read_text", "load_json", "load_yaml", "size_text", "hash_into", "file_type_fault"]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

PathLike = Union[str, "os.PathLike[str]"]


@frozen_record
class FileKind(FrozenRecord):
    """A kind of file the project reads: its name in messages (``"a CPU-Adam file"``) and the
    most bytes one may hold."""

    name: str
    limit: int


class FileReadError(ValueError):
    """A file cannot be read as its kind: the message is one line without the file's name;
    ``missing`` is True when there is no such file, ``parsing`` when it was read but its text
    is not UTF-8 or not strict JSON/YAML."""

    def __init__(self, message: str, missing: bool = False, parsing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.parsing = parsing


def size_text(n: int) -> str:
    """A byte count for people: ``512 bytes``, ``20.0 MiB``, ``1 GiB``."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _not_regular(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file: only a regular file is read"
    if stat.S_ISCHR(mode):
        return "is a character device, not a regular file: only a regular file is read"
    if stat.S_ISBLK(mode):
        return "is a block device, not a regular file: only a regular file is read"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file: only a regular file is read"
    return "is not a regular file: only a regular file is read"


def _open_error(exc: OSError) -> FileReadError:
    if exc.errno == errno.ENOENT:
        return FileReadError("no such file", missing=True)
    if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened without a reader
        return FileReadError("is a socket or a device without a reader, not a regular file: "
                             "only a regular file is read")
    if exc.errno == errno.EISDIR:
        return FileReadError("is a folder, not a file")
    reason = (exc.strerror or str(exc)).lower()
    return FileReadError(f"cannot be opened: {reason}")


def _too_big(size: int, kind: FileKind, exact: bool = True) -> FileReadError:
    limit = size_text(kind.limit)
    if not exact:
        return FileReadError(f"holds more than {limit}, over the limit for {kind.name}")
    shown = size_text(size)
    if float(shown.split()[0]) <= kind.limit / {"GiB": GIB, "MiB": MIB, "KiB": KIB,
                                                  "bytes": 1}[shown.split()[1]]:
        shown, limit = f"{size} bytes", f"{limit} ({kind.limit} bytes)"  # rounding hid it
    return FileReadError(f"is {shown}, over the {limit} limit for {kind.name}")


def open_regular(path: PathLike, kind: FileKind) -> BinaryIO:
    """``path`` opened for reading in binary, once it is known (on the open descriptor) to be a
    regular file of at most ``kind.limit`` bytes; FileReadError otherwise. The caller closes it
    (``with open_regular(...) as fh``); a reader of it should stop at the limit too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except OSError as exc:
        raise _open_error(exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileReadError(_not_regular(info.st_mode))
        if info.st_size > kind.limit:
            raise _too_big(info.st_size, kind)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: PathLike, kind: FileKind) -> bytes:
    """The bytes of the regular file ``path``, at most ``kind.limit`` of them (a file that grew
    past the limit while it was read is refused); FileReadError otherwise."""
    with open_regular(path, kind) as fh:
        try:
            data = fh.read(kind.limit + 1)
        except OSError as exc:
            raise FileReadError(f"cannot be read: {(exc.strerror or str(exc)).lower()}") \
                from None
    if len(data) > kind.limit:
        raise _too_big(len(data), kind, exact=False)
    return data


def hash_into(digest: "hashlib._Hash", path: PathLike, kind: FileKind) -> None:
    """Feed the bytes of the regular file ``path`` into ``digest`` a chunk at a time (memory
    stays small for a large file), refusing what :func:`read_bytes` refuses."""
    total = 0
    with open_regular(path, kind) as fh:
        while chunk := fh.read(MIB):
            total += len(chunk)
            if total > kind.limit:
                raise _too_big(total, kind, exact=False)
            digest.update(chunk)


def file_type_fault(path: PathLike) -> Optional[str]:
    """Why ``path`` is not a regular file (a folder, a FIFO, a device), or None when it is one
    or does not exist: for checks up front that name the fault before any work; the reading
    itself checks again on the open file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _not_regular(mode)


def read_text(path: PathLike, kind: FileKind) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_bytes`); FileReadError
    naming the first byte that is not UTF-8."""
    data = read_bytes(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start})", parsing=True) from None


def load_json(path: PathLike, kind: FileKind, *, finite: bool = True) -> Any:
    """The strict JSON of the regular file ``path`` (duplicate keys, too deep nesting, integers
    past Python's digit limit and, when ``finite``, NaN and infinities refused); every fault is
    a FileReadError."""
    try:
        return json_loads(read_text(path, kind), finite=finite)
    except StrictParseError as exc:
        raise FileReadError(str(exc), parsing=True) from None


def load_yaml(path: PathLike, kind: FileKind) -> Any:
    """The strict YAML of the regular file ``path`` (duplicate keys, explicit tags and too deep
    nesting refused); every fault is a FileReadError."""
    try:
        return yaml_loads(read_text(path, kind))
    except StrictParseError as exc:
        raise FileReadError(str(exc), parsing=True) from None

