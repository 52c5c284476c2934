"""Parse and validate workload streams: ``parse_stream(text, source) -> Stream``.

Grammar (one statement per line; ``#`` starts a comment, blank lines are ignored)::

    stream version=1 network=NAME batch=INT dtype=float32|float16|bfloat16 policy=POLICY
    tensor NAME bytes=INT kind=activation|gradient|weight|state|workspace [layer=L] [sparse=0|1] [shape=AxBx..]
    phase forward
    alloc NAME | free NAME | wait NAME
    offload NAME layer=L [codec=none] [tier=host|nvme] | prefetch NAME layer=L [tier=host|nvme]
    compute L pass=fwd|bwd|recompute|update flops=INT dram=INT [time=DURATION] [algo=A[+A]] [reads=T,T..] [writes=T,T..]
    sync L
    send NAME peer=STAGE | recv NAME peer=STAGE
    all_reduce NAME group=G | reduce_scatter NAME group=G | all_gather NAME group=G
    phase backward
    ...
    phase update            (optional: the optimizer step)
    ...
    end

Validation follows the execution semantics (docs/workloads.md): tensors are declared before
the first ``phase``; ``alloc``/``free`` must balance; ``offload`` needs an allocated tensor;
``prefetch`` needs a tensor offloaded earlier and allocated again (a weight tensor may be
prefetched without: weights kept on the host, a plain copy); ``wait`` names a prefetched
tensor; nothing is freed or overwritten while a transfer of it may be in flight (a ``sync``
drains both streams, a ``wait`` completes one prefetch); a compute's ``reads``/``writes`` must be
resident and not awaiting a prefetch; ``pass=recompute`` (a forward kernel re-run to rebuild a
tensor) only inside ``phase backward``; ``codec=none`` (a plain copy that bypasses the engine's
codec, also for the tensor's prefetch) only on ``offload``; ``send`` (to pipeline stage
``peer``) needs an allocated tensor with no transfer in flight and hands it over: the sender's
copy is freed once it has left, so it counts as freed from the send on; ``recv`` (from stage
``peer``) needs an allocated tensor to receive into; a collective (``all_reduce``,
``reduce_scatter``, ``all_gather`` over the rank's process group ``group``, of the whole
declared tensor) reads and writes its tensor in place, so it needs it allocated with no
transfer in flight. Every problem raises
:class:`StreamError` reading
``"SOURCE:LINE: message"``.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any

from .dtypes import DTYPES
from .durations import parse_duration
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, read_text

from .errors import StreamError, WorkloadError, read_fault
from .stream_schema import (COLLECTIVE_WAIT, COLLECTIVES, LAYER, OPS, PHASES, STATEMENTS, STREAM_VERSION,
                            TENSOR_KINDS, Stream, StreamOp, StreamTensor, read_values)

__all__ = ["STREAM_VERSION", "TENSOR_KINDS", "OPS", "StreamTensor", "StreamOp", "Stream",
           "parse_stream", "parse_duration", "read_stream", "STREAM_FILE"]

#: a workload stream: a line per tensor and operation (a large network's is a few MiB)
STREAM_FILE = FileKind("a workload stream", 256 * MIB)

_PASS_OF_PHASE = {"forward": "fwd", "backward": "bwd", "update": "update"}
#: the passes a compute may have besides its phase's own: recomputation in the backward pass
_EXTRA_PASSES = {"backward": ("recompute",)}
_TENSOR_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+:-]*$")


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.state = "start"  # start -> decl -> forward -> backward -> end
        self.stream: Stream | None = None
        self.allocated: set[str] = set()
        self.host: set[str] = set()
        self.inflight: dict[str, str] = {}
        #: tensors with an asynchronous collective in flight (a sync does not end them: only
        #: their collective_wait does) -> the collective
        self.async_inflight: dict[str, str] = {}
        self.prefetch_issued: set[str] = set()
        self.codec: dict[str, str] = {}
        self.tier: dict[str, str] = {}  # where each offloaded tensor went ('' = the GPU's)
        self.computed: set[str] = set()
        self.lineno = 0

    def fail(self, message: str) -> StreamError:
        return StreamError(message, source=self.source, line=self.lineno)

    # -- lexing ------------------------------------------------------------------------------
    def split(self, tokens: list[str]) -> tuple[str, str | None, dict[str, Any]]:
        """The statement, its positional argument and its typed values by field name."""
        head = tokens[0]
        if head not in STATEMENTS:
            raise self.fail(
                f"unknown op '{head}' (expected one of: {', '.join(STATEMENTS)})")
        statement = STATEMENTS[head]
        required, optional = statement.required, statement.optional
        rest = tokens[1:]
        arg = None
        if statement.positional is not None:
            if not rest or "=" in rest[0]:
                raise self.fail(f"'{head}' needs a {statement.positional} name")
            arg = rest[0]
            rest = rest[1:]
        keys: dict[str, str] = {}
        for tok in rest:
            key, eq, value = tok.partition("=")
            if not eq:
                raise self.fail(f"'{head}': unexpected token '{tok}' (expected key=value)")
            if not key or not value:
                raise self.fail(f"'{head}': malformed key=value '{tok}'")
            if key in keys:
                raise self.fail(f"'{head}': duplicate key '{key}'")
            if key not in required and key not in optional:
                allowed = ", ".join(sorted(required | optional)) or "none"
                raise self.fail(f"'{head}': unknown key '{key}' (allowed: {allowed})")
            keys[key] = value
        missing = sorted(required - set(keys))
        if missing:
            raise self.fail(f"'{head}': missing key(s) {', '.join(missing)}")
        try:
            return head, arg, read_values(head, keys)
        except ValueError as exc:
            raise self.fail(f"'{head}': {exc}") from None

    def tensor_ref(self, head: str, name: str) -> str:
        assert self.stream is not None
        if name not in self.stream.tensors:
            raise self.fail(f"'{head}': tensor '{name}' used before declared")
        return name

    def layer_name(self, head: str, name: str) -> str:
        try:
            return LAYER.read("", name)
        except ValueError as exc:
            raise self.fail(f"'{head}': {exc}") from None

    # -- statements ---------------------------------------------------------------------------
    def feed(self, lineno: int, raw: str) -> None:
        self.lineno = lineno
        tokens = []
        for tok in raw.split():
            if tok.startswith("#"):
                break
            tokens.append(tok)
        if not tokens:
            return
        if self.state == "end":
            raise self.fail(f"'{tokens[0]}' after 'end'")
        head, arg, values = self.split(tokens)
        if self.state == "start":
            if head != "stream":
                raise self.fail(f"expected the 'stream version={STREAM_VERSION} ...' header first, "
                                f"got '{head}'")
            self.header(values)
            return
        if head == "stream":
            raise self.fail("duplicate 'stream' header")
        if head == "tensor":
            self.tensor(arg, values)
        elif head == "phase":
            self.phase(arg)
        elif head == "end":
            if self.state not in PHASES:
                raise self.fail("'end' before 'phase forward'")
            self.state = "end"
        else:
            if self.state not in PHASES:
                raise self.fail(f"'{head}' before 'phase forward'")
            self.op(head, arg, values)

    def header(self, values: dict[str, Any]) -> None:
        version = values["version"]
        if version != STREAM_VERSION:
            raise self.fail(f"unsupported stream version {version} (this reader: {STREAM_VERSION})")
        if values["batch"] < 1:
            raise self.fail(f"'stream': batch must be >= 1, got {values['batch']}")
        if values["dtype"] not in DTYPES:
            raise self.fail(f"'stream': unknown dtype '{values['dtype']}' "
                            f"(expected one of {', '.join(DTYPES)})")
        from .policies import check_policy

        try:
            check_policy(values["policy"])
        except WorkloadError as exc:
            raise self.fail(f"'stream': unknown policy '{values['policy']}': {exc}") from None
        self.stream = Stream(self.source, **values)
        self.state = "decl"

    def tensor(self, name: str | None, values: dict[str, Any]) -> None:
        assert self.stream is not None and name is not None
        if self.state != "decl":
            raise self.fail("tensor declarations must precede the first 'phase'")
        if not _TENSOR_RE.match(name):
            raise self.fail(f"'tensor': bad tensor name '{name}'")
        if name in self.stream.tensors:
            raise self.fail(f"'tensor': '{name}' declared twice")
        shape = values.get("shape")
        if shape is not None:
            expect = math.prod(shape) * DTYPES[self.stream.dtype]
            if expect != values["bytes"]:
                text = "x".join(map(str, shape))
                raise self.fail(f"'tensor': bytes={values['bytes']} disagrees with shape {text} "
                                f"of {self.stream.dtype} ({expect} bytes)")
        self.stream.tensors[name] = StreamTensor(name, **values, line=self.lineno)

    def phase(self, name: str | None) -> None:
        if name not in PHASES:
            raise self.fail(f"unknown phase '{name}' (expected forward, backward or update)")
        expected = {"decl": "forward", "forward": "backward", "backward": "update"}.get(self.state)
        if name != expected:
            raise self.fail(f"'phase {name}' out of order (phases are forward, then backward, "
                            "then an optional update)")
        self.state = name

    def op(self, head: str, arg: str | None, values: dict[str, Any]) -> None:
        assert self.stream is not None and arg is not None
        phase = self.state
        if head == "compute":
            self.compute(arg, values, phase)
        elif head == "sync":
            layer = self.layer_name("sync", arg)
            if layer not in self.computed:
                raise self.fail(f"'sync': layer '{layer}' has no compute before it")
            self.inflight.clear()
        else:
            self.transfer(head, self.tensor_ref(head, arg), values)
            if head == "prefetch":
                # weights kept on the host were never offloaded: a plain copy brings them in
                values["codec"] = self.codec.get(arg, "none" if self.host_weight(arg) else "")
                values["tier"] = self.prefetch_tier(arg, values.get("tier", ""))
        self.stream.ops.append(StreamOp(head, arg, phase, **values, line=self.lineno))

    def prefetch_tier(self, name: str, given: str) -> str:
        """Where a prefetch of ``name`` reads from: its offload's tier; for a weight never
        offloaded, the ``tier=`` it starts on ('' the GPU's ``offload_to``)."""
        if name in self.host:
            if given:
                raise self.fail(f"'prefetch': tier={given} on '{name}', which was offloaded: "
                                "it comes back from its offload's tier (tier= on a prefetch "
                                "names where a weight never offloaded starts)")
            return self.tier.get(name, "")
        return given

    def host_weight(self, name: str) -> bool:
        """True for a weight tensor never offloaded: weights kept on the host
        (``weights=host``), which a prefetch brings in as a plain copy."""
        tensor = self.stream.tensors.get(name) if self.stream is not None else None
        return tensor is not None and tensor.kind == "weight" and name not in self.host

    def transfer(self, head: str, name: str, values: dict[str, Any]) -> None:
        """Check an alloc, free, offload, prefetch or wait of tensor ``name``."""
        busy = self.inflight.get(name) or self.async_inflight.get(name)
        if head == "alloc":
            if name in self.allocated:
                raise self.fail(f"'alloc': tensor '{name}' is already allocated")
            self.allocated.add(name)
        elif head == "free":
            if name not in self.allocated:
                raise self.fail(f"'free': tensor '{name}' is not allocated")
            if busy:
                raise self.fail(f"'free': tensor '{name}' while its {busy} may be in flight "
                                "(missing sync or wait)")
            self.allocated.discard(name)
        elif head == "offload":
            if name not in self.allocated:
                raise self.fail(f"'offload': tensor '{name}' is not allocated")
            if busy:
                raise self.fail(f"'offload': tensor '{name}' already has a {busy} in flight")
            self.inflight[name] = "offload"
            self.host.add(name)
            self.codec[name] = values.get("codec", "")
            self.tier[name] = values.get("tier", "")
        elif head == "prefetch":
            if name not in self.host and not self.host_weight(name):
                raise self.fail(f"'prefetch': tensor '{name}' was never offloaded")
            if name not in self.allocated:
                raise self.fail(f"'prefetch': tensor '{name}' is not allocated (alloc must precede "
                                "prefetch)")
            if busy:
                raise self.fail(f"'prefetch': tensor '{name}' already has a {busy} in flight")
            self.inflight[name] = "prefetch"
            self.prefetch_issued.add(name)
        elif head in ("send", "recv") or head in COLLECTIVES:
            self.peer_transfer(head, name, busy)
            if values.get("async_"):
                self.async_inflight[name] = head
        elif head == COLLECTIVE_WAIT:
            if self.async_inflight.pop(name, None) is None:
                raise self.fail(f"'{head}': tensor '{name}' has no asynchronous collective "
                                "(async=1) in flight")
        elif head == "wait":
            if name not in self.prefetch_issued:
                raise self.fail(f"'wait': tensor '{name}' has no prefetch before it")
            if busy == "prefetch":
                del self.inflight[name]

    def peer_transfer(self, head: str, name: str, busy: str | None) -> None:
        """Check a ``send``, ``recv`` or collective of tensor ``name``: allocated, nothing in
        flight; a send hands the tensor over (freed once it has left the GPU)."""
        if name not in self.allocated:
            raise self.fail(f"'{head}': tensor '{name}' is not allocated")
        if busy:
            raise self.fail(f"'{head}': tensor '{name}' while its {busy} may be in flight")
        if head == "send":
            self.allocated.discard(name)

    def compute(self, layer: str, values: dict[str, Any], phase: str) -> None:
        """Check a compute op of ``layer`` inside ``phase``."""
        self.layer_name("compute", layer)
        pass_ = values["pass_"]
        if pass_ != _PASS_OF_PHASE[phase] and pass_ not in _EXTRA_PASSES.get(phase, ()):
            raise self.fail(f"'compute': pass={pass_} inside 'phase {phase}'")
        for key in ("reads", "writes"):
            for name in values.get(key, ()):
                self.tensor_ref("compute", name)
                if name not in self.allocated:
                    raise self.fail(f"'compute {layer}' {key[:-1]}s tensor '{name}' which is not "
                                    "resident (never allocated, freed or offloaded)")
                busy = self.inflight.get(name)
                if name in self.async_inflight:
                    raise self.fail(f"'compute {layer}' {key[:-1]}s tensor '{name}' while its "
                                    f"asynchronous {self.async_inflight[name]} is in flight "
                                    f"(missing {COLLECTIVE_WAIT})")
                if busy == "prefetch":
                    raise self.fail(f"'compute {layer}' {key[:-1]}s tensor '{name}' before its "
                                    "prefetch completed (missing wait)")
                if key == "writes" and busy == "offload":
                    raise self.fail(f"'compute {layer}' writes tensor '{name}' while its offload "
                                    "is in flight")
        self.computed.add(layer)

    def finish(self, last_line: int) -> Stream:
        self.lineno = max(last_line, 1)
        if self.state == "start":
            raise self.fail("empty stream: no 'stream' header")
        if self.state != "end":
            raise self.fail("missing 'end'")
        assert self.stream is not None
        return self.stream


def read_stream(path: str | os.PathLike[str]) -> Stream:
    """Read and parse the workload stream file ``path`` (a regular file of at most
    :data:`STREAM_FILE`'s limit); WorkloadError/StreamError naming it."""
    where = os.fspath(path)
    try:
        text = read_text(where, STREAM_FILE)
    except FileReadError as exc:
        raise WorkloadError(read_fault(exc, "workload stream"), file=where) from None
    return parse_stream(text, where)


def parse_stream(text: str, source: str = "<stream>") -> Stream:
    """Parse and validate a workload stream; raises :class:`StreamError` ("SOURCE:LINE: ...")."""
    parser = _Parser(source)
    lines = text.splitlines()
    for lineno, raw in enumerate(lines, 1):
        parser.feed(lineno, raw)
    return parser.finish(len(lines))
