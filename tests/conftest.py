"""Shared fixtures: paths of the repository and a helper that writes and runs a topology."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: the networks a test marked ``every_network`` runs in the default tier (a plain CNN, a
#: branching one and a transformer); its other networks run in the slow tier
DEFAULT_TIER_NETWORKS = ("alexnet", "googlenet", "gpt2_small")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks
def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the cases of an ``every_network(PARAM)`` test whose network (its
    ``PARAM`` parameter, ``network`` by default) is not in :data:`DEFAULT_TIER_NETWORKS`."""
    for item in items:
        marker = item.get_closest_marker("every_network")
        callspec = getattr(item, "callspec", None)
        if marker is None or callspec is None:
            continue
        param = marker.args[0] if marker.args else "network"
        if callspec.params.get(param) not in DEFAULT_TIER_NETWORKS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _errors_speak_params():
    """Each test starts as a fresh process does: errors name params, not flags (a topology
    an earlier test built from a command line left its flags as the vocabulary)."""
    from sst_cdma.engine.param_words import speak_params

    speak_params()


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
    from sst_cdma.engine.runner import run

    def _run(body: str, *args, **kwargs):
        console = io.StringIO()
        result = run(write_script(body), *args, console=console, **kwargs)
        return result, console.getvalue()
    return _run
