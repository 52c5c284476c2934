"""The one list of compression algorithms: every codec registers itself here, and everything
else (the stream format, the model, profiles, the topology options, the reporter, capture,
sweeps, benchmarks) asks this registry instead of naming algorithms.

A registration (:class:`CodecSpec`) holds what the rest of the project needs to know about a
codec: its ``name``, its stream ``format_id`` (byte 5 of every stream header), the
implementation (a :class:`~sst_cdma.codecs.codec.Codec`, or a ``"module:attribute"`` path
loaded on first use so that a simulation which only estimates ratios never imports numba
kernels), and how its compression ratio is estimated from density alone.

The registry keeps registration order, which is the order users see (``zvc, rle, zlib, lz4,
zstd, bplane_zstd``: the built-in codecs are imported in that order by the package).  ``"none"`` (no compression) is
not a codec; :func:`algorithm_choices` adds it where an option accepts it.
"""
from __future__ import annotations

import contextlib
import importlib
import re
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, Union

from sst_cdma.engine.records import FrozenRecord, frozen_record

if TYPE_CHECKING:
    from sst_cdma.codecs.codec import Codec

__all__ = [
    "NONE",
    "ALGORITHM_NAMES",
    "ALGORITHM_CHOICES",
    "CodecSpec",
    "register",
    "unregister",
    "registered",
    "algorithm_names",
    "algorithm_choices",
    "LiveNames",
    "specs",
    "get",
    "by_format_id",
    "unknown_algorithm",
    "watch",
]

NONE = "none"
"""The algorithm name that means "no compression" (a plain copy engine); never a codec."""

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")

RatioFormula = Callable[[float, int], float]
"""``(density, itemsize) -> raw/compressed ratio`` of a large array, from density alone."""


@frozen_record
class CodecSpec(FrozenRecord):
    """One registered codec.

    ``ratio_formula`` is the codec's exact (or analytic) ratio of a large array from its
    non-zero fraction and element size; a codec whose size depends on where the zeros are
    leaves it ``None`` and gets its ratio *sampled*: the real codec compresses a seeded
    synthetic tensor of that density (:mod:`.sampling`).
    """

    name: str
    format_id: int
    implementation: Union["Codec", str]
    ratio_formula: Optional[RatioFormula] = None
    description: str = ""

    @cached_property
    def codec(self) -> "Codec":
        """The implementation, imported on first use when registered as a dotted path."""
        impl = self.implementation
        if not isinstance(impl, str):
            return impl
        module, _, attribute = impl.partition(":")
        return getattr(importlib.import_module(module), attribute)

    @property
    def sampled(self) -> bool:
        """Whether the ratio is estimated by compressing synthetic data (no formula)."""
        return self.ratio_formula is None


_SPECS: dict[str, CodecSpec] = {}
_BY_ID: dict[int, CodecSpec] = {}
_WATCHERS: list[Callable[[], None]] = []


def watch(callback: Callable[[], None]) -> None:
    """Call ``callback()`` after every later registration and unregistration (what derives
    something from the list, such as the engine's codec elements, stays current)."""
    _WATCHERS.append(callback)


def _changed() -> None:
    for callback in _WATCHERS:
        callback()


def register(name: str, format_id: int, implementation: Union["Codec", str], *,
             ratio_formula: Optional[RatioFormula] = None,
             description: str = "") -> CodecSpec:
    """Add a codec to the registry (after those already there) and return its spec.

    ``name`` is a lower-case identifier other than ``"none"``; ``format_id`` is the stream's
    algorithm byte, 1..255.  A name or format id that is already registered raises
    :class:`ValueError` (a stream must identify exactly one codec).
    """
    if not isinstance(name, str) or not _NAME.match(name) or name == NONE:
        raise ValueError(f"codec name {name!r}: expected a lower-case identifier other than "
                         f"{NONE!r}")
    if isinstance(format_id, bool) or not isinstance(format_id, int) or \
            not 1 <= format_id <= 255:
        raise ValueError(f"codec {name!r}: format id {format_id!r} is not an integer in 1..255")
    if name in _SPECS:
        raise ValueError(f"codec {name!r} is already registered "
                         f"(format id {_SPECS[name].format_id})")
    if format_id in _BY_ID:
        raise ValueError(f"codec {name!r}: format id {format_id} is already registered to "
                         f"{_BY_ID[format_id].name!r}")
    spec = CodecSpec(name, format_id, implementation, ratio_formula, description)
    _SPECS[name] = spec
    _BY_ID[format_id] = spec
    _changed()
    return spec


def unregister(name: str) -> CodecSpec:
    """Remove a registered codec (for tests and plug-ins); returns its spec."""
    spec = get(name)
    del _SPECS[name]
    del _BY_ID[spec.format_id]
    _changed()
    return spec


@contextlib.contextmanager
def registered(name: str, format_id: int, implementation: Union["Codec", str], *,
               ratio_formula: Optional[RatioFormula] = None,
               description: str = "") -> Iterator[CodecSpec]:
    """Register a codec for the duration of a ``with`` block (tests), then unregister it."""
    spec = register(name, format_id, implementation, ratio_formula=ratio_formula,
                    description=description)
    try:
        yield spec
    finally:
        unregister(name)


def algorithm_names() -> tuple[str, ...]:
    """Names of the registered codecs, in registration order (``zvc, rle, zlib, ...``)."""
    return tuple(_SPECS)


def algorithm_choices() -> tuple[str, ...]:
    """What an ``algorithm`` option accepts: ``"none"`` then every registered codec."""
    return (NONE, *_SPECS)


class LiveNames(Sequence[str]):
    """A read-only sequence that always holds the currently registered names (``"none"``
    first with ``with_none``): for declarations made at import time, such as an option's or a
    component parameter's ``choices``, that must see codecs registered later.  Compares equal
    to the tuple of the same names."""

    def __init__(self, with_none: bool) -> None:
        self._with_none = with_none

    def _names(self) -> tuple[str, ...]:
        return algorithm_choices() if self._with_none else algorithm_names()

    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, LiveNames)):
            return self._names() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


ALGORITHM_NAMES: Sequence[str] = LiveNames(with_none=False)
"""The registered codec names, always current (see :class:`LiveNames`)."""

ALGORITHM_CHOICES: Sequence[str] = LiveNames(with_none=True)
"""``"none"`` and the registered codec names, always current: an ``algorithm`` option's or
parameter's ``choices``."""


def specs() -> tuple[CodecSpec, ...]:
    """Every registered codec's spec, in registration order."""
    return tuple(_SPECS.values())


def unknown_algorithm(value: object, what: Optional[str] = None, *,
                      allow_none: bool = False) -> str:
    """The one-line message for an unknown algorithm, naming ``what`` (the option, field or
    file at fault) when given and listing the registered ones (``none`` first where
    ``allow_none``)."""
    known = algorithm_choices() if allow_none else algorithm_names()
    where = f"{what}: " if what else ""
    return f"{where}unknown algorithm {value!r} (registered: {', '.join(known)})"


def get(name: str, what: Optional[str] = None) -> CodecSpec:
    """The spec of codec ``name``; :class:`ValueError` (:func:`unknown_algorithm`) if none."""
    spec = _SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(unknown_algorithm(name, what))
    return spec


def by_format_id(format_id: int) -> Optional[CodecSpec]:
    """The codec whose streams carry ``format_id``, or None."""
    return _BY_ID.get(format_id)
