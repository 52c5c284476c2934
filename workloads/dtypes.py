"""Element types a workload can be rendered for, and their sizes in bytes."""
from __future__ import annotations

from sst_cdma.model.dtypes import DTYPES

from .errors import WorkloadError

__all__ = ["DTYPES", "itemsize"]


def itemsize(dtype: str) -> int:
    """Return the size in bytes of one element of ``dtype``.

    Raises :class:`WorkloadError` for a dtype outside :data:`DTYPES`.
    """
    try:
        return DTYPES[dtype]
    except (KeyError, TypeError):
        raise WorkloadError(
            f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})"
        ) from None
