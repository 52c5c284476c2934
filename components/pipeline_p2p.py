"""Point-to-point transfers between pipeline stages: the ``send`` and ``recv`` ops of a GPU's
stream, and ``cdma.PipelinePorts``, the GPU's ports to its neighbour stages (docs/parallel.md,
"The simulated pipeline").

A stage's activations go forward on its ``next`` port and their gradients come back on it; it
receives activations on its ``prev`` port and sends their gradients back there. So a ``send``
in the forward phase leaves on ``next`` and one in the backward phase on ``prev``, and a
``recv`` in the forward phase reads ``prev`` and one in the backward phase ``next``; the stage
the op names as its peer must be the one at the far end of that port (checked before the run).

Each port sends one message at a time in each direction: a message of S bytes starts when the
port's earlier ones have left, leaves S / ``bandwidth`` later (the sender's copy is freed then)
and lands ``latency`` after that. Messages from one peer in one phase are matched in the
order they were sent: a stage's n-th recv on a port in a phase takes the n-th message its peer
sent that way (the stages' orders send and receive their passes in the same order). A ``recv`` whose
message has not landed makes the stream wait (:class:`PeerWait`); the GPU issues on when it
lands.

With the GPU's network card on port ``nic`` (``cdma.NIC``: the stages sit on different nodes),
a message is a flow instead, capped at ``bandwidth``, over the card's transmit side and the
GPU's link to the PCIe switch it shares with the card, and the receiver's card and link (which
its hello names): alone it leaves when the formula says; an offload copy on either GPU's link
slows it (docs/clusters.md, "The PCIe switch a GPU shares with its NIC")."""
from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any, Optional, cast

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Param, Port, StatisticSpec, SubComponent
from sst_cdma.engine.flows import PS_PER_S, Flow, FlowNetwork
from sst_cdma.engine.kernel import LinkEnd, SimulationError
from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

from .interfaces import NetworkCard

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import StreamOp

__all__ = ["PeerWaitReason", "PeerWait", "PipelineMessage", "StageHello", "P2PMessage",
           "P2PResult",
           "PipelinePorts", "issue_send", "issue_recv", "recv_pending", "port_of"]

#: the port an op of each phase uses: (a send's, a recv's)
PORTS_BY_PHASE = {"forward": ("next", "prev"), "backward": ("prev", "next")}


class PeerWaitReason(enum.Enum):
    """What a GPU's stream can wait for from another GPU."""

    RECV = "recv"  # a pipeline peer's message (an activation, or its gradient) landing


@frozen_record
class PeerWait(FrozenRecord):
    """The stream waits for message ``seq`` (counted from 0) of ``phase`` on ``port`` from
    stage ``peer``, to receive into ``tensor``."""

    reason: PeerWaitReason
    port: str
    phase: str
    seq: int
    peer: int
    tensor: str


@frozen_record
class PipelineMessage(FrozenRecord):
    """A tensor one stage sends another: the sender's ``stage``, the ``phase`` it was sent in,
    its number ``seq`` among the sender's messages of that phase on that port, the tensor's
    name and bytes, and when it started leaving."""

    stage: int
    phase: str
    seq: int
    tensor: str
    nbytes: int
    started_ps: int


@frozen_record
class StageHello(FrozenRecord):
    """Sent once at init on each port: the stage at this end and the port it left by; with a
    network card, what a message to this end loads on the receiving side (``recv``: {flow
    resource: weight}) and which of those resources are the GPU's PCIe link (``pcie``)."""

    stage: int
    port: str
    recv: tuple[tuple[str, float], ...] = ()
    pcie: tuple[str, ...] = ()


@frozen_record
class _Outgoing(FrozenRecord):
    """A message waiting for its port, sent as a flow over the network card."""

    phase: str
    seq: int
    tensor: str
    peer: int
    nbytes: int


@frozen_record
class P2PMessage(FrozenRecord):
    """One message a GPU's ports sent or received (``direction``: ``send`` or ``recv``): the
    tensor, the stages it went from and to, the phase it was sent in and its number ``seq``
    among the sender's messages of that phase on that port (so a send and the recv that took
    it share ``src``, ``phase`` and ``seq``), its bytes, and on this GPU's timeline when it
    began and ended (a send: from its first byte leaving to its last; a recv: from the stream
    reaching it to its taking the landed message)."""

    direction: str
    tensor: str
    src: int
    dst: int
    phase: str
    seq: int
    nbytes: int
    start_ps: int
    end_ps: int


@record
class P2PResult(Record):
    """What one GPU's pipeline ports carried: its ``stage``, the bytes it sent and received,
    the messages each way and the time its stream waited for messages in ``recv``, and each
    message (``messages``, in the order they were sent or taken: what the Chrome trace pairs
    into flow arrows)."""

    gpu: str
    stage: int
    sent_bytes: int
    received_bytes: int
    sends: int
    recvs: int
    recv_wait_ps: int
    messages: list[P2PMessage] = field(default_factory=list, repr=False)


class PipelinePorts(SubComponent):
    """A GPU's point-to-point ports to the pipeline stages before and after it: the link its
    stream's send and recv ops use (fills the GPU's ``p2p`` slot)."""

    PARAMS = (
        Param("stage", "int", None, "this GPU's pipeline stage (its rank in its pipeline "
              "group): the peer a send or recv names is checked against the stage at the far "
              "end", minimum=0),
        Param("bandwidth", "bandwidth", "405GB/s", "payload bytes per second each way of "
              "each port (0B/s: a message takes no time but the latency); the default is "
              "H100 NVLink4's 18 links x 25 GB/s x 0.9 payload efficiency (docs/parallel.md)",
              minimum=0),
        Param("latency", "time", "3us", "time from a message's last byte leaving to its "
              "landing (docs/parallel.md: small-message send/recv time reported for H100 "
              "NVLink)", minimum=0),
    )
    PORTS = (Port("prev", "the link to the stage before: activations come in, their "
                  "gradients go back"),
             Port("next", "the link to the stage after: activations go out, their gradients "
                  "come back"),
             Port("nic", "the GPU's network card (a cdma.NIC), where its neighbour stages sit "
                  "on other nodes: messages become flows on it and on the GPU's PCIe link"))
    STATISTICS = (
        StatisticSpec("sent_bytes", "bytes of each message sent", "B", "f64", 1),
        StatisticSpec("recv_wait_ps", "time the stream waited in each recv", "ps", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.links: dict[str, Optional[LinkEnd]] = {
            "prev": self.configure_link("prev", lambda m: self._landed("prev", m)),
            "next": self.configure_link("next", lambda m: self._landed("next", m))}
        #: the stage at the far end of each connected port (from init)
        self.far_stage: dict[str, int] = {}
        #: messages sent and received so far per (port, phase)
        self.sent: dict[tuple[str, str], int] = {}
        self.taken: dict[tuple[str, str], int] = {}
        #: messages landed and not yet received: (port, phase, seq) -> the message
        self.landed: dict[tuple[str, str, int], PipelineMessage] = {}
        #: when each port's earlier messages have left, per port
        self.free_at: dict[str, int] = {"prev": 0, "next": 0}
        self.waiting_since: Optional[int] = None
        self.messages: list[P2PMessage] = []
        self.sent_bytes = self.received_bytes = self.sends = self.recvs = self.wait_ps = 0
        self.stat_sent = self.register_statistic("sent_bytes")
        self.stat_wait = self.register_statistic("recv_wait_ps")
        self.nic_link = self.configure_link("nic", self.refuse_event)
        self.nic: Optional[NetworkCard] = None
        #: per port: what a message loads at the far end, and its PCIe resources
        self.far_recv: dict[str, dict[str, float]] = {}
        self.far_pcie: dict[str, tuple[str, ...]] = {}
        #: per port: messages waiting to go as flows over the card (the first one moving)
        self.outgoing: dict[str, deque[_Outgoing]] = {"prev": deque(), "next": deque()}

    @property
    def gpu(self) -> "GPU":
        """The GPU whose slot holds these ports."""
        return cast("GPU", self.owner)

    def init(self, phase: int) -> None:
        """Phase 0: tell each peer this stage; then learn the peers' stages (a ``next`` port
        must lead to a ``prev`` one)."""
        if phase == 0 and self.nic_link is not None:
            self.nic = self.peer_provider("nic", NetworkCard)
        for port, end in self.links.items():
            if end is None:
                continue
            if phase == 0:
                end.send_untimed(self._hello(port))
            while (hello := end.recv_untimed()) is not None:
                if hello.port == port:
                    raise ConfigError(f"{self.name}: port {port!r} is wired to port "
                                      f"{hello.port!r} of stage {hello.stage}: a stage's "
                                      "'next' port leads to the next stage's 'prev'")
                self.far_stage[port] = hello.stage
                self.far_recv[port] = dict(hello.recv)
                self.far_pcie[port] = hello.pcie

    def _hello(self, port: str) -> StageHello:
        """This end's hello: its stage and, with a card, what a message to it loads."""
        if self.nic is None:
            return StageHello(self.params["stage"], port)
        return StageHello(self.params["stage"], port, tuple(self.nic.recv_weights().items()),
                          self.nic.pcie_resources())

    def setup(self) -> None:
        """Check every send and recv of the GPU's stream: its port connected to the stage it
        names."""
        for op in self.gpu.ops:
            if op.op in ("send", "recv"):
                port_of(op, self.name, self.far_stage)

    # -- sending -----------------------------------------------------------------------------
    def send(self, op: "StreamOp", nbytes: int) -> None:
        """Put ``op``'s tensor on its port: it leaves after the port's earlier messages, is
        freed on this GPU once it has left, and lands ``latency`` later."""
        port = port_of(op, self.name, self.far_stage)
        end = self.links[port]
        assert end is not None, "port_of returns connected ports only"
        now = self.sim.now
        key = (port, op.phase)
        seq = self.sent.get(key, 0)
        self.sent[key] = seq + 1
        if self.nic is not None and self.params["bandwidth"]:
            self.outgoing[port].append(_Outgoing(op.phase, seq, op.name, op.peer or 0, nbytes))
            if len(self.outgoing[port]) == 1:
                self._start_flow(port)
            return
        start = max(now, self.free_at[port])
        bandwidth = self.params["bandwidth"]
        left = start + (math.ceil(nbytes * PS_PER_S / bandwidth) if bandwidth else 0)
        self.free_at[port] = left
        end.send(PipelineMessage(self.params["stage"], op.phase, seq, op.name, nbytes, start),
                 left - now + self.params["latency"])
        memory, tensor = self.gpu.memory, op.name
        if left == now:  # gone at once (a free link): before the stream's next op
            memory.free(tensor)
        else:
            self.schedule_at(left, lambda _: memory.free(tensor))
        self._count_sent(op.name, op.peer or 0, port, op.phase, seq, nbytes, start, left)

    def _start_flow(self, port: str) -> None:
        """Put the first message waiting on ``port`` on the card: one flow over this end's
        sending side and the far end's receiving side, at most ``bandwidth``."""
        assert self.nic is not None
        message = self.outgoing[port][0]
        start = self.sim.now
        weights = {**self.nic.send_weights(), **self.far_recv.get(port, {})}
        self.service(FlowNetwork).start(message.nbytes, weights,
                                        lambda flow: self._left(port, start, flow),
                                        cap=self.params["bandwidth"], label=message.tensor)

    def _left(self, port: str, start: int, flow: Flow) -> None:
        """A message's last byte has left over the card: free the sender's copy, land it
        ``latency`` later, count it, and start the next one waiting on the port."""
        assert self.nic is not None
        message = self.outgoing[port].popleft()
        self.nic.charge(flow, (*self.nic.pcie_resources(), *self.far_pcie.get(port, ())))
        left = self.sim.now
        end = self.links[port]
        assert end is not None
        end.send(PipelineMessage(self.params["stage"], message.phase, message.seq,
                                 message.tensor, message.nbytes, start), self.params["latency"])
        self.gpu.memory.free(message.tensor)
        self._count_sent(message.tensor, message.peer, port, message.phase, message.seq,
                         message.nbytes, start, left)
        if self.outgoing[port]:
            self._start_flow(port)

    def _count_sent(self, tensor: str, peer: int, port: str, phase: str, seq: int,
                    nbytes: int, start: int, left: int) -> None:
        """Count a sent message and note it on the GPU's timeline and the ports' record."""
        self.sent_bytes += nbytes
        self.sends += 1
        self.stat_sent.add_data(nbytes)
        self.gpu.timeline.append(("send", f"{tensor} -> stage {peer}", start, left))
        self.messages.append(P2PMessage("send", tensor, self.params["stage"],
                                        self.far_stage[port], phase, seq, nbytes, start, left))

    # -- receiving ---------------------------------------------------------------------------
    def _landed(self, port: str, message: PipelineMessage) -> None:
        """A peer's message landed on ``port``: keep it for its recv, and wake the stream if
        it waits."""
        self.landed[(port, message.phase, message.seq)] = message
        self.gpu.resume()

    def expected(self, op: "StreamOp") -> PeerWait:
        """What ``op`` (a recv) waits for: the next message of its phase on its port."""
        port = port_of(op, self.name, self.far_stage)
        seq = self.taken.get((port, op.phase), 0)
        return PeerWait(PeerWaitReason.RECV, port, op.phase, seq, op.peer or 0, op.name)

    def pending(self, wait: PeerWait) -> bool:
        """Whether the message ``wait`` names has not landed yet."""
        return (wait.port, wait.phase, wait.seq) not in self.landed

    def take(self, wait: PeerWait) -> bool:
        """Receive the message ``wait`` names if it has landed (True), else note that the
        stream waits from now (False)."""
        message = self.landed.pop((wait.port, wait.phase, wait.seq), None)
        if message is None:
            if self.waiting_since is None:
                self.waiting_since = self.sim.now
            return False
        if message.nbytes != self.gpu.stream.tensors[wait.tensor].bytes:
            raise SimulationError(
                f"{self.name}: recv {wait.tensor} ({self.gpu.stream.tensors[wait.tensor].bytes} "
                f"bytes) got {message.tensor} ({message.nbytes} bytes) from stage "
                f"{message.stage}: the two stages' streams disagree")
        self.taken[(wait.port, wait.phase)] = wait.seq + 1
        now = self.sim.now
        self.messages.append(P2PMessage(
            "recv", message.tensor, message.stage, self.params["stage"], message.phase,
            message.seq, message.nbytes,
            now if self.waiting_since is None else self.waiting_since, now))
        if self.waiting_since is not None:
            waited = self.sim.now - self.waiting_since
            self.wait_ps += waited
            self.stat_wait.add_data(waited)
            self.waiting_since = None
        self.received_bytes += message.nbytes
        self.recvs += 1
        return True

    def finish(self) -> None:
        """Publish what the ports carried."""
        self.publish(P2PResult(self.gpu.name, self.params["stage"], self.sent_bytes,
                               self.received_bytes, self.sends, self.recvs, self.wait_ps,
                               self.messages))


def port_of(op: "StreamOp", where: str, far_stage: dict[str, int]) -> str:
    """The port ``op`` (a send or recv) uses, checked to be connected to the stage it
    names; a ConfigError naming ``where`` otherwise."""
    if op.phase not in PORTS_BY_PHASE:
        raise ConfigError(f"{where}: {op.op} {op.name} in phase {op.phase}: sends and recvs "
                          "belong to the forward and backward passes")
    port = PORTS_BY_PHASE[op.phase][0 if op.op == "send" else 1]
    if port not in far_stage:
        raise ConfigError(f"{where}: {op.op} {op.name} peer={op.peer} in the {op.phase} pass "
                          f"uses port {port!r}, which is not connected to a stage's ports")
    if far_stage[port] != op.peer:
        raise ConfigError(f"{where}: {op.op} {op.name} names peer={op.peer}, but port "
                          f"{port!r} leads to stage {far_stage[port]}")
    return port


def _ports(gpu: "GPU", op: "StreamOp") -> PipelinePorts:
    """The GPU's pipeline ports (its ``p2p`` slot), which its send and recv ops need."""
    ports = gpu.subcomponent("p2p")
    if not isinstance(ports, PipelinePorts):
        raise ConfigError(f"{gpu.name}: op {op.op} {op.name} needs the GPU's p2p slot filled "
                          "with cdma.PipelinePorts wired to its peer stages")
    return ports


def issue_send(gpu: "GPU", op: "StreamOp") -> bool:
    """A send: the tensor goes on its port to the peer stage; the stream goes on."""
    _ports(gpu, op).send(op, gpu.stream.tensors[op.name].bytes)
    return True


def issue_recv(gpu: "GPU", op: "StreamOp") -> bool:
    """A recv: takes the peer's message if it has landed, else the stream waits for it."""
    ports = _ports(gpu, op)
    wait = ports.expected(op)
    if ports.take(wait):
        return True
    gpu.blocked = wait
    return False


def recv_pending(gpu: "GPU", wait: PeerWait) -> bool:
    """Whether the message a recv waits for has not landed yet."""
    ports = gpu.subcomponent("p2p")
    assert isinstance(ports, PipelinePorts), "only a GPU with pipeline ports waits for a peer"
    return ports.pending(wait)
