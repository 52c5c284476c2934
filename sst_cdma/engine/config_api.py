"""The ``sst`` module a topology script imports (``import sst``), with SST-core 16's API.

Every call records into the current :class:`~sst_cdma.engine.config.ConfigGraph`; the runner gives each
run a fresh one, so two runs in one process never share state. Faults raise
:class:`~sst_cdma.engine.config.ConfigError` tagged with the script line that made the call.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from sst_cdma.engine.config import (ENABLE_ALL, PROGRAM_OPTION_ALIASES, PROGRAM_OPTIONS, ConfigComponent,
                     ConfigError, ConfigGraph, ConfigLink, ConfigSubComponent, LinkEndConfig,
                     program_option_fault)
from sst_cdma.engine.element import ParamError, StatisticEnable
from sst_cdma.engine.param_words import speak_params
from sst_cdma.engine.library import ElementNotFound, describe_slot, find_element, slot_refusal
from sst_cdma.engine.statistics import OUTPUT_TYPES
from sst_cdma.engine.units import UnitAlgebra

__all__ = [
    "Component", "SubComponent", "Link", "UnitAlgebra", "setProgramOption", "setProgramOptions",
    "getProgramOptions", "pushNamePrefix", "popNamePrefix", "setStatisticOutput",
    "setStatisticOutputOption", "setStatisticOutputOptions", "setStatisticLoadLevel",
    "enableAllStatisticsForAllComponents", "enableAllStatisticsForComponentName",
    "enableAllStatisticsForComponentType", "enableStatisticForComponentName",
    "enableStatisticForComponentType", "enableStatisticsForComponentName",
    "enableStatisticsForComponentType", "findComponentByName", "getMPIRankCount",
    "getMyMPIRank", "getThreadCount", "setThreadCount", "addGlobalParam", "addGlobalParams",
    "addSharedParam", "addSharedParams", "setStatisticLoadLevelForComponentName",
    "setStatisticLoadLevelForComponentType", "StatisticGroup", "StatisticOutput", "Statistic",
    "exit", "getElapsedExecutionTime", "getLocalMemoryUsage",
]

_graph = ConfigGraph()
_prefixes: list[str] = []
_script = ""
_started = time.perf_counter()


def _reset(graph: ConfigGraph, script: str = "") -> None:
    """Start recording into ``graph`` for ``script`` (called by the runner before each run)."""
    global _graph, _script, _started
    _graph = graph
    _script = script
    _started = time.perf_counter()
    _prefixes.clear()
    speak_params()  # the builder speaks in flags again once it parses a command line


def _notice(message: str) -> None:
    """A warning the run prints once (sst-cdma accepted a call but acts differently)."""
    if message not in _graph.notices:
        _graph.notices.append(message)


def _where(depth: int = 2) -> str:
    """``file:line`` of the statement that called into this module: the topology script's own
    line when the call came through helper modules, else the nearest caller."""
    frame = sys._getframe(depth)
    nearest = None
    while frame is not None:
        if frame.f_globals.get("__name__") != __name__:
            if nearest is None:
                nearest = frame
            if _script and frame.f_code.co_filename == _script:
                return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return f"{nearest.f_code.co_filename}:{nearest.f_lineno}" if nearest is not None else ""


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _stat_params(params: Optional[Mapping[str, Any]]) -> StatisticEnable:
    p = {str(k): _text(v) for k, v in (params or {}).items()}
    type_name = p.pop("type", "sst.AccumulatorStatistic")
    return StatisticEnable(type_name, p)


class _Configurable:
    """What Component and SubComponent share."""

    _config: ConfigComponent
    _unknown = False  # the element type is unknown (reported after the structural check)

    def addParam(self, key: str, value: Any) -> None:
        """Set one param; an unknown name or a value that does not parse is an error here."""
        where = _where()
        key = str(key)
        text = _text(value)
        if self._unknown:
            self._config.params[key] = text
            self._config.param_where[key] = where
            return
        cls = self._config.element
        decl = {p.name: p for p in cls.PARAMS}
        label = f"{self._config.name} ({self._config.type})"
        try:
            if key in decl:
                decl[key].parse(text)
            else:
                cls.validate_params({key: text}, where=label)  # raises, naming close matches
        except ParamError as exc:
            msg = f"{label}: parameter {key!r}: {exc}" if key in decl else str(exc)
            raise ConfigError(msg, where) from None
        self._config.params[key] = text
        self._config.param_where[key] = where

    def addParams(self, params: Mapping[str, Any]) -> None:
        """Set several params (see :meth:`addParam`)."""
        for key, value in params.items():
            self.addParam(key, value)

    def setSubComponent(self, slot: str, type: str, slot_num: int = 0) -> "SubComponent":
        """Load a subcomponent of ``type`` into ``slot``."""
        where = _where()
        cls = self._config.element if not self._unknown else None
        owner = f"{self._config.name} ({self._config.type})"
        declared = next((s for s in cls.SLOTS if s.name == slot), None) if cls else None
        if cls is not None and declared is None:
            known = ", ".join(s.name for s in cls.SLOTS) or "none"
            raise ConfigError(f"{owner} has no subcomponent slot {slot!r} (slots: {known})",
                              where)
        try:
            element = find_element(type)
        except ElementNotFound as exc:
            raise ConfigError(str(exc), where) from None
        if declared is not None:
            refusal = slot_refusal(declared, owner, element, slot_num)
            if refusal:
                raise ConfigError(refusal, where)
        name = f"{self._config.name}:{slot}[{slot_num}]"
        taken = next((s for s in self._config.subcomponents if s.name == name), None)
        if taken is not None:
            accepts = f"; it takes {describe_slot(declared)}" if declared else ""
            raise ConfigError(f"{owner}: slot {slot}[{slot_num}] is already filled (with "
                              f"{taken.type}, {taken.where}){accepts}", where)
        sub = ConfigSubComponent(name=name, type=type, where=where, slot=slot, index=slot_num)
        self._config.subcomponents.append(sub)
        return SubComponent(sub, self)

    def enableStatistics(self, stats: Union[str, Sequence[str]],
                         params: Optional[Mapping[str, Any]] = None) -> None:
        """Enable the named statistics (subject to the statistic load level)."""
        where = _where()
        names = [stats] if isinstance(stats, str) else list(stats)
        for stat in names:
            if not self._unknown and self._config.element.find_statistic(stat) is None:
                known = ", ".join(s.name for s in self._config.element.STATISTICS) or "none"
                raise ConfigError(f"{self._config.name} ({self._config.type}) has no statistic "
                                  f"{stat!r} (statistics: {known})", where)
            self._config.statistics[stat] = _stat_params(params)

    def enableStatistic(self, stat: str, params: Optional[Mapping[str, Any]] = None
                        ) -> "Statistic":
        """Enable one statistic; returns it as an :class:`Statistic` (its params can be added
        to later)."""
        self.enableStatistics([str(stat)], params)
        return Statistic(self, str(stat))

    def createStatistic(self, stat: str, params: Optional[Mapping[str, Any]] = None
                        ) -> "Statistic":
        """SST's explicit statistic of this element (enabled, as SST's is once created)."""
        return self.enableStatistic(stat, params)

    def setStatistic(self, stat: str, statistic: "Statistic", subid: str = "") -> None:
        """Bind ``statistic`` (from :meth:`createStatistic`) to this element's ``stat``. One
        statistic shared by several elements is refused: each element keeps its own."""
        where = _where()
        if not isinstance(statistic, Statistic):
            raise ConfigError(f"{self._config.name}: setStatistic({stat!r}, ...) takes an "
                              "sst.Statistic (from createStatistic)", where)
        if statistic.owner is not self._config or statistic.name != str(stat):
            raise ConfigError(f"{self._config.name}: setStatistic({stat!r}): statistic "
                              f"{statistic.name!r} of {statistic.owner.name} cannot be shared "
                              "here (each element keeps its own statistic of a name)", where)

    def addSharedParamSet(self, set_name: str) -> None:
        """Take the params of shared set ``set_name`` (``sst.addSharedParam(s)``), as they are
        when the script ends; the element's own params win."""
        if str(set_name) not in self._config.shared_sets:
            self._config.shared_sets.append(str(set_name))

    addGlobalParamSet = addSharedParamSet

    def addPortModule(self, port: str, type: str, params: Optional[Mapping[str, Any]] = None
                      ) -> None:
        """Refused: no element library here provides port modules."""
        raise ConfigError(f"{self._config.name}: addPortModule({port!r}, {type!r}): port "
                          "modules are not supported (no element library here provides one)",
                          _where())

    def enableAllStatistics(self, params: Optional[Mapping[str, Any]] = None) -> None:
        """Enable every statistic of this element (subject to the load level)."""
        self._config.statistics[ENABLE_ALL] = _stat_params(params)

    def setStatisticLoadLevel(self, level: int, apply_to_children: bool = False) -> None:
        """Load level for this element only (overrides the global one); 255 is SST's "not
        set" (the global level applies), as SST's generated scripts write it."""
        value = None if int(level) == 255 else int(level)
        self._config.stat_load_level = value
        if apply_to_children:
            for sub in self._config.subcomponents:
                sub.stat_load_level = value

    def getFullName(self) -> str:
        """The element's full name."""
        return self._config.name

    def getType(self) -> str:
        """``library.Element``."""
        return self._config.type

    def setRank(self, rank: int, thread: int = 0) -> None:
        """As SST's single-rank run: every component runs on rank 0, thread 0 (another rank
        or thread is said once at run time)."""
        if int(rank) != 0 or int(thread) != 0:
            _notice(f"setRank({int(rank)}, {int(thread)}) ({self._config.name} and any other): "
                    "this run has one rank and one thread; every component runs on rank 0, "
                    "thread 0, as SST's single-rank partitioner places them")

    def setCoordinates(self, x: float, y: float = 0.0, z: float = 0.0) -> None:
        """Record the element's coordinates (``--output-config`` writes them; as in SST's
        single-rank run nothing else reads them)."""
        self._config.coordinates = (float(x), float(y), float(z))

    def setWeight(self, weight: float) -> None:
        """Partitioning weight: as in SST's single-rank run, where no partitioner reads it,
        it changes nothing (it must be a number)."""
        float(weight)

    def __repr__(self) -> str:
        return f"<sst.{type(self).__name__} {self._config.name} ({self._config.type})>"


class Component(_Configurable):
    """``sst.Component(name, "lib.Element")``: a component in the configuration graph."""

    def __init__(self, name: str, type: str) -> None:
        where = _where()
        full = ".".join([*_prefixes, str(name)])
        try:
            find_element(type)
        except ElementNotFound as exc:
            # SST looks element types up when it builds components, after its structural
            # check: record the fault, accept the rest of this component's configuration
            _graph.deferred_errors.append(ConfigError(str(exc), where))
            self._unknown = True
        self._config = ConfigComponent(name=full, type=type, where=where)
        _graph.add_component(self._config)

    def addLink(self, link: "Link", port: str, latency: Any = None) -> None:
        """Attach ``link`` to ``port`` (with an optional latency for this end)."""
        link._attach(self, port, latency, _where())


class SubComponent(_Configurable):
    """A subcomponent returned by ``setSubComponent``."""

    def __init__(self, config: ConfigSubComponent, parent: _Configurable) -> None:
        self._config = config
        self._parent = parent

    def addLink(self, link: "Link", port: str, latency: Any = None) -> None:
        """Attach ``link`` to one of the subcomponent's ports."""
        link._attach(self, port, latency, _where())


class Link:
    """``sst.Link(name[, latency])``: a link with two ends."""

    def __init__(self, name: str, latency: Any = None) -> None:
        full = ".".join([*_prefixes, str(name)])
        self._config = ConfigLink(full, None if latency is None else _text(latency),
                                  where=_where())
        self.name = full
        _graph.declare_link(self._config)

    def _attach(self, comp: _Configurable, port: str, latency: Any, where: str) -> None:
        end = LinkEndConfig(comp._config.name, str(port), None if latency is None
                            else _text(latency))
        if not self._config.where:
            self._config.where = where
        _graph.add_link_end(self._config, end, where)

    def connect(self, end0: tuple, end1: tuple) -> None:
        """Connect ``(component, port[, latency])`` to ``(component, port[, latency])``."""
        where = _where()
        for end in (end0, end1):
            if not isinstance(end, tuple) or len(end) not in (2, 3) or \
                    not isinstance(end[0], _Configurable):
                raise ConfigError(f"link {self.name!r}: connect() takes tuples "
                                  "(component, port[, latency])", where)
        self._config.where = where
        for end in (end0, end1):
            self._attach(end[0], end[1], end[2] if len(end) == 3 else None, where)

    def setNoCut(self) -> None:
        """Mark the link as not to be cut by a partitioner (kept for compatibility)."""
        self._config.no_cut = True

    def setNonLocal(self, *args: Any) -> None:
        """Refused: a non-local link reaches another rank, and this run has one."""
        raise ConfigError(f"link {self.name!r}: setNonLocal: this run has one rank, so no link "
                          "can reach another", _where())

    def __repr__(self) -> str:
        return f"<sst.Link {self.name}>"


# -- program options -----------------------------------------------------------------------------
def setProgramOption(option: str, value: Any) -> None:
    """Set an ``sst`` command-line option from the script (the command line wins)."""
    option = str(option).lstrip("-")
    option = PROGRAM_OPTION_ALIASES.get(option, option)
    if option not in PROGRAM_OPTIONS:
        raise ConfigError(f"unknown program option {option!r}", _where())
    fault = program_option_fault(option, _text(value))
    if fault:
        raise ConfigError(f"setProgramOption: {fault}", _where())
    _graph.program_options[option] = _text(value)


def setProgramOptions(options: Mapping[str, Any]) -> None:
    """Set several program options."""
    for key, value in options.items():
        setProgramOption(key, value)


def getProgramOptions() -> dict[str, str]:
    """The program options in force (defaults, then the script's, then the command line's)."""
    out = dict(PROGRAM_OPTIONS)
    out.update(_graph.program_options)
    return out


def pushNamePrefix(prefix: str) -> None:
    """Prefix later component and link names with ``prefix.``."""
    _prefixes.append(str(prefix))


def popNamePrefix() -> None:
    """Drop the innermost name prefix."""
    if _prefixes:
        _prefixes.pop()


def current_graph() -> ConfigGraph:
    """The configuration graph the running script is building (not part of SST's API: for
    helpers such as :func:`components.baselines.add_baselines` that read or extend it)."""
    return _graph


def caller_location() -> str:
    """``file:line`` of the topology script statement that led to the current call, for
    errors raised by such helpers."""
    return _where(3)


# -- statistics ----------------------------------------------------------------------------------
def setStatisticOutput(type: str, params: Optional[Mapping[str, Any]] = None) -> None:
    """Choose the statistic output (``sst.statOutputCSV``, ...)."""
    if type not in OUTPUT_TYPES:
        raise ConfigError(f"unknown statistic output {type!r} (one of "
                          f"{', '.join(OUTPUT_TYPES)})", _where())
    _graph.stat_output = (type, {str(k): _text(v) for k, v in (params or {}).items()})


def setStatisticOutputOption(key: str, value: Any) -> None:
    """Set one param of the statistic output."""
    _graph.stat_output[1][str(key)] = _text(value)


def setStatisticOutputOptions(options: Mapping[str, Any]) -> None:
    """Set several params of the statistic output."""
    for key, value in options.items():
        setStatisticOutputOption(key, value)


def setStatisticLoadLevel(level: int) -> None:
    """Global statistic load level: a statistic loads only if its enable level is <= this
    (0, the default, loads none)."""
    _graph.stat_load_level = int(level)


def _wrapped(comp: Any) -> Component:
    """The script's handle on an existing component's configuration."""
    wrapper = Component.__new__(Component)
    wrapper._config = comp
    return wrapper


def _components_matching(name: Optional[str] = None, type: Optional[str] = None
                         ) -> Iterable[Component]:
    for comp in _graph.components.values():
        if (name is None or comp.name == name) and (type is None or comp.type == type):
            yield _wrapped(comp)


def enableAllStatisticsForAllComponents(params: Optional[Mapping[str, Any]] = None) -> None:
    """Enable all statistics of every component that exists now."""
    for comp in _components_matching():
        comp.enableAllStatistics(params)


def enableAllStatisticsForComponentName(name: str,
                                        params: Optional[Mapping[str, Any]] = None) -> None:
    """Enable all statistics of the component called ``name``."""
    comps = list(_components_matching(name=name))
    if not comps:
        raise ConfigError(f"no component named {name!r}", _where())
    for comp in comps:
        comp.enableAllStatistics(params)


def enableAllStatisticsForComponentType(type: str,
                                        params: Optional[Mapping[str, Any]] = None) -> None:
    """Enable all statistics of every existing component of ``type``."""
    for comp in _components_matching(type=type):
        comp.enableAllStatistics(params)


def enableStatisticsForComponentName(name: str, stats: Union[str, Sequence[str]],
                                     params: Optional[Mapping[str, Any]] = None) -> None:
    """Enable the named statistics of the component called ``name``."""
    comps = list(_components_matching(name=name))
    if not comps:
        raise ConfigError(f"no component named {name!r}", _where())
    for comp in comps:
        comp.enableStatistics(stats, params)


def enableStatisticsForComponentType(type: str, stats: Union[str, Sequence[str]],
                                     params: Optional[Mapping[str, Any]] = None) -> None:
    """Enable the named statistics of every existing component of ``type``."""
    for comp in _components_matching(type=type):
        comp.enableStatistics(stats, params)


enableStatisticForComponentName = enableStatisticsForComponentName
enableStatisticForComponentType = enableStatisticsForComponentType


def findComponentByName(name: str) -> Optional[Component]:
    """The component called ``name``, or None (a lookup: a topology finds each of its
    thousands of GPUs so)."""
    comp = _graph.component(name)
    return None if comp is None else _wrapped(comp)


def getMPIRankCount() -> int:
    """Always 1: this simulator runs on a single rank."""
    return 1


def getMyMPIRank() -> int:
    """Always 0."""
    return 0


def getThreadCount() -> int:
    """Always 1."""
    return 1


def setThreadCount(count: int) -> None:
    """SST's thread count (as ``-n``); the kernel runs one thread, which the run says."""
    setProgramOption("num-threads", int(count))


def exit() -> None:
    """End the script and ``sst`` with a failure status, as SST's ``sst.exit()`` does."""
    raise SystemExit(255)


def getElapsedExecutionTime() -> UnitAlgebra:
    """Wall time since the script started, in seconds."""
    return UnitAlgebra(f"{time.perf_counter() - _started:.6f} s")


def getLocalMemoryUsage() -> UnitAlgebra:
    """This process's peak resident memory, in bytes."""
    import resource

    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return UnitAlgebra(f"{kib * 1024} B")


def addSharedParam(set_name: str, key: str, value: Any) -> None:
    """Add ``key = value`` to shared parameter set ``set_name``; elements take it with
    ``addSharedParamSet``."""
    _graph.shared_params.setdefault(str(set_name), {})[str(key)] = _text(value)


def addSharedParams(set_name: str, params: Mapping[str, Any]) -> None:
    """Add several params to shared set ``set_name``."""
    for key, value in params.items():
        addSharedParam(set_name, key, value)


addGlobalParam = addSharedParam
addGlobalParams = addSharedParams


def _set_level(comps: list[Component], level: int, apply_to_children: bool) -> None:
    for comp in comps:
        comp.setStatisticLoadLevel(level, apply_to_children)


def setStatisticLoadLevelForComponentName(name: str, level: int,
                                          apply_to_children: bool = False) -> None:
    """Load level of the component called ``name`` (and its subcomponents, if asked)."""
    comps = list(_components_matching(name=name))
    if not comps:
        raise ConfigError(f"no component named {name!r}", _where())
    _set_level(comps, level, apply_to_children)


def setStatisticLoadLevelForComponentType(type: str, level: int,
                                          apply_to_children: bool = False) -> None:
    """Load level of every existing component of ``type``."""
    _set_level(list(_components_matching(type=type)), level, apply_to_children)


class Statistic:
    """An enabled statistic of an element (``enableStatistic``/``createStatistic``); its
    params can be added to."""

    def __init__(self, element: _Configurable, name: str) -> None:
        self.owner = element._config
        self.name = name

    def addParam(self, key: str, value: Any) -> None:
        """Add one param (``rate``, ``type``, bins...)."""
        enable = self.owner.statistics[self.name]
        if str(key) == "type":
            enable.type_name = _text(value)
        else:
            enable.params[str(key)] = _text(value)

    def addParams(self, params: Mapping[str, Any]) -> None:
        """Add several params."""
        for key, value in params.items():
            self.addParam(key, value)

    def __repr__(self) -> str:
        return f"<sst.Statistic {self.owner.name}.{self.name}>"


class StatisticOutput:
    """``sst.StatisticOutput(type, params)``: an output for a :class:`StatisticGroup`."""

    def __init__(self, type: str, params: Optional[Mapping[str, Any]] = None) -> None:
        if type not in OUTPUT_TYPES:
            raise ConfigError(f"unknown statistic output {type!r} (one of "
                              f"{', '.join(OUTPUT_TYPES)})", _where())
        self.type = type
        self.params = {str(k): _text(v) for k, v in (params or {}).items()}

    def addParam(self, key: str, value: Any) -> None:
        """Add one param."""
        self.params[str(key)] = _text(value)

    def addParams(self, params: Mapping[str, Any]) -> None:
        """Add several params."""
        for key, value in params.items():
            self.addParam(key, value)


class StatisticGroup:
    """``sst.StatisticGroup(name)``: statistics of several components dumped together every
    ``setFrequency`` period. sst-cdma enables each statistic on each component with that rate
    and writes the group to the simulation's one output (a group output that differs from it
    is refused)."""

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self.components: list[_Configurable] = []
        self.statistics: dict[str, dict[str, str]] = {}
        self.frequency: Optional[str] = None

    def addComponent(self, comp: _Configurable) -> None:
        """Add a component (its statistics of this group are enabled)."""
        self.components.append(comp)
        self._apply()

    def addStatistic(self, stat: str, params: Optional[Mapping[str, Any]] = None) -> None:
        """Add a statistic by name, with its params."""
        self.statistics[str(stat)] = {str(k): _text(v) for k, v in (params or {}).items()}
        self._apply()

    def setFrequency(self, frequency: Any) -> None:
        """Dump the group every ``frequency`` (a time, or a rate)."""
        self.frequency = _text(frequency)
        self._apply()

    def setOutput(self, output: StatisticOutput) -> None:
        """The group's output: it must be the simulation's (sst.setStatisticOutput)."""
        current = _graph.stat_output
        if (output.type, output.params) != (current[0], current[1]):
            raise ConfigError(f"statistic group {self.name!r}: an output of its own "
                              f"({output.type}) is not supported; every statistic "
                              f"goes to the one output set with sst.setStatisticOutput "
                              f"({current[0]})", _where())

    def _apply(self) -> None:
        for comp in self.components:
            for stat, params in self.statistics.items():
                given = dict(params, **({"rate": self.frequency} if self.frequency else {}))
                comp.enableStatistics([stat], given)
