"""The workload stream as objects, and the one declaration of their fields.

A stream is a header (:class:`Stream`), tensor declarations (:class:`StreamTensor`) and ops
(:class:`StreamOp`). Each field that a statement's text carries as ``key=value`` is declared
once, on the dataclass field itself (:func:`_key`): its key, its text form (how the value is
read and written) and the statements that carry it. From that declaration come the key table
the parser checks lines against (:data:`STATEMENTS`), the typed values it reads
(:func:`read_values`) and the text of one statement (:func:`statement_line`), so a new op field
is one field here plus its use. Times are integers (picoseconds); only :data:`DURATION` turns
them into text and back.
"""
from __future__ import annotations

import re
from dataclasses import MISSING, field, fields
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from .durations import format_ps, parse_duration
from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["STREAM_VERSION", "TENSOR_KINDS", "COLLECTIVES", "COLLECTIVE_WAIT", "OPS", "PHASES", "PASSES", "Form", "Key",
           "Statement", "STATEMENTS", "StreamTensor", "StreamOp", "Stream", "read_values",
           "statement_line", "INT", "WORD", "LAYER", "DURATION", "ALGORITHM", "NAMES", "FLAG",
           "SHAPE", "PASS", "TENSOR_KIND", "CODEC"]

#: The stream format version this package reads and writes.
STREAM_VERSION = 1
#: Allowed ``kind=`` values of tensor declarations.
TENSOR_KINDS = ("activation", "gradient", "weight", "state", "workspace")
#: The collectives a stream may issue over one of its rank's process groups (docs/parallel.md,
#: "Collectives on the cluster fabric").
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
#: The op that waits for an asynchronous collective (``async=1``) of its tensor to end.
COLLECTIVE_WAIT = "collective_wait"
#: Ops allowed inside a phase (``send``/``recv``: a tensor to or from another pipeline stage,
#: docs/parallel.md; the collectives over a process group, and the wait for an asynchronous
#: one).
OPS = ("alloc", "free", "offload", "prefetch", "wait", "compute", "sync", "send", "recv",
       *COLLECTIVES, COLLECTIVE_WAIT)
#: The phases, in the order a stream has them (``update`` is optional).
PHASES = ("forward", "backward", "update")
#: The passes a compute op may have.
PASSES = ("fwd", "bwd", "recompute", "update")

_LAYER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+-]*$")
_INT_RE = re.compile(r"^[0-9]+$")
_ALGO_RE = re.compile(r"^[A-Z][A-Z0-9_]*(\+[A-Z][A-Z0-9_]*)*$")


class Form(NamedTuple):
    """How a value is written as text and read back: ``read(key, text)`` raises
    :class:`ValueError` with the message (without the statement) when the text is bad."""

    read: Callable[[str, str], Any]
    write: Callable[[Any], str]


def _read_int(key: str, text: str) -> int:
    if not _INT_RE.match(text):
        raise ValueError(f"{key}={text} is not a non-negative integer")
    return int(text)


def _read_layer(key: str, text: str) -> str:
    if not _LAYER_RE.match(text):
        raise ValueError(f"bad layer name '{text}'")
    return text


def _read_algorithm(key: str, text: str) -> str:
    if not _ALGO_RE.match(text):
        raise ValueError(f"{key}={text} must be algorithm names joined by '+' "
                         "(e.g. WINOGRAD or IMPLICIT_PRECOMP_GEMM+FFT)")
    return text


def _read_flag(key: str, text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"{key}={text} must be 0 or 1")
    return text == "1"


def _read_shape(key: str, text: str) -> tuple[int, ...]:
    parts = text.split("x")
    if not all(_INT_RE.match(p) and int(p) > 0 for p in parts):
        raise ValueError(f"bad shape '{text}' (expected e.g. 64x3x224x224)")
    return tuple(int(p) for p in parts)


def _choice(allowed: tuple[str, ...], message: str) -> Form:
    """A word out of ``allowed``; ``message`` (formatted with ``key`` and ``text``) otherwise."""
    def read(key: str, text: str) -> str:
        if text not in allowed:
            raise ValueError(message.format(key=key, text=text))
        return text
    return Form(read, str)


def _same(key: str, text: str) -> str:
    return text


#: Text forms of values.
INT = Form(_read_int, str)
WORD = Form(_same, str)
LAYER = Form(_read_layer, str)
DURATION = Form(lambda key, text: parse_duration(text), format_ps)
ALGORITHM = Form(_read_algorithm, str)
NAMES = Form(lambda key, text: tuple(text.split(",")), ",".join)
FLAG = Form(_read_flag, lambda value: "1" if value else "0")
SHAPE = Form(_read_shape, lambda shape: "x".join(map(str, shape)))
PASS = _choice(PASSES, "{key}={text} must be fwd, bwd, recompute or update")
TENSOR_KIND = _choice(TENSOR_KINDS, "unknown kind '{text}' (expected one of "
                      + ", ".join(TENSOR_KINDS) + ")")
CODEC = _choice(("none",), "{key}={text} (only codec=none, a plain copy, may be named; without "
                           "the key the engine's codec is used)")
#: where an offload goes: the pinned host pool or the DMA engine's SSDs (docs/storage.md)
TIER = _choice(("host", "nvme"), "{key}={text} must be host or nvme (without the key the GPU's "
                                 "offload_to decides)")


class Key(NamedTuple):
    """A field's ``key=value`` in the text: the key, its form, the statements that carry it
    and those of them that must."""

    key: str
    form: Form
    statements: tuple[str, ...]
    required_in: tuple[str, ...]


_KEY = "stream_key"


def _key(key: str, form: Form, statements: tuple[str, ...], required: bool = False,
         default: Any = MISSING) -> Any:
    """Declare a field that ``statements`` write as ``key=value`` in ``form`` (all of them must,
    when ``required``). An optional key is left out of the text while the field holds None, '',
    () or False; a field without a ``default`` must be given."""
    meta = {_KEY: Key(key, form, statements, statements if required else ())}
    return field(default=default, metadata=meta)


@frozen_record
class StreamTensor(FrozenRecord):
    """A declared tensor (``tensor NAME bytes=... kind=...``); ``line`` is its line in the text
    it was read from (0: made as an object)."""

    name: str
    bytes: int = _key("bytes", INT, ("tensor",), required=True)
    kind: str = _key("kind", TENSOR_KIND, ("tensor",), required=True)
    layer: Optional[str] = _key("layer", LAYER, ("tensor",), default=None)
    sparse: bool = _key("sparse", FLAG, ("tensor",), default=False)
    shape: Optional[tuple[int, ...]] = _key("shape", SHAPE, ("tensor",), default=None)
    line: int = field(default=0, compare=False)


@frozen_record
class StreamOp(FrozenRecord):
    """One op of a phase; ``name`` is the tensor (alloc/free/offload/prefetch/wait) or layer
    (compute/sync). ``time_ps`` is the optional kernel time in picoseconds (measured, or priced
    by the kernel model), ``algorithm`` the convolution algorithm(s) the kernel model picked.
    ``line`` is its line in the text it was read from (0: made as an object)."""

    op: str
    name: str
    phase: str
    layer: Optional[str] = _key("layer", LAYER, ("offload", "prefetch"), True, None)
    pass_: Optional[str] = _key("pass", PASS, ("compute",), True, None)
    flops: Optional[int] = _key("flops", INT, ("compute",), True, None)
    dram: Optional[int] = _key("dram", INT, ("compute",), True, None)
    time_ps: Optional[int] = _key("time", DURATION, ("compute",), default=None)
    algorithm: str = _key("algo", ALGORITHM, ("compute",), default="")
    reads: tuple[str, ...] = _key("reads", NAMES, ("compute",), default=())
    writes: tuple[str, ...] = _key("writes", NAMES, ("compute",), default=())
    #: ``none`` on an offload (and its prefetch) the engine copies raw; '' = the engine's codec
    codec: str = _key("codec", CODEC, ("offload",), default="")
    #: ``host`` or ``nvme`` on an offload (and its prefetch): where the tensor goes; '' = the
    #: GPU's ``offload_to``. On the prefetch of a weight never offloaded: the tier it starts on
    #: (``weights`` ``host`` or ``nvme``)
    tier: str = _key("tier", TIER, ("offload", "prefetch"), default="")
    #: on a ``send`` or ``recv``: the pipeline stage the tensor goes to or comes from
    peer: Optional[int] = _key("peer", INT, ("send", "recv"), True, None)
    #: on a collective: the kind of process group of the GPU's rank it runs over (``tp``,
    #: ``dp``, ``pp`` or ``embedding``; the fabric knows each rank's groups)
    group: str = _key("group", WORD, COLLECTIVES, True, "")
    #: on a collective: ``async=1`` starts it and lets the stream go on (its kernels run
    #: beside it); a ``collective_wait`` of its tensor waits for it to end
    async_: bool = _key("async", FLAG, COLLECTIVES, default=False)
    line: int = field(default=0, compare=False)


@record
class Stream(Record):
    """A workload stream: header fields, declared tensors and the ops in order. A rendered
    stream keeps the :class:`~workloads.plan.Plan` it was made from (``plan``: its ops grouped
    per layer, with the comments its text carries); a parsed one has none."""

    source: str
    version: int = _key("version", INT, ("stream",), required=True)
    network: str = _key("network", WORD, ("stream",), required=True)
    batch: int = _key("batch", INT, ("stream",), required=True)
    dtype: str = _key("dtype", WORD, ("stream",), required=True)
    policy: str = _key("policy", WORD, ("stream",), required=True)
    tensors: dict[str, StreamTensor] = field(default_factory=dict)
    ops: list[StreamOp] = field(default_factory=list)
    #: the plan it was made from (plan.py builds on this module: the import is type-only)
    plan: Optional[Plan] = field(default=None, compare=False, repr=False)

    def phase_ops(self, phase: str) -> list[StreamOp]:
        """The ops of ``phase`` ("forward", "backward" or "update") in issue order."""
        return [op for op in self.ops if op.phase == phase]

    def layers(self, pass_: str = "fwd") -> list[str]:
        """Layer names in the order their ``pass_`` compute ops appear."""
        return [op.name for op in self.ops if op.op == "compute" and op.pass_ == pass_]

    def computes(self, pass_: str | None = None) -> list[StreamOp]:
        """The compute ops (of one pass, or all)."""
        return [op for op in self.ops
                if op.op == "compute" and (pass_ is None or op.pass_ == pass_)]


class Statement(NamedTuple):
    """What a statement's line holds: the kind of its positional argument (``tensor``,
    ``layer``, ``phase`` or None) and its keys as (field name, key, whether the line must have
    it), in the order the text writes them."""

    positional: Optional[str]
    keys: tuple[tuple[str, Key, bool], ...]
    required: frozenset[str]
    optional: frozenset[str]


def _statement(positional: Optional[str], carrier: Optional[type], head: str) -> Statement:
    keys = tuple((f.name, f.metadata[_KEY], head in f.metadata[_KEY].required_in)
                 for f in (fields(carrier) if carrier is not None else ())
                 if _KEY in f.metadata and head in f.metadata[_KEY].statements)
    return Statement(positional, keys, frozenset(k.key for _, k, must in keys if must),
                     frozenset(k.key for _, k, must in keys if not must))


#: statement -> its positional argument and keys, derived from the field declarations
STATEMENTS: dict[str, Statement] = {
    "stream": _statement(None, Stream, "stream"),
    "tensor": _statement("tensor", StreamTensor, "tensor"),
    "phase": _statement("phase", None, "phase"),
    "end": _statement(None, None, "end"),
    **{op: _statement("layer" if op in ("compute", "sync") else "tensor", StreamOp, op)
       for op in OPS},
}


def read_values(head: str, keys: dict[str, str]) -> dict[str, Any]:
    """The typed values of statement ``head``'s ``key=value`` texts, by field name (absent keys
    left out); a bad value raises :class:`ValueError` with the message."""
    return {name: key.form.read(key.key, keys[key.key])
            for name, key, _ in STATEMENTS[head].keys if key.key in keys}


def _unset(value: Any) -> bool:
    return value is None or value is False or value == "" or value == ()


def _line(head: str, positional: Optional[str], obj: Any) -> str:
    parts = [head] if positional is None else [head, positional]
    for name, key, required in STATEMENTS[head].keys:
        value = getattr(obj, name)
        if required or not _unset(value):
            parts.append(f"{key.key}={key.form.write(value)}")
    return " ".join(parts)


def statement_line(obj: Stream | StreamTensor | StreamOp) -> str:
    """The line of text of a stream's header, a tensor declaration or an op."""
    if isinstance(obj, StreamOp):
        return _line(obj.op, obj.name, obj)
    if isinstance(obj, StreamTensor):
        return _line("tensor", obj.name, obj)
    return _line("stream", None, obj)
