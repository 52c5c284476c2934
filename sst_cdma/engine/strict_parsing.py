"""JSON and YAML read strictly: a key given twice in one object is an error (both formats
otherwise keep the later value silently), explicit YAML tags are refused (a file the project
reads holds plain data, never a ``!!python/...`` object), nesting deeper than
:data:`MAX_DEPTH` levels is an error rather than a ``RecursionError`` (here or in the code that
walks the value), an integer past Python's digit limit is an error rather than a ``ValueError``
traceback, and JSON's NaN and infinities (``NaN``, ``1e400``) are refused unless the caller
asks for them. Every error is a :class:`StrictParseError`: one line, saying where (a YAML line,
a JSON line and column) and what is wrong."""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable, Optional

import yaml

__all__ = ["MAX_DEPTH", "StrictParseError", "explicit_tag", "json_loads", "yaml_loads",
           "check_depth"]

#: the deepest nesting of lists and objects a file the project reads may hold (the deepest
#: the project writes is under ten)
MAX_DEPTH = 100


class StrictParseError(ValueError):
    """A file's text is not valid strict JSON/YAML; the message is one line, without the
    file's name (the caller's error names the file)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    for key, _ in pairs:  # the first key given twice, as the object reads
        if key in seen:
            raise StrictParseError(f"duplicate key {key!r} in one object")
        seen.add(key)
    raise AssertionError("unreachable: a dict shorter than its pairs repeats a key")


def _digits_error(exc: ValueError) -> StrictParseError:
    """The one line for an integer past Python's digit limit, or ``exc`` re-raised."""
    if "digits" not in str(exc):
        raise exc
    return StrictParseError(f"an integer has more than {sys.get_int_max_str_digits()} digits "
                            "(Python's limit; no value the project reads needs that many)")


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse a value whose lists and mappings nest deeper than ``limit`` levels (walked
    without recursion)."""
    # only lists and mappings are stacked: a profile's thousands of numbers are looked at once
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise StrictParseError(f"its lists and objects are nested too deeply (over {limit} "
                                   "levels)")
        for child in (item.values() if isinstance(item, dict) else item):
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def _refuse_constant(name: str) -> float:
    raise StrictParseError(f"{name} is not a number JSON allows (NaN and infinities are "
                           "refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictParseError(f"the number {text[:20]}{'...' if len(text) > 20 else ''} is "
                               "too large for a float")
    return value


def json_loads(text: str, *, finite: bool = True) -> Any:
    """Parse JSON text, refusing a key given twice in one object, nesting too deep, an integer
    past Python's digit limit and (when ``finite``) NaN, Infinity and numbers that overflow a
    float."""
    constant: Optional[Callable[[str], Any]] = _refuse_constant if finite else None
    number: Optional[Callable[[str], Any]] = _finite_float if finite else None
    try:
        value = _limited("JSON", lambda: json.loads(text, object_pairs_hook=_unique,
                                                    parse_constant=constant,
                                                    parse_float=number))
    except json.JSONDecodeError as exc:
        raise StrictParseError(f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                               f"{exc.msg}") from None
    check_depth(value)
    return value


def _limited(kind: str, parse: Callable[[], Any]) -> Any:
    """``parse()``, its nesting past Python's recursion limit and its integers past Python's
    digit limit each one StrictParseError (the parser's own errors propagate)."""
    try:
        return parse()
    except RecursionError:
        raise StrictParseError(f"its {kind} is nested too deeply (over {MAX_DEPTH} levels)") \
            from None
    except StrictParseError:
        raise
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise  # the caller says where in the text
        raise _digits_error(exc) from None


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys and explicit tags."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are each given once."""
        self.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict)):
                raise StrictParseError(f"line {key_node.start_mark.line + 1}: a mapping key "
                                       "must be a plain name")
            if key in seen:
                raise StrictParseError(f"line {key_node.start_mark.line + 1}: duplicate key "
                                       f"{key!r} (first on line {seen[key]})")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """Any node, refusing a tag the plain value would not have had."""
        if explicit_tag(self, node):
            raise StrictParseError(f"line {node.start_mark.line + 1}: the tag {node.tag!r} is "
                                   "not allowed (plain values only)")
        return super().construct_object(node, deep=deep)


def explicit_tag(resolver: yaml.resolver.BaseResolver, node: yaml.Node) -> bool:
    """Whether ``node`` carries a tag its plain (or quoted) text would not have had: an
    explicit ``!tag`` or ``!!type`` in the file."""
    if isinstance(node, yaml.ScalarNode):
        plain = resolver.resolve(yaml.ScalarNode, node.value, (True, False))
        quoted = resolver.resolve(yaml.ScalarNode, node.value, (False, True))
        return node.tag not in (plain, quoted)
    return bool(node.tag != resolver.resolve(type(node), None, None))


if getattr(yaml, "__with_libyaml__", False):
    class _FastStrictLoader(yaml.CSafeLoader, _StrictLoader):  # type: ignore[misc]
        """:class:`_StrictLoader` with libyaml's parser (its checks and constructors, in
        Python, alike): several times quicker on a network definition."""
else:  # pragma: no cover - PyYAML built without libyaml
    _FastStrictLoader = None  # type: ignore[assignment,misc]


#: the longest text given to libyaml: its parser recurses in C, one level per nesting level,
#: and overflows the C stack (a crash, not an error) somewhere between 20,000 and 50,000
#: levels (measured on this project's Linux machine: ``[`` x depth); a text nests at most one
#: level a character, so one this short cannot reach that, whatever it holds
FAST_YAML_CHARS = 8192


def _fast_load(text: str) -> tuple[bool, Any]:
    """``(True, value)`` where libyaml's parser reads ``text`` as the strict loader would;
    ``(False, None)`` where it is not there, the text is longer than
    :data:`FAST_YAML_CHARS` or libyaml refuses it (the pure-Python loader then reads it, and
    says what is wrong in its own words)."""
    if _FastStrictLoader is None or len(text) > FAST_YAML_CHARS:
        return False, None
    try:
        return True, yaml.load(text, Loader=_FastStrictLoader)  # noqa: S506
    except (yaml.YAMLError, StrictParseError, RecursionError, ValueError):
        return False, None


def yaml_loads(text: str) -> Any:
    """Parse YAML text safely, refusing duplicate keys and explicit tags."""
    done, value = _fast_load(text)
    if done:
        check_depth(value)
        return value
    try:
        value = _limited("YAML", lambda: yaml.load(text, Loader=_StrictLoader))  # noqa: S506
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(" ".join(str(x) for x in (exc.context, exc.problem) if x).split())
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise StrictParseError(f"invalid YAML: {where}{what}") from None
    except yaml.YAMLError as exc:
        raise StrictParseError(f"invalid YAML: {' '.join(str(exc).split())}") from None
    check_depth(value)
    return value
