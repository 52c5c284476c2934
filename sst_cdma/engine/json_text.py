"""Indented JSON text, fast: :func:`indented` gives the text ``json.dumps(obj, indent=N,
sort_keys=...)`` gives, character for character, in a fraction of its time.

The standard library writes indented JSON with its pure-Python encoder (its C encoder serves
only ``indent=None``), a chain of generators yielding each token: a summary of 64 GPUs
(2.8 MB) takes it about a second. Here each value's text is made by one function call per
container and a ``join`` per list or object, with the standard library's own C pieces for
strings (``encode_basestring_ascii``) and its rules for everything else: ``float.__repr__``
(``NaN``, ``Infinity``, ``-Infinity`` for the non-finite), ``int.__repr__``, ``true``,
``false``, ``null``; keys that are not strings converted as ``json`` converts them; tuples as
lists; an object of another type a TypeError as ``json`` raises it. What it does not do:
``default=``, ``skipkeys``, ``ensure_ascii=False``, ``allow_nan=False`` or the circular
reference check (a circular structure ends in RecursionError rather than ValueError).
"""
from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import Any, Callable

__all__ = ["indented"]

_INFINITY = float("inf")


def _float_text(value: float) -> str:
    """A float as ``json`` writes it (``allow_nan``: the JavaScript names)."""
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _key_text(key: Any) -> str:
    """An object's key as ``json`` writes it: always a JSON string."""
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if isinstance(key, float):
        return encode_basestring_ascii(_float_text(key))
    if key is True or key is False or key is None:
        return {True: '"true"', False: '"false"', None: '"null"'}[key]
    if isinstance(key, int):
        return '"' + int.__repr__(key) + '"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def indented(obj: Any, indent: int = 2, sort_keys: bool = False) -> str:
    """``json.dumps(obj, indent=indent, sort_keys=sort_keys)`` (see the module docstring)."""
    step = " " * indent

    def text(value: Any, inset: str) -> str:
        kind = type(value)
        if kind is str:
            return encode_basestring_ascii(value)
        if kind is int:
            return int.__repr__(value)
        if kind is float:
            return _float_text(value)
        if kind is dict:
            return mapping(value, inset)
        if kind is list:
            return sequence(value, inset)
        return other(value, inset)

    def scalar_or(value: Any, inset: str) -> str:
        # (text() inlined for the common scalars: one call fewer per value)
        kind = type(value)
        if kind is str:
            return encode_basestring_ascii(value)
        if kind is float:
            return _float_text(value)
        if kind is int:
            return int.__repr__(value)
        return text(value, inset)

    def sequence(values: Any, inset: str) -> str:
        if not values:
            return "[]"
        inner = inset + step
        parts = [scalar_or(item, inner) for item in values]
        return "[\n" + inner + (",\n" + inner).join(parts) + "\n" + inset + "]"

    def mapping(values: dict[Any, Any], inset: str) -> str:
        if not values:
            return "{}"
        inner = inset + step
        items = sorted(values.items()) if sort_keys else values.items()
        parts = [(encode_basestring_ascii(key) if type(key) is str else _key_text(key)) +
                 ": " + scalar_or(item, inner) for key, item in items]
        return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + inset + "}"

    def other(value: Any, inset: str) -> str:
        # json's order of tests, for the subclasses and the singletons
        if isinstance(value, str):
            return encode_basestring_ascii(value)
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            return _float_text(value)
        if isinstance(value, (list, tuple)):
            return sequence(value, inset)
        if isinstance(value, dict):
            return mapping(value, inset)
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    encode: Callable[[Any, str], str] = text
    return encode(obj, "")
