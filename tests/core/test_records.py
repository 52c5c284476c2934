"""Records that inherit their comparison, hash and ``repr`` (sst_cdma.engine.records) behave as
the methods ``@dataclass`` would have written for them: the messages between the cdma
elements, and records with fields left out of the comparison, the hash or the ``repr``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

import components.messages as messages
from sst_cdma.engine.records import FrozenRecord, Record, record_methods_inherited


@dataclass(frozen=True, repr=False, eq=False)
class Picky(FrozenRecord):
    """A frozen record with a field out of the comparison, one out of the hash, one out of the
    ``repr``."""

    a: int
    b: str = field(default="b", compare=False)
    c: int = field(default=0, hash=False)
    d: Optional[tuple[int, ...]] = field(default=None, repr=False)


@dataclass(repr=False, eq=False)
class Open(Record):
    """A mutable record with a list field."""

    name: str
    items: list[int] = field(default_factory=list)


def _written(cls: type) -> type:
    """The class ``@dataclass`` would have made of ``cls``'s fields, all methods written."""
    specs = []
    for f in dataclasses.fields(cls):
        kwargs: dict[str, Any] = {"compare": f.compare, "hash": f.hash, "repr": f.repr}
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        specs.append((f.name, f.type, field(**kwargs)))
    made = dataclasses.make_dataclass(cls.__name__, specs,
                                      frozen=cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    made.__qualname__ = cls.__qualname__
    return made


SAMPLES: list[tuple[type, tuple[Any, ...], tuple[Any, ...]]] = [
    # (record, arguments, arguments of an unequal one)
    (messages.MovedTensor, ("conv1", 10, True, (2, 3)), ("conv1", 10, False, (2, 3))),
    (messages.OffloadManifest, ("gpu0", "vgg16", "float32", 64), ("gpu0", "vgg16", "float16", 64)),
    (messages.CopyCost, (1, 2, 3, 4, 5), (1, 2, 3, 4, 6)),
    (messages.CodecKernel, ("compress", "t", 7, 8), ("decompress", "t", 7, 8)),
    (messages.GradientManifest, ("g", "s", "r", (("l", 1),)), ("g", "s", "r", ())),
    (messages.PathInfo, (["a"], ["b"], 5), (["a"], ["c"], 5)),
    (messages.TransferRequest, ("offload", "t", 3, "l"), ("prefetch", "t", 3, "l")),
    (messages.CpuStepRequest, ("b0", 1, 2), ("b0", 1, 3)),
    (messages.GradientReady, ("fc8",), ("fc7",)),
    (messages.AllReduceDone, (), None),
    (Picky, (1, "x", 2, (3,)), (2, "x", 2, (3,))),
    (Open, ("n", [1, 2]), ("n", [1])),
]


@pytest.mark.parametrize("cls,args,other_args", SAMPLES, ids=[s[0].__name__ for s in SAMPLES])
def test_a_record_compares_hashes_and_prints_as_its_written_dataclass(cls, args, other_args):
    written = _written(cls)
    mine, theirs = cls(*args), written(*args)
    assert record_methods_inherited(cls)
    assert repr(mine) == repr(theirs)
    assert mine == cls(*args) and not mine != cls(*args)
    assert mine != theirs  # another class, as a written dataclass is unequal to it
    if other_args is not None:
        assert (mine == cls(*other_args)) == (theirs == written(*other_args))
    if cls.__dataclass_params__.frozen:
        assert hash(mine) == hash(theirs) == hash(cls(*args))
        with pytest.raises(dataclasses.FrozenInstanceError):
            mine.__setattr__(dataclasses.fields(cls)[0].name, None)
    else:
        with pytest.raises(TypeError, match="unhashable"):
            hash(mine)


def test_fields_left_out_are_left_out_as_dataclass_leaves_them():
    assert Picky(1, "x") == Picky(1, "y")  # b is not compared
    assert hash(Picky(1, c=1)) == hash(Picky(1, c=2))  # c is not hashed
    assert repr(Picky(1, d=(9,))) == "Picky(a=1, b='b', c=0)"  # d is not shown
    assert dataclasses.replace(Picky(1), a=2) == Picky(2)
    assert dataclasses.asdict(Open("n", [1])) == {"name": "n", "items": [1]}


def test_every_message_inherits_its_methods_instead_of_compiling_them():
    records = [obj for obj in vars(messages).values()
               if isinstance(obj, type) and dataclasses.is_dataclass(obj)
               and obj.__module__ == messages.__name__]
    assert len(records) >= 14
    for cls in records:
        assert record_methods_inherited(cls), cls
        frozen = cls.__dataclass_params__.frozen
        assert issubclass(cls, FrozenRecord) == frozen, cls


def test_a_record_written_whole_by_dataclass_is_told_apart():
    @dataclass(frozen=True)
    class Written(FrozenRecord):
        """``eq`` left on: ``@dataclass`` writes its own ``__eq__``."""

        a: int

    assert not record_methods_inherited(Written)
    assert not record_methods_inherited(_written(Open))


@dataclass(frozen=True, repr=False, eq=False)
class Base(FrozenRecord):
    """A frozen record another derives from."""

    a: int


@dataclass(frozen=True, repr=False, eq=False)
class Derived(Base):
    """A frozen record with one field more than its base."""

    b: int = 0


def test_the_first_comparison_and_hash_write_the_class_its_own_methods():
    @dataclass(frozen=True, repr=False, eq=False)
    class Fresh(FrozenRecord):
        """A record no one has compared or hashed yet."""

        a: int
        b: str = field(default="", compare=False)

    assert "__eq__" not in Fresh.__dict__ and "__hash__" not in Fresh.__dict__
    assert Fresh(1, "x") == Fresh(1, "y") and hash(Fresh(1)) == hash((1,))
    assert "__eq__" in Fresh.__dict__ and "__hash__" in Fresh.__dict__
    assert record_methods_inherited(Fresh)
    assert Fresh(1) != Fresh(2) and Fresh(1).__eq__(1) is NotImplemented


def test_a_derived_record_compares_on_its_own_fields_after_its_base_wrote_its_methods():
    assert Base(1) == Base(1) and hash(Base(1)) == hash((1,))  # Base writes its methods
    assert Derived(1, 2) != Derived(1, 3)
    assert hash(Derived(1, 2)) == hash((1, 2))
    assert Derived.__dict__["__eq__"] is not Base.__dict__["__eq__"]
    assert Base(1) != Derived(1, 0)  # another class, as dataclass compares
