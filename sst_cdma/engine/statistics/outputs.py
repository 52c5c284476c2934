"""Statistic outputs in SST-core 16's formats: ``sst.statOutputConsole``, ``sst.statOutputCSV``,
``sst.statOutputJSON`` and ``sst.statOutputTXT``. The reference files under
``shared/reference/sst-core-16/`` are what these must reproduce byte for byte."""
from __future__ import annotations

import errno
import os
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Optional

import numpy as np

from sst_cdma.engine.statistics.types import Number, Statistic, StatisticError


def fit_value(value: Number, ftype: str) -> Number:
    """``value`` as a field of type ``ftype`` holds it: a float for ``f32``/``f64``; an integer
    wrapped at the field's width for the integer types, as SST-core's C++ fields wrap (a SumSQ
    of large byte counts or picosecond times overflows a u64 there too). Statistics that can
    grow that large are declared ``f64`` (docs/model.md, "Statistics")."""
    if ftype[0] == "f":
        return float(value)
    bits = 32 if ftype.endswith("32") else 64
    v = int(value) % (1 << bits)
    if ftype[0] == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def format_value(value: Number, ftype: str) -> str:
    """Text of one field value as SST prints it (``%f`` for floats, plain integers), fitted to
    its type by :func:`fit_value`, so every value fits the type its column declares."""
    if ftype == "f32":
        return "%f" % float(np.float32(value))
    if ftype == "f64":
        return "%f" % float(value)
    return str(fit_value(value, ftype))


class StatisticOutput(ABC):
    """Where statistics go. ``start`` sees every statistic that will ever be dumped (so the CSV
    header can be their union), ``output`` writes one dump at a sim time, ``stop`` closes."""

    type_name = ""
    known_params: tuple[str, ...] = ()

    def __init__(self, params: Mapping[str, Any], base_dir: Path,
                 stream: Optional[IO[str]] = None) -> None:
        unknown = sorted(set(params) - set(self.known_params))
        if unknown:
            raise StatisticError(f"{self.type_name}: unknown parameter {unknown[0]!r} "
                                 f"(known: {', '.join(self.known_params) or 'none'})")
        self.params = dict(params)
        self.base_dir = base_dir
        self.stream = stream
        self.path: Optional[Path] = None
        self._fh: Optional[IO[str]] = None

    def _open(self, default_name: str) -> IO[str]:
        path = Path(str(self.params.get("filepath", f"./{default_name}")))
        if not path.is_absolute():
            path = self.base_dir / path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:  # never through a link: one planted in a shared folder would redirect the write
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise StatisticError(f"{path}: is a symlink (to {os.readlink(path)}); statistics "
                                 "are not written through a link: remove it, or name the file "
                                 "it points to as the statistic output's filepath") from None
        self._fh = open(fd, "w", encoding="utf-8", newline="\n")
        return self._fh

    @abstractmethod
    def start(self, stats: list[Statistic]) -> None:
        """Prepare for output of ``stats``."""

    @abstractmethod
    def output(self, stats: Iterable[Statistic], sim_time: int) -> None:
        """Write one dump of ``stats`` at ``sim_time`` (ps)."""

    def stop(self) -> None:
        """Finish and close the output."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _flag(params: Mapping[str, Any], name: str) -> bool:
    """An output's boolean param (true unless given as 0/false/no/off)."""
    return str(params.get(name, "1")).strip().lower() not in ("0", "false", "no", "off")


def _key(name: str, ftype: str) -> str:
    return f"{name}.{ftype}"


class CSVOutput(StatisticOutput):
    """``sst.statOutputCSV``: one header with the union of all fields, one row per statistic per
    dump, 0 in columns a statistic does not have."""

    type_name = "sst.statOutputCSV"
    known_params = ("filepath", "separator", "outputtopheader", "outputsimtime", "outputrank")

    def start(self, stats: list[Statistic]) -> None:
        """Open the file and write the header."""
        fh = self._open("StatisticOutput.csv")
        self.sep = str(self.params.get("separator", ", "))
        self.columns: list[str] = []
        seen: set[str] = set()
        for stat in stats:
            for name, ftype, _ in stat.fields():
                key = _key(name, ftype)
                if key not in seen:
                    seen.add(key)
                    self.columns.append(key)
        # SST's outputsimtime=0 and outputrank=0 leave those columns out
        self.with_time = _flag(self.params, "outputsimtime")
        self.with_rank = _flag(self.params, "outputrank")
        head = ["ComponentName", "StatisticName", "StatisticSubId", "StatisticType"]
        head += ["SimTime"] * self.with_time + ["Rank"] * self.with_rank + self.columns
        if _flag(self.params, "outputtopheader"):
            fh.write(self.sep.join(head) + "\n")

    def output(self, stats: Iterable[Statistic], sim_time: int) -> None:
        """Write a row per statistic."""
        fh = self._fh
        assert fh is not None
        for stat in stats:
            values = {_key(n, t): format_value(v, t) for n, t, v in stat.fields()}
            row = [stat.component, stat.name, stat.subid, stat.kind]
            row += [str(sim_time)] * self.with_time + ["0"] * self.with_rank
            row += [values.get(c, "0") for c in self.columns]
            fh.write(self.sep.join(row) + "\n")


class TXTOutput(StatisticOutput):
    """``sst.statOutputTXT``: one line per statistic, ``Field.type = value; `` pairs."""

    type_name = "sst.statOutputTXT"
    known_params = ("filepath", "outputtopheader", "outputinlineheader", "outputsimtime",
                    "outputrank")
    default_name = "StatisticOutput.txt"
    prefix = ""
    with_time = True

    def start(self, stats: list[Statistic]) -> None:
        """Open the file."""
        self._open(self.default_name)

    def _line(self, stat: Statistic, sim_time: int) -> str:
        parts = [f"{self.prefix}{stat.full_name} : {stat.kind} : "]
        if self.with_time and _flag(self.params, "outputsimtime"):
            parts.append(f"SimTime = {sim_time}; ")
        if self.with_time and _flag(self.params, "outputrank"):
            parts.append("Rank = 0; ")
        parts += [f"{_key(n, t)} = {format_value(v, t)}; " for n, t, v in stat.fields()]
        return "".join(parts) + "\n"

    def output(self, stats: Iterable[Statistic], sim_time: int) -> None:
        """Write a line per statistic."""
        fh = self._fh
        assert fh is not None
        for stat in stats:
            fh.write(self._line(stat, sim_time))


class ConsoleOutput(TXTOutput):
    """``sst.statOutputConsole`` (the default): the TXT lines on standard output, indented by one
    space, without SimTime and Rank."""

    type_name = "sst.statOutputConsole"
    prefix = " "
    with_time = False

    def start(self, stats: list[Statistic]) -> None:
        """Console output needs no file."""
        self._fh = self.stream or sys.stdout

    def stop(self) -> None:
        """Flush, never close, the console."""
        if self._fh is not None:
            self._fh.flush()
        self._fh = None


class JSONOutput(StatisticOutput):
    """``sst.statOutputJSON``: a ``components`` list, one entry per component per dump, each
    statistic's field values listed by position."""

    type_name = "sst.statOutputJSON"
    known_params = ("filepath", "outputsimtime", "outputrank")

    def start(self, stats: list[Statistic]) -> None:
        """Open the file and the ``components`` list."""
        fh = self._open("StatisticOutput.json")
        fh.write('{\n   "components" : [\n')
        self._first = True

    def output(self, stats: Iterable[Statistic], sim_time: int) -> None:
        """Write one component block per component that has statistics in this dump."""
        fh = self._fh
        assert fh is not None
        by_component: dict[str, list[Statistic]] = {}
        for stat in stats:
            by_component.setdefault(stat.component, []).append(stat)
        for comp, comp_stats in by_component.items():
            lines = []
            for stat in comp_stats:
                vals = []
                for _, t, v in stat.fields():
                    text = format_value(v, t)
                    vals.append(text + " " if t[0] == "f" else text)
                lines.append(f'            {{ "stat" : "{stat.name}", "values" : '
                             f'[ {", ".join(vals)} ] }}')
            block = (f'      {{\n         "name" : "{comp}",\n         "simtime" : {sim_time},\n'
                     f'         "statistics" : [\n' + ",\n".join(lines) +
                     "\n         ]\n      }")
            fh.write(block if self._first else ",\n" + block)
            self._first = False

    def stop(self) -> None:
        """Close the ``components`` list and the file."""
        if self._fh is not None:
            self._fh.write("\n   ]\n}\n")
        super().stop()


class MemoryOnlyOutput(StatisticOutput):
    """Writes nothing: the statistics go only to the run's in-memory table (what
    :func:`sst_cdma.run` records when the run has nowhere to write them). Not an SST output,
    so scripts cannot name it."""

    type_name = "memory-only"

    def start(self, stats: list[Statistic]) -> None:
        """Nothing to prepare."""

    def output(self, stats: Iterable[Statistic], sim_time: int) -> None:
        """Nothing to write."""


OUTPUT_TYPES = {cls.type_name: cls for cls in (ConsoleOutput, CSVOutput, JSONOutput, TXTOutput)}


def make_output(type_name: str, params: Mapping[str, Any], base_dir: Path,
                stream: Optional[IO[str]] = None) -> StatisticOutput:
    """Build the output named like SST's (``sst.statOutputCSV``, ...)."""
    cls = OUTPUT_TYPES.get(type_name)
    if cls is None:
        raise StatisticError(f"unknown statistic output {type_name!r} "
                             f"(one of {', '.join(OUTPUT_TYPES)})")
    return cls(params, base_dir, stream)
