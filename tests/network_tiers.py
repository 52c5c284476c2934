"""Which shipped networks a test parametrized over them runs in the default tier: every one
but the largest (tens of billions of parameters and more), whose architectures the default
tier covers with a smaller network of the same family (llama3_8b for Llama 3's grouped-query
attention, the GPT-2 family for GPT-3's); the largest run in the slow tier."""
from __future__ import annotations

from typing import Iterable

import pytest

__all__ = ["LARGEST", "tiered"]

#: the shipped networks of tens of billions of parameters and more
LARGEST = frozenset({"llama3_70b", "llama3_405b", "gpt3_175b"})


def tiered(names: Iterable[str]) -> list[object]:
    """``names`` as pytest params, the largest marked slow."""
    return [pytest.param(name, marks=pytest.mark.slow, id=name) if name in LARGEST else name
            for name in names]
