"""Records that inherit their comparison, hash and ``repr`` (sst_cdma.engine.records) behave as
the methods ``@dataclass`` would have written for them: the messages between the cdma
elements, and records with fields left out of the comparison, the hash or the ``repr``."""
from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

import components.messages as messages
from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record, \
    record_methods_inherited


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


@frozen_record
class Shaped(FrozenRecord):
    """A frozen record with a factory, a field left out of ``__init__`` and a keyword-only
    one."""

    a: int
    b: list[int] = field(default_factory=list)
    c: str = "c"
    d: int = field(default=4, init=False)
    e: tuple[int, ...] = field(default=(), kw_only=True)


@record
class Posted(Record):
    """A mutable record whose ``__post_init__`` sets a field left out of ``__init__``."""

    a: int
    b: int = 0
    total: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.total = self.a + self.b


def test_a_declared_record_is_made_as_dataclass_would_make_it():
    assert vars(Shaped(1)) == {"a": 1, "b": [], "c": "c", "d": 4, "e": ()}
    assert vars(Shaped(1, [2], c="x", e=(3,))) == {"a": 1, "b": [2], "c": "x", "d": 4,
                                                    "e": (3,)}
    assert Shaped(1).b is not Shaped(1).b  # the factory runs for each record
    for bad in (lambda: Shaped(), lambda: Shaped(1, d=5), lambda: Shaped(1, [], "c", ())):
        with pytest.raises(TypeError):
            bad()
    posted = Posted(1, 2)
    assert posted.total == 3 and posted == Posted(1, 2) and repr(posted) == \
        "Posted(a=1, b=2, total=3)"
    posted.b = 5  # a mutable record takes assignments
    assert posted.b == 5
    with pytest.raises(TypeError, match="unhashable"):
        hash(posted)
    assert dataclasses.replace(Shaped(1, e=(2,)), a=2) == Shaped(2, e=(2,))
    assert pickle.loads(pickle.dumps(Shaped(1, [2]))) == Shaped(1, [2])
    assert copy.deepcopy(Posted(2)) == Posted(2)


def test_a_frozen_record_refuses_assignment_as_a_frozen_dataclass_does():
    shaped = Shaped(1)
    for change in (lambda: setattr(shaped, "a", 2), lambda: delattr(shaped, "a"),
                   lambda: setattr(shaped, "other", 2)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()

    class Plain(Shaped):
        """Not declared a record: as for a frozen dataclass's subclass, only the fields are
        guarded."""

    plain = Plain(1)
    plain.other = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.a = 2
    assert Shaped.__dataclass_params__.frozen and not Posted.__dataclass_params__.frozen


def test_no_method_is_written_before_the_first_record_is_made():
    @frozen_record
    class Fresh(FrozenRecord):
        """A record class just declared."""

        a: int

    assert not {"__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"} & \
        set(Fresh.__dict__)
    declared = Fresh.__dict__["__init__"]
    assert Fresh(1).a == 1
    assert Fresh.__dict__["__init__"] is not declared  # written at the first record
    assert Fresh(2).a == 2


def test_a_record_dataclass_would_refuse_is_refused_when_declared():
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class Misordered(Record):
            """b lacks a default after a."""

            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(TypeError, match="InitVar"):
        @record
        class WithInitVar(Record):
            """An InitVar, which the written __init__ does not pass on."""

            a: dataclasses.InitVar[int]
    with pytest.raises(TypeError, match="derives from FrozenRecord"):
        @frozen_record
        class NotFrozen(Record):
            """A frozen record that does not derive from FrozenRecord."""
    with pytest.raises(TypeError, match="not from FrozenRecord"):
        @record
        class Frozen(FrozenRecord):
            """A mutable record deriving from FrozenRecord."""


def test_a_record_without_a_docstring_is_named_by_its_fields():
    @record
    class Bare(Record):
        a: int
        b: str = ""

    assert Bare.__doc__ == "Bare(a, b)"
