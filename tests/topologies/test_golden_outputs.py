"""The main job and the other golden runs (``tests/golden_cases.py``) write byte for byte what
they wrote when their golden copies were blessed: statistics, summary, rendered streams and
console. A change that means to move no result (a reorganisation, a speed-up) passes as it is;
one that moves results on purpose re-blesses the copies (``python tests/golden_cases.py``) in
its own commit, whose message says which change moved them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from golden_cases import CASES, GOLDEN, outputs  # noqa: E402


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_byte_identical_to_the_golden_copy(case):
    blessed = {p.name: p.read_text(encoding="utf-8") for p in sorted((GOLDEN / case).iterdir())}
    now = outputs(case)
    assert sorted(now) == sorted(blessed), f"{case}: the run writes other files"
    for name, text in blessed.items():
        assert now[name] == text, f"{case}: {name} differs from tests/data/golden/{case}/{name}"
