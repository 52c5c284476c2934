"""A run's output folder (``--output-directory DIR``): the user's folder, written into.

A run writes into a staging folder beside the folder ``DIR`` resolves to (``DIR`` may be a
symlink, to another file system too: the staging folder is made beside the link's target),
named ``DIR.partial-<host>-<pid>-<nonce>``. When the run has ended:

- a new ``DIR`` is the staging folder renamed, in one step (never over a folder made
  meanwhile);
- an existing ``DIR`` stays the folder it is (its owner, mode, extended attributes and ACLs
  untouched): the run's files are moved in one by one, each in one step (a rename, or across
  file systems a copy written aside and renamed over the old file), through folder
  descriptors opened without following links. A marker ``DIR/.incomplete`` is written first,
  as a new file, and removed last, so a folder a stopped run left half-written says so and
  :func:`sst_cdma.read_statistics` refuses a file in it. Files the run does not write are left
  as they are; nothing of ``DIR`` is removed.

Before anything moves, every path the run would replace is checked: a symlink, a folder
where the run writes a file (or a file where it makes a folder), a device or a FIFO is not
the run's to replace, so nothing is changed, and the error names the path and the folder
beside ``DIR`` where the run's outputs are kept (``DIR.kept-<host>-<pid>-<nonce>``).

A later run removes the staging folders of runs of this machine whose process no longer
exists (killed with SIGKILL, or the machine went down); it never touches those of a process
still alive (:mod:`~sst_cdma.engine.stale_folders`), and removes nothing beyond a mount point
(:func:`~sst_cdma.engine.file_safety.remove_tree`).
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Optional

from sst_cdma.engine.errors import RunError
from sst_cdma.engine.file_safety import kind_of, open_folder, remove_tree
from sst_cdma.engine.stale_folders import left_by_dead_process, owner_tag, stale_folders

__all__ = ["check_output_directory", "prepare_staging", "publish_outputs", "cannot_write",
           "write_failure", "incomplete_marker", "INCOMPLETE"]

#: the file a run writes first into an output folder it moves its files into one by one (see
#: the module's text), and removes last
INCOMPLETE = ".incomplete"

#: errors of the storage itself (full, over quota, read-only, failing), whatever the file
STORAGE_ERRNOS = frozenset(getattr(errno, name) for name in
                           ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG") if hasattr(errno, name))


def _fail(message: str, out_dir: Path) -> Exception:
    return RunError(message, f"--output-directory {out_dir}")


def _broken_link(path: Path) -> Optional[str]:
    """Why the symlink ``path`` leads nowhere (a loop, or a target that does not exist), or
    None when it is not a symlink or leads somewhere."""
    if not path.is_symlink():
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"a dangling symlink (to {os.readlink(path)}, which does not exist)"
    return None


def check_output_directory(out_dir: Path) -> Path:
    """The folder the run's outputs go to: ``out_dir``, or the folder its symlinks resolve to;
    its missing parents are created. RunError naming the path at fault when it cannot be a
    folder: a file, a dangling symlink or a symlink loop there or above."""
    for path in (out_dir, *out_dir.parents):
        fault = _broken_link(path)
        if fault is not None:
            where = "is" if path == out_dir else f"{path} is"
            raise _fail(f"{where} {fault}", out_dir)
        if path.exists():
            if not path.is_dir():
                where = "is" if path == out_dir else f"{path} is"
                raise _fail(f"{where} a file, not a folder", out_dir)
            break
    target = Path(os.path.realpath(out_dir))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail(f"cannot create its folder: {exc.strerror or exc}", out_dir) from None
    return target


def _umask() -> int:
    """The process's file-creation mask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale(target: Path) -> None:
    """Remove what killed runs of this machine left beside ``target``; put back an old folder
    one (of an earlier version, which swapped folders) had renamed aside when ``target`` is
    missing."""
    for aside in stale_folders(target.parent, f"{target.name}.old-"):
        if not os.path.lexists(target):
            try:
                os.rename(aside, target)
                continue
            except OSError:
                pass
        remove_tree(aside)
    for staging in stale_folders(target.parent, f"{target.name}.partial-"):
        remove_tree(staging)


def prepare_staging(out_dir: Path, target: Path) -> Path:
    """A new empty staging folder beside ``target`` (``out_dir`` resolved), with the mode
    ``mkdir`` would give it under the umask (``mkdtemp`` makes it private, and the rename
    would keep that); what killed runs left there is removed first."""
    _remove_stale(target)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-{owner_tag()}-",
                                        dir=target.parent))
        staging.chmod(0o777 & ~_umask())
        return staging
    except OSError as exc:
        raise _fail(f"cannot write beside it: {exc.strerror or exc}", out_dir) from None


def _rename_new(staging: Path, target: Path) -> bool:
    """Rename ``staging`` to ``target`` when nothing is there (Linux ``renameat2`` with
    ``RENAME_NOREPLACE``, so a folder made meanwhile is never replaced); False when something
    is."""
    if not sys.platform.startswith("linux"):
        if os.path.lexists(target):
            return False
        os.rename(staging, target)
        return True
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it
        renameat2 = None
    if renameat2 is not None:
        at_fdcwd, rename_noreplace = -100, 1
        if renameat2(at_fdcwd, os.fsencode(staging), at_fdcwd, os.fsencode(target),
                     rename_noreplace) == 0:
            return True
        code = ctypes.get_errno()
        if code in (errno.EEXIST, errno.ENOTEMPTY, errno.EXDEV, errno.EBUSY):
            return False  # there already, or a mount point (a bind mount too): moved into
        if code not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(staging), None, str(target))
    if os.path.lexists(target):
        return False
    os.rename(staging, target)
    return True


class _Refused(Exception):
    """A path in the output folder where the run would write is not the run's to replace."""

    def __init__(self, rel: Path, what: str) -> None:
        super().__init__(f"{rel} is {what}")
        self.rel, self.what = rel, what


def _entry(fd: int, name: str) -> Optional[os.stat_result]:
    """``name`` in the open folder ``fd``, not following a link (None when absent)."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_folder(src: Path, fd: Optional[int], rel: Path) -> None:
    """Raise :class:`_Refused` for the first path under the output folder's ``rel`` (open as
    ``fd``; None when the run would create it) that the files of ``src`` would replace and
    that is not a plain file (or, for a folder of ``src``, a real folder): a symlink, a
    folder where a file goes, a device, a FIFO."""
    if fd is None:
        return
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        found = _entry(fd, entry.name)
        is_dir = entry.is_dir(follow_symlinks=False)
        if found is None:
            continue
        if is_dir != stat.S_ISDIR(found.st_mode) or not (
                stat.S_ISDIR(found.st_mode) or stat.S_ISREG(found.st_mode)):
            what = kind_of(found.st_mode)
            raise _Refused(rel / entry.name, f"{what}, not a {'folder' if is_dir else 'file'}"
                                              " the run writes")
        if is_dir:
            sub = open_folder(entry.name, dir_fd=fd)
            try:
                _check_folder(Path(entry.path), sub, rel / entry.name)
            finally:
                os.close(sub)


def _drop_dead_copies(fd: int) -> None:
    """Remove the half-copied files killed runs of this machine left in the open folder."""
    for entry in list(os.scandir(fd)):
        if entry.name.startswith(".copy-") and entry.is_file(follow_symlinks=False) and \
                left_by_dead_process(entry.name, ".copy-"):
            try:
                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass


def _copy_file(src: Path, fd: int, name: str) -> None:
    """Copy ``src`` into the open folder ``fd`` as ``name``, in one step: written aside as a
    new file (never through a link), then renamed over ``name``."""
    tmp = f".copy-{owner_tag()}-{uuid.uuid4().hex[:8]}"
    info = os.stat(src)
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                  stat.S_IMODE(info.st_mode), dir_fd=fd)
    try:
        with open(src, "rb") as reader, os.fdopen(out, "wb", closefd=False) as writer:
            shutil.copyfileobj(reader, writer)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
    finally:
        os.close(out)


def _move_file(src_fd: int, src: Path, fd: int, name: str) -> None:
    """Move the file ``name`` of the open folder ``src_fd`` (at ``src``) into the open folder
    ``fd`` in one step: a rename, or where the two are on different mounts (another file
    system, or a bind mount of the same one, which a rename cannot cross) a copy."""
    try:
        os.replace(name, name, src_dir_fd=src_fd, dst_dir_fd=fd)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        _copy_file(src, fd, name)


def _move_folder(src: Path, fd: int) -> None:
    """Move every file of ``src`` into the open folder ``fd``, each in one step: a rename on
    the same file system, else a copy (:func:`_copy_file`); folders are made (with
    ``src``'s modes) or entered, never through a link."""
    _drop_dead_copies(fd)
    src_fd = open_folder(src)
    try:
        for entry in sorted(os.scandir(src), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                if _entry(fd, entry.name) is None:
                    os.mkdir(entry.name, stat.S_IMODE(entry.stat().st_mode), dir_fd=fd)
                sub = open_folder(entry.name, dir_fd=fd)
                try:
                    _move_folder(Path(entry.path), sub)
                finally:
                    os.close(sub)
            else:
                _move_file(src_fd, Path(entry.path), fd, entry.name)
    finally:
        os.close(src_fd)


def _write_marker(fd: int) -> tuple[int, int]:
    """Write the marker :data:`INCOMPLETE` into the open folder ``fd`` as a new file (one a
    stopped run left is replaced; nothing is written through a link); its (device, inode)."""
    if _entry(fd, INCOMPLETE) is not None:  # a plain file (checked): a stopped run's
        os.unlink(INCOMPLETE, dir_fd=fd)
    out = os.open(INCOMPLETE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666,
                  dir_fd=fd)
    try:
        os.write(out, f"{owner_tag()}: a run is moving its outputs in; if none is, one was "
                      "stopped halfway and the files here may come from two runs\n".encode())
        info = os.fstat(out)
    finally:
        os.close(out)
    return info.st_dev, info.st_ino


def _remove_marker(fd: int, marker: tuple[int, int]) -> None:
    """Remove the marker this run wrote (and nothing put in its place meanwhile)."""
    found = _entry(fd, INCOMPLETE)
    if found is not None and (found.st_dev, found.st_ino) == marker:
        os.unlink(INCOMPLETE, dir_fd=fd)


def _move_in(staging: Path, target: Path) -> None:
    """Move the files of ``staging`` into the existing folder ``target`` (see the module's
    text); :class:`_Refused`, with nothing moved, when a path there is not the run's to
    replace."""
    top = open_folder(target)
    try:
        marker = _entry(top, INCOMPLETE)
        if marker is not None and not stat.S_ISREG(marker.st_mode):
            raise _Refused(Path(INCOMPLETE), f"{kind_of(marker.st_mode)}, not the marker a run "
                                             "writes")
        _check_folder(staging, top, Path())
        written = _write_marker(top)
        _move_folder(staging, top)
        _remove_marker(top, written)
    finally:
        os.close(top)


def incomplete_marker(folder: Path) -> Optional[Path]:
    """The :data:`INCOMPLETE` marker of an output ``folder`` whose files a stopped run left
    half-copied (None when there is none)."""
    marker = Path(folder) / INCOMPLETE
    return marker if os.path.lexists(marker) else None


def _keep(staging: Path, target: Path) -> Path:
    """Rename ``staging`` to a name no later run removes; where it now is."""
    kept = target.with_name(f"{target.name}.kept-{owner_tag()}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(staging, kept)
    except OSError:
        return staging
    return kept


def publish_outputs(staging: Path, target: Path, out_dir: Optional[Path] = None) -> None:
    """Put the finished ``staging`` folder's files in ``target`` (see the module's text) and
    remove ``staging``. RunError naming ``out_dir`` (default ``target``) when it cannot; when
    a path in ``target`` is not the run's to replace, nothing in ``target`` is changed and the
    outputs are kept in a folder beside it that the error names."""
    shown = out_dir or target
    try:
        if not _rename_new(staging, target):
            _move_in(staging, target)
    except _Refused as refused:
        kept = _keep(staging, target)
        raise _fail(f"{shown / refused.rel} is {refused.what}: nothing there was changed or "
                    f"removed; move it away and look for this run's outputs in {kept}",
                    shown) from None
    except OSError as exc:
        raise _fail(f"cannot move the outputs in: {exc.strerror or exc}", shown) from None
    remove_tree(staging)


def _inside(path: object, folder: Path) -> Optional[Path]:
    """``path`` relative to ``folder`` when it lies inside it."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
    except ValueError:
        return None


def cannot_write(exc: OSError, staging: Path) -> bool:
    """Whether ``exc`` is the storage failing (a full disk...) or names a file of the
    ``staging`` folder: the run could not write its outputs."""
    return exc.errno in STORAGE_ERRNOS or _inside(exc.filename, staging) is not None


def write_failure(exc: OSError, out_dir: Path, staging: Path) -> Exception:
    """The RunError for ``exc`` (see :func:`cannot_write`): one line naming the output folder,
    the file as it would have been called in it when the error says which, and the reason."""
    rel = _inside(exc.filename, staging)
    what = f"cannot write {out_dir / rel}" if rel is not None else "cannot write its files"
    return _fail(f"{what}: {exc.strerror or exc} (the previous outputs, if any, are left as "
                 "they were)", out_dir)
