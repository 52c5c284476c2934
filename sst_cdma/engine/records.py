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
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, ClassVar


def _names(cls: type, wanted: str) -> tuple[str, ...]:
    """The fields of ``cls`` that take part in its comparison (``compare``), hash (``hash``)
    or ``repr`` (``repr``), as ``@dataclass`` picks them."""
    if wanted == "hash":
        return tuple(f.name for f in dataclasses.fields(cls)
                     if (f.compare if f.hash is None else f.hash))
    return tuple(f.name for f in dataclasses.fields(cls) if getattr(f, wanted))


def _values(cls: type, wanted: str) -> Callable[[Any], tuple[Any, ...]]:
    """A function of a ``cls`` record giving the tuple of its :func:`_names` fields' values,
    made once and kept on the class (the comparison and the hash run as often as a written
    ``__eq__`` and ``__hash__`` would)."""
    attribute = f"_record_{wanted}"
    made = cls.__dict__.get(attribute)
    if made is None:
        names = _names(cls, wanted)
        if len(names) == 1:
            one = operator.attrgetter(names[0])
            made = lambda record: (one(record),)  # noqa: E731 - a tuple even of one
        else:
            made = operator.attrgetter(*names) if names else (lambda record: ())
        type.__setattr__(cls, attribute, made)  # read back from the class dict: no binding
    return made  # type: ignore[no-any-return]


class Record:
    """A mutable dataclass record: declare it ``@dataclass(repr=False, eq=False)``. Equal to
    another of the same class with equal compared fields; unhashable, as ``@dataclass`` makes a
    mutable class that compares its fields."""

    __slots__ = ()
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        """Same class and equal compared fields (NotImplemented for another class)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        values = _values(self.__class__, "compare")
        return values(self) == values(other)

    def __repr__(self) -> str:
        """``Name(field=value, ...)``, as ``@dataclass`` writes it."""
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__, "repr"))
        return f"{self.__class__.__qualname__}({shown})"


class FrozenRecord(Record):
    """A frozen dataclass record: declare it ``@dataclass(frozen=True, repr=False, eq=False)``.
    Hashed on its compared fields, as ``@dataclass`` hashes a frozen class."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        """The hash of the tuple of its hashed fields."""
        return hash(_values(self.__class__, "hash")(self))


def record_methods_inherited(cls: type[Any]) -> bool:
    """Whether ``cls`` takes its comparison, hash and ``repr`` from :class:`Record` (none of
    them written for it by ``@dataclass``)."""
    base = FrozenRecord if issubclass(cls, FrozenRecord) else Record
    return issubclass(cls, Record) and all(
        getattr(cls, name) is getattr(base, name) for name in ("__eq__", "__repr__", "__hash__"))
