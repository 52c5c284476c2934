"""The ``__init__`` of a record class (:func:`sst_cdma.engine.records.record`), written for its
fields and compiled when the first record of the class is made, not when its module is
imported.

It takes the parameters ``@dataclass`` would write (the fields in order, defaults and default
factories, keyword-only fields after a ``*``; fields left out of ``__init__`` get their default
or factory value) and calls ``__post_init__`` where the class has one. A frozen record's fields
go into the new instance's ``__dict__`` in one call (its guards refuse ``setattr``, as a frozen
dataclass's do; a record of eight fields is made in 0.63 us against 0.94 us with
``@dataclass(frozen=True)``'s one ``object.__setattr__`` a field, measured on this project's
machine), unless a field's name is a descriptor's on the class (then ``object.__setattr__``,
as ``@dataclass`` does); a mutable record's are assigned one by one, through any
``__setattr__`` or property the class has.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

__all__ = ["init_refusal", "lazy_init"]

#: the default of a parameter whose field has a default factory: not given
_NOT_GIVEN = object()


def init_refusal(cls: type) -> str:
    """Why the written ``__init__`` cannot stand in for ``@dataclass``'s for dataclass ``cls``
    ('' where it can): an ``InitVar`` (passed to ``__post_init__``) is not written, and a field
    without a default after one with a default is refused as ``@dataclass`` refuses it."""
    for pseudo in getattr(cls, "__dataclass_fields__").values():  # ClassVars and InitVars too
        if isinstance(pseudo.type, dataclasses.InitVar) or "InitVar" in str(pseudo.type):
            return f"field {pseudo.name!r} is an InitVar"
    defaulted = ""
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            defaulted = f.name
        elif defaulted:
            return f"non-default argument {f.name!r} follows default argument {defaulted!r}"
    return ""


def _setter(cls: type, frozen: bool) -> str:
    """How the written ``__init__`` stores the fields: ``dict`` (one ``__dict__.update``),
    ``object`` (``object.__setattr__`` each) or ``assign`` (``self.name = value``)."""
    if not frozen:
        return "assign"
    described = [f.name for f in dataclasses.fields(cls)
                 if hasattr(type(inspect.getattr_static(cls, f.name, None)), "__set__")]
    return "object" if described else "dict"


def _parameters(cls: type, scope: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """The ``__init__``'s parameters (a ``*`` before the keyword-only ones) and each field's
    value expression, filling ``scope`` with the defaults and factories they name."""
    positional: list[str] = []
    keyword: list[str] = []
    values: list[tuple[str, str]] = []
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            scope[f"_default_{f.name}"] = f.default
        if has_factory:
            scope[f"_factory_{f.name}"] = f.default_factory
        if not f.init:
            if has_default or has_factory:
                values.append((f.name, f"_default_{f.name}" if has_default
                               else f"_factory_{f.name}()"))
            continue
        if has_default:
            parameter, value = f"{f.name}=_default_{f.name}", f.name
        elif has_factory:
            parameter = f"{f.name}=_not_given"
            value = f"_factory_{f.name}() if {f.name} is _not_given else {f.name}"
        else:
            parameter, value = f.name, f.name
        (keyword if f.kw_only else positional).append(parameter)
        values.append((f.name, value))
    return positional + (["*"] + keyword if keyword else []), values


def _source(cls: type, frozen: bool, scope: dict[str, Any]) -> str:
    """The source of ``cls``'s ``__init__``."""
    parameters, values = _parameters(cls, scope)
    setter = _setter(cls, frozen)
    if setter == "dict":
        body = ["self.__dict__.update({" + ", ".join(f"{n!r}: {v}" for n, v in values) + "})"]
    elif setter == "object":
        body = [f"_object_setattr(self, {n!r}, {v})" for n, v in values]
    else:
        body = [f"self.{n} = {v}" for n, v in values]
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    return (f"def __init__({', '.join(['self', *parameters])}):\n"
            + "".join(f"    {line}\n" for line in body or ["pass"]))


def _write(cls: type, frozen: bool) -> Callable[..., None]:
    """Write, compile and set ``cls``'s ``__init__``; return it."""
    scope: dict[str, Any] = {"_not_given": _NOT_GIVEN, "_object_setattr": object.__setattr__}
    namespace: dict[str, Any] = {}
    exec(_source(cls, frozen, scope), scope, namespace)  # noqa: S102 - field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    type.__setattr__(cls, "__init__", init)
    return init  # type: ignore[no-any-return]


def lazy_init(cls: type, frozen: bool) -> Callable[..., None]:
    """An ``__init__`` for ``cls`` that writes and sets its real one on the first call, then
    makes the record with it."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _write(cls, frozen)(self, *args, **kwargs)
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__
