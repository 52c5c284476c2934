"""sst-cdma: an SST-style simulation toolkit for GPU memory virtualization with a compressing
DMA engine (cDMA).

The package holds the SST-compatible core (config API, event kernel, units, statistics, CLIs),
the codecs and density profiles. Its sibling packages, installed beside it from the folders of
the same name, are the element library ``cdma`` (``components``) and the workloads
(``workloads``).
"""
from __future__ import annotations

__version__ = "0.1.0"

from typing import Any

__all__ = ["__version__", "run", "RunResult", "RunError", "read_statistics",
           "StatisticsFileError"]


def __getattr__(name: str) -> Any:
    """Import the runner and the statistics reader lazily so ``import sst_cdma`` stays light
    (codecs users need no simulator)."""
    if name in ("run", "RunResult", "RunError"):
        from sst_cdma.engine import runner

        return getattr(runner, name)
    if name in ("read_statistics", "StatisticsFileError"):
        from sst_cdma.engine.statistics import reader

        return getattr(reader, name)
    raise AttributeError(f"module 'sst_cdma' has no attribute {name!r}")
