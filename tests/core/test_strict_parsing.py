"""strict_parsing: libyaml's parser where it reads a text as the pure-Python loader does, and the
pure-Python loader for the rest."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sst_cdma.engine import strict_parsing
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads, yaml_loads

ROOT = Path(__file__).resolve().parents[2]
needs_libyaml = pytest.mark.skipif(strict_parsing._FastStrictLoader is None,
                                   reason="PyYAML without libyaml")


def _shipped_yaml() -> list[Path]:
    return sorted([*ROOT.glob("workloads/networks/*.yaml"), *ROOT.glob("sweeps/*.yaml"),
                   *ROOT.glob("tests/data/*.yaml")])


@needs_libyaml
def test_libyaml_reads_every_shipped_file_as_the_python_loader_does():
    files = [p for p in _shipped_yaml()
             if len(p.read_text(encoding="utf-8")) <= strict_parsing.FAST_YAML_CHARS]
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        done, fast = strict_parsing._fast_load(text)
        assert done, path
        assert fast == yaml.load(text, Loader=strict_parsing._StrictLoader), path  # noqa: S506


@needs_libyaml
@pytest.mark.parametrize("text, words", [
    ("a: 1\nb: 2\na: 3\n", "line 3: duplicate key 'a' (first on line 1)"),
    ("x: !!float 1\n", "the tag 'tag:yaml.org,2002:float' is not allowed"),
    ("x: [1, 2\n", "invalid YAML: line 2, column 1"),
])
def test_a_fault_reads_as_the_python_loader_words_it(text, words):
    assert strict_parsing._fast_load(text) == (False, None)
    with pytest.raises(StrictParseError) as caught:
        yaml_loads(text)
    assert words in str(caught.value)


def test_a_long_text_goes_to_the_python_loader(monkeypatch):
    def refuse(text: str) -> None:
        raise AssertionError("libyaml given a text past FAST_YAML_CHARS")

    monkeypatch.setattr(strict_parsing, "_FastStrictLoader", refuse)
    monkeypatch.setattr(strict_parsing.yaml, "load", lambda text, Loader: (
        refuse(text) if Loader is refuse else {"read": Loader.__name__}))
    long_text = "a: 1\n" + "#" * strict_parsing.FAST_YAML_CHARS
    assert yaml_loads(long_text) == {"read": "_StrictLoader"}


@needs_libyaml
@pytest.mark.parametrize("text", ["x: !!str 1\n", 'x: !!int "1"\n', "x: !!map {a: 1}\n",
                                  "a: &x 1\nb: *x\n", "x: 0o17\n", "x: 1_000\n", "x: <<\n",
                                  "? [1]\n: 2\n", "- a\n-\n- {b: [c, d]}\n"])
def test_odd_texts_read_alike_either_way(text, monkeypatch):
    def read() -> str:
        try:
            return repr(yaml_loads(text))
        except StrictParseError as exc:
            return f"refused: {exc}"

    either = read()
    monkeypatch.setattr(strict_parsing, "_FastStrictLoader", None)  # the Python loader alone
    assert either == read()


def test_json_refuses_the_first_key_given_twice():
    assert json_loads('{"a": 1, "b": {"c": 2}}') == {"a": 1, "b": {"c": 2}}
    with pytest.raises(StrictParseError, match="duplicate key 'b' in one object"):
        json_loads('{"a": 1, "b": 2, "b": 3, "a": 4}')


def _nested(levels: int, leaf: object = 1) -> object:
    """``levels`` lists and objects, alternating, around ``leaf``."""
    value = leaf
    for k in range(levels):
        value = [value, 2.5, "x"] if k % 2 else {"a": value, "b": None}
    return value


@pytest.mark.parametrize("levels", [1, 2, 7, strict_parsing.MAX_DEPTH])
def test_nesting_up_to_the_limit_is_read(levels):
    strict_parsing.check_depth(_nested(levels))
    strict_parsing.check_depth(_nested(levels - 1, leaf=[]))  # an empty list at the limit
    assert json_loads(json.dumps(_nested(levels))) == _nested(levels)


def test_nesting_past_the_limit_is_one_line():
    for value in (_nested(strict_parsing.MAX_DEPTH + 1),
                  {"a": 1, "b": [0] * 5 + [_nested(strict_parsing.MAX_DEPTH)]}):
        with pytest.raises(StrictParseError, match="nested too deeply"):
            strict_parsing.check_depth(value)
    with pytest.raises(StrictParseError, match="over 3 levels"):
        strict_parsing.check_depth([[[[]]]], limit=3)
    strict_parsing.check_depth([[[1, 2]]], limit=3)  # scalars are no level
    strict_parsing.check_depth(5, limit=0)
