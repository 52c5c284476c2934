"""The configuration graph a topology script builds: components (networkx nodes) with params,
subcomponents and statistic enables; links (networkx edges) with per-end latencies; program
options and the statistic output. It is checked before anything is built, and it can be written
as JSON (which ``sst`` runs again) or as Graphviz DOT.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Callable, Optional

import networkx as nx

from sst_cdma.engine.records import Record, record
from sst_cdma.engine.element import SIM_TIME_LIMIT_PS, Element, StatisticEnable
from sst_cdma.engine.errors import ConfigError
from sst_cdma.engine.library import find_element

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
    "checkpoint-sim-period": "", "checkpoint-wall-period": "0", "dot-verbosity": "0",
}
#: the values of the ``run-mode`` program option
RUN_MODES = ("init", "run", "both")
#: older names SST-core still takes for a program option
PROGRAM_OPTION_ALIASES = {"stopAtCycle": "stop-at"}
#: SST-core 16's own partitioners; on one rank each puts every component on rank 0
PARTITIONERS = ("sst.single", "sst.linear", "sst.roundrobin", "sst.simple", "sst.self")


def beyond_sim_range(ps: int) -> str:
    """Why ``ps`` cannot be a simulated time or latency ("" when it can)."""
    if ps <= SIM_TIME_LIMIT_PS:
        return ""
    return (f"beyond the simulation's range (simulated time is a 64-bit count of ps: at most "
            f"{SIM_TIME_LIMIT_PS} ps, about 213 days)")


def program_option_fault(name: str, value: str) -> str:
    """Why ``value`` cannot be program option ``name`` ("" when it can): ``timebase`` other
    than 1 ps (sst-cdma counts time in ps only) or a partitioner SST-core does not have."""
    from sst_cdma.engine.units import UnitAlgebra, UnitError

    if name == "timebase":
        try:
            base = UnitAlgebra(value or "1ps")
        except UnitError as exc:
            return f"timebase {value!r}: {exc}"
        if base.units != "s" or base.value * 10**12 != 1:
            return (f"timebase {value!r}: this kernel counts time in picoseconds only "
                    "(timebase 1ps, SST's default); leave it out")
    if name == "partitioner" and value and value not in PARTITIONERS:
        return (f"partitioner {value!r} is not one of SST-core's ({', '.join(PARTITIONERS)})")
    return ""


class StructureError(ConfigError):
    """SST's structural check failed: links created and never connected, or connected on one
    side only. ``warnings`` are SST's lines (``Found unused link: l0``), in link creation
    order."""

    def __init__(self, warnings: list[str], where: str = "") -> None:
        super().__init__("Structure errors found in the ConfigGraph: " + "; ".join(warnings),
                         where)
        self.warnings = warnings


@record
class ConfigComponent(Record):
    """A component or subcomponent as configured: type, params and where it was declared."""

    name: str
    type: str
    where: str = ""
    params: dict[str, str] = field(default_factory=dict)
    param_where: dict[str, str] = field(default_factory=dict)
    statistics: dict[str, StatisticEnable] = field(default_factory=dict)
    stat_load_level: Optional[int] = None
    subcomponents: list["ConfigSubComponent"] = field(default_factory=list)
    #: SST's setCoordinates (written back by --output-config; nothing else reads them)
    coordinates: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: the shared parameter sets this element takes its params from (addSharedParamSet)
    shared_sets: list[str] = field(default_factory=list)

    @property
    def element(self) -> builtins.type[Element]:  # the field `type` shadows the builtin
        """The element class (resolved through the library registry)."""
        return find_element(self.type)


@dataclass(repr=False, eq=False)
class ConfigSubComponent(ConfigComponent):
    """A subcomponent in a parent's slot."""

    slot: str = ""
    index: int = 0


@record
class LinkEndConfig(Record):
    """One end of a link: component, port, and this end's latency text (None: link default)."""

    component: str
    port: str
    latency: Optional[str]


@record
class ConfigLink(Record):
    """A link: its default latency, its ends (at most two) and the no-cut flag."""

    name: str
    latency: Optional[str] = None
    ends: list[LinkEndConfig] = field(default_factory=list)
    no_cut: bool = False
    where: str = ""

    def end_latency(self, i: int) -> Optional[str]:
        """The latency text that applies to end ``i``."""
        return self.ends[i].latency if self.ends[i].latency is not None else self.latency


def _subcomponent(todo: list[ConfigComponent], name: str) -> Optional[ConfigComponent]:
    """The subcomponent called ``name`` in the trees of the components in ``todo``, or None."""
    while todo:
        element = todo.pop()
        for sub in element.subcomponents:
            if sub.name == name:
                return sub
            todo.append(sub)
    return None


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
        #: shared parameter sets (sst.addSharedParam): set name -> key -> value text
        self.shared_params: dict[str, dict[str, str]] = {}
        #: one-line notes the run prints as warnings (a call accepted where sst-cdma differs)
        self.notices: list[str] = []
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

    def element_config(self, name: str) -> Optional[ConfigComponent]:
        """The component, or the subcomponent (``COMPONENT:SLOT[N]``, at any depth), called
        ``name``; None when there is none."""
        comp = self.component(name)
        if comp is not None or ":" not in name:
            return comp
        owner = self.component(self.owner(name))  # where setSubComponent names it: its tree
        todo = [owner] if owner is not None else []
        found = _subcomponent(todo, name)
        # a subcomponent named otherwise (a graph file's own name): every component's tree
        return found if found is not None else _subcomponent(list(self.components.values()),
                                                             name)

    def owner(self, name: str) -> str:
        """The component an element name belongs to (a subcomponent's is its top parent)."""
        return name.partition(":")[0]

    def port_links(self) -> dict[tuple[str, str], list[str]]:
        """(component, port) -> names of links attached there."""
        out: dict[tuple[str, str], list[str]] = {}
        for link in self.links.values():
            for end in link.ends:
                out.setdefault((end.component, end.port), []).append(link.name)
        return out

    # -- building ------------------------------------------------------------------------------
    def add_component(self, comp: ConfigComponent) -> None:
        """Add a node; duplicate names are an error, and so is a name that would lead a file
        named after it out of the output folder (a ``/``, a ``\\`` or a NUL in it)."""
        bad = next((c for c in ("/", "\\", "\0") if c in comp.name), None)
        if bad is not None:
            raise ConfigError(f"component name {comp.name!r}: {bad!r} is not allowed in a name "
                              "(outputs are named after components, and must stay inside the "
                              "output folder)", comp.where)
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
        if self.element_config(end.component) is None:
            raise ConfigError(f"link {link.name!r} names unknown component {end.component!r}",
                              where)
        link.ends.append(end)
        self.links.setdefault(link.name, link)
        if len(link.ends) == 2:
            a, b = link.ends
            self.graph.add_edge(self.owner(a.component), self.owner(b.component),
                                key=link.name, link=link)

    def declare_link(self, link: ConfigLink) -> None:
        """Record a link the script created (``sst.Link(name)``), connected or not; a second
        link of one name is an error naming it and where the first was made."""
        first = self.declared_links.get(link.name)
        if first is not None and first is not link:
            raise ConfigError(f"duplicate link name {link.name!r} (a link of that name was "
                              f"already created{' at ' + first.where if first.where else ''})",
                              link.where)
        self.declared_links.setdefault(link.name, link)

    def resolve_shared_params(self) -> None:
        """Give every element the params of the shared sets it named (its own params win);
        keys its element does not declare are left out (a set serves several types)."""
        from sst_cdma.engine.element import ParamError

        todo = list(self.components.values())
        while todo:
            element = todo.pop()
            todo.extend(element.subcomponents)
            for set_name in element.shared_sets:
                if set_name not in self.shared_params:
                    raise ConfigError(f"{element.name}: no shared parameter set {set_name!r} "
                                      "(sst.addSharedParam(s) makes one)", element.where)
                decl = {p.name: p for p in element.element.PARAMS}
                for key, text in self.shared_params[set_name].items():
                    if key in decl and key not in element.params:
                        try:
                            decl[key].parse(text)
                        except ParamError as exc:
                            raise ConfigError(f"{element.name} ({element.type}): parameter "
                                              f"{key!r} of shared set {set_name!r}: {exc}",
                                              element.where) from None
                        element.params[key] = text

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
                if self.element_config(end.component) is None:
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
            self._check_ports(comp, ports_of, used)
        for final_check in self.final_checks:
            final_check(self)

    def _check_ports(self, comp: ConfigComponent, ports_of: dict[str, list[tuple[str, list[str]]]],
                     used: dict[tuple[str, str], list[str]]) -> None:
        """One component's ports (its subcomponents' too) and its statistics."""
        for element in [comp, *comp.subcomponents]:
            cls = element.element
            for port, names in ports_of.get(element.name, ()):
                if cls.find_port(port) is None:
                    known = ", ".join(p.name for p in cls.PORTS) or "none"
                    raise ConfigError(f"{element.name} ({element.type}) has no port {port!r} "
                                      f"(ports: {known})", self.links[names[0]].where)
            for stat in element.statistics:
                if stat != ENABLE_ALL and cls.find_statistic(stat) is None:
                    known = ", ".join(s.name for s in cls.STATISTICS) or "none"
                    raise ConfigError(f"{element.name} ({element.type}) has no statistic "
                                      f"{stat!r} (statistics: {known})", element.where)
        for element in [comp, *comp.subcomponents]:  # a subcomponent's own ports too
            for decl in element.element.PORTS:
                if decl.required and "%d" not in decl.name and \
                        (element.name, decl.name) not in used:
                    raise ConfigError(f"{element.name} ({element.type}): required port "
                                      f"{decl.name!r} is not connected", element.where)

    def end_latency_ps(self, link: ConfigLink, i: int) -> Optional[int]:
        """Latency of end ``i`` in ps, or None when neither the end nor the link has one."""
        from sst_cdma.engine.units import UnitAlgebra, UnitError

        text = link.end_latency(i)
        if text is None:
            return None
        try:
            value = UnitAlgebra(text).to_picoseconds()
        except UnitError as exc:
            raise ConfigError(f"link {link.name!r}: latency {text!r}: {exc}", link.where) from None
        if value < 0:
            raise ConfigError(f"link {link.name!r}: negative latency {text!r}", link.where)
        if beyond_sim_range(value):
            raise ConfigError(f"link {link.name!r}: latency {text!r} is "
                              f"{beyond_sim_range(value)}", link.where)
        return value

    # -- DOT (JSON and Python: sst_cdma.engine.graph_files) -------------------------------------------
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
