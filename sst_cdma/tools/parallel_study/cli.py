"""The command line of ``python -m sst_cdma.tools.parallel_study``."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .registry import TABLES, markdown

__all__ = ["main"]

PROG = "python -m sst_cdma.tools.parallel_study"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print each named table (its title, then the markdown table), or with ``--list`` every
    table's name and title; an unknown name is one line naming it and the tables, exit 2."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="The simulated tables of EVALUATION.md, 'Across many GPUs'.")
    parser.add_argument("tables", nargs="*", metavar="TABLE",
                        help=f"tables to print: {', '.join(TABLES)}")
    parser.add_argument("--list", action="store_true", help="list the tables and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f"{t.name}: {t.title}" for t in TABLES.values()))
        return 0
    unknown = [name for name in args.tables if name not in TABLES]
    if unknown or not args.tables:
        what = f"no table {unknown[0]!r}" if unknown else "name a table"
        print(f"{PROG}: error: {what}; the tables are {', '.join(TABLES)}", file=sys.stderr)
        return 2
    for number, name in enumerate(args.tables):
        table = TABLES[name]
        print(("\n" if number else "") + f"{table.title}\n\n" + markdown(table.make()), end="",
              flush=True)
    return 0
