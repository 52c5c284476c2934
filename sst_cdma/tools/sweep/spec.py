"""Sweep specs: a YAML file naming a topology script, fixed model options, a grid and/or an
explicit list of points, and element param overrides; expanded into :class:`Point` s, each one
simulation. Everything is checked here, before anything runs, and every error names the spec
file and line. The format is documented in ``docs/sweeps.md``."""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from sst_cdma.engine.file_reads import file_type_fault
from sst_cdma.tools.sweep.marks import Located, SpecError, is_scalar, kind_name, load_located
from sst_cdma.tools.sweep.stats import SelectorError, parse_selector

TOP_KEYS = ("name", "description", "topology", "options", "grid", "points", "params",
            "statistics", "exclude", "full_trace", "max_points")
#: The most points a spec may expand to unless its ``max_points`` allows more: checking each
#: point runs its topology script, so a typo that multiplies the grid is refused at once
MAX_POINTS = 10000
#: Summary keys left out of the table unless a spec says otherwise: per-layer timelines,
#: per-tensor plan choices (they stay in each point's summary.json; ``sst-cdma plans`` reads
#: the choices there) and the file format's version (the same in every point, no figure).
DEFAULT_EXCLUDE = ("layers", "layers.*", "*.layers", "*.layers.*", "plan.tensors",
                   "plan.tensors.*", "schema_version")
POINT_RESERVED = ("topology", "params")
OPTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def format_value(value: Any) -> str:
    """A spec scalar as a command-line / param string (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: A number as written in a spec (YAML 1.2 / JSON syntax: ``16``, ``16.0``, ``1.6e1``).
NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def same_value(value: Any) -> str:
    """``value`` as a command-line / param string, a number in one canonical spelling: numbers
    equal in value (``16``, ``16.0``, ``1.6e1``, ``"16"``) give one text, so points that differ
    only in how a number is written are one simulation (duplicate detection)."""
    text = format_value(value)
    if isinstance(value, bool) or not NUMBER.fullmatch(text.strip()):
        return text
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return text
    sign, digits, exponent = number.as_tuple()
    if not any(digits):
        return "0"
    digits = "".join(map(str, digits))  # type: ignore[assignment]
    stripped = digits.rstrip("0")  # type: ignore[attr-defined]
    return f"{'-' if sign else ''}{stripped}e{int(exponent) + len(digits) - len(stripped)}"


class SpecPath(str):
    """The absolute path of a file or folder a spec value names (what a point runs with), which
    remembers the value as the spec wrote it: errors show it so, never the absolute path."""

    written: str

    def __new__(cls, path: str, written: str) -> "SpecPath":
        obj = super().__new__(cls, path)
        obj.written = written
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (SpecPath, (str(self), self.written))


def _argv(options: Iterable[tuple[str, Any]], paths: dict[str, str]) -> list[str]:
    """``--name value`` per ``(name, value)`` option (a bare ``--name`` for ``true``; ``false``
    and null left out), a value named in ``paths`` replaced by its path."""
    out: list[str] = []
    for name, value in options:
        if value is None or value is False:
            continue
        out.append(f"--{name}")
        if value is not True:
            out.append(paths.get(name, format_value(value)))
    return out


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: a topology script, its model options and param overrides.

    ``index`` is its position in spec order; ``line`` the spec line it comes from (an explicit
    point's entry, else the grid); ``lines`` maps ``opt.NAME`` / ``param.PATTERN.NAME`` /
    ``topology`` to the line that set it, so errors can point at the value at fault."""

    index: int
    topology: Path
    topology_name: str
    options: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, str, Any], ...]
    line: int
    lines: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    #: options whose value names a file or folder: (option, its absolute path)
    files: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    #: params whose value names a file or folder: (pattern, param, its absolute path)
    param_files: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    def model_options(self, as_written: bool = False) -> list[str]:
        """The options the script sees in ``sys.argv[1:]``: ``--name value`` per option; a
        ``true`` option is a bare ``--name`` flag, ``false``/null options are left out. A value
        naming a file relative to the spec is given as its absolute path (a point runs in its
        own folder; a :class:`SpecPath`, which remembers the value as written), unless
        ``as_written``."""
        if as_written:
            return _argv(self.options, {})
        values = dict(self.options)
        return _argv(self.options, {name: SpecPath(path, format_value(values[name]))
                                    for name, path in self.files})

    def canonical_options(self) -> list[str]:
        """The options as written, sorted by name: what identifies the point (its cache key,
        duplicate detection). Points that differ only in the order of their options are one
        point."""
        return _argv(sorted(self.options, key=lambda option: option[0]), {})

    def overrides(self, as_written: bool = False) -> dict[str, dict[str, str]]:
        """Param overrides for :func:`sst_cdma.engine.runner.apply_overrides`. A value naming a file
        relative to the spec is given as its absolute path (a :class:`SpecPath`), unless
        ``as_written``, as for :meth:`model_options`."""
        paths = {} if as_written else {(pattern, name): path
                                       for pattern, name, path in self.param_files}
        out: dict[str, dict[str, str]] = {}
        for pattern, name, value in self.params:
            text = format_value(value)
            if (pattern, name) in paths:
                text = SpecPath(paths[(pattern, name)], text)
            out.setdefault(pattern, {})[name] = text
        return out

    def named_files(self) -> dict[str, str]:
        """Every file or folder the point's options and params name: a name (the option's; for
        a param ``params:["PATTERN", "PARAM"]``, which no option name can be) -> its absolute
        path. Their content is part of the cache key."""
        out = dict(self.files)
        out.update({"params:" + json.dumps([pattern, name]): path
                    for pattern, name, path in self.param_files})
        return out

    def columns(self) -> dict[str, Any]:
        """The point's parameters as table columns: ``topology``, ``opt.NAME``,
        ``param.PATTERN.NAME``."""
        cols: dict[str, Any] = {"topology": self.topology_name}
        cols.update({f"opt.{name}": value for name, value in self.options})
        cols.update({f"param.{pattern}.{name}": value for pattern, name, value in self.params})
        return cols

    def describe(self) -> str:
        """A short label: the model options and overrides as one would type them."""
        parts = [self.topology_name] + self.model_options(as_written=True)
        parts += [f"{pattern}.{name}={format_value(value)}" for pattern, name, value in
                  self.params]
        return " ".join(parts)

    def line_for(self, message: str) -> int:
        """The spec line most likely at fault for ``message``: the line of an option or param
        the message names (``--NAME`` or the param name), else the point's line."""
        lines = dict(self.lines)
        for name, _ in sorted(self.options, key=lambda o: -len(o[0])):
            if re.search(rf"--{re.escape(name)}(?![\w-])", message) and f"opt.{name}" in lines:
                return lines[f"opt.{name}"]
        for pattern, name, _ in self.params:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", message):
                return lines.get(f"param.{pattern}.{name}", self.line)
        written = dict(self.options)
        named = [(f"opt.{name}", format_value(written[name])) for name, _ in self.files]
        named += [(f"param.{pattern}.{name}", format_value(value))
                  for pattern, name, value in self.params
                  if any((pattern, name) == (p, n) for p, n, _ in self.param_files)]
        for where, value in named:  # a file an option or param names, as written
            if re.search(rf"(?<![\w./-]){re.escape(value)}(?![\w/-])", message) \
                    and where in lines:
                return lines[where]
        for pattern, name, _ in self.params:
            if repr(pattern) in message:
                return lines.get(f"param.{pattern}.{name}", self.line)
        if "topology" in lines and "no such topology" in message:
            return lines["topology"]
        return self.line

    def canonical_overrides(self) -> dict[str, dict[str, str]]:
        """:meth:`overrides` with each pattern's params sorted by name (the patterns keep their
        order: where two globs match one component the later one wins)."""
        return {pattern: dict(sorted(params.items()))
                for pattern, params in self.overrides(as_written=True).items()}

    def identity(self) -> str:
        """What makes two points the same simulation (for duplicate detection): the topology,
        the canonical options and overrides, so the order options are written in does not
        count, and numbers equal in value (``16``, ``16.0``, ``1.6e1``) are one value."""
        options = [(name, value if isinstance(value, bool) or value is None else
                    same_value(value)) for name, value in self.options]
        overrides: dict[str, dict[str, str]] = {}
        for pattern, name, value in self.params:
            overrides.setdefault(pattern, {})[name] = same_value(value)
        return json.dumps([str(self.topology), _argv(sorted(options), {}),
                           [[p, sorted(v.items())] for p, v in overrides.items()]])

    def spelled_unlike(self, other: "Point") -> Optional[tuple[str, Any, Any, int, int]]:
        """The first option or param whose value this point writes otherwise than ``other``
        (the same simulation: see :meth:`identity`): (its label, this value, other's value,
        its line here, its line in ``other``); None when both write every value alike."""
        mine, theirs = dict(self.lines), dict(other.lines)
        values = {f"opt.{name}": value for name, value in other.options}
        values.update({f"param.{p}.{n}": value for p, n, value in other.params})
        here = [(f"opt.{name}", name, value) for name, value in self.options]
        here += [(f"param.{p}.{n}", f"{p}.{n}", value) for p, n, value in self.params]
        for where, label, value in here:
            if where in values and format_value(value) != format_value(values[where]):
                return (label, value, values[where], mine.get(where, self.line),
                        theirs.get(where, other.line))
        return None


@dataclass
class SweepSpec:
    """A parsed, validated sweep spec and its expanded points (in spec order)."""

    path: Path
    name: str
    description: str
    points: list[Point]
    statistics: list[str]
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    #: each point keeps its full Chrome trace (default: the GPU memory counters only)
    full_trace: bool = False
    #: the spec line of each statistic selector
    statistics_lines: dict[str, int] = field(default_factory=dict)


# -- parsing helpers -----------------------------------------------------------------------------
def _require(item: Located, kind: str, what: str, path: Path) -> None:
    if item.kind != kind:
        raise SpecError(f"{what} must be a {kind}, not {kind_name(item)}", path,
                        item.line)


def _scalar(item: Located, what: str, path: Path, allow_null: bool = True) -> Any:
    if item.kind != "scalar" or not is_scalar(item.value):
        raise SpecError(f"{what} must be a single value (string, number or boolean), not "
                        f"{kind_name(item)}", path, item.line)
    if item.value is None and not allow_null:
        raise SpecError(f"{what} must have a value", path, item.line)
    return item.value


def _option_name(name: str, line: int, path: Path, where: str) -> str:
    if name.startswith("-"):
        raise SpecError(f"{where}: write option {name!r} without its dashes "
                        f"({name.lstrip('-')!r})", path, line)
    if not OPTION_NAME.match(name):
        raise SpecError(f"{where}: {name!r} is not a valid option name", path, line)
    return name


def _topology(item: Located, what: str, spec_dir: Path, path: Path,
              check_files: bool) -> tuple[str, Path]:
    value = _scalar(item, what, path, allow_null=False)
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{what} must be a path to a topology script", path, item.line)
    resolved = (spec_dir / value).resolve()
    if check_files and resolved.is_dir():
        raise SpecError(f"topology script {value!r} is a folder ({resolved}), not a script",
                        path, item.line)
    fault = file_type_fault(resolved) if check_files else None
    if fault:
        raise SpecError(f"topology script {value!r} ({resolved}) {fault}", path, item.line)
    if check_files and not resolved.is_file():
        raise SpecError(f"topology script {value!r} not found (looked for {resolved})", path,
                        item.line)
    return Path(value).as_posix(), resolved


def _named_file(value: Any, spec_dir: Path) -> Optional[str]:
    """The absolute path of the file or folder an option value names relative to the spec
    (or absolutely), if it names one. Only values that look like paths (with a ``/`` or a
    suffix) count, so a bare name such as a shipped network's is never taken for a folder."""
    if not isinstance(value, str) or not value.strip():
        return None
    if "/" not in value and not Path(value).suffix:
        return None
    candidate = (spec_dir / value).resolve()
    return str(candidate) if candidate.exists() else None


def _param_value(item: Located, what: str, path: Path) -> Any:
    value = _scalar(item, what, path, allow_null=False)
    return value


@dataclass
class _Assign:
    """A set of choices: option values, a topology, param values; each with its line."""

    options: dict[str, tuple[Any, int]] = field(default_factory=dict)
    topology: Optional[tuple[str, Path, int]] = None
    params: dict[tuple[str, str], tuple[Any, int]] = field(default_factory=dict)
    line: int = 0


def _parse_params(item: Located, path: Path, allow_lists: bool, where: str
                  ) -> tuple[dict[tuple[str, str], tuple[Any, int]],
                             list[tuple[tuple[str, str], list[tuple[Any, int]]]]]:
    """Fixed ``(pattern, param) -> (value, line)`` and swept axes (lists)."""
    _require(item, "mapping", where, path)
    fixed: dict[tuple[str, str], tuple[Any, int]] = {}
    axes: list[tuple[tuple[str, str], list[tuple[Any, int]]]] = []
    for pattern, body in item.items():
        if not pattern.strip():
            raise SpecError(f"{where}: empty component pattern", path, body.key_line)
        _require(body, "mapping", f"{where}: {pattern!r}", path)
        if not body.value:
            raise SpecError(f"{where}: {pattern!r} sets no params", path, body.line)
        for name, value in body.items():
            what = f"{where}: {pattern}.{name}"
            if value.kind == "sequence":
                if not allow_lists:
                    raise SpecError(f"{what} must be a single value here (sweep params in the "
                                    f"top-level 'params')", path, value.line)
                if not value.value:
                    raise SpecError(f"{what}: the list of values is empty", path, value.line)
                axes.append(((pattern, name), [(_param_value(v, what, path), v.line)
                                               for v in value.value]))
            else:
                fixed[(pattern, name)] = (_param_value(value, what, path), value.line)
    return fixed, axes


def _check_point_count(top: dict[str, Located], path: Path, grid_axes: list[Any],
                       explicit: list[Any], param_axes: list[Any]) -> None:
    """SpecError when the spec expands to more points than :data:`MAX_POINTS` (or its
    ``max_points``), counted before anything is expanded."""
    limit, line = MAX_POINTS, 1
    if "max_points" in top:
        item = top["max_points"]
        limit, line = item.value, item.line
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise SpecError(f"max_points must be a whole number >= 1, not {kind_name(item)}",
                            path, item.line)
    grid = math.prod(len(values) for _, values in grid_axes) if grid_axes else 0
    count = max(grid + len(explicit), 1) * math.prod(len(v) for _, v in param_axes)
    if count > limit:
        where = f"the spec's max_points ({limit})" if "max_points" in top else \
            f"the limit of {MAX_POINTS}"
        raise SpecError(f"expands to {count:,} points, more than {where}: set max_points: "
                        f"{count} to run them all", path, line)


_Topo = tuple[str, Path, int]
_ParamAxes = list[tuple[tuple[str, str], list[tuple[Any, int]]]]


def _read_top(path: Path) -> dict[str, Located]:
    """The spec's top-level mapping, read from ``path``; SpecError on a spec that is not a
    mapping or a top-level key outside :data:`TOP_KEYS` (with the closest allowed key)."""
    root = load_located(path)
    _require(root, "mapping", "the spec", path)
    for key, item in root.items():
        if key not in TOP_KEYS:
            import difflib

            close = difflib.get_close_matches(str(key), TOP_KEYS, n=1)
            raise SpecError(f"unknown key {key!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + f" (allowed: {', '.join(TOP_KEYS)})", path, item.key_line)
    return root.value


def _header(top: dict[str, Located], path: Path) -> tuple[str, str, bool]:
    """The spec's ``name`` (default: the file's stem), ``description`` and ``full_trace``."""
    name = path.stem
    if "name" in top:
        value = _scalar(top["name"], "name", path, allow_null=False)
        name = str(value)
    description = ""
    if "description" in top:
        description = str(_scalar(top["description"], "description", path) or "")
    full_trace = False
    if "full_trace" in top:
        full_trace = _scalar(top["full_trace"], "full_trace", path, allow_null=False)
        if not isinstance(full_trace, bool):
            raise SpecError(f"full_trace must be true or false, got {full_trace!r}", path,
                            top["full_trace"].line)
    return name, description, full_trace


def _top_topology(top: dict[str, Located], spec_dir: Path, path: Path,
                  check_files: bool) -> Optional[_Topo]:
    """The top-level ``topology`` (name as written, resolved path, line), if given."""
    if "topology" not in top:
        return None
    topo_name, topo_path = _topology(top["topology"], "topology", spec_dir, path, check_files)
    return topo_name, topo_path, top["topology"].line


def _fixed_options(top: dict[str, Located], path: Path) -> dict[str, tuple[Any, int]]:
    """The ``options`` section: option name -> (value, line)."""
    fixed_opts: dict[str, tuple[Any, int]] = {}
    if "options" in top:
        _require(top["options"], "mapping", "options", path)
        for key, item in top["options"].items():
            _option_name(key, item.key_line, path, "options")
            if key in POINT_RESERVED:
                raise SpecError(f"options: {key!r} is not a model option (give it at the top "
                                "level)", path, item.key_line)
            fixed_opts[key] = (_scalar(item, f"options: {key}", path), item.line)
    return fixed_opts


def _grid_axes(top: dict[str, Located], fixed_opts: dict[str, tuple[Any, int]],
               spec_dir: Path, path: Path, check_files: bool
               ) -> tuple[list[tuple[str, list[Any]]], int]:
    """The ``grid`` section: its axes (option or ``topology`` -> its values, each with its
    line) in spec order, and the grid's line (0 without a grid)."""
    grid_axes: list[tuple[str, list[Any]]] = []
    if "grid" not in top:
        return grid_axes, 0
    grid = top["grid"]
    _require(grid, "mapping", "grid", path)
    grid_line = grid.key_line or grid.line
    if not grid.value:
        raise SpecError("grid is empty (give at least one option and its values)", path,
                        grid.line)
    for key, item in grid.items():
        if key == "params":
            raise SpecError("grid: sweep params in the top-level 'params' (lists of "
                            "values)", path, item.key_line)
        if key != "topology":
            _option_name(key, item.key_line, path, "grid")
        if item.kind != "sequence":
            raise SpecError(f"grid: {key!r} must be a list of values (e.g. [a, b]), not "
                            f"{kind_name(item)}", path, item.line)
        if not item.value:
            raise SpecError(f"grid: {key!r}: the list of values is empty", path, item.line)
        if key in fixed_opts:
            raise SpecError(f"grid: option {key!r} is also fixed in 'options' (line "
                            f"{fixed_opts[key][1]})", path, item.key_line)
        values = []
        for v in item.value:
            if key == "topology":
                values.append(_topology(v, "grid: topology", spec_dir, path, check_files)
                              + (v.line,))
            else:
                values.append((_scalar(v, f"grid: {key}", path), v.line))  # type: ignore[arg-type]
        grid_axes.append((key, values))
    return grid_axes, grid_line


def _point_entry(item: Located, spec_dir: Path, path: Path, check_files: bool) -> _Assign:
    """One entry of ``points``: its topology, params and options, each with its line."""
    if item.kind != "mapping":
        raise SpecError(f"each entry of points must be a mapping of option: value, not "
                        f"{kind_name(item)}", path, item.line)
    assign = _Assign(line=item.line)
    for key, value in item.items():
        if key == "topology":
            assign.topology = _topology(value, "points: topology", spec_dir, path,
                                        check_files) + (value.line,)
        elif key == "params":
            fixed, _ = _parse_params(value, path, False, "points: params")
            assign.params = fixed
        else:
            _option_name(key, value.key_line, path, "points")
            if value.kind == "sequence":
                raise SpecError(f"points: {key!r} must be a single value (use the grid "
                                "to sweep lists)", path, value.line)
            if value.kind == "mapping":
                hint = " (did you mean params?)" if key in ("param", "parameters") \
                    else ""
                raise SpecError(f"points: option {key!r} must be a single value, not a "
                                f"mapping{hint}", path, value.line)
            assign.options[key] = (_scalar(value, f"points: {key}", path), value.line)
    return assign


def _explicit_points(top: dict[str, Located], spec_dir: Path, path: Path,
                     check_files: bool) -> list[_Assign]:
    """The ``points`` section, one :class:`_Assign` per entry."""
    if "points" not in top:
        return []
    points = top["points"]
    if points.kind != "sequence":
        raise SpecError(f"points must be a list of mappings, not {kind_name(points)}", path,
                        points.line)
    if not points.value:
        raise SpecError("points is an empty list", path, points.line)
    return [_point_entry(item, spec_dir, path, check_files) for item in points.value]


def _statistics(top: dict[str, Located], path: Path) -> tuple[list[str], dict[str, int]]:
    """The ``statistics`` selectors (each parsed) and the line of each."""
    statistics: list[str] = []
    statistics_lines: dict[str, int] = {}
    if "statistics" in top:
        stats = top["statistics"]
        if stats.kind != "sequence":
            raise SpecError(f"statistics must be a list of selectors, not {kind_name(stats)}",
                            path, stats.line)
        for item in stats.value:
            sel = _scalar(item, "statistics", path, allow_null=False)
            try:
                parse_selector(str(sel))
            except SelectorError as exc:
                raise SpecError(f"statistics: {exc}", path, item.line) from None
            statistics.append(str(sel))
            statistics_lines[str(sel)] = item.line
    return statistics, statistics_lines


def _exclude(top: dict[str, Located], path: Path) -> tuple[str, ...]:
    """The ``exclude`` key patterns (default :data:`DEFAULT_EXCLUDE`)."""
    if "exclude" not in top:
        return DEFAULT_EXCLUDE
    node = top["exclude"]
    if node.kind != "sequence":
        raise SpecError(f"exclude must be a list of key patterns, not {kind_name(node)}",
                        path, node.line)
    return tuple(str(_scalar(item, "exclude", path, allow_null=False))
                 for item in node.value)


def _base_assigns(top: dict[str, Located], grid_axes: list[tuple[str, list[Any]]],
                  grid_line: int, explicit: list[_Assign],
                  topology: Optional[_Topo]) -> list[_Assign]:
    """Every combination of the grid, then the explicit points; one empty assignment when the
    spec has neither (a single point of the fixed options)."""
    base: list[_Assign] = []
    if grid_axes:
        for combo in itertools.product(*(values for _, values in grid_axes)):
            assign = _Assign(line=grid_line)
            for (key, _), choice in zip(grid_axes, combo):
                if key == "topology":
                    assign.topology = choice
                else:
                    assign.options[key] = choice
            base.append(assign)
    base.extend(explicit)
    if not base:
        base.append(_Assign(line=(top["options"].key_line if "options" in top else
                                  topology[2] if topology else 1)))
    return base


def _make_point(index: int, topo: _Topo, options: dict[str, tuple[Any, int]],
                params: dict[tuple[str, str], tuple[Any, int]], line: int,
                spec_dir: Path) -> Point:
    """The :class:`Point` of one choice of topology, options and params (each with its
    line), its file-naming values resolved against ``spec_dir``."""
    lines = [("topology", topo[2])]
    lines += [(f"opt.{k}", ln) for k, (_, ln) in options.items()]
    lines += [(f"param.{p}.{n}", ln) for (p, n), (_, ln) in params.items()]
    return Point(index=index, topology=topo[1], topology_name=topo[0],
                 options=tuple((k, v) for k, (v, _) in options.items()),
                 params=tuple((p, n, v) for (p, n), (v, _) in params.items()),
                 line=line, lines=tuple(lines),
                 files=tuple((k, f) for k, (v, _) in options.items()
                             if (f := _named_file(v, spec_dir)) is not None),
                 param_files=tuple((p, n, f) for (p, n), (v, _) in params.items()
                                   if (f := _named_file(v, spec_dir)) is not None))


def _refuse_repeat(point: Point, seen: dict[str, Point], path: Path) -> None:
    """SpecError when ``point`` is the same simulation as one already in ``seen`` (naming
    the value spelled otherwise, if any); else record it."""
    ident = point.identity()
    if ident in seen:
        first = seen[ident]
        unlike = point.spelled_unlike(first)
        if unlike is None:
            raise SpecError(f"point {point.index} ({point.describe()}) repeats point "
                            f"{first.index} (line {first.line})", path, point.line)
        label, mine, theirs, line, first_line = unlike
        raise SpecError(f"point {point.index} ({point.describe()}) repeats point "
                        f"{first.index} (line {first_line}): {label} "
                        f"{format_value(mine)} and {format_value(theirs)} are the same "
                        "number", path, line)
    seen[ident] = point


def _expand(base: list[_Assign], topology: Optional[_Topo],
            fixed_opts: dict[str, tuple[Any, int]],
            fixed_params: dict[tuple[str, str], tuple[Any, int]], param_axes: _ParamAxes,
            spec_dir: Path, path: Path) -> list[Point]:
    """The points, in spec order: each assignment (over the fixed options) times every
    combination of the swept params (over the fixed params, under the point's own params).
    SpecError on a point without a topology or one that repeats another."""
    result: list[Point] = []
    seen: dict[str, Point] = {}
    for assign in base:
        topo = assign.topology or topology
        if topo is None:
            raise SpecError("no topology: give 'topology' at the top level (or one in every "
                            "point / in the grid)", path, assign.line or 1)
        options = dict(fixed_opts)
        options.update(assign.options)
        for combo in itertools.product(*(values for _, values in param_axes)) or [()]:
            params = dict(fixed_params)
            for (pkey, _), choice in zip(param_axes, combo):
                params[pkey] = choice
            params.update(assign.params)
            point = _make_point(len(result), topo, options, params, assign.line, spec_dir)
            _refuse_repeat(point, seen, path)
            result.append(point)
    return result


def load_spec(path: Union[str, Path], check_files: bool = True) -> SweepSpec:
    """Parse and check a sweep spec; expand its points. SpecError (``FILE:LINE: message``) on
    any fault. ``check_files=False`` skips the checks that topology scripts exist."""
    path = Path(path)
    top = _read_top(path)
    spec_dir = path.resolve().parent
    name, description, full_trace = _header(top, path)
    topology = _top_topology(top, spec_dir, path, check_files)
    fixed_opts = _fixed_options(top, path)
    grid_axes, grid_line = _grid_axes(top, fixed_opts, spec_dir, path, check_files)
    explicit = _explicit_points(top, spec_dir, path, check_files)
    fixed_params: dict[tuple[str, str], tuple[Any, int]] = {}
    param_axes: _ParamAxes = []
    if "params" in top:
        fixed_params, param_axes = _parse_params(top["params"], path, True, "params")
    statistics, statistics_lines = _statistics(top, path)
    exclude = _exclude(top, path)
    _check_point_count(top, path, grid_axes, explicit, param_axes)
    base = _base_assigns(top, grid_axes, grid_line, explicit, topology)
    points = _expand(base, topology, fixed_opts, fixed_params, param_axes, spec_dir, path)
    return SweepSpec(path=path, name=name, description=description, points=points,
                     statistics=statistics, exclude=exclude, full_trace=full_trace,
                     statistics_lines=statistics_lines)


__all__ = ["Point", "SweepSpec", "SpecError", "SpecPath", "load_spec", "format_value",
           "same_value", "DEFAULT_EXCLUDE"]
