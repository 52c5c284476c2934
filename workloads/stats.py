"""Static statistics of a stream: peak memory, offloaded bytes, per-layer work.

:func:`stream_stats` replays a :class:`~workloads.stream.Stream`'s ``alloc`` and
``free`` ops in issue order (exactly how the GPU's capacity tracking sees them) and sums the
transfers and kernels per layer — the inputs of a closed-form per-layer model
(time_l ~ max(compute_l, transfer_l)).
"""
from __future__ import annotations

from dataclasses import field

from .stream import Stream, StreamOp

from sst_cdma.engine.records import Record, record

__all__ = ["LayerStats", "StreamStats", "stream_stats", "tensor_choices", "REPORTED_CHOICES"]

#: what a stream does with each activation tensor, as :func:`tensor_choices` reports it
REPORTED_CHOICES = ("keep", "offload", "compress", "recompute", "free")


def tensor_choices(stream: Stream) -> dict[str, str]:
    """Every activation tensor of ``stream`` -> what the stream does with it: ``recompute``
    (a ``pass=recompute`` kernel writes it), ``offload`` (offloaded ``codec=none``),
    ``compress`` (offloaded through the engine's codec), ``free`` (released in the forward
    pass and never brought back: no backward kernel reads it), else ``keep``."""
    out = {name: "keep" for name, t in stream.tensors.items() if t.kind == "activation"}
    freed: set[str] = set()
    for op in stream.ops:
        if op.op == "compute" and op.pass_ == "recompute":
            for t in op.writes:
                if t in out:
                    out[t] = "recompute"
        elif op.op == "offload" and op.name in out:
            out[op.name] = "offload" if op.codec == "none" else "compress"
        elif op.op == "free" and op.phase == "forward" and op.name in out:
            freed.add(op.name)
    for t in freed:
        if out[t] == "keep":
            out[t] = "free"
    return out


@record
class LayerStats(Record):
    """Per-layer sums. ``offload_bytes`` are issued in the layer's forward block (overlapping its
    forward kernel), ``prefetch_bytes`` in its backward block; ``stalls`` counts ``wait`` ops
    (on-demand prefetches) before its backward kernel."""

    name: str
    flops_fwd: int = 0
    flops_bwd: int = 0
    dram_fwd: int = 0
    dram_bwd: int = 0
    time_fwd_ps: int | None = None
    time_bwd_ps: int | None = None
    flops_update: int = 0
    dram_update: int = 0
    offload_bytes: int = 0
    prefetch_bytes: int = 0
    sparse_offload_bytes: int = 0
    offloaded: list[str] = field(default_factory=list)
    prefetched: list[str] = field(default_factory=list)
    stalls: int = 0
    flops_recompute: int = 0
    time_recompute_ps: int | None = None


@record
class StreamStats(Record):
    """Whole-iteration figures of a stream.

    ``peak_bytes`` is the largest allocated total (line ``peak_line``, phase ``peak_phase``);
    ``declared_bytes`` the sum of every declared tensor — what a network-wide allocator that
    never frees would need; ``resident_after_forward`` the allocation at ``phase backward``.
    ``state_bytes`` is the optimizer state, ``flops_update``/``dram_update`` the optimizer
    step's kernels (zero without an ``update`` phase). ``leaked`` lists tensors still allocated
    at ``end``.
    """

    network: str
    batch: int
    dtype: str
    policy: str
    peak_bytes: int
    peak_line: int
    peak_phase: str
    forward_peak_bytes: int
    backward_peak_bytes: int
    resident_after_forward: int
    weight_bytes: int
    state_bytes: int
    declared_bytes: int
    activation_bytes: int
    offloaded_bytes: int
    prefetched_bytes: int
    sparse_offloaded_bytes: int
    flops_fwd: int
    flops_bwd: int
    dram_fwd: int
    dram_bwd: int
    flops_update: int
    dram_update: int
    offloaded: tuple[str, ...]
    prefetched: tuple[str, ...]
    leaked: tuple[str, ...]
    layers: dict[str, LayerStats]
    kernel_mean_bytes: int = 0

    def as_dict(self) -> dict[str, object]:
        """Scalar figures as a plain dict (layers omitted)."""
        return {k: v for k, v in self.__dict__.items() if k != "layers"}


def stream_stats(stream: Stream) -> StreamStats:
    """Replay ``stream`` and return its :class:`StreamStats`."""
    replay = _Replay(stream)
    for k, op in enumerate(stream.ops):
        replay.op(k, op)
    return replay.stats()


def _next_computes(ops: list[StreamOp]) -> list[str | None]:
    """For each op, the layer of the next compute after it (None after the last)."""
    out: list[str | None] = [None] * len(ops)
    upcoming: str | None = None
    for k in range(len(ops) - 1, -1, -1):
        out[k] = upcoming
        if ops[k].op == "compute":
            upcoming = ops[k].name
    return out


class _Replay:
    """The running totals of a stream replayed op by op."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.sizes = {name: t.bytes for name, t in stream.tensors.items()}
        self.allocated: set[str] = set()
        self.current = self.peak = self.peak_line = 0
        self.peak_phase = "forward"
        self.phase_peak = {"forward": 0, "backward": 0, "update": 0}
        self.after_forward: int | None = None
        self.layers: dict[str, LayerStats] = {}
        self.offloaded: list[str] = []
        self.prefetched: list[str] = []
        self.totals = {"offload": 0, "prefetch": 0, "sparse": 0}
        self.next_compute = _next_computes(stream.ops)
        #: the allocation summed over the kernels issued, and their count
        self.kernel_bytes = self.kernels = 0

    def layer(self, name: str) -> LayerStats:
        if name not in self.layers:
            self.layers[name] = LayerStats(name)
        return self.layers[name]

    def op(self, k: int, op: StreamOp) -> None:
        """Count op ``k``."""
        if op.phase == "backward" and self.after_forward is None:
            self.after_forward = self.current
        size = self.sizes.get(op.name, 0)
        if op.op == "alloc":
            self.allocated.add(op.name)
            self.current += size
            if self.current > self.peak:
                self.peak, self.peak_line, self.peak_phase = self.current, op.line, op.phase
            self.phase_peak[op.phase] = max(self.phase_peak[op.phase], self.current)
        elif op.op == "free":
            self.allocated.discard(op.name)
            self.current -= size
        elif op.op == "offload":
            st = self.layer(op.layer or "?")
            st.offload_bytes += size
            st.offloaded.append(op.name)
            self.totals["offload"] += size
            if self.stream.tensors[op.name].sparse:
                st.sparse_offload_bytes += size
                self.totals["sparse"] += size
            self.offloaded.append(op.name)
        elif op.op == "prefetch":
            st = self.layer(op.layer or "?")
            st.prefetch_bytes += size
            st.prefetched.append(op.name)
            self.totals["prefetch"] += size
            self.prefetched.append(op.name)
        elif op.op == "wait":
            target = self.next_compute[k]
            if target is not None:
                self.layer(target).stalls += 1
        elif op.op == "compute":
            self.kernel(op)

    def kernel(self, op: StreamOp) -> None:
        """Count a compute op into its layer's work and the allocation it runs beside."""
        self.kernel_bytes += self.current
        self.kernels += 1
        st = self.layer(op.name)
        if op.pass_ == "fwd":
            st.flops_fwd += op.flops or 0
            st.dram_fwd += op.dram or 0
            if op.time_ps is not None:
                st.time_fwd_ps = (st.time_fwd_ps or 0) + op.time_ps
        elif op.pass_ == "update":
            st.flops_update += op.flops or 0
            st.dram_update += op.dram or 0
        elif op.pass_ == "recompute":
            st.flops_recompute += op.flops or 0
            if op.time_ps is not None:
                st.time_recompute_ps = (st.time_recompute_ps or 0) + op.time_ps
        else:
            st.flops_bwd += op.flops or 0
            st.dram_bwd += op.dram or 0
            if op.time_ps is not None:
                st.time_bwd_ps = (st.time_bwd_ps or 0) + op.time_ps

    def stats(self) -> StreamStats:
        """The totals as :class:`StreamStats`."""
        stream, layers, totals = self.stream, self.layers, self.totals
        kinds = list(stream.tensors.values())
        return StreamStats(
            network=stream.network, batch=stream.batch, dtype=stream.dtype,
            policy=stream.policy, peak_bytes=self.peak, peak_line=self.peak_line,
            peak_phase=self.peak_phase, forward_peak_bytes=self.phase_peak["forward"],
            backward_peak_bytes=self.phase_peak["backward"],
            resident_after_forward=(self.current if self.after_forward is None
                                    else self.after_forward),
            weight_bytes=sum(t.bytes for t in kinds if t.kind == "weight"),
            state_bytes=sum(t.bytes for t in kinds if t.kind == "state"),
            declared_bytes=sum(t.bytes for t in kinds),
            activation_bytes=sum(t.bytes for t in kinds if t.kind == "activation"),
            offloaded_bytes=totals["offload"], prefetched_bytes=totals["prefetch"],
            sparse_offloaded_bytes=totals["sparse"],
            flops_fwd=sum(s.flops_fwd for s in layers.values()),
            flops_bwd=sum(s.flops_bwd for s in layers.values()),
            dram_fwd=sum(s.dram_fwd for s in layers.values()),
            dram_bwd=sum(s.dram_bwd for s in layers.values()),
            flops_update=sum(s.flops_update for s in layers.values()),
            dram_update=sum(s.dram_update for s in layers.values()),
            offloaded=tuple(self.offloaded), prefetched=tuple(self.prefetched),
            leaked=tuple(sorted(self.allocated)), layers=layers,
            kernel_mean_bytes=(2 * self.kernel_bytes + self.kernels) // (2 * self.kernels)
            if self.kernels else 0,
        )
