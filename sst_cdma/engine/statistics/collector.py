"""Decides which statistics load (enable rules and load levels), schedules periodic dumps
(``rate``) and feeds every dump to the configured output and to an in-memory table (values fitted
to their field types as the output writes them)."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Sequence

from sst_cdma.engine.kernel import STATISTIC_PRIORITY, Simulator
from sst_cdma.engine.units import UnitAlgebra, UnitError
from sst_cdma.engine.element import StatisticEnable
from sst_cdma.engine.statistics.outputs import MemoryOnlyOutput, StatisticOutput, fit_value, format_value, make_output
from sst_cdma.engine.statistics.reader import typed_table
from sst_cdma.engine.statistics.table_csv import table_csv
from sst_cdma.engine.statistics.types import NullStatistic, Statistic, StatisticError, make_statistic

if TYPE_CHECKING:
    from sst_cdma.engine.config import ConfigComponent
    from sst_cdma.engine.element import Element, StatisticSpec

ENABLE_ALL = "*"
CONTROL_PARAMS = {"rate", "resetonoutput", "startat", "stopat"}
TYPE_PARAMS = {"minvalue", "binwidth", "numbins", "includeoutofbounds"}
CSV_HEAD = ["ComponentName", "StatisticName", "StatisticSubId", "StatisticType", "SimTime", "Rank"]


class StatisticsCollector:
    """Registers statistics for components and writes them out."""

    def __init__(self, sim: Simulator, global_level: int, output_type: str,
                 output_params: dict[str, str], base_dir: Path,
                 console: Optional[IO[str]] = None, record_all: bool = False) -> None:
        """``record_all``: record every statistic the components declare, whatever the
        configuration enabled and at any load level, into the in-memory table only (no
        output)."""
        self.sim = sim
        self.global_level = global_level
        self.record_all = record_all
        self.output: StatisticOutput = (MemoryOnlyOutput({}, base_dir) if record_all else
                                        make_output(output_type, output_params, base_dir,
                                                    console))
        self.configs: dict[str, "ConfigComponent"] = {}
        self.stats: list[Statistic] = []
        self._keys: set[tuple[str, str, str]] = set()
        self._periodic: dict[int, list[Statistic]] = {}
        self._reset_on_output: set[int] = set()
        self.suppressed_by_level = 0
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []
        self._wrapped: set[tuple[str, str]] = set()
        self._started = False

    def register(self, element: "Element", decl: "StatisticSpec", subid: str = "") -> Statistic:
        """The statistic ``element`` asked for: live when enabled at a sufficient load level."""
        cfg = self.configs.get(element.name)
        enable = None
        if cfg is not None:
            enable = cfg.statistics.get(decl.name) or cfg.statistics.get(ENABLE_ALL)
        if self.record_all:
            enable = StatisticEnable()
        if enable is None:
            return NullStatistic(element.name, decl.name, subid, decl.dtype)
        level = cfg.stat_load_level if cfg is not None and cfg.stat_load_level is not None \
            else self.global_level
        if not self.record_all and (level <= 0 or decl.level > level):
            self.suppressed_by_level += 1
            return NullStatistic(element.name, decl.name, subid, decl.dtype)
        key = (element.name, decl.name, subid)
        if key in self._keys:
            raise StatisticError(f"{element.name}: statistic {decl.name!r} (subid {subid!r}) "
                                 "registered twice")
        params = {}
        for k, v in enable.params.items():
            low = k.lower()
            if low not in CONTROL_PARAMS | TYPE_PARAMS:
                raise StatisticError(f"{element.name}.{decl.name}: unknown statistic parameter "
                                     f"{k!r}")
            if low in TYPE_PARAMS:
                params[k] = v
        stat = make_statistic(enable.type_name, element.name, decl.name, subid, decl.dtype,
                              params)
        if not stat.enabled:
            return stat
        self._keys.add(key)
        self.stats.append(stat)
        if self._started:  # registered during the run (SST's dynamic statistics)
            self._late(stat)
        lower = {k.lower(): v for k, v in enable.params.items()}
        rate = lower.get("rate", "0ns")
        try:
            period = UnitAlgebra(rate).to_picoseconds() if rate not in ("0", "0ns") else 0
        except UnitError as exc:
            raise StatisticError(f"{element.name}.{decl.name}: rate {rate!r}: {exc}") from None
        if period < 0:
            raise StatisticError(f"{element.name}.{decl.name}: rate {rate!r} is negative (a "
                                 "dump period, or 0 for one dump at the end)")
        if period > 0:
            self._periodic.setdefault(period, []).append(stat)
            if str(lower.get("resetonoutput", "0")).lower() in ("1", "true", "yes", "on"):
                self._reset_on_output.add(id(stat))
        return stat

    def _late(self, stat: Statistic) -> None:
        """A statistic registered after the output's header was written: its fields join the
        in-memory table; a field the header lacks is left out of the file, which is said."""
        missing = [f"{n}.{t}" for n, t, _ in stat.fields() if f"{n}.{t}" not in self.columns]
        if missing:
            self.columns += missing
            print(f"sst: warning: statistic {stat.full_name} was registered during the run; "
                  f"its fields {', '.join(missing)} are not in the output's header, so the file "
                  "leaves them out (enable a statistic of the same type from the start)",
                  file=sys.stderr)

    def keep_in_memory(self) -> None:
        """Write no statistic file: what the graph enables goes to the in-memory table only
        (a graph whose statistics are meant for an output folder, run without one). Called
        before :meth:`start`, while the components are built."""
        if self._started:
            raise StatisticError("the statistic output was opened already: keep_in_memory() "
                                 "is for the components' construction")
        self.output = MemoryOnlyOutput({}, self.output.base_dir)

    def start(self) -> None:
        """Open the output (its header lists every registered statistic) and schedule the
        periodic dumps."""
        self._started = True
        self.output.start(self.stats)
        seen: set[str] = set()
        for stat in self.stats:
            for name, ftype, _ in stat.fields():
                key = f"{name}.{ftype}"
                if key not in seen:
                    seen.add(key)
                    self.columns.append(key)
        for period in sorted(self._periodic):
            self.sim.schedule(period, self._periodic_dump, period, STATISTIC_PRIORITY)

    def _periodic_dump(self, period: int) -> None:
        stats = self._periodic[period]
        self.dump(stats)
        for stat in stats:
            if id(stat) in self._reset_on_output:
                stat.reset()
        if self.sim.pending():  # only keep ticking while the model still has work
            self.sim.schedule(self.sim.now + period, self._periodic_dump, period,
                              STATISTIC_PRIORITY)

    def dump(self, stats: list[Statistic], now: Optional[int] = None) -> None:
        """Write ``stats`` stamped ``now`` (default: the current time) to the output and the
        in-memory table."""
        now = self.sim.now if now is None else now
        self.output.output(stats, now)
        for stat in stats:
            row: dict[str, Any] = dict(zip(CSV_HEAD, [stat.component, stat.name, stat.subid,
                                                      stat.kind, now, 0]))
            for name, ftype, value in stat.fields():
                fitted = fit_value(value, ftype)
                if fitted != value and ftype[0] != "f":
                    self._warn_wrapped(stat, name, ftype)
                row[f"{name}.{ftype}"] = fitted
            self.rows.append(row)

    def _warn_wrapped(self, stat: Statistic, field: str, ftype: str) -> None:
        key = (stat.full_name, field)
        if key not in self._wrapped:
            self._wrapped.add(key)
            print(f"sst: warning: statistic {stat.full_name}: {field} does not fit its type "
                  f"{ftype} and wraps, as SST-core's does (declare the statistic f64)",
                  file=sys.stderr)

    def copy_statistics(self, plan: Sequence[tuple[str, str]]) -> None:
        """Write each statistic of an element that stands for others under their names too:
        ``plan`` lists (element, name) pairs in the order the end-of-run dump is to write
        them, an element paired with its own name for its own statistics; an element the plan
        does not name keeps its statistics, after the plan's. Called after the run, before
        :meth:`finish` (a periodic dump during the run wrote the element's own only)."""
        own: dict[str, list[Statistic]] = {}
        for stat in self.stats:
            own.setdefault(stat.component, []).append(stat)
        planned = {element for element, _ in plan}
        out: list[Statistic] = []
        for element, name in plan:
            for stat in own.get(element, ()):
                if name == element:
                    out.append(stat)
                else:
                    twin = copy.copy(stat)
                    twin.component = name
                    out.append(twin)
        out += [stat for stat in self.stats if stat.component not in planned]
        self.stats = out

    def finish(self, end_ps: Optional[int] = None) -> None:
        """The end-of-run dump of every statistic stamped ``end_ps`` (default: the current
        time), then close the output."""
        self.dump(self.stats, end_ps)
        self.output.stop()

    def table(self) -> "Any":
        """All dumps as a pandas DataFrame with the CSV's columns, each of its declared type
        (``Sum.u64`` unsigned 64-bit integers...; 0 where a statistic has no such field), as
        :func:`~sst_cdma.engine.statistics.reader.read_statistics` reads the CSV back."""
        return typed_table(self.rows, CSV_HEAD + self.columns)

    def table_csv(self) -> str:
        """:meth:`table` as the CSV text its ``to_csv(index=False, lineterminator="\\n")``
        writes, made without pandas; empty when no statistic was dumped."""
        return table_csv(self.rows, CSV_HEAD + self.columns) if self.rows else ""


__all__ = ["StatisticsCollector", "format_value"]
