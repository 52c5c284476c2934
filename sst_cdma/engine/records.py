"""Dataclass records that compile none of their methods when their module is imported.

``@dataclass`` writes the source of each method a class asks for and compiles it there: an
``__init__``, a ``__repr__`` and an ``__eq__`` for every record, a ``__hash__``, a
``__setattr__`` and a ``__delattr__`` more for a frozen one; at import, that is most of what
creating a record class costs (half a millisecond for a frozen one of eight fields, measured on this project's machine), and a
run imports a hundred record classes. A record class derives from :class:`Record` (or
:class:`FrozenRecord`) and is declared with :func:`record` (or :func:`frozen_record`): it is a
dataclass (``fields``, ``replace``, ``asdict`` take it) whose ``repr`` is shared, whose frozen
guards are :class:`FrozenRecord`'s, and whose ``__init__``, ``__eq__`` and (frozen) ``__hash__``
are written for its fields, as ``@dataclass`` writes them, and compiled when the first record
is made, compared or hashed: from then on as quick as a written dataclass's, and a class no run
makes never pays for them. Equal when of the same class with equal compared fields, a frozen
record hashed on its compared fields (hash-able fields), a mutable one unhashable, the same
``repr`` and the same ``FrozenInstanceError``s as ``@dataclass`` makes. A class declared
``@dataclass(repr=False, eq=False)`` (``frozen=True`` too) on the same bases inherits the
comparison, hash and ``repr`` alike and has the rest written by ``@dataclass``.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar, dataclass_transform

from sst_cdma.engine.record_init import init_refusal, lazy_init

T = TypeVar("T")


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
    """A frozen dataclass record: declare it with :func:`frozen_record` (or
    ``@dataclass(frozen=True, repr=False, eq=False)``). Hashed on its compared fields, as
    ``@dataclass`` hashes a frozen class; the first hash writes the class its own
    ``__hash__``. Its fields cannot be assigned or deleted (FrozenInstanceError), nor can
    another attribute be given to a record of a declared class, as ``@dataclass`` guards a
    frozen class."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        """The hash of the tuple of its hashed fields."""
        return _written(self.__class__, "__hash__")(self)  # type: ignore[no-any-return]

    def __setattr__(self, name: str, value: Any) -> None:
        """Refused, as a frozen dataclass refuses it."""
        if "__dataclass_params__" in type(self).__dict__ or name in self.__dataclass_fields__:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        """Refused, as a frozen dataclass refuses it."""
        if "__dataclass_params__" in type(self).__dict__ or name in self.__dataclass_fields__:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)

    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


def _declared(cls: type[T], frozen: bool) -> type[T]:
    """``cls`` made a dataclass without any method written for it now: its ``__init__`` is
    written when its first record is made (:func:`sst_cdma.engine.record_init.lazy_init`),
    the rest it inherits from :class:`Record` or :class:`FrozenRecord`."""
    base = FrozenRecord if frozen else Record
    if not issubclass(cls, base) or (not frozen and issubclass(cls, FrozenRecord)):
        raise TypeError(f"{cls.__qualname__}: a {'frozen ' if frozen else ''}record derives "
                        f"from {base.__name__}"
                        + ("" if frozen else " and not from FrozenRecord"))
    own_init = "__init__" in cls.__dict__
    if not cls.__doc__:  # @dataclass would name the signature of the __init__ not written yet
        fields = ", ".join(cls.__dict__.get("__annotations__", {}))
        type.__setattr__(cls, "__doc__", f"{cls.__name__}({fields})")
    # a frozen record deriving from another: @dataclass refuses a frozen base to a class it
    # does not make frozen, so it writes this rare one its guards
    frozen_base = frozen and any(getattr(getattr(b, "__dataclass_params__", None), "frozen",
                                         False) for b in cls.__mro__[1:])
    made = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=frozen_base)
    refusal = init_refusal(made)
    if refusal:
        raise TypeError(f"{cls.__qualname__}: {refusal}")
    if frozen:  # as a frozen dataclass says it is (dataclasses' checks of subclasses read it)
        made.__dataclass_params__.frozen = True  # type: ignore[attr-defined]
    if not own_init:
        type.__setattr__(made, "__init__", lazy_init(made, frozen))
    return made


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """Class decorator: ``cls`` (deriving from :class:`Record`) a mutable dataclass record,
    as ``@dataclass`` would make it (the same ``__init__``, comparison and ``repr``), with no
    method compiled when its module is imported."""
    return _declared(cls, frozen=False)


@dataclass_transform(frozen_default=True,
                     field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen_record(cls: type[T]) -> type[T]:
    """Class decorator: ``cls`` (deriving from :class:`FrozenRecord`) a frozen dataclass
    record, as ``@dataclass(frozen=True)`` would make it (the same ``__init__``, comparison,
    hash, ``repr`` and guards), with no method compiled when its module is imported; its
    ``__dataclass_params__`` says it is frozen, as a frozen dataclass's do."""
    return _declared(cls, frozen=True)


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
