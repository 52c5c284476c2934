"""Files written whole: a reader (or a run that fails halfway) never sees half of one.

A file is written aside, then renamed over the old one in one step. What is not a plain
file is never replaced that way: a character device or a FIFO the user names (``/dev/null``,
``/dev/stdout``, a pipe) is written to as the device it is; a folder, a block device or a
socket is refused; and a file a program owns inside a folder it writes (a sweep's
``results.csv``) is refused when it is a link, since the program never made one there.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Union

from sst_cdma.engine.file_safety import kind_of

__all__ = ["replace_whole", "write_text_whole", "check_replaceable"]

PathLike = Union[str, "os.PathLike[str]"]

#: folders whose names are views of devices and processes (``/dev/stdout`` is
#: ``/proc/self/fd/1``): a path there is written to, never replaced
DEVICE_FOLDERS = ("/dev/", "/proc/")


def _refusal(path: PathLike, what: str) -> OSError:
    """The OSError saying ``path`` is ``what`` and is not replaced."""
    return OSError(errno.EEXIST, f"is {what}, which is not replaced by a file", os.fspath(path))


def _is_device(path: PathLike, mode: int) -> bool:
    """Whether ``path`` (``st_mode`` ``mode``, links followed) is written to in place."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or \
        os.path.abspath(path).startswith(DEVICE_FOLDERS)


def check_replaceable(path: PathLike, owned: bool = False) -> bool:
    """Whether ``path`` is written to in place (a device or FIFO: True) or replaced (False);
    OSError (its text saying what the path is) for a folder, a block device or a socket, and
    with ``owned`` for anything but a plain file or nothing (a link above all)."""
    try:
        info = os.lstat(path) if owned else os.stat(path)
    except FileNotFoundError:
        return False
    if owned and not stat.S_ISREG(info.st_mode):
        what = kind_of(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            what += f" (to {os.readlink(path)}) the program did not make"
        raise _refusal(path, what)
    if stat.S_ISREG(info.st_mode):
        return False
    if _is_device(path, info.st_mode):
        return True
    raise _refusal(path, kind_of(info.st_mode))


def replace_whole(path: PathLike, write: Callable[[Path], object], owned: bool = False
                  ) -> None:
    """Let ``write`` write a temporary file beside ``path`` (a link's target: the link is kept),
    then rename it over ``path`` in one step, keeping an existing file's permissions. If
    ``write`` or the rename fails, ``path`` is left as it was and the temporary file removed;
    the exception propagates. A device or FIFO is written to in place, and what may not be
    replaced is an OSError (see :func:`check_replaceable`; ``owned``: ``path`` is the
    program's own file in a folder it writes, never a link)."""
    if check_replaceable(path, owned):
        write(Path(path))
        return
    target = os.fspath(path) if owned else os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(target)))
    os.close(fd)
    try:
        write(Path(tmp))
        if os.path.exists(target):
            mode = os.stat(target).st_mode & 0o7777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_whole(path: PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` with :func:`replace_whole`."""
    replace_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline=""))
