"""Fixtures of the engine's tests."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def mounted(tmp_path):
    """Mount a fresh tmpfs at the path given (skips where this process cannot mount); every
    mount is undone after the test."""
    done = []

    def mount(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "none", str(path)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here (not root, or no mount)")
        done.append(path)
        return path

    yield mount
    for path in reversed(done):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def bound(tmp_path):
    """Bind-mount the folder given at the path given (skips where this process cannot
    mount): a mount of the same file system, which a rename cannot cross; undone after."""
    done = []

    def bind(source: Path, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mount", "--bind", str(source), str(path)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot bind-mount here (not root, or no mount)")
        done.append(path)
        return path

    yield bind
    for path in reversed(done):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
