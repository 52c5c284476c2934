"""The interface every algorithm module implements, and the registry of algorithms."""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["Payload", "Codec"]


@frozen_record
class Payload(FrozenRecord):
    """An encoded payload whose exact ``size`` is known before any byte is written.

    ``write(out)`` fills a writable ``uint8`` array of exactly ``size`` bytes.
    """

    size: int
    write: Callable[[np.ndarray], None]


class Codec(Protocol):
    """An algorithm: sizes, encodes and decodes payloads of a flat bits array.

    ``bits`` arrays are 1-D, C-contiguous, aligned unsigned-integer views of the elements
    (see :func:`sst_cdma.codecs.dtypes.bits_view`).
    """

    name: str

    def payload_size(self, bits: np.ndarray) -> int:
        """Exact payload size in bytes, as cheaply as the algorithm allows."""
        ...

    def prepare(self, bits: np.ndarray) -> Payload:
        """Work out (or perform) the encoding of ``bits``."""
        ...

    def check_sizes(self, count: int, itemsize: int, payload_len: int) -> None:
        """Reject, before any allocation, a count impossible for this payload length."""
        ...

    def decode(self, payload: np.ndarray, count: int, bits_dtype: np.dtype) -> np.ndarray:
        """Decode a validated-length payload into a new flat bits array of ``count`` items."""
        ...
