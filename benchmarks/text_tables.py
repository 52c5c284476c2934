"""How a benchmark prints a table: markdown (a docs page's table, as its check compares it) or
columns separated by two spaces."""
from __future__ import annotations

from typing import Sequence

__all__ = ["print_table"]


def print_table(head: Sequence[str], align: Sequence[str], rows: Sequence[Sequence[str]],
                markdown: bool) -> None:
    """Print ``rows`` under ``head``; ``align`` is each markdown column's rule (``---``,
    ``---:``)."""
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(align) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [head, *rows]:
            print("  ".join(row))
