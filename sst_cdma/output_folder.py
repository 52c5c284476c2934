"""A run's output folder (``--output-directory DIR``), replaced whole.

A run writes into a staging folder beside the folder ``DIR`` resolves to (``DIR`` may be a
symlink, to another file system too: the staging folder is made beside the link's target, so
moving it in is a rename), named ``DIR.partial-<host>-<pid>-<nonce>``. When the run has
ended, the staging folder takes ``DIR``'s place in one step: a new ``DIR`` is a rename; an
existing one is exchanged with it atomically (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere,
or on a file system without it, the old folder is renamed aside to
``DIR.old-<host>-<pid>-<nonce>`` and the staging folder renamed in), and the old folder then
deleted. Files of the old folder the run did not write are carried into the new one first
(hard links, or copies where the file system has none). So a reader sees the old folder or the
new one, never a mix, however the run ends.

Where the staging folder cannot or should not take ``DIR``'s place (``DIR`` is a mount point,
which cannot be renamed, or cannot be renamed for want of permission; it is the working folder
of this process, or above it; it holds more than :data:`CARRY_LIMIT` entries the run does not
write), the files are moved (or, across file systems, copied) in one by one instead, each in
one step, with a marker ``DIR/.incomplete`` written first and removed last: a folder a stopped
run left half-written says so, and :func:`sst_cdma.read_statistics` refuses a file in it.

A later run removes the staging folders of runs of this machine whose process no longer
exists (killed with SIGKILL, or the machine went down), and puts back an old folder such a run
had renamed aside when ``DIR`` itself is missing (killed between the two renames); it never
touches those of a process still alive (:mod:`~sst_cdma.stale_folders`).
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Optional

from .stale_folders import left_by_dead_process, owner_tag, stale_folders

__all__ = ["check_output_directory", "prepare_staging", "publish_outputs", "cannot_write",
           "write_failure", "incomplete_marker", "INCOMPLETE"]

#: the file a run writes first into an output folder it moves its files into one by one (see
#: the module's text), and removes last
INCOMPLETE = ".incomplete"

#: errors of the storage itself (full, over quota, read-only, failing), whatever the file
STORAGE_ERRNOS = frozenset(getattr(errno, name) for name in
                           ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG") if hasattr(errno, name))


def _fail(message: str, out_dir: Path) -> Exception:
    from .runner import RunError  # the runner imports this module

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
    one had renamed aside when ``target`` is missing."""
    for aside in stale_folders(target.parent, f"{target.name}.old-"):
        if not os.path.lexists(target):
            try:
                os.rename(aside, target)
                continue
            except OSError:
                pass
        shutil.rmtree(aside, ignore_errors=True)
    for staging in stale_folders(target.parent, f"{target.name}.partial-"):
        shutil.rmtree(staging, ignore_errors=True)


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


def _carry_over(old: Path, new: Path) -> None:
    """Give ``new`` every file (and folder) of ``old`` it does not have: hard links, or
    copies where the file system has none. ``old`` is left as it was."""
    for path in sorted(old.rglob("*")):
        copy = new / path.relative_to(old)
        if os.path.lexists(copy) or not copy.parent.is_dir() or copy.parent.is_symlink():
            continue  # the run wrote it (or a file where its folder would be): the run's wins
        if path.is_dir() and not path.is_symlink():
            copy.mkdir()
            shutil.copymode(path, copy)
            continue
        try:
            os.link(path, copy, follow_symlinks=False)
        except OSError:
            if path.is_symlink():
                os.symlink(os.readlink(path), copy)
            else:
                shutil.copy2(path, copy)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2``); False where the
    system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def _swap_in(staging: Path, target: Path) -> Path:
    """Put ``staging`` in ``target``'s place; return where the old folder now is."""
    if _exchange(staging, target):
        return staging
    aside = target.with_name(f"{target.name}.old-{owner_tag()}-{uuid.uuid4().hex[:8]}")
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    return aside


#: the most entries of an old output folder the run did not write that are carried into the
#: new one; a folder holding more (a home folder given as the output folder) is written into
#: file by file instead
CARRY_LIMIT = 1000


def _too_much_to_carry(old: Path, new: Path) -> bool:
    """Whether ``old`` holds more than :data:`CARRY_LIMIT` entries ``new`` lacks."""
    count = 0
    for path in old.rglob("*"):
        count += not os.path.lexists(new / path.relative_to(old))
        if count > CARRY_LIMIT:
            return True
    return False


def _swappable(staging: Path, target: Path) -> bool:
    """Whether ``staging`` should take ``target``'s place by a rename: the same file system,
    ``target`` not a mount point (which cannot be renamed), not this process's working folder
    or one above it (the process, and a shell there, would be left in the deleted old one),
    and not a folder of many files the run does not write."""
    try:
        if os.stat(staging).st_dev != os.stat(target).st_dev or os.path.ismount(target):
            return False
    except OSError:
        return True  # let the rename say what is wrong
    try:
        if _inside(os.getcwd(), target) is not None:
            return False
    except OSError:  # a working folder deleted meanwhile: not this one
        pass
    return not _too_much_to_carry(target, staging)


def _move_in(staging: Path, target: Path) -> None:
    """Move every file of ``staging`` over ``target``'s one by one, each in one step (a
    rename on the same file system; else a copy written aside, then renamed over the old
    file): for a ``target`` the staging folder cannot replace. The marker
    :data:`INCOMPLETE` is written first and removed last, so a folder a stopped run left
    half-written says so (:func:`incomplete_marker`)."""
    folders = [target, *(target / p.relative_to(staging) for p in staging.rglob("*")
                         if p.is_dir() and not p.is_symlink())]
    for folder in folders:  # half-copied files of killed runs, where this run writes
        for left in folder.glob(".copy-*") if folder.is_dir() else ():
            if left.is_file() and left_by_dead_process(left.name, ".copy-"):
                left.unlink()
    same_fs = os.stat(staging).st_dev == os.stat(target).st_dev
    marker = target / INCOMPLETE
    marker.write_text(f"{owner_tag()}: a run is moving its outputs in; if none is, one was "
                      "stopped halfway and the files here may come from two runs\n",
                      encoding="utf-8")
    for path in sorted(staging.rglob("*")):
        dest = target / path.relative_to(staging)
        if path.is_dir() and not path.is_symlink():
            dest.mkdir(exist_ok=True)
            continue
        if same_fs:
            os.replace(path, dest)
            continue
        tmp = dest.with_name(f".copy-{owner_tag()}-{uuid.uuid4().hex[:8]}")
        shutil.copy2(path, tmp, follow_symlinks=False)
        os.replace(tmp, dest)
    marker.unlink()


def incomplete_marker(folder: Path) -> Optional[Path]:
    """The :data:`INCOMPLETE` marker of an output ``folder`` whose files a stopped run left
    half-copied (None when there is none)."""
    marker = Path(folder) / INCOMPLETE
    return marker if marker.is_file() else None


def publish_outputs(staging: Path, target: Path, out_dir: Optional[Path] = None) -> None:
    """Put the finished ``staging`` folder in ``target``'s place (see the module's text) and
    remove the old one. RunError naming ``out_dir`` (default ``target``) when it cannot."""
    try:
        if not os.path.lexists(target):
            try:
                os.rename(staging, target)
                return
            except OSError:
                if not target.is_dir():  # not a race with another run creating it
                    raise
        if not _swappable(staging, target):
            _move_in(staging, target)
            shutil.rmtree(staging, ignore_errors=True)
            return
        _carry_over(target, staging)
        staging.chmod(target.stat().st_mode & 0o7777)
        try:
            old = _swap_in(staging, target)
        except PermissionError:  # the old folder cannot be renamed (a sticky folder above)
            _move_in(staging, target)
            old = staging
    except OSError as exc:
        raise _fail(f"cannot move the outputs in: {exc.strerror or exc}",
                    out_dir or target) from None
    shutil.rmtree(old, ignore_errors=True)


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
