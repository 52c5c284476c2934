"""dict_init: a frozen dataclass's quicker __init__ makes the same instances."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Optional

import pytest

from sst_cdma.engine.dict_init import dict_init


@dataclass(frozen=True)
class Written:
    """Made by @dataclass's own __init__."""

    op: str
    name: str
    size: Optional[int] = None
    reads: tuple[str, ...] = ()
    line: int = field(default=0, compare=False)


@dict_init
@dataclass(frozen=True)
class Quick:
    """The same fields, made by dict_init's __init__."""

    op: str
    name: str
    size: Optional[int] = None
    reads: tuple[str, ...] = ()
    line: int = field(default=0, compare=False)


@pytest.mark.parametrize("args, kwargs", [
    (("alloc", "x"), {}),
    (("compute", "conv1", 3), {"reads": ("a", "b")}),
    ((), {"op": "free", "name": "y", "line": 7}),
])
def test_instances_are_those_dataclass_makes(args, kwargs):
    written, quick = Written(*args, **kwargs), Quick(*args, **kwargs)
    assert vars(quick) == vars(written) and list(vars(quick)) == list(vars(written))
    assert repr(quick).replace("Quick", "Written") == repr(written)
    assert quick == Quick(*args, **kwargs) and hash(quick) == hash(Quick(*args, **kwargs))
    assert dataclasses.replace(quick, name="z").name == "z"


def test_the_signature_and_its_faults_are_dataclass_s():
    assert inspect.signature(Quick) == inspect.signature(Written)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'name'"):
        Quick("alloc")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nmae'"):
        Quick("alloc", nmae="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Quick("alloc", "x").name = "y"  # type: ignore[misc]


def test_a_class_it_would_not_make_alike_is_refused():
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Factory:
        a: list = field(default_factory=list)

    @dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (Mutable, Factory, Checked):
        with pytest.raises(TypeError, match=f"dict_init: .*{cls.__name__}"):
            dict_init(cls)
