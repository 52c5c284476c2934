"""``python -m sst_cdma.tools.parallel_study TABLE``: the tables of EVALUATION.md's "Across
many GPUs", each printed by one command. A table is one function registered by name
(:func:`~sst_cdma.tools.parallel_study.registry.register`) in a module this package imports
below; adding one is that function and its block in EVALUATION.md."""
from __future__ import annotations

from . import depth, published, schedules, zero  # noqa: F401  (each registers its tables)
from .cli import main
from .registry import TABLES, StudyTable, Table, markdown, register

__all__ = ["TABLES", "StudyTable", "Table", "markdown", "register", "main"]
