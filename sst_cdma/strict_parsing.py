"""JSON and YAML read strictly: a key given twice in one object is an error (both formats
otherwise keep the later value silently), explicit YAML tags are refused (a file the project
reads holds plain data, never a ``!!python/...`` object), and nesting too deep for the parser
is an error rather than a ``RecursionError``. Every error is a :class:`StrictParseError`: one
line, saying where (a YAML line, a JSON line and column) and what is wrong."""
from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["StrictParseError", "json_loads", "yaml_loads"]


class StrictParseError(ValueError):
    """A file's text is not valid strict JSON/YAML; the message is one line, without the
    file's name (the caller's error names the file)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictParseError(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


def json_loads(text: str) -> Any:
    """Parse JSON text, refusing a key given twice in one object and nesting too deep."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise StrictParseError(f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                               f"{exc.msg}") from None
    except RecursionError:
        raise StrictParseError("its JSON nests too deep") from None


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
        if isinstance(node, yaml.ScalarNode):
            plain = self.resolve(yaml.ScalarNode, node.value, (True, False))
            quoted = self.resolve(yaml.ScalarNode, node.value, (False, True))
            explicit = node.tag not in (plain, quoted)
        else:
            explicit = node.tag != self.resolve(type(node), None, None)
        if explicit:
            raise StrictParseError(f"line {node.start_mark.line + 1}: the tag {node.tag!r} is "
                                   "not allowed (plain values only)")
        return super().construct_object(node, deep=deep)


def yaml_loads(text: str) -> Any:
    """Parse YAML text safely, refusing duplicate keys and explicit tags."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(" ".join(str(x) for x in (exc.context, exc.problem) if x).split())
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise StrictParseError(f"invalid YAML: {where}{what}") from None
    except yaml.YAMLError as exc:
        raise StrictParseError(f"invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise StrictParseError("its YAML nests too deep") from None
