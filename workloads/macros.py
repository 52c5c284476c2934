"""Module macros: named groups of layers (fire, inception, bottleneck) expanded by the loader.

A macro is declared in YAML (the shared library ``networks/_macros.yaml`` or a network file's
own ``macros:`` section)::

    fire:
      doc: SqueezeNet fire module
      args: [squeeze, expand1x1, expand3x3]        # or a mapping name -> default (null: required)
      output: concat                               # default: the last layer
      layers:
        - {name: squeeze1x1, kind: conv, params: {num_output: $squeeze, kernel_size: 1}}
        - {name: relu_squeeze1x1, kind: relu}
        - {name: expand1x1, kind: conv, inputs: [squeeze1x1],
           params: {num_output: $expand1x1, kernel_size: 1}}
        ...

and used like a layer: ``{name: fire2, kind: fire, params: {squeeze: 16, expand1x1: 64,
expand3x3: 64}}``.  Expansion prefixes every macro layer with the instance name
(``fire2/squeeze1x1``, Caffe's naming), substitutes ``$arg`` values in params, replaces the
input reference ``$input`` by the instance's inputs, and makes the instance name an alias of
its output layer so later layers can say ``inputs: [fire2]``.  A macro layer without
``inputs`` reads the previous macro layer (the first one reads the instance's inputs).  Macros
may use other macros (up to :data:`MAX_DEPTH` deep).
"""
from __future__ import annotations

from typing import Any, Mapping

from .errors import WorkloadError

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

__all__ = ["Macro", "RawLayer", "parse_macros", "expand_layers", "MAX_DEPTH"]

#: Deepest allowed nesting of macros inside macros.
MAX_DEPTH = 8
_REQUIRED = object()
_LAYER_KEYS = {"name", "kind", "inputs", "params", "doc"}


@frozen_record
class Macro(FrozenRecord):
    """A parsed macro definition."""

    name: str
    args: Mapping[str, Any]
    layers: tuple[Mapping[str, Any], ...]
    output: str
    doc: str = ""


@record
class RawLayer(Record):
    """A layer after macro expansion, before validation: inputs are names or aliases."""

    name: str
    kind: str
    inputs: list[str]
    params: Any
    macro: str | None = None  # instance path that produced it, e.g. "inception_3a"


def _check_layer_entry(entry: Any, file: str, where: str) -> None:
    if not isinstance(entry, Mapping):
        raise WorkloadError(f"{where}: each layer must be a mapping, got {entry!r}", file=file)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{where}: layer without a 'name': {dict(entry)!r}", file=file)
    unknown = sorted(set(entry) - _LAYER_KEYS)
    if unknown:
        raise WorkloadError(
            f"unknown key(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(sorted(_LAYER_KEYS))})",
            file=file,
            layer=name,
        )
    if not isinstance(entry.get("kind"), str):
        raise WorkloadError("missing or non-string 'kind'", file=file, layer=name)


def parse_macros(raw: Any, file: str, reserved: set[str]) -> dict[str, Macro]:
    """Parse a ``macros:`` mapping from ``file``; ``reserved`` are names macros may not take."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise WorkloadError("'macros' must be a mapping of name -> definition", file=file)
    out: dict[str, Macro] = {}
    for name, body in raw.items():
        where = f"macro '{name}'"
        if name in reserved:
            raise WorkloadError(f"{where}: name clashes with a layer kind", file=file)
        if not isinstance(body, Mapping):
            raise WorkloadError(f"{where}: definition must be a mapping", file=file)
        unknown = sorted(set(body) - {"doc", "args", "layers", "output"})
        if unknown:
            raise WorkloadError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}", file=file)
        args_raw = body.get("args") or {}
        if isinstance(args_raw, list):
            args = {str(a): _REQUIRED for a in args_raw}
        elif isinstance(args_raw, Mapping):
            args = {str(a): (_REQUIRED if d is None else d) for a, d in args_raw.items()}
        else:
            raise WorkloadError(f"{where}: 'args' must be a list or a mapping", file=file)
        layers = body.get("layers")
        if not isinstance(layers, list) or not layers:
            raise WorkloadError(f"{where}: 'layers' must be a non-empty list", file=file)
        names = []
        for entry in layers:
            _check_layer_entry(entry, file, where)
            names.append(entry["name"])
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise WorkloadError(f"{where}: duplicate layer name(s) {sorted(dup)}", file=file)
        output = body.get("output", names[-1])
        if output not in names:
            raise WorkloadError(f"{where}: output '{output}' is not one of its layers", file=file)
        out[name] = Macro(name, args, tuple(layers), output, str(body.get("doc", "")))
    return out


def _substitute(value: Any, args: Mapping[str, Any], macro: str, file: str, layer: str) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        key = value[1:]
        if key not in args:
            raise WorkloadError(
                f"macro '{macro}' uses undefined argument '{value}'", file=file, layer=layer
            )
        return args[key]
    if isinstance(value, list):
        return [_substitute(v, args, macro, file, layer) for v in value]
    if isinstance(value, Mapping):
        return {k: _substitute(v, args, macro, file, layer) for k, v in value.items()}
    return value


def _as_inputs(value: Any, file: str, layer: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise WorkloadError(f"'inputs' must be a layer name or a list of names, got {value!r}",
                        file=file, layer=layer)


class _Expander:
    def __init__(self, macros: Mapping[str, Macro], file: str) -> None:
        self.macros = macros
        self.file = file
        self.layers: list[RawLayer] = []
        self.aliases: dict[str, str] = {}

    def instance(self, macro: Macro, name: str, inputs: list[str], params: Any,
                 stack: tuple[str, ...]) -> None:
        if len(stack) >= MAX_DEPTH or macro.name in stack:
            chain = " -> ".join(stack + (macro.name,))
            raise WorkloadError(f"macro nesting too deep or recursive: {chain}",
                                file=self.file, layer=name)
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise WorkloadError(f"params of macro '{macro.name}' must be a mapping",
                                file=self.file, layer=name)
        unknown = sorted(set(params) - set(macro.args))
        if unknown:
            raise WorkloadError(
                f"unknown argument(s) {', '.join(map(repr, unknown))} for macro '{macro.name}' "
                f"(allowed: {', '.join(macro.args) or 'none'})",
                file=self.file, layer=name)
        args = {}
        for arg, default in macro.args.items():
            if arg in params:
                args[arg] = params[arg]
            elif default is _REQUIRED:
                raise WorkloadError(f"missing argument '{arg}' for macro '{macro.name}'",
                                    file=self.file, layer=name)
            else:
                args[arg] = default
        local = {entry["name"] for entry in macro.layers}
        prefix = name + "/"
        prev: str | None = None
        for entry in macro.layers:
            full = prefix + entry["name"]
            refs = _as_inputs(entry.get("inputs"), self.file, full)
            if refs is None:
                resolved = list(inputs) if prev is None else [prev]
            else:
                resolved = []
                for ref in refs:
                    if ref == "$input":
                        resolved.extend(inputs)
                    elif ref in local:
                        resolved.append(prefix + ref)
                    else:
                        raise WorkloadError(
                            f"macro '{macro.name}' input '{ref}' is neither '$input' nor one "
                            "of the macro's own layers", file=self.file, layer=full)
            sub = _substitute(entry.get("params"), args, macro.name, self.file, full)
            self.emit(full, entry["kind"], resolved, sub, stack + (macro.name,), name)
            prev = full
        self.aliases[name] = prefix + macro.output

    def emit(self, name: str, kind: str, inputs: list[str], params: Any,
             stack: tuple[str, ...], instance: str | None) -> None:
        if kind in self.macros:
            self.instance(self.macros[kind], name, inputs, params, stack)
        else:
            self.layers.append(RawLayer(name, kind, inputs, params, instance))


def expand_layers(entries: list[Any], macros: Mapping[str, Macro], file: str
                  ) -> tuple[list[RawLayer], dict[str, str]]:
    """Expand macro instances in a network's ``layers`` list.

    Returns the flat layer list (inputs filled in: a layer without ``inputs`` reads the
    previous entry) and the alias table mapping each macro instance name to its output layer.
    """
    exp = _Expander(macros, file)
    prev: str | None = None
    for i, entry in enumerate(entries):
        _check_layer_entry(entry, file, f"layers[{i}]")
        name = entry["name"]
        refs = _as_inputs(entry.get("inputs"), file, name)
        if refs is None:
            refs = [] if prev is None or entry["kind"] == "data" else [prev]
        exp.emit(name, entry["kind"], refs, entry.get("params"), (), None)
        prev = name
    return exp.layers, exp.aliases
