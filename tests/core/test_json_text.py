"""``indented``: the text ``json.dumps(obj, indent=N, sort_keys=...)`` gives, character for
character, on what makes the encoders differ (escapes, non-ASCII, floats and their non-finite
values, big integers, non-string keys, tuples, subclasses, empty and nested containers), and
json's TypeError for what it cannot write."""
from __future__ import annotations

import enum
import json
import random

import pytest

from sst_cdma.engine.json_text import indented


class Level(enum.IntEnum):
    """An int subclass: json writes its int value."""

    HIGH = 3


class Name(str):
    """A str subclass."""


STRINGS = ["", "plain", 'quote " and \\ backslash', "tab\tline\nbreak\r", "\x00\x1f control",
           "unicode é ü 中文 \U0001f600", Name("sub"), "</script>"]
FLOATS = [0.0, -0.0, 0.1, 1 / 3, 1e16, 1e-7, 1e22, 5e-324, 1.7976931348623157e308,
          float("nan"), float("inf"), float("-inf"), 123456789.125]
SCALARS = [*STRINGS, *FLOATS, 0, -1, 2 ** 64 + 1, -(2 ** 70), True, False, None, Level.HIGH]
KEYS = ["b", "a", "", "é", 1, -7, 2.5, float("inf"), True, None, Name("k")]


def _value(rng: random.Random, depth: int, keys: list = KEYS) -> object:
    """A random JSON-able value, containers more likely near the top, its objects' keys
    from ``keys``."""
    roll = rng.random()
    if depth > 4 or roll < 0.4:
        return rng.choice(SCALARS)
    size = rng.choice((0, 1, 2, 5))
    if roll < 0.6:
        return [_value(rng, depth + 1, keys) for _ in range(size)]
    if roll < 0.7:
        return tuple(_value(rng, depth + 1, keys) for _ in range(size))
    return {rng.choice(keys): _value(rng, depth + 1, keys) for _ in range(size)}


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("indent", [2, 1, 4, 0])
def test_the_text_is_json_dumps_text(seed, indent):
    value = _value(random.Random(seed), 0)
    assert indented(value, indent) == json.dumps(value, indent=indent)


@pytest.mark.parametrize("seed", range(20))
def test_sorted_keys_as_json_sorts_them(seed):
    rng = random.Random(seed)
    words = ["zeta", "alpha", "mid", "é", ""]  # (keys of one type: json sorts them)
    value = {key: _value(rng, 1, words) for key in words}
    value["nested"] = {"b": {"d": 1, "c": [{"y": 2, "x": 3}]}, "a": []}
    assert indented(value, 2, sort_keys=True) == json.dumps(value, indent=2, sort_keys=True)


def test_a_value_or_key_json_cannot_write_is_the_same_typeerror():
    for bad in ({"a": {1, 2}}, [object()], {(1, 2): 3}):
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad, indent=2)
        with pytest.raises(TypeError) as mine:
            indented(bad, 2)
        assert str(mine.value) == str(theirs.value)
