"""The study's tables, by name: each is one function that runs its simulations and returns a
:class:`Table`, registered with :func:`register`; ``python -m sst_cdma.tools.parallel_study
NAME`` prints it as markdown (EVALUATION.md, "Across many GPUs")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["Table", "StudyTable", "TABLES", "register", "markdown"]


@dataclass(frozen=True)
class Table:
    """A table's column names and its rows of cells, already formatted."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class StudyTable:
    """A registered table: its name on the command line, a one-line title and the function
    that makes it."""

    name: str
    title: str
    make: Callable[[], Table]


#: every registered table, by name, in registration order
TABLES: dict[str, StudyTable] = {}


def register(name: str, title: str) -> Callable[[Callable[[], Table]], Callable[[], Table]]:
    """Register the decorated function as the table ``name`` (ValueError if taken)."""
    def decorate(make: Callable[[], Table]) -> Callable[[], Table]:
        if name in TABLES:
            raise ValueError(f"parallel study: table {name!r} is registered twice")
        TABLES[name] = StudyTable(name, title, make)
        return make
    return decorate


def markdown(table: Table) -> str:
    """The table as a markdown table (header, separator, rows), each line ending in a newline."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |\n"
    for row in table.rows:
        if len(row) != len(table.header):
            raise ValueError(f"parallel study: a row of {len(row)} cells under "
                             f"{len(table.header)} columns: {row}")
    return line(table.header) + "|" + "---|" * len(table.header) + "\n" + \
        "".join(line(row) for row in table.rows)
