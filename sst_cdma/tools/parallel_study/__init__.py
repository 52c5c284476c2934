"""``python -m sst_cdma.tools.parallel_study TABLE``: the tables of EVALUATION.md's "Across
many GPUs", each printed by one command. A table is one function registered by name
(:func:`~sst_cdma.tools.parallel_study.registry.register`) in a module this package imports
below; adding one is that function and its block in EVALUATION.md."""
from __future__ import annotations

# each module registers its tables
from . import depth, published, schedules, stage_auto, switch, zero  # noqa: F401
from .cli import main
from .registry import TABLES, StudyTable, Table, markdown, register

__all__ = ["TABLES", "StudyTable", "Table", "markdown", "register", "main"]
