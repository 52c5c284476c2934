"""Fixtures for density-profile tests: a valid profile document to break in many ways."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest


def valid_document() -> dict[str, Any]:
    """A small, fully valid profile document (two tensors, ratios on some points)."""
    return {
        "format": "sst-cdma-density-profile",
        "version": 1,
        "network": "tiny",
        "dtype": "float32",
        "provenance": {"kind": "measured", "model": "tests:Tiny", "data": "zeros",
                       "steps": 100, "command": "make it", "date": "2024-05-01"},
        "tensors": {
            "conv1": {"sample_shape": [4, 2, 2], "points": [
                {"progress": 0.0, "density": 0.5, "ratios": {"zvc": 1.88, "rle": 1.5, "zlib": 2.0}},
                {"progress": 0.5, "density": 0.3},
                {"progress": 1.0, "density": 0.2, "ratios": {"zvc": 4.3}},
            ]},
            "conv3": {"points": [
                {"progress": 0.0, "density": 0.9},
                {"progress": 0.25, "density": 0.6},
                {"progress": 1.0, "density": 0.4},
            ]},
        },
    }


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh valid document each test may mutate."""
    return copy.deepcopy(valid_document())


@pytest.fixture
def write(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Write a JSON-able object (or raw text) to ``tmp_path/NAME`` and return the path."""
    def _write(data: Any, name: str = "profile.json") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return path
    return _write
