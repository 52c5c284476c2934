"""Which shipped networks a test parametrized over them runs in the default tier: every one
but the largest (tens of billions of parameters and more), whose architectures the default
tier covers with a smaller network of the same family (llama3_8b for Llama 3's grouped-query
attention, the GPT-2 family for GPT-3's), and but the larger siblings of a family the default
tier already runs (GPT-2 Large and XL beside GPT-2 small and medium, OPT-1.3B beside OPT-125M
and 350M, Llama 13B beside Llama 7B: the same builder at other sizes); those run in the slow
tier."""
from __future__ import annotations

from typing import Iterable

import pytest

__all__ = ["LARGEST", "LARGER_SIBLINGS", "tiered"]

#: the shipped networks of tens of billions of parameters and more
LARGEST = frozenset({"llama3_70b", "llama3_405b", "gpt3_175b"})
#: shipped networks a smaller network of the same family stands for in the default tier
LARGER_SIBLINGS = frozenset({"gpt2_large", "gpt2_xl", "opt_1_3b", "llama_13b"})


def tiered(names: Iterable[str]) -> list[object]:
    """``names`` as pytest params, the largest and the larger siblings marked slow."""
    slow = LARGEST | LARGER_SIBLINGS
    return [pytest.param(name, marks=pytest.mark.slow, id=name) if name in slow else name
            for name in names]
