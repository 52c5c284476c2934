"""Collectives of a GPU's stream: the ``all_reduce``, ``reduce_scatter`` and ``all_gather``
ops over one of its rank's process groups, and ``cdma.CollectivePort``, the GPU's port to the
cluster fabric that prices them (``cdma.ClusterFabric``; docs/parallel.md, "Collectives on the
cluster fabric").

A collective starts once the kernels issued before it have ended. A blocking one runs on the
GPU's compute stream, as NCCL's kernels run on the stream Megatron issues them on: the stream
issues nothing after it until it completes (Megatron's tensor-parallel all-reduce in the
forward pass). An asynchronous one (``async=1``) runs beside the kernels issued after it, as
FSDP's all-gathers and reduce-scatters run on streams of their own; the stream waits for it
only in a ``collective_wait`` of its tensor (``components/collective_wait.py``), and only for
what is left of it. The copy stream goes on meanwhile.

The k-th collective a rank's stream issues over its group of one kind (``tp``, ``dp``, ...)
meets the k-th of every other member of that group at the fabric; the fabric answers each
member when the last has arrived plus the collective's priced time. While the stream waits it
holds a typed :class:`CollectiveWait`: first for its compute stream to drain, then for the
fabric's answer, which ends it by calling the GPU's ``resume()``."""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any, Optional, cast

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Port, StatisticSpec, SubComponent
from sst_cdma.engine.kernel import LinkEnd

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import StreamOp

__all__ = ["CollectiveWaitReason", "CollectiveWait", "CollectiveHello", "CollectiveIssue",
           "CollectiveDone", "CollectiveOpsResult", "CollectivePort", "issue_collective",
           "collective_pending", "collective_port"]


class CollectiveWaitReason(enum.Enum):
    """What a GPU's stream waits for in a collective."""

    COMPUTE = "compute"        # the kernels issued before it ending (it runs after them)
    COLLECTIVE = "collective"  # every member of its group arriving, and the collective's time


@frozen_record
class CollectiveWait(FrozenRecord):
    """The stream waits in collective ``op`` (its ``seq``-th over its ``group``, counted from
    0) of ``tensor``, for ``reason``."""

    reason: CollectiveWaitReason
    op: str
    group: str
    seq: int
    tensor: str


@frozen_record
class CollectiveHello(FrozenRecord):
    """Sent once at init to the fabric: the GPU's name and the kinds of process group its
    stream's collectives name (checked by the fabric before the run)."""

    gpu: str
    groups: tuple[str, ...]


@frozen_record
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


@frozen_record
class CollectiveDone(FrozenRecord):
    """The fabric's answer: collective ``seq`` over ``group`` ended at ``end_ps``."""

    group: str
    seq: int
    end_ps: int


@record
class CollectiveOpsResult(Record):
    """What one GPU's collectives did: per collective (op, group, seq, tensor, bytes, when
    it went to the fabric, when it ended), the time its stream waited in them (``wait_ps``)
    and that time per group kind (``waited``: its exposed time; a blocking collective's is
    all of it, an asynchronous one's its collective_wait's stall)."""

    gpu: str
    collectives: list[tuple[str, str, int, str, int, int, int]] = field(default_factory=list)
    wait_ps: int = 0
    waited: dict[str, int] = field(default_factory=dict)


class CollectivePort(SubComponent):
    """A GPU's port to the cluster fabric: the link its stream's all_reduce, reduce_scatter
    and all_gather ops use (fills the GPU's ``collectives`` slot).

    The port runs one collective at a time over each group kind, in issue order (NCCL runs a
    communicator's collectives in the order they were issued): a collective issued while
    another over its group is at the fabric waits in the port's queue and goes to the fabric
    when that one ends. A blocking collective's stream waits for its end; an asynchronous one
    (``async=1``) lets the stream go on, and a ``collective_wait`` of its tensor waits for
    the rest of it."""

    PORTS = (Port("fabric", "the link to the cluster fabric (cdma.ClusterFabric's gpuN, N "
                  "this GPU's rank)", required=True),)
    STATISTICS = (
        StatisticSpec("collective_wait_ps", "time the stream waited in each collective, from "
                      "its compute stream draining to the group's answer (an asynchronous "
                      "one: in its collective_wait)", "ps", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.link: LinkEnd = self.connected_link("fabric", self._done)
        #: collectives issued so far over each group kind
        self.issued: dict[str, int] = {}
        #: the blocking collective the stream waits in: ((group, seq), when the stream got to it)
        self.current: Optional[tuple[tuple[str, int], int]] = None
        #: where a collective_wait stalls: when the stream got to it
        self.wait_from: Optional[int] = None
        #: per group kind, the collectives issued and not yet at the fabric:
        #: (op, seq, tensor, bytes)
        self.queued: dict[str, deque[tuple[str, int, str, int]]] = {}
        #: per group kind, the collective at the fabric: (op, seq, tensor, bytes, sent at)
        self.at_fabric: dict[str, tuple[str, int, str, int, int]] = {}
        #: the last asynchronous collective of each tensor: (group, seq)
        self.handles: dict[str, tuple[str, int]] = {}
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
        """Issue ``op`` (a collective) once the compute stream has drained; an asynchronous
        one returns True at once, a blocking one once the fabric's answer has come (the
        stream goes on)."""
        gpu = self.gpu
        if self.current is None:
            if self._compute_busy():
                gpu.blocked = CollectiveWait(CollectiveWaitReason.COMPUTE, op.op, op.group,
                                             self.issued.get(op.group, 0), op.name)
                return False
            handle = self._start(op)
            if op.async_:
                self.handles[op.name] = handle
                return True
            self.current = (handle, self.sim.now)
        (group, seq), reached = self.current
        if not self._taken(op, group, seq, reached):
            return False
        self.current = None
        # the collective ran on the compute stream: the kernels after it were enqueued behind
        # it, so the next one pays no launch after an idle stream
        gpu.compute_idle = False
        return True

    def wait(self, op: "StreamOp") -> bool:
        """A ``collective_wait`` of ``op.name``: True once its asynchronous collective has
        ended; the stream's stall (from reaching the wait to the end) is exposed time."""
        group, seq = self.handles[op.name]
        if self.wait_from is None:
            self.wait_from = self.sim.now
        if not self._taken(op, group, seq, self.wait_from):
            return False
        self.wait_from = None
        del self.handles[op.name]
        return True

    def _taken(self, op: "StreamOp", group: str, seq: int, reached: int) -> bool:
        """Whether collective ``seq`` over ``group`` has ended (its answer taken, the
        stream's wait since ``reached`` counted); the stream waits for it otherwise."""
        end = self.ended.pop((group, seq), None)
        if end is None:
            self.gpu.blocked = CollectiveWait(CollectiveWaitReason.COLLECTIVE, op.op, group,
                                              seq, op.name)
            return False
        stalled = max(0, end - reached)
        self.result.wait_ps += stalled
        self.result.waited[group] = self.result.waited.get(group, 0) + stalled
        self.stat_wait.add_data(stalled)
        return True

    def _start(self, op: "StreamOp") -> tuple[str, int]:
        """Queue ``op`` behind the collectives over its group, sending it to the fabric now if
        none is there; its (group, seq)."""
        group = op.group
        seq = self.issued.get(group, 0)
        self.issued[group] = seq + 1
        nbytes = self.gpu.stream.tensors[op.name].bytes
        self.queued.setdefault(group, deque()).append((op.op, seq, op.name, nbytes))
        if group not in self.at_fabric:
            self._send_next(group)
        return group, seq

    def _send_next(self, group: str) -> None:
        """Send the next queued collective over ``group`` to the fabric (if any)."""
        queue = self.queued.get(group)
        if not queue:
            return
        kind, seq, tensor, nbytes = queue.popleft()
        now = self.sim.now
        self.at_fabric[group] = (kind, seq, tensor, nbytes, now)
        self.link.send(CollectiveIssue(kind, group, seq, tensor, nbytes, now))

    def pending(self, wait: CollectiveWait) -> bool:
        """Whether what ``wait`` waits for has not happened yet."""
        if wait.reason is CollectiveWaitReason.COMPUTE:
            return self._compute_busy()
        return (wait.group, wait.seq) not in self.ended

    def _done(self, done: CollectiveDone) -> None:
        """The fabric's answer landed: record the collective, keep its end for the stream,
        send the next queued over its group, and wake the stream."""
        kind, seq, tensor, nbytes, start = self.at_fabric.pop(done.group)
        assert seq == done.seq, "the fabric answers a group's collectives in order"
        self.ended[(done.group, seq)] = done.end_ps
        self.result.collectives.append((kind, done.group, seq, tensor, nbytes, start,
                                        done.end_ps))
        self.gpu.record("collective", f"{kind} {tensor} group={done.group}", start, done.end_ps)
        self._send_next(done.group)
        self.gpu.resume()

    def finish(self) -> None:
        """Publish what the GPU's collectives did."""
        self.result.gpu = self.gpu.name
        self.publish(self.result)


def collective_port(gpu: "GPU", op: "StreamOp") -> CollectivePort:
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
    return collective_port(gpu, op).issue(op)


def collective_pending(gpu: "GPU", wait: CollectiveWait) -> bool:
    """Whether what a collective waits for has not happened yet."""
    port = gpu.subcomponent("collectives")
    assert isinstance(port, CollectivePort), "only a GPU with a fabric port waits in one"
    return port.pending(wait)
