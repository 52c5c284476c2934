"""Dataclass records whose comparison, hash and ``repr`` are shared methods, not code written
and compiled for each class when its module is imported.

``@dataclass`` writes the source of each method a class asks for and compiles it there: an
``__init__``, a ``__repr__`` and an ``__eq__`` for every record, a ``__hash__``, a
``__setattr__`` and a ``__delattr__`` more for a frozen one; at import, that is most of what
creating a record class costs. A record that derives from :class:`Record` (or
:class:`FrozenRecord`) and is declared ``@dataclass(repr=False, eq=False)`` (``frozen=True``
too for a frozen one) has its ``__init__`` (and a frozen one's guards) written by
``@dataclass`` and inherits the rest, which behave as ``@dataclass`` writes them: equal when
of the same class with equal compared fields, a frozen record hashed on its compared fields
(hash-able fields), a mutable one unhashable, and the same ``repr``. It stays a dataclass:
``fields``, ``replace`` and ``asdict`` take it as before.

Compared or hashed for the first time, a record class gets an ``__eq__`` (a frozen one a
``__hash__`` too) written for its fields, as ``@dataclass`` writes them, and compiled once:
from then on it compares and hashes as quickly as a written dataclass, and a class no run
compares or hashes never pays for compiling them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar


def _names(cls: type, wanted: str) -> tuple[str, ...]:
    """The fields of ``cls`` that take part in its comparison (``compare``), hash (``hash``)
    or ``repr`` (``repr``), as ``@dataclass`` picks them."""
    if wanted == "hash":
        return tuple(f.name for f in dataclasses.fields(cls)
                     if (f.compare if f.hash is None else f.hash))
    return tuple(f.name for f in dataclasses.fields(cls) if getattr(f, wanted))


#: the attribute marking a method this module wrote for one record class
_MADE = "_record_made_for"


def _tuple(prefix: str, names: tuple[str, ...]) -> str:
    """``(prefix.a, prefix.b,)``: the source of the tuple of those fields' values."""
    return "(" + "".join(f"{prefix}.{name}," for name in names) + ")"


def _written(cls: type, name: str) -> Callable[..., Any]:
    """``cls``'s ``__eq__`` or ``__hash__`` written for its fields (the source ``@dataclass``
    would write, field names being identifiers), compiled and set on the class. Called for an
    instance of a subclass, it hands over to the shared method, which writes the subclass its
    own."""
    if name == "__eq__":
        source = ("def __eq__(self, other):\n"
                  "    if self.__class__ is not _cls:\n"
                  "        return _shared(self, other)\n"
                  "    if other.__class__ is not _cls:\n"
                  "        return NotImplemented\n"
                  f"    return {_tuple('self', _names(cls, 'compare'))} == "
                  f"{_tuple('other', _names(cls, 'compare'))}\n")
        shared: Callable[..., Any] = Record.__eq__
    else:
        source = ("def __hash__(self):\n"
                  "    if self.__class__ is not _cls:\n"
                  "        return _shared(self)\n"
                  f"    return hash({_tuple('self', _names(cls, 'hash'))})\n")
        shared = FrozenRecord.__hash__
    namespace: dict[str, Any] = {}
    exec(source, {"_cls": cls, "_shared": shared}, namespace)  # noqa: S102 - field names only
    method = namespace[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(method, _MADE, cls)
    type.__setattr__(cls, name, method)
    return method  # type: ignore[no-any-return]


class Record:
    """A mutable dataclass record: declare it ``@dataclass(repr=False, eq=False)``. Equal to
    another of the same class with equal compared fields; unhashable, as ``@dataclass`` makes a
    mutable class that compares its fields."""

    __slots__ = ()
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        """Same class and equal compared fields (NotImplemented for another class); the
        first comparison writes the class its own ``__eq__``."""
        return _written(self.__class__, "__eq__")(self, other)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        """``Name(field=value, ...)``, as ``@dataclass`` writes it."""
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__, "repr"))
        return f"{self.__class__.__qualname__}({shown})"


class FrozenRecord(Record):
    """A frozen dataclass record: declare it ``@dataclass(frozen=True, repr=False, eq=False)``.
    Hashed on its compared fields, as ``@dataclass`` hashes a frozen class; the first hash
    writes the class its own ``__hash__``."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        """The hash of the tuple of its hashed fields."""
        return _written(self.__class__, "__hash__")(self)  # type: ignore[no-any-return]


def _inherited(cls: type, base: type, name: str) -> bool:
    """Whether ``cls``'s ``name`` method is ``base``'s or one this module wrote for a record
    class (not one ``@dataclass`` wrote)."""
    method = getattr(cls, name)
    return method is getattr(base, name) or getattr(method, _MADE, None) is not None


def record_methods_inherited(cls: type[Any]) -> bool:
    """Whether ``cls`` takes its comparison, hash and ``repr`` from :class:`Record` (none of
    them written for it by ``@dataclass``)."""
    base = FrozenRecord if issubclass(cls, FrozenRecord) else Record
    return issubclass(cls, Record) and all(
        _inherited(cls, base, name) for name in ("__eq__", "__repr__", "__hash__"))
