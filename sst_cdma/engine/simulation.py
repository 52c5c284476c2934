"""Builds a simulation from a checked configuration graph and runs its lifecycle: construct,
init phases, setup, run, finish, statistics output."""
from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import IO, Any, Optional

from sst_cdma.engine.graph_files import to_json as graph_to_json
from sst_cdma.engine.library import describe_slot, slot_refusal
from sst_cdma.engine.cyclic_gc import held_back as _no_cyclic_gc
from sst_cdma.engine.config import ConfigComponent, ConfigError, ConfigGraph, ConfigSubComponent
from sst_cdma.engine.element import Component, Element, ParamError, SubComponent
from sst_cdma.engine.kernel import LinkEnd, SimulationError, Simulator
from sst_cdma.engine.progress import PhaseClock
from sst_cdma.engine.statistics import StatisticError
from sst_cdma.engine.statistics.collector import StatisticsCollector

MAX_INIT_PHASES = 1000


def _resolved(element: Element) -> dict[str, Any]:
    """``element``'s entry in ``config.json``: name, type, resolved params and, as SST's
    configuration files write them, its subcomponents by slot."""
    out: dict[str, Any] = {"name": element.name, "type": element.type_name(),
                           "params": dict(element.params)}
    subs = [{"slot_name": slot, **_resolved(sub)}
            for slot, loaded in element.subcomponents.items() for sub in loaded]
    if subs:
        out["subcomponents"] = subs
    return out


class Simulation:
    """One simulation: the kernel, the components built from the graph, their link ends and
    the statistics collector. ``reports`` is where components leave results for the caller.
    ``record_all_statistics`` records every declared statistic in memory only, instead of what
    the graph enables and its output (see :class:`~sst_cdma.engine.statistics.collector.StatisticsCollector`).
    ``console`` is where the components and the console statistics print for the user
    (default: a buffer of the simulation's own, so that nothing is printed)."""

    def __init__(self, graph: ConfigGraph, output_directory: Optional[Path] = None,
                 console: Optional[IO[str]] = None, record_all_statistics: bool = False,
                 phases: Optional[PhaseClock] = None) -> None:
        self.graph = graph
        self.sim = Simulator()
        self.output_directory = output_directory
        #: where components print for the user (the runner's console, else a buffer)
        self.console: IO[str] = console if console is not None else io.StringIO()
        self.reports: dict[str, Any] = {}
        #: element name -> the typed result record it published (:meth:`Element.publish`)
        self.results: dict[str, Any] = {}
        #: the latest time an element declared the work the run reports on ended
        #: (:meth:`Element.declare_work_end`); the run's reported time and the statistics'
        #: SimTime (None: none declared, the simulation's end)
        self.work_end_ps: Optional[int] = None
        self.components: dict[str, Component] = {}
        self._ends: dict[tuple[str, str], LinkEnd] = {}
        self._ports: dict[str, list[str]] = {}  # component -> its connected ports
        self._peers: dict[tuple[str, str], tuple[str, str]] = {}  # (comp, port) -> far end
        self._by_name: dict[str, Element] = {}
        #: whether trace-writing elements write every event (False: a summary trace, as sweep
        #: points keep unless asked)
        self.full_trace = True
        base = output_directory if output_directory is not None else Path.cwd()
        out_type, out_params = graph.stat_output
        try:
            self.statistics = StatisticsCollector(self.sim, graph.stat_load_level, out_type,
                                               dict(out_params), base, self.console,
                                               record_all_statistics)
        except StatisticError as exc:
            raise ConfigError(str(exc), graph.source) from None
        #: the wall time of the run's phases (the runner's clock, which times the script too)
        self.phases = phases if phases is not None else PhaseClock()
        self.timing: dict[str, float] = self.phases.seconds

    # -- construction --------------------------------------------------------------------------
    def link_end(self, component: str, port: str) -> Optional[LinkEnd]:
        """The link end wired to ``component.port`` (None when the port is not connected)."""
        return self._ends.get((component, port))

    def peer(self, component: str, port: str) -> Optional[tuple[Element, str]]:
        """The element and port at the far end of the link on ``component.port`` (None when
        the port is not connected, or before every element is built)."""
        far = self._peers.get((component, port))
        if far is None or far[0] not in self._by_name:
            return None
        return self._by_name[far[0]], far[1]

    def connected_ports(self, component: str) -> list[str]:
        """Names of ``component``'s connected ports, sorted."""
        return sorted(self._ports.get(component, ()))

    def build(self) -> None:
        """Check the graph, create the links, construct every component."""
        with _no_cyclic_gc(), self.phases.active(), self.phases.phase("build_s"):
            self._build()

    def _build(self) -> None:
        self.graph.check()
        for link in self.graph.links.values():
            a, b = link.ends
            end_a, end_b = self.sim.make_link(link.name, a.port, self.graph.end_latency_ps(link, 0),  # type: ignore[arg-type]
                                              b.port, self.graph.end_latency_ps(link, 1))  # type: ignore[arg-type]
            self._ends[(a.component, a.port)] = end_a
            self._ends[(b.component, b.port)] = end_b
            self._ports.setdefault(a.component, []).append(a.port)
            self._ports.setdefault(b.component, []).append(b.port)
            self._peers[(a.component, a.port)] = (b.component, b.port)
            self._peers[(b.component, b.port)] = (a.component, a.port)
        self.statistics.configs = {}
        for cfg in self.graph.components.values():
            self.statistics.configs[cfg.name] = cfg
            for sub in cfg.subcomponents:
                self.statistics.configs[sub.name] = sub
        for cfg in self.graph.components.values():
            self.components[cfg.name] = self._construct(cfg)  # type: ignore[assignment]
        self._by_name = {el.name: el for el in self.elements()}
        for (comp, port), end in self._ends.items():
            if end.handler is None and end.peer is not None and not self._is_polled(comp, port):
                cfg = self.graph.element_config(comp)  # type: ignore[assignment]
                raise ConfigError(f"{comp}: port {port!r} is connected but the element never "
                                  "configures it", cfg.where if cfg else self.graph.source)

    def _is_polled(self, comp: str, port: str) -> bool:
        return (comp, port) in getattr(self._by_name.get(comp), "_polled_ports", ())

    def _construct(self, cfg: ConfigComponent, parent: Optional[Element] = None) -> Element:
        cls = cfg.element
        where = cfg.where
        try:
            if isinstance(cfg, ConfigSubComponent):
                if not issubclass(cls, SubComponent):
                    raise ConfigError(f"{cfg.type} is not a subcomponent", where)
                obj: Element = cls.__new__(cls)
                obj.parent = parent  # type: ignore[attr-defined]
            else:
                if not issubclass(cls, Component):
                    raise ConfigError(f"{cfg.type} is a subcomponent, not a component", where)
                obj = cls.__new__(cls)
            obj._pending_subs = cfg.subcomponents  # type: ignore[attr-defined]
            obj.__init__(self, cfg.name, cfg.params)  # type: ignore[misc]
            return obj
        except ConfigError as exc:
            if not exc.where:  # an element's own refusal: at the line that declared it
                exc.where = where
            raise
        except (ParamError, StatisticError, ValueError, LookupError) as exc:
            bad_param = next((k for k in cfg.params if repr(k) in str(exc)), None)
            raise ConfigError(str(exc), cfg.param_where.get(bad_param, where)
                              if bad_param else where) from None

    def build_subcomponents(self, parent: Element) -> dict[str, list[SubComponent]]:
        """Construct the subcomponents configured for ``parent`` (called from Element init),
        each checked against its slot's declaration; load a slot's default element where the
        configuration left it empty; refuse an empty required slot."""
        out: dict[str, list[SubComponent]] = {}
        owner = f"{parent.name} ({parent.type_name()})"
        slots = {slot.name: slot for slot in parent.SLOTS}
        for sub_cfg in sorted(getattr(parent, "_pending_subs", []),
                              key=lambda s: (s.slot, s.index)):
            slot = slots.get(sub_cfg.slot)
            if slot is None:
                raise ConfigError(f"{owner} has no subcomponent slot {sub_cfg.slot!r} (slots: "
                                  f"{', '.join(slots) or 'none'})", sub_cfg.where)
            refusal = slot_refusal(slot, owner, sub_cfg.element, sub_cfg.index)
            if refusal:
                raise ConfigError(refusal, sub_cfg.where)
            sub = self._construct(sub_cfg, parent)
            out.setdefault(sub_cfg.slot, []).append(sub)  # type: ignore[arg-type]
        parent_cfg = self.statistics.configs.get(parent.name)
        where = parent_cfg.where if parent_cfg is not None else ""
        for slot in parent.SLOTS:
            if slot.name in out:
                continue
            if slot.default:  # an anonymous subcomponent: its statistics enabled as its parent's
                cfg = ConfigSubComponent(name=f"{parent.name}:{slot.name}[0]", type=slot.default,
                                         where=where, slot=slot.name, index=0)
                if parent_cfg is not None:
                    self.statistics.configs[cfg.name] = parent_cfg
                out[slot.name] = [self._construct(cfg, parent)]  # type: ignore[list-item]
            elif slot.required:
                raise ConfigError(f"{owner}: slot {slot.name!r} is empty; it needs "
                                  f"{describe_slot(slot)}: "
                                  f"setSubComponent({slot.name!r}, TYPE)", where)
        return out

    def elements(self) -> list[Element]:
        """Every component and subcomponent, in construction order."""
        out: list[Element] = []
        for comp in self.components.values():
            out.append(comp)
            for subs in comp.subcomponents.values():
                out.extend(subs)
        return out

    # -- lifecycle -----------------------------------------------------------------------------
    def run(self, stop_at_ps: Optional[int] = None) -> None:
        """init phases, setup, the event loop, finish, then the statistics output."""
        with _no_cyclic_gc(), self.phases.active():
            self._run(stop_at_ps)

    def _run(self, stop_at_ps: Optional[int]) -> None:
        with self.phases.phase("setup_s"):
            self._init_and_setup()
        with self.phases.phase("run_s"):
            self.sim.run(stop_at_ps)
        with self.phases.phase("finish_s"):
            # Elements that summarise others (FINISH_LAST) see everyone else's results.
            for el in sorted(self.elements(), key=lambda e: getattr(e, "FINISH_LAST", False)):
                el.finish()
        with self.phases.phase("writing_s"):
            self.statistics.finish(self.reported_end_ps)
        self.sim.phase = "done"

    def _init_and_setup(self) -> None:
        """The init phases until no element sends, then every element's setup."""
        sim = self.sim
        elements = self.elements()
        sim.phase = "init"
        for phase in range(MAX_INIT_PHASES):
            sim._untimed_sent = 0
            for el in elements:
                self._located(el, el.init, phase)
            if sim._untimed_sent == 0:
                break
        else:
            raise SimulationError(f"init did not converge after {MAX_INIT_PHASES} phases")
        sim.phase = "setup"
        for el in elements:
            self._located(el, el.setup)
        try:
            self.statistics.start()
        except StatisticError as exc:  # its file cannot be opened as one of the run's own
            raise ConfigError(str(exc), self.graph.source) from None


    def resolved_config(self) -> dict[str, Any]:
        """Every component (and, under it, each subcomponent with its slot) with every param
        resolved (defaults included), every link and the statistics options: what
        ``config.json`` holds."""
        comps = [_resolved(comp) for comp in self.components.values()]
        graph = graph_to_json(self.graph)
        return {"components": comps, "links": graph["links"],
                "statistics_options": graph["statistics_options"]}

    @property
    def reported_end_ps(self) -> int:
        """The simulated time a run reports: the latest end of work an element declared
        (:meth:`Element.declare_work_end`), else when the last event ran."""
        return self.work_end_ps if self.work_end_ps is not None else self.sim.now

    def _located(self, el: Element, method: Any, *args: Any) -> None:
        """Call a lifecycle method; a ConfigError it raises without a location gets the line
        where the element was configured."""
        try:
            method(*args)
        except ConfigError as exc:
            if not exc.where:
                cfg = self.statistics.configs.get(el.name)
                exc.where = cfg.where if cfg is not None else self.graph.source
            raise


def warn(message: str) -> None:
    """A one-line warning on stderr."""
    print(f"sst: warning: {message}", file=sys.stderr)
