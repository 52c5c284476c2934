"""What this machine gives a process: the memory it may use, for the commands that bound a
count or a size by it (``--gpus``, ``time-cpu-adam --sizes``, ``capture-states``' model)."""
from __future__ import annotations

import os
import resource
from typing import Optional

__all__ = ["available_memory", "memory_fault"]


def available_memory() -> Optional[int]:
    """The bytes this process may use: the machine's memory, or less under an address-space
    limit (None when neither is known)."""
    try:
        limits = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    except (ValueError, OSError, AttributeError):
        limits = []
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        limits.append(soft)
    return min(limits) if limits else None


def memory_fault(need: float, what: str) -> str:
    """Why ``need`` bytes (for ``what``: "the largest size, at 18 bytes a parameter") cannot
    be held here ("" when they can, or when the memory is not known)."""
    have = available_memory()
    if have is None or need <= have:
        return ""
    return (f"needs at least {need / 2**30:.1f} GiB of memory ({what}), more than the "
            f"{have / 2**30:.1f} GiB this process may use")
