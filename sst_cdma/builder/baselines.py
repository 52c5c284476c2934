"""Where :func:`add_baselines` was first documented: it lives in the element library now
(``components.baselines``, as it names the cdma element types and params it changes); this
name keeps the hand-wired scripts written against ``sst_cdma.builder.baselines`` working."""
from __future__ import annotations

from components.baselines import add_baselines

__all__ = ["add_baselines"]
