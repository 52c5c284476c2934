"""Touching the user's folders safely: what a run removes, it removes without following a
link and without entering another file system; what it opens as a folder, it opens without
following a link (so a link planted after a check cannot redirect a write).

A folder tree is removed through folder descriptors (``unlinkat``/``rmdir`` relative to an
open folder, never a path walked again), and a folder that is a mount point (another file
system, or a bind mount of the same one, as ``/proc/self/mountinfo`` lists it) is left whole
with everything above it: :func:`remove_tree` then says it could not remove all.
"""
from __future__ import annotations

import os
import stat
from typing import Optional, Union

__all__ = ["remove_tree", "open_folder", "kind_of", "mount_points", "FOLDER_FLAGS"]

PathLike = Union[str, "os.PathLike[str]"]

#: how a folder is opened: read-only, a folder or nothing, never through a symlink
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words: ``a symlink``, ``a folder``, ..."""
    for test, words in ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISREG, "a file"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a special file"


def _unescape(field: str) -> str:
    """A path field of ``/proc/self/mountinfo`` with its octal escapes (``\\040``) undone."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points() -> frozenset[str]:
    """Every mount point of this process's view (empty where ``/proc`` does not say)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            return frozenset(_unescape(line.split()[4]) for line in fh if len(line.split()) > 4)
    except OSError:
        return frozenset()


def open_folder(name: PathLike, dir_fd: Optional[int] = None) -> int:
    """A descriptor of the folder ``name`` (relative to ``dir_fd`` when given), opened without
    following a symlink: OSError (ELOOP or ENOTDIR) when ``name`` is a link or no folder."""
    return os.open(name, FOLDER_FLAGS, dir_fd=dir_fd)


def _empty(fd: int, where: str, dev: int, mounts: frozenset[str]) -> bool:
    """Remove everything inside the open folder ``fd`` (at path ``where``) that lies on the
    device ``dev`` and under no mount point; True when nothing is left."""
    whole = True
    for entry in list(os.scandir(fd)):
        name = entry.name
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError:
            whole = False
            continue
        if not stat.S_ISDIR(info.st_mode):
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:
                whole = False
            continue
        path = os.path.join(where, name)
        if info.st_dev != dev or path in mounts:
            whole = False           # another file system mounted here: never entered
            continue
        whole = _remove_folder(fd, name, path, dev, mounts) and whole
    return whole


def _remove_folder(parent: int, name: str, path: str, dev: int, mounts: frozenset[str]
                   ) -> bool:
    """Empty and remove the folder ``name`` of the open folder ``parent``."""
    try:
        fd = open_folder(name, dir_fd=parent)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_dev != dev:  # swapped for a mount meanwhile
            return False
        inner = _empty(fd, path, dev, mounts)
    finally:
        os.close(fd)
    if not inner:
        return False
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError:
        return False
    return True


def remove_tree(path: PathLike) -> bool:
    """Remove ``path``, a file or a folder tree this program made, never following a
    symlink (a link is removed, not its target) and never entering a mount point inside it
    (left whole, with the folders above it). True when it is all gone (or was not there);
    errors are swallowed, as ``shutil.rmtree(ignore_errors=True)`` does."""
    where = os.path.abspath(path)
    try:
        info = os.lstat(where)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(where)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True
    mounts = mount_points()
    real = os.path.realpath(where)
    if real in mounts:
        return False
    parent, name = os.path.split(where)
    try:
        parent_fd = open_folder(parent or ".")
    except OSError:
        parent_fd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY)  # a linked parent
    try:
        return _remove_folder(parent_fd, name, real, info.st_dev, mounts)
    finally:
        os.close(parent_fd)

