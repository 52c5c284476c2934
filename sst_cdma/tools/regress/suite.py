"""Regression suites: ``SUITE/suite.yaml`` lists cases (a topology, its model options and param
overrides, what to compare and with which tolerance); ``SUITE/reference/<case>.json`` holds each
case's blessed values. Format documented in ``docs/sweeps.md``."""
from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from sst_cdma.engine.file_reads import file_type_fault
from sst_cdma.tools.sweep.marks import Located, SpecError, is_scalar, kind_name, load_located
from sst_cdma.tools.sweep.spec import Point
from sst_cdma.tools.sweep.stats import SelectorError, parse_selector

SUITE_FILE = "suite.yaml"
SUITE_KEYS = ("name", "description", "tolerance", "cases")
CASE_KEYS = ("name", "description", "topology", "options", "params", "compare", "tolerance")
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DEFAULT_COMPARE = ("*",)


@dataclass(frozen=True)
class Tolerance:
    """How far a number may drift: passes when ``|got - ref| <= max(abs, rel * |ref|)``.
    The default (0, 0) is exact; non-numbers always compare exactly."""

    abs: float = 0.0
    rel: float = 0.0

    def allows(self, reference: Any, got: Any) -> bool:
        """True when ``got`` matches ``reference`` within this tolerance."""
        if _is_number(reference) and _is_number(got):
            ref, val = float(reference), float(got)
            if math.isnan(ref) or math.isnan(val):
                return math.isnan(ref) and math.isnan(val)
            if reference == got:
                return True
            return abs(val - ref) <= max(self.abs, self.rel * abs(ref))
        return type(reference) is type(got) and reference == got

    def __str__(self) -> str:
        if not self.abs and not self.rel:
            return "exact"
        parts = []
        if self.abs:
            parts.append(f"abs {self.abs:g}")
        if self.rel:
            parts.append(f"rel {self.rel:g}")
        return ", ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_glob(entry: str) -> bool:
    """Whether a compare entry is a glob over the run's keys (a statistic selector never is:
    its component glob is part of its name)."""
    return any(ch in entry for ch in "*?[") and not entry.startswith("stat.")


def applies(pattern: str, key: str) -> bool:
    """Whether a tolerance written for ``pattern`` (a key or a glob) applies to ``key``."""
    return pattern == key or fnmatch.fnmatchcase(key, pattern)


@dataclass
class Case:
    """One regression case: a point to run, the keys to compare and their tolerances (its own,
    then the suite's). ``compare_lines`` and ``tolerance_lines`` give the suite line of each
    compare entry and of each of the case's own tolerances."""

    name: str
    point: Point
    compare: list[str]
    tolerances: list[tuple[str, Tolerance]] = field(default_factory=list)
    line: int = 0
    compare_lines: dict[str, int] = field(default_factory=dict)
    tolerance_lines: dict[str, int] = field(default_factory=dict)

    @property
    def selectors(self) -> list[str]:
        """The statistic selectors among the compared keys."""
        return [key for key in self.compare if key.startswith("stat.")]

    def tolerance(self, key: str) -> Tolerance:
        """The tolerance for ``key``: an exact pattern first, else the first matching glob,
        else exact."""
        for pattern, tol in self.tolerances:
            if pattern == key:
                return tol
        for pattern, tol in self.tolerances:
            if applies(pattern, key):
                return tol
        return Tolerance()


@dataclass
class Suite:
    """A loaded suite: its folder, name and cases; its suite-wide tolerances and their
    lines."""

    folder: Path
    name: str
    cases: list[Case]
    tolerance_lines: dict[str, int] = field(default_factory=dict)

    @property
    def file(self) -> Path:
        """The suite's ``suite.yaml``."""
        return self.folder / SUITE_FILE

    def reference_path(self, case: Case) -> Path:
        """Where the case's reference values live."""
        return self.folder / "reference" / f"{case.name}.json"


def _tolerances(item: Located, path: Path, where: str) -> list[tuple[str, Tolerance, int]]:
    if item.kind != "mapping":
        raise SpecError(f"{where} must map keys to {{abs: N, rel: N}}, not {kind_name(item)}",
                        path, item.line)
    out = []
    for key, body in item.items():
        if body.kind != "mapping" or not body.value:
            raise SpecError(f"{where}: {key!r} must be {{abs: N}} and/or {{rel: N}}", path,
                            body.line)
        values = {"abs": 0.0, "rel": 0.0}
        for name, value in body.items():
            if name not in values:
                raise SpecError(f"{where}: {key!r}: unknown tolerance {name!r} (abs, rel)",
                                path, value.key_line)
            if not _is_number(value.value) or not value.value >= 0 \
                    or not math.isfinite(value.value):
                shown = value.value if _is_number(value.value) else kind_name(value)
                raise SpecError(f"{where}: {key}.{name} must be a finite number >= 0, not "
                                f"{shown}", path, value.line)
            values[name] = float(value.value)
        out.append((key, Tolerance(values["abs"], values["rel"]), body.key_line or body.line))
    return out


def _case_name(item: Located, path: Path) -> str:
    """A case entry's name, once the entry is a mapping of known keys."""
    if item.kind != "mapping":
        raise SpecError(f"each case must be a mapping, not {kind_name(item)}", path, item.line)
    for key, value in item.items():
        if key not in CASE_KEYS:
            raise SpecError(f"case: unknown key {key!r} (allowed: {', '.join(CASE_KEYS)})",
                            path, value.key_line)
    body = item.value
    if "name" not in body:
        raise SpecError("case without a name", path, item.line)
    name = body["name"].value
    if body["name"].kind != "scalar":
        raise SpecError(f"case name must be a name, not {kind_name(body['name'])}", path,
                        body["name"].line)
    if not isinstance(name, str) or not CASE_NAME.match(name):
        raise SpecError(f"case name {name!r} must be letters, digits, '-', '_' or '.'", path,
                        body["name"].line)
    return name


def _case_script(item: Located, name: str, folder: Path, path: Path) -> tuple[Path, Located]:
    """The case's topology script (resolved against the suite folder; it must be a file) and
    its spec node."""
    body = item.value
    if "topology" not in body:
        raise SpecError(f"case {name}: no topology", path, item.line)
    topo = body["topology"]
    if topo.kind != "scalar" or not isinstance(topo.value, str) or not topo.value.strip():
        raise SpecError(f"case {name}: topology must be a path to a topology script", path,
                        topo.line)
    script = (folder / topo.value).resolve()
    fault = file_type_fault(script)
    if fault:
        raise SpecError(f"case {name}: topology script {topo.value!r} {fault}", path, topo.line)
    if not script.is_file():
        raise SpecError(f"case {name}: topology script {topo.value!r} not found", path,
                        topo.line)
    return script, topo


def _case_options(body: dict[str, Located], name: str, path: Path,
                  lines: list[tuple[str, int]]) -> list[tuple[str, Any]]:
    """The case's model options, ``(name, value)``; each one's line added to ``lines``."""
    options: list[tuple[str, Any]] = []
    if "options" in body:
        opts = body["options"]
        if opts.kind != "mapping":
            raise SpecError(f"case {name}: options must be a mapping, not {kind_name(opts)}",
                            path, opts.line)
        for key, value in opts.items():
            if value.kind != "scalar" or not is_scalar(value.value):
                raise SpecError(f"case {name}: option {key!r} must be a single value", path,
                                value.line)
            options.append((key, value.value))
            lines.append((f"opt.{key}", value.line))
    return options


def _case_params(body: dict[str, Located], name: str, path: Path,
                 lines: list[tuple[str, int]]) -> list[tuple[str, str, Any]]:
    """The case's param overrides, ``(pattern, param, value)``; each one's line added to
    ``lines``."""
    params: list[tuple[str, str, Any]] = []
    if "params" in body:
        prm = body["params"]
        if prm.kind != "mapping":
            raise SpecError(f"case {name}: params must map a component (glob) to its params",
                            path, prm.line)
        for pattern, group in prm.items():
            if group.kind != "mapping":
                raise SpecError(f"case {name}: params: {pattern!r} must map param names to "
                                "values", path, group.line)
            for key, value in group.items():
                if value.kind != "scalar" or value.value is None:
                    raise SpecError(f"case {name}: param {pattern}.{key} must be a single value",
                                    path, value.line)
                params.append((pattern, key, value.value))
                lines.append((f"param.{pattern}.{key}", value.line))
    return params


def _case_compare(item: Located, name: str, path: Path) -> tuple[list[str], dict[str, int]]:
    """The keys the case compares (default :data:`DEFAULT_COMPARE`; a ``stat.`` selector as
    its column) and the line of each."""
    body = item.value
    compare = list(DEFAULT_COMPARE)
    compare_lines = {entry: item.line for entry in compare}
    if "compare" in body:
        cmp = body["compare"]
        if cmp.kind != "sequence" or not cmp.value:
            raise SpecError(f"case {name}: compare must be a non-empty list of keys", path,
                            cmp.line)
        compare = []
        compare_lines = {}
        for entry in cmp.value:
            if entry.kind != "scalar" or not isinstance(entry.value, str) or not entry.value:
                raise SpecError(f"case {name}: compare entries are keys (strings), not "
                                f"{kind_name(entry)}", path, entry.line)
            if entry.value.startswith("stat."):
                try:
                    sel = parse_selector(entry.value)
                except SelectorError as exc:
                    raise SpecError(f"case {name}: {exc}", path, entry.line) from None
                key = sel.column
            else:
                key = entry.value
            compare.append(key)
            compare_lines.setdefault(key, entry.line)
    return compare, compare_lines


def _case_tolerances(body: dict[str, Located], compare: list[str], name: str,
                     path: Path) -> list[tuple[str, Tolerance, int]]:
    """The case's own tolerances; SpecError on one that applies to no compared key (checked
    when the compared keys are known, i.e. none is a glob)."""
    tolerances = _tolerances(body["tolerance"], path, f"case {name}: tolerance") \
        if "tolerance" in body else []
    if not any(is_glob(entry) for entry in compare):   # the compared keys are known already
        for pattern, _, line in tolerances:
            if not any(applies(pattern, key) for key in compare):
                raise SpecError(f"case {name}: tolerance {pattern!r} applies to no compared key "
                                f"(compare: {', '.join(compare)})", path, line)
    return tolerances


def _case(item: Located, index: int, folder: Path, path: Path,
          defaults: list[tuple[str, Tolerance, int]]) -> Case:
    """One case of the suite, its keys checked in this order: name, topology, options,
    params, compare, tolerance."""
    name = _case_name(item, path)
    script, topo = _case_script(item, name, folder, path)
    lines = [("topology", topo.line)]
    options = _case_options(item.value, name, path, lines)
    params = _case_params(item.value, name, path, lines)
    compare, compare_lines = _case_compare(item, name, path)
    tolerances = _case_tolerances(item.value, compare, name, path)
    point = Point(index=index, topology=script, topology_name=Path(topo.value).as_posix(),
                  options=tuple(options), params=tuple(params), line=item.line,
                  lines=tuple(lines))
    return Case(name=name, point=point, compare=compare,
                tolerances=[(p, t) for p, t, _ in tolerances + defaults], line=item.line,
                compare_lines=compare_lines,
                tolerance_lines={p: line for p, _, line in tolerances})


def load_suite(folder: Union[str, Path]) -> Suite:
    """Load ``folder/suite.yaml``; SpecError (``FILE:LINE: message``) when malformed."""
    folder = Path(folder)
    path = folder / SUITE_FILE
    if not folder.is_dir():
        raise SpecError(f"no such suite directory (looked for {path.resolve()}; SUITE_DIR is "
                        "a folder holding suite.yaml)", folder)
    root = load_located(path)
    if root.kind != "mapping":
        raise SpecError(f"the suite must be a mapping, not {kind_name(root)}", path, root.line)
    for key, value in root.items():
        if key not in SUITE_KEYS:
            raise SpecError(f"unknown key {key!r} (allowed: {', '.join(SUITE_KEYS)})", path,
                            value.key_line)
    top = root.value
    name = str(top["name"].value) if "name" in top else folder.resolve().name
    defaults = _tolerances(top["tolerance"], path, "tolerance") if "tolerance" in top else []
    if "cases" not in top:
        raise SpecError("the suite lists no cases", path, 1)
    cases_node = top["cases"]
    if cases_node.kind != "sequence" or not cases_node.value:
        raise SpecError("cases must be a non-empty list", path, cases_node.line)
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(cases_node.value):
        case = _case(item, index, folder.resolve(), path, defaults)
        if case.name in seen:
            raise SpecError(f"case {case.name!r} is listed twice (first on line "
                            f"{seen[case.name]})", path, item.line)
        seen[case.name] = item.line
        cases.append(case)
    if not any(is_glob(entry) for case in cases for entry in case.compare):
        for pattern, _, line in defaults:
            if not any(applies(pattern, key) for case in cases for key in case.compare):
                raise SpecError(f"tolerance {pattern!r} applies to no key any case compares",
                                path, line)
    return Suite(folder=folder, name=name, cases=cases,
                 tolerance_lines={p: line for p, _, line in defaults})


def find_case(suite: Suite, name: str) -> Optional[Case]:
    """The case called ``name``."""
    return next((c for c in suite.cases if c.name == name), None)


__all__ = ["Suite", "Case", "Tolerance", "load_suite", "find_case", "is_glob", "applies",
           "SUITE_FILE"]
