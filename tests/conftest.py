"""Shared fixtures: paths of the repository and a helper that writes and runs a topology."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture
def write_script(tmp_path):
    """Write a topology script (dedented) into tmp_path and return its path."""
    def _write(body: str, name: str = "topo.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body), encoding="utf-8")
        return path
    return _write


@pytest.fixture
def run_script(write_script):
    """Write a topology and run it in-process; returns (RunResult, console text)."""
    from sst_cdma.runner import run

    def _run(body: str, *args, **kwargs):
        console = io.StringIO()
        result = run(write_script(body), *args, console=console, **kwargs)
        return result, console.getvalue()
    return _run
