"""Fixtures of the engine's tests."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def _mounts(what: str, *args: str):
    """A function that runs ``mount ARGS... SOURCE PATH`` (skips the test where this process
    cannot mount), and the list of mount points it made, undone after the test."""
    done: list[Path] = []

    def mount(source: str, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mount", *args, source, str(path)],
                          capture_output=True).returncode != 0:
            pytest.skip(f"cannot {what} here (not root, or no mount)")
        done.append(path)
        return path

    return mount, done


def _undo(done: list[Path]) -> None:
    for path in reversed(done):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def mounted(tmp_path):
    """Mount a fresh tmpfs at the path given (skips where this process cannot mount); every
    mount is undone after the test."""
    mount, done = _mounts("mount a tmpfs", "-t", "tmpfs")
    yield lambda path: mount("none", path)
    _undo(done)


@pytest.fixture
def bound(tmp_path):
    """Bind-mount the folder given at the path given (skips where this process cannot
    mount): a mount of the same file system, which a rename cannot cross; undone after."""
    mount, done = _mounts("bind-mount", "--bind")
    yield lambda source, path: mount(str(source), path)
    _undo(done)
