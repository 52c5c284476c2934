"""Declared params: parsing by kind, defaults, required params, ranges, close-match hints."""
from __future__ import annotations

import pytest

from sst_cdma.engine.element import Component, Param, ParamError


class Widget(Component):
    """A component with one param of every kind."""

    library = "test"
    PARAMS = (
        Param("name", "str", None, "required: what it is called"),
        Param("count", "int", 4, "how many", minimum=1),
        Param("ratio", "float", 0.5, "a fraction", minimum=0, maximum=1),
        Param("enabled", "bool", "false", "on or off"),
        Param("delay", "time", "1ns", "a latency"),
        Param("clock", "frequency", "1GHz", "a clock"),
        Param("rate", "bandwidth", "16GB/s", "a bandwidth", minimum=0, exclusive_minimum=True),
        Param("size", "bytes", "2KiB", "a size"),
        Param("mode", "str", "fast", "a choice", choices=("fast", "slow")),
    )


def parse(**given):
    return Widget.validate_params({"name": "w", **given}, "w (test.Widget)")


def test_defaults_are_parsed_by_kind():
    p = parse()
    assert p == {"name": "w", "count": 4, "ratio": 0.5, "enabled": False, "delay": 1000,
                 "clock": 1e9, "rate": 16e9, "size": 2048, "mode": "fast"}


def test_values_parse_with_units_and_booleans():
    p = parse(count="0x10", enabled="yes", delay="2.5us", clock="1.4GHz", rate="12.5 GB/s",
              size="1MiB", ratio=1)
    assert (p["count"], p["enabled"], p["delay"], p["clock"]) == (16, True, 2_500_000, 1.4e9)
    assert (p["rate"], p["size"], p["ratio"]) == (12.5e9, 1 << 20, 1.0)


def test_missing_required_param_names_it():
    with pytest.raises(ParamError, match="required parameter 'name' is missing"):
        Widget.validate_params({}, "w (test.Widget)")


@pytest.mark.parametrize("key,value,message", [
    ("count", "0", "'0' must be >= 1"),
    ("count", "2.5", "'2.5' is not a valid int"),
    ("ratio", "1.5", "'1.5' must be <= 1"),
    ("enabled", "maybe", "'maybe' is not a boolean"),
    ("delay", "5 GB", "'5 GB' is not a time"),
    ("rate", "0GB/s", "'0GB/s' must be > 0"),
    ("size", "3 parsecs", "unknown unit"),
    ("mode", "medium", "'medium' is not one of fast, slow"),
    ("ratio", "nan", "'nan' is not a finite number"),
    ("ratio", "inf", "'inf' is not a finite number"),
    ("ratio", "-Infinity", "'-Infinity' is not a finite number"),
    ("rate", "1e400GB/s", "'1e400GB/s' is too large for a bandwidth"),
    ("clock", "1e400GHz", "'1e400GHz' is too large for a frequency"),
])
def test_bad_values_name_the_param_and_the_fault(key, value, message):
    with pytest.raises(ParamError) as err:
        parse(**{key: value})
    assert f"parameter {key!r}" in str(err.value) and message in str(err.value)


def test_unknown_param_suggests_close_matches():
    with pytest.raises(ParamError, match=r"unknown parameter 'cont' \(did you mean 'count'\?\)"):
        parse(cont=3)
    with pytest.raises(ParamError, match=r"unknown parameter 'zzz' \(known: "):
        parse(zzz=3)


def test_nan_is_refused_even_without_a_range():
    """NaN compares false with every bound, so a float param without minimum or maximum must
    still refuse it (and infinity) where the param is parsed."""
    free = Param("x", "float", 1.0, "no bounds")
    for text in ("nan", "NaN", " inf", "-inf", "1e999"):
        with pytest.raises(ParamError, match="is not a finite number"):
            free.parse(text)
    with pytest.raises(ParamError, match="is not a finite number"):
        free.parse(float("nan"))
    assert free.parse("1e300") == 1e300


@pytest.mark.parametrize("text, value", [("1e23", 10**23), ("1.5e3", 1500), ("12", 12),
                                         ("0x10", 16), ("2E2", 200)])
def test_whole_numbers_are_read_exactly_as_written(text, value):
    # 1e23 through a float would be 99999999999999991611392
    assert parse(count=text)["count"] == value


@pytest.mark.parametrize("text", ["2.5", "1e99999", "inf", "nan", "lots"])
def test_what_is_not_a_whole_number_is_refused(text):
    with pytest.raises(ParamError, match="count"):
        parse(count=text)


def test_a_value_with_units_is_read_once_per_text_and_its_range_checked_each_time(monkeypatch):
    # a system of thousands of GPUs gives each the same texts: the exact arithmetic once
    import sst_cdma.engine.element as element

    read = []
    real = element.UnitAlgebra
    monkeypatch.setattr(element, "UnitAlgebra", lambda text: read.append(text) or real(text))
    monkeypatch.setattr(element, "_quantities", {})
    assert [parse(rate="12.5 GB/s", delay="3ns")["rate"] for _ in range(3)] == [12.5e9] * 3
    assert read.count("12.5 GB/s") == 1 and read.count("3ns") == 1
    assert parse(delay="3 ns")["delay"] == 3000  # another text: read afresh
    assert read.count("3 ns") == 1
    with pytest.raises(ParamError, match="must be > 0"):
        parse(rate="0 GB/s")
    with pytest.raises(ParamError, match="must be > 0"):  # refused again, not remembered
        parse(rate="0 GB/s")
