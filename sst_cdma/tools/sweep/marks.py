"""YAML with line numbers: spec and suite files are composed with :func:`yaml.compose` so every
value remembers the line it came from, and every error can name ``FILE:LINE``."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import yaml

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, read_text
from sst_cdma.engine.strict_parsing import MAX_DEPTH, explicit_tag

#: a sweep spec or a regress suite: a few hundred lines by hand
SPEC_FILE = FileKind("a spec or suite file", 4 * MIB)

class SpecError(Exception):
    """A spec (or suite) file is malformed: ``path:line: message``."""

    def __init__(self, message: str, path: Union[str, Path, None] = None,
                 line: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else ""
        self.line = line

    @property
    def where(self) -> str:
        """``FILE[:LINE]`` of the fault (empty when unknown)."""
        if not self.path:
            return ""
        return f"{display_path(self.path)}:{self.line}" if self.line else display_path(self.path)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def display_path(path: Union[str, Path]) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if not rel.startswith("..") else str(path)


@dataclass
class Located:
    """A YAML value and the (1-based) line it starts on. Mappings hold ``dict[str, Located]``,
    sequences ``list[Located]``, scalars their Python value (str, int, float, bool, None)."""

    value: Any
    line: int
    key_line: int = 0

    @property
    def kind(self) -> str:
        """``mapping``, ``sequence`` or ``scalar``."""
        if isinstance(self.value, dict):
            return "mapping"
        if isinstance(self.value, list):
            return "sequence"
        return "scalar"

    def items(self) -> Iterator[tuple[str, "Located"]]:
        """The (key, value) pairs of a mapping, in file order."""
        return iter(self.value.items())

    def plain(self) -> Any:
        """The value with every nested :class:`Located` unwrapped."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


class _Constructor(yaml.constructor.SafeConstructor):
    pass


_RESOLVER = yaml.resolver.Resolver()  # what yaml.SafeLoader resolves plain values with


def _convert(node: yaml.Node, path: str, constructor: _Constructor, depth: int = 1) -> Located:
    line = node.start_mark.line + 1
    if explicit_tag(_RESOLVER, node):
        raise SpecError(f"the tag {node.tag!r} is not allowed (plain values only)", path, line)
    if depth > MAX_DEPTH:
        raise SpecError(f"lists and mappings are nested too deeply (over {MAX_DEPTH} levels)",
                        path, line)
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)
        out: dict[str, Located] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or explicit_tag(_RESOLVER, key_node):
                raise SpecError("mapping keys must be plain names", path,
                                key_node.start_mark.line + 1)
            key = constructor.construct_object(key_node)
            if not isinstance(key, (str, int, float)) or isinstance(key, bool):
                raise SpecError(f"mapping key {key!r} must be a name", path,
                                key_node.start_mark.line + 1)
            key = str(key)
            if key in out:
                raise SpecError(f"duplicate key {key!r} (first on line {out[key].key_line})",
                                path, key_node.start_mark.line + 1)
            value = _convert(value_node, path, constructor, depth + 1)
            value.key_line = key_node.start_mark.line + 1
            out[key] = value
        return Located(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Located([_convert(item, path, constructor, depth + 1) for item in node.value],
                       line)
    try:
        value = constructor.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"bad value: {' '.join(str(problem).split())} (plain values only)",
                        path, line) from None
    except ValueError:  # an integer past Python's digit limit
        raise SpecError(f"bad value: a number of {len(str(node.value))} digits (at most "
                        f"{sys.get_int_max_str_digits()})", path, line) from None
    return Located(value, line)


def load_located(path: Union[str, Path]) -> Located:
    """Read a YAML file into :class:`Located` values; SpecError on unreadable or invalid YAML
    (with the line of the fault) and on duplicate keys."""
    path = str(path)
    try:
        text = read_text(path, SPEC_FILE)
    except FileReadError as exc:
        raise SpecError(str(exc) if exc.missing else f"cannot read: {exc}", path) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise SpecError(f"lists and mappings are nested too deeply (over {MAX_DEPTH} levels)",
                        path) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        msg = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise SpecError(f"invalid YAML: {msg}", path, mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}", path) from None
    if node is None:
        raise SpecError("the file is empty", path, 1)
    return _convert(node, path, _Constructor())


def is_scalar(value: Any) -> bool:
    """True for the scalar types a spec may hold (str, int, float, bool, None)."""
    return value is None or isinstance(value, (str, int, float, bool))


def kind_name(item: Located) -> str:
    """A short human name of a value's type for error messages."""
    if item.kind != "scalar":
        return "a " + item.kind
    value = item.value
    return "null" if value is None else f"{type(value).__name__} {value!r}"
