"""Memory of kernel prices already computed, so a shape is priced once per process.

The kernel model's prices are pure functions of their inputs (shape, pass, dtype, the GPU's
:class:`~sst_cdma.model.kernel_model.Hardware` and the fitted constants), so the same input
gives the same, bit-identical result. Two memories keep them:

* :class:`PriceMemo`, a least-recently-used map of hashable keys (a layer's shape, pass,
  workspace limit, GPU and constants) to prices: a network of many layers of one shape, an
  out-of-memory retry whose limits changed for a few layers, and baselines that share the main
  system's network and GPU all find their prices there.
* :func:`array_key`, a key from numpy arrays' contents, for the GEMM candidates of whole
  calibration sets (which do not depend on the constants a fit varies), kept within a byte
  budget by :class:`PriceMemo`'s ``weigh``.

:func:`clear` empties every memory (tests that count computations start from it).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional

import numpy as np

__all__ = ["PriceMemo", "array_key", "clear"]

_MEMOS: list["PriceMemo"] = []


class PriceMemo:
    """A least-recently-used map holding at most ``entries`` values and, where ``weigh``
    gives each value a size, at most ``budget`` of them in all."""

    def __init__(self, entries: int, budget: float = float("inf"),
                 weigh: Optional[Callable[[Any], int]] = None) -> None:
        self.entries, self.budget, self.weigh = entries, budget, weigh
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._total = 0
        _MEMOS.append(self)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key``, or None."""
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for ``key``, forgetting the least recently used beyond the limits."""
        if key in self._values:
            self._total -= self._sizes.pop(key, 0)
        self._values[key] = value
        self._values.move_to_end(key)
        if self.weigh is not None:
            self._sizes[key] = size = self.weigh(value)
            self._total += size
        while len(self._values) > self.entries or \
                (self._total > self.budget and len(self._values) > 1):
            old, _ = self._values.popitem(last=False)
            self._total -= self._sizes.pop(old, 0)

    def of_object(self, held: Any, extra: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, worked out once per (``held``, ``extra``) while kept: ``held`` is kept
        beside the value, so its identity cannot be taken by another object meanwhile (treat
        it as read-only once asked)."""
        key = (id(held), extra)
        entry = self.get(key)
        if entry is None:
            entry = (held, make())
            self.put(key, entry)
        return entry[1]

    def clear(self) -> None:
        """Forget everything."""
        self._values.clear()
        self._sizes.clear()
        self._total = 0


def array_key(*arrays: np.ndarray) -> tuple[Any, ...]:
    """A hashable key of the arrays' dtypes, shapes and contents."""
    return tuple((a.dtype.str, a.shape, a.tobytes()) for a in arrays)


def clear() -> None:
    """Empty every price memory of the process."""
    for memo in _MEMOS:
        memo.clear()
