"""The configuration graph a topology script builds: components (networkx nodes) with params,
subcomponents and statistic enables; links (networkx edges) with per-end latencies; program
options and the statistic output. It is checked before anything is built, and it can be written
as JSON (which ``sst`` runs again) or as Graphviz DOT.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import networkx as nx

from .element import Element, StatisticEnable
from .library import find_element

ENABLE_ALL = "*"

# Program options a script may set with sst.setProgramOption(s); values are kept as text.
# SST-core 16 accepts (and its graph files list) all of these; the ones sst-cdma does not act
# on (timeVortex, interthread-links, checkpoint-*, ...) are accepted and kept.
PROGRAM_OPTIONS = {
    "stop-at": "", "timing-info": "0", "print-timing-info": "0", "output-directory": "",
    "output-json": "", "output-dot": "", "output-config": "", "run-mode": "both",
    "verbose": "0", "timebase": "1ps", "num-threads": "1", "model-options": "",
    "heartbeat-period": "", "heartbeat-sim-period": "", "heartbeat-wall-period": "0",
    "exit-after": "", "partitioner": "", "timeVortex": "sst.timevortex.priority_queue",
    "interthread-links": "false", "output-prefix-core": "#@x SST Core: ",
    "checkpoint-sim-period": "", "checkpoint-wall-period": "0",
}
#: the values of the ``run-mode`` program option
RUN_MODES = ("init", "run", "both")


class ConfigError(ValueError):
    """A fault in the configuration. ``where`` is ``file:line`` of the script statement that
    caused it, when known."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class StructureError(ConfigError):
    """SST's structural check failed: links created and never connected, or connected on one
    side only. ``warnings`` are SST's lines (``Found unused link: l0``), in link creation
    order."""

    def __init__(self, warnings: list[str], where: str = "") -> None:
        super().__init__("Structure errors found in the ConfigGraph: " + "; ".join(warnings),
                         where)
        self.warnings = warnings


@dataclass
class ConfigComponent:
    """A component or subcomponent as configured: type, params and where it was declared."""

    name: str
    type: str
    where: str = ""
    params: dict[str, str] = field(default_factory=dict)
    param_where: dict[str, str] = field(default_factory=dict)
    statistics: dict[str, StatisticEnable] = field(default_factory=dict)
    stat_load_level: Optional[int] = None
    subcomponents: list["ConfigSubComponent"] = field(default_factory=list)

    @property
    def element(self) -> type[Element]:
        """The element class (resolved through the library registry)."""
        return find_element(self.type)


@dataclass
class ConfigSubComponent(ConfigComponent):
    """A subcomponent in a parent's slot."""

    slot: str = ""
    index: int = 0


@dataclass
class LinkEndConfig:
    """One end of a link: component, port, and this end's latency text (None: link default)."""

    component: str
    port: str
    latency: Optional[str]


@dataclass
class ConfigLink:
    """A link: its default latency, its ends (at most two) and the no-cut flag."""

    name: str
    latency: Optional[str] = None
    ends: list[LinkEndConfig] = field(default_factory=list)
    no_cut: bool = False
    where: str = ""

    def end_latency(self, i: int) -> Optional[str]:
        """The latency text that applies to end ``i``."""
        return self.ends[i].latency if self.ends[i].latency is not None else self.latency


class ConfigGraph:
    """Everything one topology script configured. Components are nodes of ``self.graph`` (a
    networkx MultiGraph) and connected links are its edges, keyed by link name."""

    def __init__(self) -> None:
        self.graph = nx.MultiGraph()
        self.links: dict[str, ConfigLink] = {}
        self.program_options: dict[str, str] = {}
        self.stat_output: tuple[str, dict[str, str]] = ("sst.statOutputConsole", {})
        self.stat_load_level = 0
        self.source = ""
        #: every link the script created, connected or not, in creation order
        self.declared_links: dict[str, ConfigLink] = {}
        #: faults the script made that SST reports after its structural check (an unknown
        #: element type): raised by :meth:`check_structure` when the structure is sound
        self.deferred_errors: list[ConfigError] = []
        #: checks the element library adds (each raises ConfigError), run last by :meth:`check`:
        #: the baselines' copies still matching the main system they were copied from
        self.final_checks: list[Callable[["ConfigGraph"], None]] = []

    # -- queries -------------------------------------------------------------------------------
    @property
    def components(self) -> dict[str, ConfigComponent]:
        """Component name -> configuration, in creation order."""
        return {n: d["config"] for n, d in self.graph.nodes(data=True)}

    def component(self, name: str) -> Optional[ConfigComponent]:
        """The component called ``name``, or None."""
        data = self.graph.nodes.get(name)
        return data["config"] if data else None

    def port_links(self) -> dict[tuple[str, str], list[str]]:
        """(component, port) -> names of links attached there."""
        out: dict[tuple[str, str], list[str]] = {}
        for link in self.links.values():
            for end in link.ends:
                out.setdefault((end.component, end.port), []).append(link.name)
        return out

    # -- building ------------------------------------------------------------------------------
    def add_component(self, comp: ConfigComponent) -> None:
        """Add a node; duplicate names are an error."""
        if comp.name in self.graph:
            first = self.graph.nodes[comp.name]["config"].where
            raise ConfigError(f"duplicate component name {comp.name!r} (first defined at {first})",
                              comp.where)
        self.graph.add_node(comp.name, config=comp)

    def add_link_end(self, link: ConfigLink, end: LinkEndConfig, where: str) -> None:
        """Attach one end; a third end is an error. With two ends the link becomes an edge."""
        if len(link.ends) >= 2:
            raise ConfigError(f"link {link.name!r} already has two ends; "
                              f"cannot also connect {end.component}.{end.port}", where)
        if end.component not in self.graph:
            raise ConfigError(f"link {link.name!r} names unknown component {end.component!r}",
                              where)
        link.ends.append(end)
        self.links.setdefault(link.name, link)
        if len(link.ends) == 2:
            a, b = link.ends
            self.graph.add_edge(a.component, b.component, key=link.name, link=link)

    def declare_link(self, link: ConfigLink) -> None:
        """Record a link the script created (``sst.Link(name)``), connected or not."""
        self.declared_links.setdefault(link.name, link)

    # -- checks --------------------------------------------------------------------------------
    def structure_warnings(self) -> list[str]:
        """SST-core's ``ConfigGraph::checkForStructuralErrors``: one line per link never
        connected or connected on one side only, in link creation order."""
        out = []
        links = {**self.declared_links, **self.links}
        for link in links.values():
            if not link.ends:
                out.append(f"Found unused link: {link.name}")
            elif len(link.ends) == 1:
                out.append(f"Found dangling link: {link.name}.  It is connected on one side "
                           f"to component {link.ends[0].component}.")
        return out

    def check_structure(self) -> None:
        """What SST does after the script ran, before anything is built: raise StructureError
        for unused or dangling links, then the first deferred fault (an unknown element)."""
        warnings = self.structure_warnings()
        if warnings:
            raise StructureError(warnings, self.source)
        if self.deferred_errors:
            raise self.deferred_errors[0]

    def check(self) -> None:
        """Raise ConfigError for the first fault: dangling link, port used twice, unknown or
        required port, missing latency, bad param, unknown statistic."""
        for link in self.links.values():
            if len(link.ends) < 2:
                end = link.ends[0]
                raise ConfigError(f"link {link.name!r} is dangling: only {end.component}."
                                  f"{end.port} is connected", link.where)
            for i, end in enumerate(link.ends):
                if end.component not in self.graph:
                    raise ConfigError(f"link {link.name!r} names unknown component "
                                      f"{end.component!r}", link.where)
                if self.end_latency_ps(link, i) is None:
                    raise ConfigError(f"link {link.name!r} has no latency for end "
                                      f"{end.component}.{end.port} and no default latency",
                                      link.where)
        used = self.port_links()
        for (comp_name, port), names in used.items():
            if len(names) > 1:
                raise ConfigError(f"port {comp_name}.{port} is connected twice (links "
                                  f"{', '.join(repr(n) for n in names)})",
                                  self.links[names[1]].where)
        ports_of: dict[str, list[tuple[str, list[str]]]] = {}
        for (comp_name, port), names in used.items():
            ports_of.setdefault(comp_name, []).append((port, names))
        for comp in self.components.values():
            cls = comp.element
            for port, names in ports_of.get(comp.name, ()):
                if cls.find_port(port) is None:
                    known = ", ".join(p.name for p in cls.PORTS) or "none"
                    raise ConfigError(f"{comp.name} ({comp.type}) has no port {port!r} "
                                      f"(ports: {known})", self.links[names[0]].where)
            for decl in cls.PORTS:
                if decl.required and "%d" not in decl.name and (comp.name, decl.name) not in used:
                    raise ConfigError(f"{comp.name} ({comp.type}): required port "
                                      f"{decl.name!r} is not connected", comp.where)
            for sub in [comp, *comp.subcomponents]:
                sub_cls = sub.element
                for stat in sub.statistics:
                    if stat != ENABLE_ALL and sub_cls.find_statistic(stat) is None:
                        known = ", ".join(s.name for s in sub_cls.STATISTICS) or "none"
                        raise ConfigError(f"{sub.name} ({sub.type}) has no statistic {stat!r} "
                                          f"(statistics: {known})", sub.where)
        for final_check in self.final_checks:
            final_check(self)

    def end_latency_ps(self, link: ConfigLink, i: int) -> Optional[int]:
        """Latency of end ``i`` in ps, or None when neither the end nor the link has one."""
        from .units import UnitAlgebra, UnitError

        text = link.end_latency(i)
        if text is None:
            return None
        try:
            value = UnitAlgebra(text).to_picoseconds()
        except UnitError as exc:
            raise ConfigError(f"link {link.name!r}: latency {text!r}: {exc}", link.where) from None
        if value < 0:
            raise ConfigError(f"link {link.name!r}: negative latency {text!r}", link.where)
        return value

    # -- JSON, Python and DOT ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The graph as SST-core 16's JSON model (what ``sst FILE.json`` reads)."""
        from .graph_files import to_json

        return to_json(self)

    def write_json(self, path: Path) -> None:
        """Write :meth:`to_json` to ``path``, laid out as SST-core 16 writes it."""
        from .graph_files import dumps

        path.write_text(dumps(self.to_json()), encoding="utf-8")

    def write_python(self, path: Path) -> None:
        """Write the graph as a Python script that rebuilds it (``--output-config``)."""
        from .graph_files import to_python

        path.write_text(to_python(self), encoding="utf-8")

    @classmethod
    def from_json(cls, data: Any, source: str) -> "ConfigGraph":
        """Rebuild a graph from SST's JSON model; ConfigError names what is wrong."""
        from .graph_files import from_json

        return from_json(data, source)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT: a box per component, an edge per link."""
        lines = ['graph "sst" {', "  node [shape=box];"]
        for c in self.components.values():
            lines.append(f'  "{c.name}" [label="{c.name}\\n{c.type}"];')
        for u, v, key, d in self.graph.edges(keys=True, data=True):
            link: ConfigLink = d["link"]
            a, b = link.ends
            lat = link.end_latency(0) or ""
            lines.append(f'  "{a.component}" -- "{b.component}" [label="{key}\\n{lat}", '
                         f'taillabel="{a.port}", headlabel="{b.port}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"
