"""Configuration graph files in SST-core 16's formats: the JSON model that ``--output-json``
writes and ``sst FILE.json`` reads, and the Python script that ``--output-config`` writes.

JSON (as ``sst --output-json`` of SST-core 16 writes it)::

    {"program_options": {...}, "statistics_options": {"statisticLoadLevel", "statisticOutput",
     "params"}, "components": [{"name", "type", "statistics_options"?: {"enable_all_statistics",
     "params"?, "statistic_load_level"?}, "params", "statistics"?: [{"name", "params"}],
     "subcomponents"?: [{"slot_name", "slot_number", "type", "params", ...}]}],
     "statistics_group": null, "links": [{"name", "noCut", "nonlocal", "left": {"component",
     "port", "latency"}, "right": {...}}] or null}

Latencies are written per end in SST's text (``"1 ns"``); a statistic's type is its
``"type"`` param.
"""
from __future__ import annotations

import json
import re
from difflib import get_close_matches
from pathlib import Path, PurePath
from typing import Any, Optional

from sst_cdma.engine.config import (ENABLE_ALL, PROGRAM_OPTION_ALIASES, PROGRAM_OPTIONS, ConfigComponent,
                     ConfigError, ConfigGraph, ConfigLink, ConfigSubComponent, LinkEndConfig,
                     program_option_fault)
from sst_cdma.engine.element import StatisticEnable
from sst_cdma.engine.units import UnitAlgebra

#: the program options SST-core 16's graph files list, in its order
GRAPH_FILE_OPTIONS = ("verbose", "stop-at", "timing-info", "heartbeat-sim-period",
                      "heartbeat-wall-period", "timebase", "partitioner", "timeVortex",
                      "interthread-links", "output-prefix-core", "checkpoint-sim-period",
                      "checkpoint-wall-period")
#: SST-core 16's program options as its graph files list them, with its defaults: ours, but for
#: the partitioner, which SST names (it ran the single-rank one)
SST_PROGRAM_OPTIONS = {name: "sst.single" if name == "partitioner" else PROGRAM_OPTIONS[name]
                       for name in GRAPH_FILE_OPTIONS}
#: options of one command line that a saved graph must not carry (replaying it would write the
#: files again, or only check it)
NOT_SAVED = {"output-json", "output-dot", "output-config", "run-mode", "model-options",
             "output-directory"}
DEFAULT_STAT_TYPE = "sst.AccumulatorStatistic"
#: SST's STATISTICLOADLEVELUNINITIALIZED: a component load level of 255 means "not set"
LEVEL_NOT_SET = 255


def saved_program_options(graph: ConfigGraph) -> dict[str, str]:
    """SST's list with this graph's values, then the other options the script set."""
    opts = dict(graph.program_options)
    if opts.get("print-timing-info") and not opts.get("timing-info"):
        opts["timing-info"] = opts["print-timing-info"]
    opts.pop("print-timing-info", None)
    out = {k: opts.get(k) or v for k, v in SST_PROGRAM_OPTIONS.items()}
    out.update({k: v for k, v in opts.items() if k not in out and k not in NOT_SAVED})
    return out


def latency_text(ps: int) -> str:
    """A latency in ps as SST writes it: best SI prefix, every digit (``"1 ns"``)."""
    return UnitAlgebra(f"{ps}ps").toStringBestSI(None)


def _stat_params(enable: StatisticEnable) -> dict[str, str]:
    """A statistic's params with its type, keys sorted (as SST writes them)."""
    return dict(sorted({**enable.params, "type": enable.type_name}.items()))


# -- JSON --------------------------------------------------------------------------------------
def dumps(doc: dict[str, Any]) -> str:
    """JSON text laid out as SST-core 16 writes its graph files: top-level keys and the items
    of top-level arrays at the margin, everything inside them indented by two."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, dict):
            parts.append(f"{json.dumps(key)}:{json.dumps(value, indent=2)}")
        elif isinstance(value, list):
            items = ",\n".join(json.dumps(item, indent=2) for item in value)
            parts.append(f"{json.dumps(key)}: [\n{items}\n]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _component_json(c: ConfigComponent) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(c, ConfigSubComponent):
        out.update(slot_name=c.slot, slot_number=c.index, type=c.type)
    else:
        out.update(name=c.name, type=c.type)
    stat_opts: dict[str, Any] = {}
    if ENABLE_ALL in c.statistics:
        stat_opts["enable_all_statistics"] = True
        every = c.statistics[ENABLE_ALL]
        if every.params or every.type_name != DEFAULT_STAT_TYPE:
            stat_opts["params"] = _stat_params(every)
    if c.stat_load_level is not None:
        stat_opts["statistic_load_level"] = c.stat_load_level
    if stat_opts:
        out["statistics_options"] = stat_opts
    out["params"] = dict(c.params)
    stats = [{"name": n, "params": _stat_params(e)} for n, e in c.statistics.items()
             if n != ENABLE_ALL]
    if stats:
        out["statistics"] = stats
    if c.subcomponents:
        out["subcomponents"] = [_component_json(s) for s in c.subcomponents]
    return out


def to_json(graph: ConfigGraph) -> dict[str, Any]:
    """The graph as SST-core 16's JSON model (see the module docstring)."""
    links = []
    for link in graph.links.values():
        item: dict[str, Any] = {"name": link.name, "noCut": link.no_cut, "nonlocal": False}
        for i, side in enumerate(("left", "right")[:len(link.ends)]):
            end = link.ends[i]
            ps = graph.end_latency_ps(link, i)
            item[side] = {"component": end.component, "port": end.port,
                          "latency": latency_text(ps) if ps is not None else None}
        links.append(item)
    return {
        "program_options": saved_program_options(graph),
        "statistics_options": {"statisticLoadLevel": graph.stat_load_level,
                               "statisticOutput": graph.stat_output[0],
                               "params": dict(graph.stat_output[1])},
        "components": [_component_json(c) for c in graph.components.values()],
        "statistics_group": None,
        "links": links or None,
    }


def _json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, for messages."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(
        type(value), type(value).__name__)


def _mapping(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a JSON object (absent or null: empty); ConfigError naming ``what``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{what}: expected a mapping (JSON object), got {_json_type(value)} "
                          f"{json.dumps(value)[:40]}")
    return value


def _sequence(value: Any, what: str) -> list[Any]:
    """``value`` as a JSON array (absent or null: empty); ConfigError naming ``what``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{what}: expected an array, got {_json_type(value)}")
    return value


def _statistic(st: Any, what: str) -> tuple[str, StatisticEnable]:
    st = _mapping(st, what)
    params = {str(k): str(v) for k, v in _mapping(st.get("params"), f"{what}.params").items()}
    type_name = params.pop("type", str(st.get("type", DEFAULT_STAT_TYPE)))
    return str(st["name"]), StatisticEnable(type_name, params)


def _component_from_json(d: Any, path: str, source: str,
                         parent: Optional[str]) -> ConfigComponent:
    """One (sub)component; faults name it (by name once known, else ``path``)."""
    from sst_cdma.engine.library import ElementNotFound, find_element

    if not isinstance(d, dict):
        raise ConfigError(f"{path}: expected an object, got {_json_type(d)}")
    if parent is not None and "name" not in d and "slot_name" in d:
        d = {**d, "name": f"{parent}:{d['slot_name']}"
                          f"[{_whole_number(d.get('slot_number', 0), f'{path}: slot_number')}]"}
    for key in ("name", "type"):
        if key not in d:
            where = path if key == "name" else \
                f"{'subcomponent' if parent is not None else 'component'} {str(d['name'])!r}"
            raise ConfigError(f"malformed configuration graph: KeyError: {key!r} ({where} has "
                              f"no \"{key}\")")
    label = f"{'subcomponent' if parent is not None else 'component'} {str(d['name'])!r}"
    type_name = d["type"]
    if not isinstance(type_name, str):
        raise ConfigError(f"{label}: type: expected a string such as \"library.Element\", got "
                          f"{_json_type(type_name)}")
    try:
        find_element(type_name)
    except ElementNotFound as exc:
        raise ConfigError(f"{label}: {exc}") from None
    params = _mapping(d.get("params"), f"{label}: params")
    kwargs: dict[str, Any] = dict(name=str(d["name"]), type=type_name, where=source,
                                  params={str(k): str(v) for k, v in params.items()})
    c: ConfigComponent = ConfigSubComponent(**kwargs, slot=str(d["slot_name"]),
                                            index=_whole_number(d.get("slot_number", 0),
                                                                f"{label}: slot_number")) \
        if parent is not None else ConfigComponent(**kwargs)
    stat_opts = _mapping(d.get("statistics_options"), f"{label}: statistics_options")
    if stat_opts.get("enable_all_statistics"):
        c.statistics[ENABLE_ALL] = _statistic(
            {"name": ENABLE_ALL, "params": stat_opts.get("params")},
            f"{label}: statistics_options")[1]
    for j, st in enumerate(_sequence(d.get("statistics"), f"{label}: statistics")):
        name, enable = _statistic(st, f"{label}: statistics[{j}]")
        c.statistics[name] = enable
    level = stat_opts.get("statistic_load_level", d.get("statistic_load_level"))
    if level is not None:
        number = _whole_number(level, f"{label}: statistics_options.statistic_load_level")
        if number != LEVEL_NOT_SET:
            c.stat_load_level = number
    c.subcomponents = [  # type: ignore[misc]
        _component_from_json(s, f"{label}: subcomponents[{k}]", source, c.name)  # type: ignore[misc]
        for k, s in enumerate(_sequence(d.get("subcomponents"), f"{label}: subcomponents"))]
    return c


def _link_ends(d: dict[str, Any]) -> list[dict[str, Any]]:
    """A link's ends: SST's ``left``/``right``, or the ``ends`` list of sst-cdma 0.x files."""
    if "ends" in d:
        return _sequence(d["ends"], f"link {d.get('name')!r}: ends")
    return [_mapping(d[side], f"link {d.get('name')!r}: {side}")
            for side in ("left", "right") if d.get(side) is not None]


def _program_options(given: Any) -> dict[str, str]:
    """A graph file's program options; an option SST-core does not have, or a value sst-cdma
    cannot act on (a timebase other than 1 ps), is refused."""
    out = {}
    for key, value in _mapping(given, "program_options").items():
        if value is None:
            continue
        name = PROGRAM_OPTION_ALIASES.get(str(key), str(key))
        if name not in PROGRAM_OPTIONS:
            close = get_close_matches(name, PROGRAM_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"program_options: unknown program option {key!r}{hint}")
        fault = program_option_fault(name, str(value))
        if fault:
            raise ConfigError(f"program_options: {fault}")
        out[name] = str(value)
    return out


def _confine_filepath(graph: ConfigGraph) -> None:
    """A graph file writes its statistics file only inside the output folder (the current
    folder without one): an absolute ``filepath``, or one that climbs out with ``..``, is
    refused (a graph file from elsewhere would otherwise write where its author chose)."""
    given = graph.stat_output[1].get("filepath")
    if not given:
        return
    path = PurePath(given)
    if not path.is_absolute() and ".." not in path.parts:
        return
    raise ConfigError(f"statistics_options.params.filepath {given!r} points outside the "
                      "output folder: a graph file writes only inside it (give a file name, "
                      f"such as {path.name or 'StatisticOutput.csv'!r}, or a path below the "
                      "folder)")


def _whole_number(value: Any, what: str) -> int:
    """``value`` (a JSON number or a string of digits) as an int; ConfigError naming
    ``what`` for anything else (``'abc'``, ``1.5``, ``true``)."""
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"{what}: {value!r} is not a whole number")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what}: {value!r} is not a whole number") from None


def from_json(data: Any, source: str) -> ConfigGraph:
    """Rebuild a graph from SST's JSON model (as SST-core 16 or ``--output-json`` wrote it);
    ConfigError names what is wrong."""
    if not isinstance(data, dict) or "components" not in data:
        raise ConfigError("not an SST configuration graph (a JSON object with "
                          "\"components\")", source)
    g = ConfigGraph()
    g.source = source
    try:
        g.program_options = _program_options(data.get("program_options"))
        so = _mapping(data.get("statistics_options"), "statistics_options")
        g.stat_load_level = _whole_number(so.get("statisticLoadLevel", 0),
                                          "statistics_options.statisticLoadLevel")
        g.stat_output = (str(so.get("statisticOutput", "sst.statOutputConsole")),
                         {str(k): str(v) for k, v in
                          _mapping(so.get("params"), "statistics_options.params").items()})
        _confine_filepath(g)
        for i, d in enumerate(_sequence(data.get("components"), "components")):
            g.add_component(_component_from_json(d, f"components[{i}]", source, None))
        for d in _sequence(data.get("links"), "links"):
            d = _mapping(d, "links[]")
            link = ConfigLink(str(d["name"]), d.get("latency"), no_cut=bool(d.get("noCut")),
                              where=source)
            g.declare_link(link)
            for e in _link_ends(d):
                latency = e.get("latency")
                g.add_link_end(link, LinkEndConfig(str(e["component"]), str(e["port"]),
                                                   None if latency is None else str(latency)),
                               source)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, ConfigError):
            if not exc.where:
                exc.where = source
            raise
        raise ConfigError(f"malformed configuration graph: {type(exc).__name__}: {exc}",
                          source) from None
    return g


# -- Python ------------------------------------------------------------------------------------
def _py(text: str) -> str:
    """A Python string literal."""
    return json.dumps(text)


def _dict_lines(params: dict[str, str]) -> str:
    """``{`` one ``"key" : "value"`` a line ``}``, as SST writes params."""
    items = ",\n".join(f"     {_py(k)} : {_py(v)}" for k, v in params.items())
    return "{\n" + items + ("\n" if items else "") + "}"


def _stat_dict(enable: StatisticEnable) -> dict[str, str]:
    """Params of an enable with ``type`` first, then the rest sorted (as SST writes them)."""
    return {"type": enable.type_name, **dict(sorted(enable.params.items()))}


class _Names:
    """Python variable names for components and links, unique within one script."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, prefix: str, name: str) -> str:
        base = f"{prefix}_{re.sub(r'[^0-9A-Za-z_]', '_', name)}"
        var, n = base, 1
        while var in self.used:
            n += 1
            var = f"{base}_{n}"
        self.used.add(var)
        return var


def _component_py(c: ConfigComponent, var: str, lines: list[str], names: _Names,
                  variables: dict[str, str]) -> None:
    variables[c.name] = var
    if c.params:
        lines.append(f"{var}.addParams({_dict_lines(c.params)})")
    if not isinstance(c, ConfigSubComponent):
        x, y, z = c.coordinates  # as C++'s ostream writes a double (%g)
        lines.append(f"{var}.setCoordinates({x:g}, {y:g}, {z:g})")
    if c.stat_load_level is not None or ENABLE_ALL in c.statistics:
        level = LEVEL_NOT_SET if c.stat_load_level is None else c.stat_load_level
        lines.append(f"{var}.setStatisticLoadLevel({level})")
    for name, enable in c.statistics.items():
        if name == ENABLE_ALL:
            args = "" if not enable.params and enable.type_name == DEFAULT_STAT_TYPE else \
                _dict_lines(_stat_dict(enable))
            lines.append(f"{var}.enableAllStatistics({args})")
        else:
            lines.append(f"{var}.enableStatistics([{_py(name)}], "
                         f"{_dict_lines(_stat_dict(enable))})")
    for sub in c.subcomponents:
        assert isinstance(sub, ConfigSubComponent)
        sub_var = names("subcomp", sub.name)
        lines.append(f"{sub_var} = {var}.setSubComponent({_py(sub.slot)}, {_py(sub.type)}, "
                     f"{sub.index})")
        _component_py(sub, sub_var, lines, names, variables)


def to_python(graph: ConfigGraph) -> str:
    """The graph as a Python script that rebuilds it, laid out as SST-core 16's
    ``--output-config`` writes it."""
    names = _Names()
    lines = ["# Automatically generated by SST", "import sst", "",
             "# Define SST Program Options:",
             "# (These reflect the settings from original run and are not necessary in all "
             "files)"]
    lines += [f"sst.setProgramOption({_py(k)}, {_py(v)})"
              for k, v in saved_program_options(graph).items()]
    lines += ["# Define the shared parameter sets:", "", "# Define the SST Components:"]
    comp_vars: dict[str, str] = {}
    for c in graph.components.values():
        var = names("comp", c.name)
        lines.append(f"{var} = sst.Component({_py(c.name)}, {_py(c.type)})")
        _component_py(c, var, lines, names, comp_vars)
        lines.append("")
    lines.append("# Define the SST Links:")
    order = {name: i for i, name in enumerate(graph.components)}
    for link in sorted(graph.links.values(),
                       key=lambda lk: order[graph.owner(lk.ends[0].component)]):
        var = names("link", link.name)
        lines.append(f"{var} = sst.Link({_py(link.name)})")
        if link.no_cut:
            lines.append(f"{var}.setNoCut()")
        ends = []
        for i, end in enumerate(link.ends):
            ps = graph.end_latency_ps(link, i)
            lat = f", {_py(latency_text(ps))}" if ps is not None else ""
            ends.append(f"({comp_vars[end.component]}, {_py(end.port)}{lat})")
        lines.append(f"{var}.connect({','.join(ends)})")
        lines.append("")
    lines.append("# Define SST Statistics Options:")
    lines.append(f"sst.setStatisticLoadLevel({graph.stat_load_level})")
    lines.append(f"sst.setStatisticOutput({_py(graph.stat_output[0])}, "
                 f"{_dict_lines(dict(graph.stat_output[1]))})")
    lines.append("# End of generated output.")
    return "\n".join(lines) + "\n\n"


def write_json(graph: ConfigGraph, path: Path) -> None:
    """Write :func:`to_json` of ``graph`` to ``path``, laid out as SST-core 16 writes it."""
    path.write_text(dumps(to_json(graph)), encoding="utf-8")


def write_python(graph: ConfigGraph, path: Path) -> None:
    """Write ``graph`` as a Python script that rebuilds it (``--output-config``)."""
    path.write_text(to_python(graph), encoding="utf-8")
