"""Parse and validate workload streams: ``parse_stream(text, source) -> Stream``.

Grammar (one statement per line; ``#`` starts a comment, blank lines are ignored)::

    stream version=1 network=NAME batch=INT dtype=float32|float16|bfloat16 policy=POLICY
    tensor NAME bytes=INT kind=activation|gradient|weight|state|workspace [layer=L] [sparse=0|1] [shape=AxBx..]
    phase forward
    alloc NAME | free NAME | wait NAME
    offload NAME layer=L [codec=none] | prefetch NAME layer=L
    compute L pass=fwd|bwd|recompute|update flops=INT dram=INT [time=DURATION] [algo=A[+A]] [reads=T,T..] [writes=T,T..]
    sync L
    phase backward
    ...
    phase update            (optional: the optimizer step)
    ...
    end

Validation follows the execution semantics (docs/workloads.md): tensors are declared before
the first ``phase``; ``alloc``/``free`` must balance; ``offload`` needs an allocated tensor;
``prefetch`` needs a tensor offloaded earlier and allocated again; ``wait`` names a prefetched
tensor; nothing is freed or overwritten while a transfer of it may be in flight (a ``sync``
drains both streams, a ``wait`` completes one prefetch); a compute's ``reads``/``writes`` must be
resident and not awaiting a prefetch; ``pass=recompute`` (a forward kernel re-run to rebuild a
tensor) only inside ``phase backward``; ``codec=none`` (a plain copy that bypasses the engine's
codec, also for the tensor's prefetch) only on ``offload``. Every problem raises
:class:`StreamError` reading
``"SOURCE:LINE: message"``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

from .dtypes import DTYPES
from .errors import StreamError, WorkloadError

__all__ = ["STREAM_VERSION", "TENSOR_KINDS", "StreamTensor", "StreamOp", "Stream",
           "parse_stream", "parse_duration"]

#: The stream format version this parser reads.
STREAM_VERSION = 1
#: Allowed ``kind=`` values of tensor declarations.
TENSOR_KINDS = ("activation", "gradient", "weight", "state", "workspace")
_PHASES = ("forward", "backward", "update")
_PASS_OF_PHASE = {"forward": "fwd", "backward": "bwd", "update": "update"}
#: the passes a compute may have besides its phase's own: recomputation in the backward pass
_EXTRA_PASSES = {"backward": ("recompute",)}
_CODECS = ("none",)
_TENSOR_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+:-]*$")
_LAYER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+-]*$")
_INT_RE = re.compile(r"^[0-9]+$")
_ALGO_RE = re.compile(r"^[A-Z][A-Z0-9_]*(\+[A-Z][A-Z0-9_]*)*$")
_DURATION_RE = re.compile(r"^((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(ps|ns|us|ms|s)$")
_MAX_PS = Decimal(10) ** 24  # ~30 years: anything longer is a typo
_PS_PER = {"ps": 1, "ns": 10**3, "us": 10**6, "ms": 10**9, "s": 10**12}

# statement -> (positional argument, required keys, optional keys)
_SCHEMA: dict[str, tuple[str | None, frozenset[str], frozenset[str]]] = {
    "stream": (None, frozenset({"version", "network", "batch", "dtype", "policy"}), frozenset()),
    "tensor": ("tensor", frozenset({"bytes", "kind"}), frozenset({"layer", "sparse", "shape"})),
    "phase": ("phase", frozenset(), frozenset()),
    "end": (None, frozenset(), frozenset()),
    "alloc": ("tensor", frozenset(), frozenset()),
    "free": ("tensor", frozenset(), frozenset()),
    "wait": ("tensor", frozenset(), frozenset()),
    "offload": ("tensor", frozenset({"layer"}), frozenset({"codec"})),
    "prefetch": ("tensor", frozenset({"layer"}), frozenset()),
    "compute": ("layer", frozenset({"pass", "flops", "dram"}),
                frozenset({"time", "algo", "reads", "writes"})),
    "sync": ("layer", frozenset(), frozenset()),
}
#: Ops allowed inside a phase.
OPS = ("alloc", "free", "offload", "prefetch", "wait", "compute", "sync")


def parse_duration(text: str) -> int:
    """Parse ``"1.25ms"`` / ``"800us"`` / ``"3e-3s"`` into integer picoseconds (ValueError if bad)."""
    m = _DURATION_RE.match(text)
    if not m:
        raise ValueError(f"bad duration {text!r} (expected a number with ps, ns, us, ms or s)")
    try:
        value = Decimal(m.group(1)) * _PS_PER[m.group(2)]
        if value > _MAX_PS:
            raise ValueError(f"duration {text!r} is implausibly long")
        return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    except (ArithmeticError, InvalidOperation):
        raise ValueError(f"bad duration {text!r}") from None


@dataclass(frozen=True)
class StreamTensor:
    """A declared tensor."""

    name: str
    bytes: int
    kind: str
    layer: str | None
    sparse: bool
    shape: tuple[int, ...] | None
    line: int


@dataclass(frozen=True)
class StreamOp:
    """One op of a phase; ``name`` is the tensor (alloc/free/offload/prefetch/wait) or layer
    (compute/sync). ``time_ps`` is the optional kernel time in picoseconds (measured, or priced
    by the kernel model), ``algorithm`` the convolution algorithm(s) the kernel model picked."""

    op: str
    name: str
    phase: str
    line: int
    layer: str | None = None
    pass_: str | None = None
    flops: int | None = None
    dram: int | None = None
    time_ps: int | None = None
    reads: tuple[str, ...] = ()
    algorithm: str = ""
    writes: tuple[str, ...] = ()
    #: ``none`` on an offload (and its prefetch) the engine copies raw; '' = the engine's codec
    codec: str = ""


@dataclass
class Stream:
    """A validated workload stream: header fields, declared tensors and the ops in order."""

    source: str
    version: int
    network: str
    batch: int
    dtype: str
    policy: str
    tensors: dict[str, StreamTensor] = field(default_factory=dict)
    ops: list[StreamOp] = field(default_factory=list)

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


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.state = "start"  # start -> decl -> forward -> backward -> end
        self.stream: Stream | None = None
        self.allocated: set[str] = set()
        self.host: set[str] = set()
        self.inflight: dict[str, str] = {}
        self.prefetch_issued: set[str] = set()
        self.codec: dict[str, str] = {}
        self.computed: set[str] = set()
        self.lineno = 0

    def fail(self, message: str) -> StreamError:
        return StreamError(message, source=self.source, line=self.lineno)

    # -- lexing ------------------------------------------------------------------------------
    def split(self, tokens: list[str]) -> tuple[str, str | None, dict[str, str]]:
        head = tokens[0]
        if head not in _SCHEMA:
            raise self.fail(
                f"unknown op '{head}' (expected one of: {', '.join(_SCHEMA)})")
        positional, required, optional = _SCHEMA[head]
        rest = tokens[1:]
        arg = None
        if positional is not None:
            if not rest or "=" in rest[0]:
                raise self.fail(f"'{head}' needs a {positional} name")
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
        return head, arg, keys

    def int_value(self, head: str, key: str, text: str, minimum: int = 0) -> int:
        if not _INT_RE.match(text):
            raise self.fail(f"'{head}': {key}={text} is not a non-negative integer")
        value = int(text)
        if value < minimum:
            raise self.fail(f"'{head}': {key} must be >= {minimum}, got {value}")
        return value

    def tensor_ref(self, head: str, name: str) -> str:
        assert self.stream is not None
        if name not in self.stream.tensors:
            raise self.fail(f"'{head}': tensor '{name}' used before declared")
        return name

    def layer_name(self, head: str, name: str) -> str:
        if not _LAYER_RE.match(name):
            raise self.fail(f"'{head}': bad layer name '{name}'")
        return name

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
        head, arg, keys = self.split(tokens)
        if self.state == "start":
            if head != "stream":
                raise self.fail(f"expected the 'stream version={STREAM_VERSION} ...' header first, "
                                f"got '{head}'")
            self.header(keys)
            return
        if head == "stream":
            raise self.fail("duplicate 'stream' header")
        if head == "tensor":
            self.tensor(arg, keys)
        elif head == "phase":
            self.phase(arg)
        elif head == "end":
            if self.state not in _PHASES:
                raise self.fail("'end' before 'phase forward'")
            self.state = "end"
        else:
            if self.state not in _PHASES:
                raise self.fail(f"'{head}' before 'phase forward'")
            self.op(head, arg, keys)

    def header(self, keys: dict[str, str]) -> None:
        version = self.int_value("stream", "version", keys["version"])
        if version != STREAM_VERSION:
            raise self.fail(f"unsupported stream version {version} (this reader: {STREAM_VERSION})")
        batch = self.int_value("stream", "batch", keys["batch"], minimum=1)
        if keys["dtype"] not in DTYPES:
            raise self.fail(f"'stream': unknown dtype '{keys['dtype']}' "
                            f"(expected one of {', '.join(DTYPES)})")
        from .policies import check_policy

        try:
            check_policy(keys["policy"])
        except WorkloadError as exc:
            raise self.fail(f"'stream': unknown policy '{keys['policy']}': {exc}") from None
        self.stream = Stream(self.source, version, keys["network"], batch, keys["dtype"],
                             keys["policy"])
        self.state = "decl"

    def tensor(self, name: str | None, keys: dict[str, str]) -> None:
        assert self.stream is not None and name is not None
        if self.state != "decl":
            raise self.fail("tensor declarations must precede the first 'phase'")
        if not _TENSOR_RE.match(name):
            raise self.fail(f"'tensor': bad tensor name '{name}'")
        if name in self.stream.tensors:
            raise self.fail(f"'tensor': '{name}' declared twice")
        nbytes = self.int_value("tensor", "bytes", keys["bytes"])
        if keys["kind"] not in TENSOR_KINDS:
            raise self.fail(f"'tensor': unknown kind '{keys['kind']}' "
                            f"(expected one of {', '.join(TENSOR_KINDS)})")
        sparse = keys.get("sparse", "0")
        if sparse not in ("0", "1"):
            raise self.fail(f"'tensor': sparse={sparse} must be 0 or 1")
        layer = keys.get("layer")
        if layer is not None:
            self.layer_name("tensor", layer)
        shape = None
        if "shape" in keys:
            parts = keys["shape"].split("x")
            if not all(_INT_RE.match(p) and int(p) > 0 for p in parts):
                raise self.fail(f"'tensor': bad shape '{keys['shape']}' (expected e.g. 64x3x224x224)")
            shape = tuple(int(p) for p in parts)
            expect = math.prod(shape) * DTYPES[self.stream.dtype]
            if expect != nbytes:
                raise self.fail(f"'tensor': bytes={nbytes} disagrees with shape {keys['shape']} "
                                f"of {self.stream.dtype} ({expect} bytes)")
        self.stream.tensors[name] = StreamTensor(name, nbytes, keys["kind"], layer,
                                                 sparse == "1", shape, self.lineno)

    def phase(self, name: str | None) -> None:
        if name not in _PHASES:
            raise self.fail(f"unknown phase '{name}' (expected forward, backward or update)")
        expected = {"decl": "forward", "forward": "backward", "backward": "update"}.get(self.state)
        if name != expected:
            raise self.fail(f"'phase {name}' out of order (phases are forward, then backward, "
                            "then an optional update)")
        self.state = name

    def op(self, head: str, arg: str | None, keys: dict[str, str]) -> None:
        assert self.stream is not None and arg is not None
        phase = self.state
        if head == "compute":
            self.stream.ops.append(self.compute(arg, keys, phase))
            return
        if head == "sync":
            layer = self.layer_name("sync", arg)
            if layer not in self.computed:
                raise self.fail(f"'sync': layer '{layer}' has no compute before it")
            self.inflight.clear()
            self.stream.ops.append(StreamOp("sync", layer, phase, self.lineno))
            return
        name = self.tensor_ref(head, arg)
        owner = self.layer_name(head, keys["layer"]) if "layer" in keys else None
        busy = self.inflight.get(name)
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
            codec = keys.get("codec", "")
            if codec and codec not in _CODECS:
                raise self.fail(f"'offload': codec={codec} (only codec=none, a plain copy, may "
                                "be named; without the key the engine's codec is used)")
            self.inflight[name] = "offload"
            self.host.add(name)
            self.codec[name] = codec
        elif head == "prefetch":
            if name not in self.host:
                raise self.fail(f"'prefetch': tensor '{name}' was never offloaded")
            if name not in self.allocated:
                raise self.fail(f"'prefetch': tensor '{name}' is not allocated (alloc must precede "
                                "prefetch)")
            if busy:
                raise self.fail(f"'prefetch': tensor '{name}' already has a {busy} in flight")
            self.inflight[name] = "prefetch"
            self.prefetch_issued.add(name)
        elif head == "wait":
            if name not in self.prefetch_issued:
                raise self.fail(f"'wait': tensor '{name}' has no prefetch before it")
            if busy == "prefetch":
                del self.inflight[name]
        codec = self.codec.get(name, "") if head in ("offload", "prefetch") else ""
        self.stream.ops.append(StreamOp(head, name, phase, self.lineno, layer=owner,
                                        codec=codec))

    def compute(self, arg: str, keys: dict[str, str], phase: str) -> StreamOp:
        layer = self.layer_name("compute", arg)
        pass_ = keys["pass"]
        if pass_ not in _PASS_OF_PHASE.values() and pass_ != "recompute":
            raise self.fail(f"'compute': pass={pass_} must be fwd, bwd, recompute or update")
        if pass_ != _PASS_OF_PHASE[phase] and pass_ not in _EXTRA_PASSES.get(phase, ()):
            raise self.fail(f"'compute': pass={pass_} inside 'phase {phase}'")
        flops = self.int_value("compute", "flops", keys["flops"])
        dram = self.int_value("compute", "dram", keys["dram"])
        time_ps = None
        if "time" in keys:
            try:
                time_ps = parse_duration(keys["time"])
            except ValueError as exc:
                raise self.fail(f"'compute': {exc}") from None
        algorithm = keys.get("algo", "")
        if "algo" in keys and not _ALGO_RE.match(algorithm):
            raise self.fail(f"'compute': algo={algorithm} must be algorithm names joined by '+' "
                            "(e.g. WINOGRAD or IMPLICIT_PRECOMP_GEMM+FFT)")
        lists = {}
        for key in ("reads", "writes"):
            names = tuple(keys[key].split(",")) if key in keys else ()
            for name in names:
                self.tensor_ref("compute", name)
                if name not in self.allocated:
                    raise self.fail(f"'compute {layer}' {key[:-1]}s tensor '{name}' which is not "
                                    "resident (never allocated, freed or offloaded)")
                busy = self.inflight.get(name)
                if busy == "prefetch":
                    raise self.fail(f"'compute {layer}' {key[:-1]}s tensor '{name}' before its "
                                    "prefetch completed (missing wait)")
                if key == "writes" and busy == "offload":
                    raise self.fail(f"'compute {layer}' writes tensor '{name}' while its offload "
                                    "is in flight")
            lists[key] = names
        self.computed.add(layer)
        return StreamOp("compute", layer, phase, self.lineno, pass_=pass_, flops=flops,
                        dram=dram, time_ps=time_ps, reads=lists["reads"],
                        writes=lists["writes"], algorithm=algorithm)

    def finish(self, last_line: int) -> Stream:
        self.lineno = max(last_line, 1)
        if self.state == "start":
            raise self.fail("empty stream: no 'stream' header")
        if self.state != "end":
            raise self.fail("missing 'end'")
        assert self.stream is not None
        return self.stream


def parse_stream(text: str, source: str = "<stream>") -> Stream:
    """Parse and validate a workload stream; raises :class:`StreamError` ("SOURCE:LINE: ...")."""
    parser = _Parser(source)
    lines = text.splitlines()
    for lineno, raw in enumerate(lines, 1):
        parser.feed(lineno, raw)
    return parser.finish(len(lines))
