"""The element base classes: a component declares its params, ports and statistics once, in one
place (SST's ELI, gem5's typed params), and construction validates params against that
declaration. ``sst-info`` prints the same declarations.
"""
from __future__ import annotations

import decimal

import math
import re
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Sequence, TypeVar, \
    Union, overload

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record
from sst_cdma.engine.errors import ConfigError
from sst_cdma.engine.kernel import LinkEnd, Service, Simulator
from sst_cdma.engine.statistics import Statistic
from sst_cdma.engine.units import UnitAlgebra, UnitError

if TYPE_CHECKING:
    from typing_extensions import TypeForm  # an interface is a Protocol: abstract, never type[P]

    from sst_cdma.engine.simulation import Simulation

P = TypeVar("P")  # an interface (sst_cdma.engine.interfaces)
S = TypeVar("S", bound=Service)
E = TypeVar("E")  # what a scheduled callback receives

PARAM_KINDS = ("int", "float", "bool", "str", "time", "frequency", "bandwidth", "bytes")


class ParamError(ValueError):
    """A param is unknown, missing, does not parse, or is out of range."""


class ParamRuleError(ParamError):
    """A rule between an element's params is broken (:meth:`Element.check_params`).
    ``reason`` says which and why, without naming the element: the builder reports it as a
    fault of the options that set the params."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.reason = reason


_TRUE = ("1", "true", "yes", "on")


def _parse_int(raw: Any) -> int:
    """An int from an int, an integral float, or text such as ``12``, ``0x10`` or ``1e6``."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    try:
        return int(text, 0)
    except ValueError:
        # exactly, as written: 1e23 is 10**23, not the float nearest it (99999999999999991611392)
        try:
            number = decimal.Decimal(text)
        except decimal.InvalidOperation:
            raise ValueError(text) from None
        if not number.is_finite() or number.adjusted() > _MAX_INT_DIGITS:
            raise ValueError(f"{text!r} is not a whole number of at most {_MAX_INT_DIGITS} "
                             "digits") from None
        if number != number.to_integral_value():
            raise ValueError(text) from None
        return int(number)


#: the most digits a whole-number param may have (Python's own limit for reading one)
_MAX_INT_DIGITS = 4300

_FALSE = ("0", "false", "no", "off")
#: the largest ``bytes`` param: all a 64-bit address reaches (16 EiB)
MAX_BYTES = 2 ** 64
#: the longest simulated time: SST counts it in a 64-bit integer of core ticks (1 ps); the
#: most any ``time`` param may be
SIM_TIME_LIMIT_PS = 2**64 - 1
#: the slowest rate any non-zero ``bandwidth`` param takes, in B/s, and why (a codec's or a host
#: CPU's rate has its own floor beside it)
MIN_BANDWIDTH = 1e6
MIN_BANDWIDTH_WHY = ("no memory, link, drive or codec of a computer is slower than a USB 1.1 "
                     "port's 1.5 MB/s, and at 1 MB/s 80 GB, one accelerator's memory, would "
                     "already take 22 hours to move")
#: the largest count whose arithmetic stays exact where it meets a rate or a size: float64
#: holds every whole number up to 2**53 and skips some above it
MAX_EXACT_COUNT = 2 ** 53
MAX_EXACT_COUNT_WHY = ("a count the model multiplies in float64, which holds whole numbers "
                       "exactly only up to 2**53")
#: the smallest fraction of a peak (an efficiency) a param takes, and why
MIN_FRACTION = 1e-4
MIN_FRACTION_WHY = ("below 1e-4 of its peak, one lane of ten thousand, no kernel, memory or "
                    "link is at work, and the times it divides leave the simulated range")
_BASE_UNITS = {"time": " ps", "frequency": " Hz", "bandwidth": " B/s", "bytes": " B"}
#: how each quantity kind reads a value with units
_IN_BASE_UNITS: dict[str, Callable[[UnitAlgebra], Any]] = {
    "time": UnitAlgebra.to_picoseconds, "frequency": UnitAlgebra.to_hertz,
    "bandwidth": UnitAlgebra.to_bytes_per_second, "bytes": UnitAlgebra.to_bytes}
_QUANTITIES_SIZE = 1 << 12  # values with units kept: a system of thousands of GPUs repeats a few
#: (kind, text) -> the value in base units: exact arithmetic on fractions, the same for
#: every one of thousands of components given the same text
_quantities: dict[tuple[str, str], Any] = {}


@frozen_record
class Param(FrozenRecord):
    """One declared parameter. ``kind`` decides how the string from the config is read:
    ``time`` -> int ps, ``frequency`` -> Hz, ``bandwidth`` -> B/s, ``bytes`` -> int bytes,
    ``int``/``float``/``bool``/``str`` as named. ``default=None`` marks it required."""

    name: str
    kind: str
    default: Any
    doc: str
    choices: Optional[Sequence[Any]] = None
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    exclusive_minimum: bool = False
    #: an extra check of the parsed value: raises ValueError with the reason it is refused
    check: Optional[Callable[[Any], None]] = None
    #: why the minimum is what it is, and why the maximum: said with a value each refuses
    #: (every rate's floor, every count's and size's upper bound says why)
    why_minimum: str = ""
    why_maximum: str = ""

    @property
    def required(self) -> bool:
        """True when the param has no default."""
        return self.default is None

    def parse(self, raw: Any) -> Any:
        """Convert ``raw`` (usually a string from the topology) to this param's Python value."""
        kind = self.kind
        try:
            if kind == "str":
                value: Any = str(raw)
            elif kind == "bool":
                low = str(raw).strip().lower()
                if low not in _TRUE + _FALSE:
                    raise ParamError(f"{raw!r} is not a boolean (true/false, yes/no, on/off, 1/0)")
                value = low in _TRUE
            elif kind == "int":
                value = _parse_int(raw)
            elif kind == "float":
                value = float(str(raw).strip())
                if not math.isfinite(value):
                    raise ParamError(f"{raw!r} is not a finite number")
            elif kind in _IN_BASE_UNITS:
                key = (kind, str(raw))
                value = _quantities.get(key)
                if value is None:
                    value = _IN_BASE_UNITS[kind](UnitAlgebra(key[1]))
                    if len(_quantities) >= _QUANTITIES_SIZE:
                        _quantities.clear()
                    _quantities[key] = value
            else:
                raise ParamError(f"unknown param kind {kind!r}")
        except ParamError:
            raise
        except UnitError as exc:
            raise ParamError(str(exc)) from None
        except OverflowError:
            raise ParamError(f"{raw!r} is too large for a {kind}") from None
        except ValueError:
            raise ParamError(f"{raw!r} is not a valid {kind}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ParamError(f"{raw!r} is not a finite {kind}")
        if self.choices is not None and value not in self.choices:
            raise ParamError(f"{raw!r} is not one of {', '.join(map(str, self.choices))}")
        self._check_range(raw, value)
        _check_kind_range(kind, raw, value)
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as exc:
                raise ParamError(f"{raw!r}: {exc}") from None
        return value

    def _check_range(self, raw: Any, value: Any) -> None:
        """Refuse ``value`` outside ``minimum``/``maximum``, saying :attr:`why`."""
        if self.kind in ("str", "bool"):
            return
        unit = _BASE_UNITS.get(self.kind, "")
        if self.minimum is not None:
            if value < self.minimum or (self.exclusive_minimum and value == self.minimum):
                op = ">" if self.exclusive_minimum else ">="
                raise ParamError(f"{raw!r} must be {op} {_bound(self.minimum)}{unit}"
                                 + _because(self.why_minimum))
        if self.maximum is not None and value > self.maximum:
            raise ParamError(f"{raw!r} must be <= {_bound(self.maximum)}{unit}"
                             + _because(self.why_maximum))


def _because(why: str) -> str:
    """`` (why)``, or nothing without a reason."""
    return f" ({why})" if why else ""


def _bound(value: float) -> str:
    """A range's end as an error prints it: a whole number in full, others as ``%g``."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _check_kind_range(kind: str, raw: Any, value: Any) -> None:
    """The range every param of a quantity kind shares: a size within a 64-bit address space,
    a time within the simulation's range, a non-zero rate at least :data:`MIN_BANDWIDTH`."""
    if kind == "bytes" and value > MAX_BYTES:
        raise ParamError(f"{raw!r} is more than 2**64 B (16 EiB, all a 64-bit address "
                         "reaches)")
    if kind == "time" and value > SIM_TIME_LIMIT_PS:
        raise ParamError(f"{raw!r} is more than {SIM_TIME_LIMIT_PS} ps, about 213 days: the "
                         "simulated time is a 64-bit count of ps")
    if kind == "bandwidth" and 0 < value < MIN_BANDWIDTH:
        raise ParamError(f"{raw!r} is slower than {MIN_BANDWIDTH:g} B/s ({MIN_BANDWIDTH_WHY})")


@frozen_record
class Port(FrozenRecord):
    """One declared port. A name may hold ``%d`` for a numbered family (``port%d``).
    ``provides`` lists the interfaces (``sst_cdma.engine.interfaces``) the element offers to the
    peer on this port, which gets them with ``peer_provider``."""

    name: str
    doc: str
    required: bool = False
    provides: tuple[type, ...] = ()

    def matches(self, port: str) -> bool:
        """True when ``port`` is this port or a member of its ``%d`` family."""
        if "%d" not in self.name:
            return port == self.name
        pattern = re.escape(self.name).replace("%d", r"\d+")
        return re.fullmatch(pattern, port) is not None


@frozen_record
class StatisticSpec(FrozenRecord):
    """One declared statistic: its name, doc, units, data type and enable level (1 = always
    loaded once statistics are enabled at level 1 or more)."""

    name: str
    doc: str
    units: str = ""
    dtype: str = "u64"
    level: int = 1


@frozen_record
class SubComponentSlot(FrozenRecord):
    """A slot of a component that a subcomponent fills (``setSubComponent(slot, type)``), as
    SST's ``SST_ELI_DOCUMENT_SUBCOMPONENT_SLOTS`` declares one: its name and doc; ``accepts``,
    the subcomponent base class (the slot's interface) every element filling it derives from
    (None: any subcomponent), or the type of the element that is that class
    (``"library.Element"``, SST's way of naming an interface), found when a slot's filler is
    checked, so a component whose slot few runs fill need not import that element's module
    (:func:`sst_cdma.engine.library.slot_interface`); whether the component cannot work with the slot empty
    (``required``); the element type it loads itself when the configuration leaves the slot
    empty (``default``, SST's anonymous subcomponent); and whether it takes several
    subcomponents (``multiple``: slot numbers 0, 1, ...) or one."""

    name: str
    doc: str
    accepts: Optional[Union[type, str]] = None
    required: bool = False
    default: str = ""
    multiple: bool = False

    @property
    def interface(self) -> str:
        """The name of the interface the slot accepts (``SubComponent`` for any)."""
        if isinstance(self.accepts, str):
            return self.accepts.rpartition(".")[2]
        return self.accepts.__name__ if self.accepts is not None else "SubComponent"


@record
class StatisticEnable(Record):
    """How the configuration enabled a statistic: its type and params (rate, bins, ...)."""

    type_name: str = "sst.AccumulatorStatistic"
    params: dict = field(default_factory=dict)


class Element:
    """What components and subcomponents share: declarations, params, statistics, links."""

    PARAMS: ClassVar[Sequence[Param]] = ()
    PORTS: ClassVar[Sequence[Port]] = ()
    STATISTICS: ClassVar[Sequence[StatisticSpec]] = ()
    SLOTS: ClassVar[Sequence[SubComponentSlot]] = ()
    library: ClassVar[str] = ""
    element_name: ClassVar[str] = ""

    def __init__(self, simulation: "Simulation", name: str, params: Mapping[str, Any]) -> None:
        self.simulation = simulation
        self.sim: Simulator = simulation.sim
        self.name = name
        self.params = self.validate_params(params, where=f"{name} ({self.type_name()})")
        self._polled_ports: set[tuple[str, str]] = set()
        self.subcomponents: dict[str, list["SubComponent"]] = simulation.build_subcomponents(self)

    # -- declarations ------------------------------------------------------------------------
    @classmethod
    def type_name(cls) -> str:
        """``library.Element``."""
        return f"{cls.library}.{cls.element_name or cls.__name__}"

    @classmethod
    def description(cls) -> str:
        """The first line of the class docstring."""
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    @classmethod
    def validate_params(cls, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Parse ``given`` against the declaration; raise ParamError naming the param at fault."""
        declared = {p.name: p for p in cls.PARAMS}
        for key in given:
            if key not in declared:
                from difflib import get_close_matches  # only when a name is wrong

                close = get_close_matches(key, declared, n=3, cutoff=0.6)
                hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else \
                    f" (known: {', '.join(sorted(declared)) or 'none'})"
                raise ParamError(f"{where}: unknown parameter {key!r}{hint}")
        values: dict[str, Any] = {}
        for p in cls.PARAMS:
            if p.name in given:
                try:
                    values[p.name] = p.parse(given[p.name])
                except ParamError as exc:
                    raise ParamError(f"{where}: parameter {p.name!r}: {exc}") from None
            elif p.required:
                raise ParamError(f"{where}: required parameter {p.name!r} is missing "
                                 f"({p.doc})")
            else:
                values[p.name] = p.parse(p.default) if isinstance(p.default, str) \
                    and p.kind != "str" else p.default
        fault = cls.check_params(values, given)
        if fault:
            raise ParamRuleError(where, fault)
        return values

    @classmethod
    def check_params(cls, values: Mapping[str, Any], given: Mapping[str, Any]) -> Optional[str]:
        """The rules between this element's own params: the fault of the first one
        ``values`` (every param, parsed) break, in the caller's words
        (:func:`sst_cdma.engine.param_words.param_word`), else None. ``given`` holds the
        params as they were given (their text); :meth:`validate_params` asks, so every
        graph that builds the element, by hand or by the builder, is checked."""
        return None

    @classmethod
    def find_port(cls, port: str) -> Optional[Port]:
        """The declared port that ``port`` names, or None."""
        for decl in cls.PORTS:
            if decl.matches(port):
                return decl
        return None

    @classmethod
    def provided_interfaces(cls) -> tuple[type, ...]:
        """Every interface this element provides on some port, in declaration order."""
        out: list[type] = []
        for decl in cls.PORTS:
            for interface in decl.provides:
                if interface not in out:
                    out.append(interface)
        return tuple(out)

    @classmethod
    def find_statistic(cls, stat: str) -> Optional[StatisticSpec]:
        """The declared statistic called ``stat``, or None."""
        for decl in cls.STATISTICS:
            if decl.name == stat:
                return decl
        return None

    # -- services for the model ----------------------------------------------------------------
    def configure_link(self, port: str, handler: Optional[Callable[[Any], Any]] = None
                       ) -> Optional[LinkEnd]:
        """The link end connected to ``port`` with ``handler`` receiving its events; None when
        the port is not connected. A link without a handler is polled with ``recv()``."""
        if self.find_port(port) is None:
            raise ParamError(f"{self.name} ({self.type_name()}): configure_link on undeclared "
                             f"port {port!r}")
        end = self.simulation.link_end(self.name, port)
        if end is not None:
            end.handler = handler
            if handler is None:
                self._polled_ports.add((self.name, port))
        return end

    def connected_link(self, port: str, handler: Optional[Callable[[Any], Any]] = None
                       ) -> LinkEnd:
        """``configure_link`` for a port that is connected whenever the element runs: one
        declared ``required`` (the configuration refuses it unconnected) or one of
        :meth:`connected_ports`. Its link end, never None; an unconnected port raises
        ConfigError naming the element and the port."""
        end = self.configure_link(port, handler)
        if end is None:
            raise ConfigError(f"{self.name} ({self.type_name()}): port {port!r} is not "
                              "connected")
        return end

    def peer_provider(self, port: str, interface: TypeForm[P]) -> P:
        """The element at the far end of ``port``, as ``interface``: it must declare the
        interface on its own port (``Port(..., provides=...)``) and implement it. Ask from
        ``init()`` on; a port that is undeclared or not connected, or a peer that does not
        provide it, raises ``InterfaceError`` (a ConfigError) naming both elements, the ports
        and the interface."""
        from sst_cdma.engine.interfaces import resolve_peer

        return resolve_peer(self, port, interface)

    def service(self, kind: type[S]) -> S:
        """The simulation's instance of service ``kind`` (e.g. ``FlowNetwork``), shared by
        every element that asks for it."""
        return self.sim.service(kind)

    @overload
    def schedule_at(self, time_ps: int, handler: Callable[[None], object]) -> None: ...

    @overload
    def schedule_at(self, time_ps: int, handler: Callable[[E], object], event: E) -> None: ...

    def schedule_at(self, time_ps: int, handler: Callable[[Any], object],
                    event: Any = None) -> None:
        """Call ``handler(event)`` at simulated time ``time_ps`` (absolute picoseconds, now or
        later; events due at the same time run in the order they were scheduled). A time in
        the past raises SimulationError."""
        self.sim.schedule(time_ps, handler, event)

    def refuse_event(self, event: Any) -> None:
        """Handler for ports that carry no timed events (wiring-only links): an event there is
        a modelling error."""
        from sst_cdma.engine.kernel import SimulationError

        raise SimulationError(f"{self.name}: unexpected event {event!r}")

    def connected_ports(self) -> list[str]:
        """Names of this element's ports that the configuration connected, sorted."""
        return self.simulation.connected_ports(self.name)

    def configure_self_link(self, name: str, latency: str | int,
                            handler: Callable[[Any], Any]) -> LinkEnd:
        """A link from this element to itself, e.g. for timers."""
        lat = latency if isinstance(latency, int) else UnitAlgebra(latency).to_picoseconds()
        end = self.sim.make_self_link(f"{self.name}.{name}", lat)
        end.handler = handler
        return end

    def register_clock(self, frequency: str | int, handler: Callable[[int], Any]) -> None:
        """Call ``handler(cycle)`` at ``frequency`` (e.g. ``"1GHz"`` or a period in ps) until
        it returns True."""
        period = frequency if isinstance(frequency, int) else \
            UnitAlgebra(frequency).to_picoseconds()
        self.sim.register_clock(period, handler)

    def register_statistic(self, stat: str, subid: str = "") -> Statistic:
        """The statistic object for a declared statistic: a live one when the configuration
        enabled it at a sufficient load level, else a NullStatistic that records nothing."""
        decl = self.find_statistic(stat)
        if decl is None:
            raise ParamError(f"{self.name} ({self.type_name()}): register_statistic on "
                             f"undeclared statistic {stat!r}")
        return self.simulation.statistics.register(self, decl, subid)

    def subcomponent(self, slot: str) -> Optional["SubComponent"]:
        """The first subcomponent loaded into ``slot``, or None."""
        subs = self.subcomponents.get(slot)
        return subs[0] if subs else None

    # -- lifecycle hooks (override as needed) ---------------------------------------------------
    def init(self, phase: int) -> None:
        """Untimed init phase ``phase`` (0, 1, ...) exchanging data with ``send_untimed``."""

    def setup(self) -> None:
        """Called once after init, before the first event."""

    def finish(self) -> None:
        """Called once after the run, before statistics are written."""

    # -- results -------------------------------------------------------------------------------
    def publish(self, record: Any) -> None:
        """Leave this element's typed result record (a dataclass of what it measured) for
        elements that compose results, such as a reporter, and for the caller of the run."""
        self.simulation.results[self.name] = record

    def declare_work_end(self, time_ps: int) -> None:
        """Declare that the work of this element that the run reports on ended at ``time_ps``.
        The run reports the latest time any element declared as its simulated time, and the
        statistics carry it as SimTime, however long other elements go on running (elements
        that only compute a comparison, say, declare nothing)."""
        current = self.simulation.work_end_ps
        self.simulation.work_end_ps = time_ps if current is None else max(current, time_ps)


class Component(Element):
    """Base class of every component. Subclasses declare ``PARAMS``, ``PORTS``, ``STATISTICS``
    (and ``SLOTS``) and read validated values from ``self.params``."""

    def register_as_primary(self) -> None:
        """Make this a primary component: the run ends once all primaries allow it."""
        self.sim.register_primary(self.name)

    def primary_ok_to_end(self) -> None:
        """This primary component has finished its work."""
        self.sim.primary_ok_to_end(self.name)

    def primary_do_not_end(self) -> None:
        """This primary component has work again."""
        self.sim.primary_do_not_end(self.name)


class SubComponent(Element):
    """Base class of subcomponents: loaded into a parent's slot, sharing its links and stats
    namespace (its statistics appear under the parent's name)."""

    parent: Optional[Element] = None

    @property
    def owner(self) -> Element:
        """The element whose slot holds this subcomponent (:attr:`parent`, which the simulation
        sets before ``__init__`` runs); one built outside a slot raises ConfigError."""
        if self.parent is None:
            raise ConfigError(f"{self.name} ({self.type_name()}): a subcomponent works in a "
                              "component's slot, and this one is in none")
        return self.parent
