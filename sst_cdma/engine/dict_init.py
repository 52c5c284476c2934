"""A quicker ``__init__`` for a frozen dataclass made in great numbers: :func:`dict_init`.

``@dataclass(frozen=True)`` writes an ``__init__`` that sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses): one call a field, so a record of many
fields costs several microseconds to make. :func:`dict_init` writes one with the same
parameters, defaults and annotations that puts every field into the new instance's
``__dict__`` in one call: the instance is the same (same fields, in the same order; equal,
hashed and shown alike), frozen as before, made two to three times quicker. Only for a frozen
dataclass without ``__post_init__``, slots, ``InitVar`` or keyword-only fields, default
factories or fields left out of ``__init__``: anything else is refused (TypeError), where this
``__init__`` would not do what ``@dataclass``'s does.
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["dict_init"]

T = TypeVar("T")


def _refusal(cls: type) -> str:
    """Why :func:`dict_init` cannot stand in for ``cls``'s ``__init__`` ('' where it can)."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return "not a frozen dataclass"
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        return "it has __post_init__ or slots"
    for f in getattr(cls, "__dataclass_fields__").values():
        if f._field_type is not dataclasses._FIELD:  # type: ignore[attr-defined]
            return f"field {f.name!r} is a ClassVar or an InitVar"
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            return f"field {f.name!r} is left out of __init__, keyword-only or has a factory"
    return ""


def dict_init(cls: type[T]) -> type[T]:
    """Class decorator, above ``@dataclass(frozen=True)``: ``cls`` with an ``__init__`` that
    fills the instance's ``__dict__`` at once (see the module docstring)."""
    refusal = _refusal(cls)
    if refusal:
        raise TypeError(f"dict_init: {cls.__qualname__}: {refusal}")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    params = ", ".join(f"{f.name}=_defaults[{f.name!r}]" if f.name in defaults else f.name
                       for f in fields)
    values = ", ".join(f"{f.name}={f.name}" for f in fields)
    source = f"def __init__(self, {params}):\n    self.__dict__.update({values})\n"
    namespace: dict[str, Any] = {}
    exec(source, {"_defaults": defaults}, namespace)  # noqa: S102 - our own field names
    init = namespace["__init__"]
    written = cls.__dict__["__init__"]
    init.__qualname__ = written.__qualname__
    init.__module__ = written.__module__
    init.__annotations__ = dict(written.__annotations__)
    init.__doc__ = written.__doc__
    type.__setattr__(cls, "__init__", init)
    return cls
