"""Collectives of a GPU's stream: the ``all_reduce``, ``reduce_scatter`` and ``all_gather``
ops over one of its rank's process groups, and ``cdma.CollectivePort``, the GPU's port to the
cluster fabric that prices them (``cdma.ClusterFabric``; docs/parallel.md, "Collectives on the
cluster fabric").

A collective runs on the GPU's compute stream, as NCCL's kernels run on the stream Megatron
issues them on: it starts once the kernels issued before it have ended, and the stream issues
nothing after it until it completes (a blocking collective, as Megatron's tensor-parallel
all-reduce in the forward pass; an asynchronous form that lets kernels run beside it is not
modelled yet). The copy stream goes on meanwhile.

The k-th collective a rank's stream issues over its group of one kind (``tp``, ``dp``, ...)
meets the k-th of every other member of that group at the fabric; the fabric answers each
member when the last has arrived plus the collective's priced time. While the stream waits it
holds a typed :class:`CollectiveWait`: first for its compute stream to drain, then for the
fabric's answer, which ends it by calling the GPU's ``resume()``."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, cast

from sst_cdma.engine.records import FrozenRecord, Record
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Port, StatisticSpec, SubComponent
from sst_cdma.engine.kernel import LinkEnd

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import StreamOp

__all__ = ["CollectiveWaitReason", "CollectiveWait", "CollectiveHello", "CollectiveIssue",
           "CollectiveDone", "CollectiveOpsResult", "CollectivePort", "issue_collective",
           "collective_pending"]


class CollectiveWaitReason(enum.Enum):
    """What a GPU's stream waits for in a collective."""

    COMPUTE = "compute"        # the kernels issued before it ending (it runs after them)
    COLLECTIVE = "collective"  # every member of its group arriving, and the collective's time


@dataclass(frozen=True, repr=False, eq=False)
class CollectiveWait(FrozenRecord):
    """The stream waits in collective ``op`` (its ``seq``-th over its ``group``, counted from
    0) of ``tensor``, for ``reason``."""

    reason: CollectiveWaitReason
    op: str
    group: str
    seq: int
    tensor: str


@dataclass(frozen=True, repr=False, eq=False)
class CollectiveHello(FrozenRecord):
    """Sent once at init to the fabric: the GPU's name and the kinds of process group its
    stream's collectives name (checked by the fabric before the run)."""

    gpu: str
    groups: tuple[str, ...]


@dataclass(frozen=True, repr=False, eq=False)
class CollectiveIssue(FrozenRecord):
    """A rank's collective reaching the fabric: its kind (``op``), the group kind, its number
    ``seq`` among the rank's collectives over that group, the tensor, its bytes (the whole
    buffer, nccl-tests' size) and when the rank's compute stream got to it."""

    op: str
    group: str
    seq: int
    tensor: str
    nbytes: int
    issued_ps: int


@dataclass(frozen=True, repr=False, eq=False)
class CollectiveDone(FrozenRecord):
    """The fabric's answer: collective ``seq`` over ``group`` ended at ``end_ps``."""

    group: str
    seq: int
    end_ps: int


@dataclass(repr=False, eq=False)
class CollectiveOpsResult(Record):
    """What one GPU's collectives did: per collective (op, group, seq, tensor, bytes, when
    its stream got to it, when it ended), and the time its stream waited in them."""

    gpu: str
    collectives: list[tuple[str, str, int, str, int, int, int]] = field(default_factory=list)
    wait_ps: int = 0


class CollectivePort(SubComponent):
    """A GPU's port to the cluster fabric: the link its stream's all_reduce, reduce_scatter
    and all_gather ops use (fills the GPU's ``collectives`` slot)."""

    PORTS = (Port("fabric", "the link to the cluster fabric (cdma.ClusterFabric's gpuN, N "
                  "this GPU's rank)", required=True),)
    STATISTICS = (
        StatisticSpec("collective_wait_ps", "time the stream waited in each collective, from "
                      "its compute stream draining to the group's answer", "ps", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.link: LinkEnd = self.connected_link("fabric", self._done)
        #: collectives issued so far over each group kind
        self.issued: dict[str, int] = {}
        #: the collective the stream waits in: (group, seq, tensor, bytes, when issued)
        self.current: Optional[tuple[str, int, str, int, int]] = None
        #: answers landed and not yet taken: (group, seq) -> end
        self.ended: dict[tuple[str, int], int] = {}
        self.result = CollectiveOpsResult("")
        self.stat_wait = self.register_statistic("collective_wait_ps")

    @property
    def gpu(self) -> "GPU":
        """The GPU whose slot holds this port."""
        return cast("GPU", self.owner)

    def init(self, phase: int) -> None:
        """Phase 0 (the GPU has its stream by then): tell the fabric the group kinds the
        stream's collectives name."""
        if phase == 0:
            groups = sorted({op.group for op in self.gpu.ops if op.group})
            self.link.send_untimed(CollectiveHello(self.gpu.name, tuple(groups)))

    def _compute_busy(self) -> bool:
        """Whether a kernel issued before the collective is running or queued."""
        gpu = self.gpu
        return bool(gpu.compute_busy or gpu.compute_q)

    def issue(self, op: "StreamOp") -> bool:
        """Issue ``op`` (a collective) once the compute stream has drained, then wait for the
        fabric's answer; True once it has come (the stream goes on)."""
        gpu = self.gpu
        seq = self.issued.get(op.group, 0)
        if self.current is None:
            if self._compute_busy():
                gpu.blocked = CollectiveWait(CollectiveWaitReason.COMPUTE, op.op, op.group,
                                             seq, op.name)
                return False
            nbytes = gpu.stream.tensors[op.name].bytes
            now = self.sim.now
            self.issued[op.group] = seq + 1
            self.current = (op.group, seq, op.name, nbytes, now)
            self.link.send(CollectiveIssue(op.op, op.group, seq, op.name, nbytes, now))
        group, seq, tensor, nbytes, start = self.current
        end = self.ended.pop((group, seq), None)
        if end is None:
            gpu.blocked = CollectiveWait(CollectiveWaitReason.COLLECTIVE, op.op, group, seq,
                                         tensor)
            return False
        self.current = None
        self.result.collectives.append((op.op, group, seq, tensor, nbytes, start, end))
        gpu.record("collective", f"{op.op} {tensor} group={group}", start, end)
        self.result.wait_ps += end - start
        self.stat_wait.add_data(end - start)
        # the collective ran on the compute stream: the kernels after it were enqueued behind
        # it, so the next one pays no launch after an idle stream
        gpu.compute_idle = False
        return True

    def pending(self, wait: CollectiveWait) -> bool:
        """Whether what ``wait`` waits for has not happened yet."""
        if wait.reason is CollectiveWaitReason.COMPUTE:
            return self._compute_busy()
        return (wait.group, wait.seq) not in self.ended

    def _done(self, done: CollectiveDone) -> None:
        """The fabric's answer landed: keep it for the stream, and wake the stream."""
        self.ended[(done.group, done.seq)] = done.end_ps
        self.gpu.resume()

    def finish(self) -> None:
        """Publish what the GPU's collectives did."""
        self.result.gpu = self.gpu.name
        self.publish(self.result)


def _port(gpu: "GPU", op: "StreamOp") -> CollectivePort:
    """The GPU's port to the cluster fabric (its ``collectives`` slot)."""
    port = gpu.subcomponent("collectives")
    if not isinstance(port, CollectivePort):
        raise ConfigError(f"{gpu.name}: op {op.op} {op.name} group={op.group} needs the GPU's "
                          "collectives slot filled with cdma.CollectivePort wired to a "
                          "cdma.ClusterFabric")
    return port


def issue_collective(gpu: "GPU", op: "StreamOp") -> bool:
    """An all_reduce, reduce_scatter or all_gather: runs after the kernels before it, and
    the stream waits until its group's collective has completed."""
    return _port(gpu, op).issue(op)


def collective_pending(gpu: "GPU", wait: CollectiveWait) -> bool:
    """Whether what a collective waits for has not happened yet."""
    port = gpu.subcomponent("collectives")
    assert isinstance(port, CollectivePort), "only a GPU with a fabric port waits in one"
    return port.pending(wait)
