"""Temporary folders that say who made them, so that a later run can remove those a killed
process left (SIGKILL, a power cut: nothing of the process ran to clean up) and never one a
live process is still writing.

A folder is named ``<prefix><host>-<pid>-<nonce>``: :func:`owner_tag` gives ``<host>-<pid>``.
:func:`left_by_dead_process` is true only when the host is this machine's and no process of
that number exists: a folder made on another machine (a shared file system) or by a process
still alive is never taken as stale; one whose number a new process has since taken is kept
until that process ends, which is safe."""
from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Iterator

__all__ = ["owner_tag", "left_by_dead_process", "stale_folders"]

_TAGGED = re.compile(r"(?P<host>.+)-(?P<pid>\d+)-(?P<nonce>[A-Za-z0-9_]+)")


def _host() -> str:
    """This machine's name, with characters that do not belong in a file name replaced."""
    return re.sub(r"[^A-Za-z0-9._]", "_", socket.gethostname())[:64] or "host"


def owner_tag() -> str:
    """``<host>-<pid>`` of this process, for the name of a temporary folder."""
    return f"{_host()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process (or a number the system cannot check): keep it
    return True


def left_by_dead_process(name: str, prefix: str) -> bool:
    """Whether ``name`` is ``<prefix><host>-<pid>-<nonce>`` made on this machine by a process
    that no longer exists."""
    if not name.startswith(prefix):
        return False
    match = _TAGGED.fullmatch(name[len(prefix):])
    if match is None or match["host"] != _host():
        return False
    return not _alive(int(match["pid"]))


def stale_folders(folder: Path, prefix: str) -> Iterator[Path]:
    """The folders in ``folder`` named ``<prefix>...`` that a dead process of this machine
    left (none when ``folder`` cannot be listed)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix) and entry.is_dir(follow_symlinks=False) and \
                left_by_dead_process(entry.name, prefix):
            yield Path(entry.path)
