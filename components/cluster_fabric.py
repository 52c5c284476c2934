"""``cdma.ClusterFabric``: the fabric of a cluster of NVSwitch nodes on a scale-out network,
as a resource that prices the collectives of its ranks' process groups (docs/parallel.md,
"Collectives on the cluster fabric").

The GPU on port ``gpuN`` is global rank N; ranks fill the nodes in order (rank r on node
r // GPUs per node: ``sst_cdma.model.cluster_graph.rank_place``). The process groups are those
of the layout ``tp`` x ``pp`` x ``dp`` in Megatron-LM's rank order
(``workloads.parallel.ranks.process_groups``). The cluster's networkx graph (nodes, NICs behind
their PCIe switches, leaves and spines) is built once, and the algorithm in the ``collective``
slot prices each collective on it with the model's ``group_cost``.

Rendezvous: the k-th collective each member of a group issues over it meets the others' k-th;
when the last member has issued it, every member's completes at that time plus the priced time
(whole picoseconds, rounded up). A member whose k-th is another op, or of other bytes, is an
error naming both ranks; a run that ends with members still waiting is a deadlock, reported
with the ranks that wait, the op and the ranks that never issued it.

With ``representative`` only data-parallel replica 0 is on the ports (ports ``gpuR``, R its
global rank): a group's collective completes once its simulated members have issued it, priced
over the whole group on the ranks' real placement; the other replicas are identical, so they
arrive at the same time (docs/parallel.md, "Symmetry"). With ``tp_representative`` only each
stage's tensor-parallel rank 0 is on the ports (of replica 0, or of every replica): a tp
group's collective completes at that rank's arrival, priced over the whole group; the stage's
other tp ranks run the same stream, and their own groups (dp, pp, embedding) are priced for
none.

With rank N's network card on port ``nicN`` (``cdma.NIC``), the network phase of each of its
collectives also runs as a flow on that card and its GPU's link to the PCIe switch they share
(components/fabric_flows.py): alone it takes the priced time; slowed by the GPU's offload
copies on that link, the collective ends later by the slowest member's loss."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Component, Param, Port, StatisticSpec, SubComponentSlot
from sst_cdma.engine.flows import PS_PER_S, FlowNetwork
from sst_cdma.engine.kernel import LinkEnd, SimulationError
from sst_cdma.model.cluster_graph import Cluster, build_cluster, group_shape
from sst_cdma.model.clusters import FABRICS, NODES, ClusterError
from sst_cdma.model.collectives import CollectiveCost, CollectiveError
from workloads.parallel.layout import ParallelLayout
from workloads.parallel.ranks import ProcessGroups, process_groups

from .cluster_collective import ClusterCollective
from .collective_ops import CollectiveDone, CollectiveHello, CollectiveIssue
from .fabric_flows import NetworkFlows, network_load
from .interfaces import NetworkCard

__all__ = ["ClusterFabric", "ClusterFabricResult", "CollectiveRecord", "ranks_text"]

#: why the run ended when no event was left (sst_cdma.engine.kernel's ``end_reason``): the
#: only end at which ranks still waiting in a collective are a deadlock
NO_EVENTS_LEFT = "no events left"


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective of a group: the group's kind and number, its ``seq`` over the group,
    the op, the tensor (as the first member named it), the bytes, the ranks, when the first
    and the last member issued it, when it ended, and the model's cost (its phases name the
    tiers it crossed)."""

    group: str
    index: int
    seq: int
    op: str
    tensor: str
    nbytes: int
    ranks: tuple[int, ...]
    first_ps: int
    last_ps: int
    end_ps: int
    cost: CollectiveCost
    #: how much later it ended than priced: its network phase's flows lost that long to
    #: other flows on the members' NICs and GPU links (0 without NICs on the fabric)
    network_delay_ps: int = 0

    @property
    def time_ps(self) -> int:
        """The collective's own time: from the last member's arrival to its end."""
        return self.end_ps - self.last_ps

    @property
    def tiers(self) -> tuple[str, ...]:
        """The tiers its phases crossed (``intra``: NVLink in a node; ``inter``: the NICs)."""
        return tuple(phase.tier for phase in self.cost.phases)


@dataclass
class ClusterFabricResult:
    """What the fabric priced over the run: its node preset, node count, scale-out fabric,
    the algorithm element in its slot, the ranks and every collective in the order they
    completed."""

    node: str
    nodes: int
    fabric: str
    algorithm: str
    ranks: int
    collectives: list[CollectiveRecord] = field(default_factory=list, repr=False)


#: the group kinds of a layout: the fields of its group tables
GROUP_KINDS = tuple(f.name for f in fields(ProcessGroups))


class ClusterFabric(Component):
    """A cluster's NVLink and scale-out fabric: the GPUs on its ports are the ranks of a
    tp x pp x dp layout, and their collectives are priced by the algorithm in the
    ``collective`` slot on the cluster's graph."""

    PARAMS = (
        Param("node", "str", "dgx_h100", "node preset: its GPUs, NVSwitch, NICs and PCIe "
              "switches (docs/clusters.md)", choices=tuple(sorted(NODES))),
        Param("nodes", "int", 1, "nodes in the cluster (the ranks fill them in order)",
              minimum=1),
        Param("fabric", "str", "rail_ndr", "scale-out network preset (docs/clusters.md)",
              choices=tuple(sorted(FABRICS))),
        Param("oversubscription", "float", 0.0, "leaf down:up port ratio, at least 1 (0: the "
              "fabric preset's)", minimum=0),
        Param("tp", "int", 1, "tensor-parallel size of the layout", minimum=1),
        Param("pp", "int", 1, "pipeline-parallel size of the layout", minimum=1),
        Param("dp", "int", 0, "data-parallel size of the layout (0: the GPUs on the ports "
              "over tp x pp)", minimum=0),
        Param("representative", "bool", False, "only data-parallel replica 0 is on the ports "
              "(ports gpuR, R its global rank): each collective is priced for its whole group "
              "on the ranks' real placement and completes at the replica's arrival, the other "
              "replicas being identical (needs dp; docs/parallel.md, \"Symmetry\")"),
        Param("tp_representative", "bool", False, "only tensor-parallel rank 0 of each stage "
              "(of each replica on the ports) is on the ports: a tp group's collective "
              "completes at that rank's arrival, priced for the whole group, the stage's other "
              "tp ranks running the same stream (docs/parallel.md, \"Symmetry\")"),
    )
    PORTS = (Port("gpu%d", "rank N's GPU (its cdma.CollectivePort): ports gpu0 .. gpuN-1, "
                  "one per rank"),
             Port("nic%d", "rank N's network card (a cdma.NIC), optional: the network phase "
                  "of its collectives runs on it and on its GPU's link to the PCIe switch "
                  "they share"),)
    SLOTS = (SubComponentSlot("collective", "the algorithm a collective of a group runs with "
                              "on the cluster", accepts=ClusterCollective,
                              default="cdma.ClusterRing"),)
    STATISTICS = (
        StatisticSpec("collective_time_ps", "time of each collective, from its last member's "
                      "arrival to its end", "ps", "f64", 1),
        StatisticSpec("collective_bytes", "bytes of each collective (the whole buffer)", "B",
                      "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        #: the simulated ranks' links, by global rank
        self.links = self._rank_links()
        self.world = self._world()
        self.cluster = self._build_cluster()
        self.collective: ClusterCollective = self.subcomponent("collective")  # type: ignore[assignment]
        self.groups = self._layout_groups()
        self._check_replica()
        #: per group kind: each rank's group number
        self.group_of = {kind: _index(tables, self.world)
                         for kind, tables in self.groups.items()}
        #: (kind, group) -> its simulated members (all of them, but with one replica)
        self.simulated: dict[tuple[str, int], tuple[int, ...]] = {}
        self.hellos: dict[int, CollectiveHello] = {}
        #: collectives some members have issued: (kind, group, seq) -> rank -> its issue
        self.pending: dict[tuple[str, int, int], dict[int, CollectiveIssue]] = {}
        self.prices: dict[tuple[tuple[int, ...], str, int], CollectiveCost] = {}
        self.result = ClusterFabricResult(self.params["node"], self.params["nodes"],
                                          self.params["fabric"], self.collective.type_name(),
                                          self.world)
        self.stat_time = self.register_statistic("collective_time_ps")
        self.stat_bytes = self.register_statistic("collective_bytes")
        self.nic_ports = [p for p in self.connected_ports() if p.startswith("nic")]
        for port in self.nic_ports:
            self.configure_link(port, self.refuse_event)
        #: rank -> its network card (setup)
        self.nics: dict[int, NetworkCard] = {}
        self.network = NetworkFlows(self.service(FlowNetwork))

    # -- construction ----------------------------------------------------------------------
    def _rank_links(self) -> dict[int, LinkEnd]:
        """The links of ports gpu0 .. gpuN-1 (every one connected, none skipped; with
        ``representative``, the ports of replica 0's ranks, checked once the groups are
        known)."""
        numbers = sorted(int(port[3:]) for port in self.connected_ports()
                         if port.startswith("gpu"))
        if not numbers:
            raise ValueError(f"{self.name} ({self.type_name()}): no GPU on its gpuN ports")
        if self._represents():
            return {i: self.connected_link(f"gpu{i}", self._arrivals_of(i)) for i in numbers}
        if numbers != list(range(len(numbers))):
            missing = sorted(set(range(numbers[-1] + 1)) - set(numbers))
            raise ValueError(f"{self.name} ({self.type_name()}): ports gpu0 .. gpu{numbers[-1]} "
                             f"are the ranks, but gpu{missing[0]} is not connected")
        return {i: self.connected_link(f"gpu{i}", self._arrivals_of(i))
                for i in range(len(numbers))}

    def _represents(self) -> bool:
        """Whether the ports hold some ranks for others (``representative`` or
        ``tp_representative``)."""
        return bool(self.params["representative"] or self.params["tp_representative"])

    def _world(self) -> int:
        """The layout's ranks: the GPUs on the ports, or with ``representative`` or
        ``tp_representative`` tp x pp x dp (dp given)."""
        p = self.params
        if not self._represents():
            return len(self.links)
        if not p["dp"]:
            what = "representative" if p["representative"] else "tp_representative"
            raise ValueError(f"{self.name} ({self.type_name()}): {what} needs the "
                             "layout's dp (the ranks not on the ports)")
        return p["tp"] * p["pp"] * p["dp"]

    def _check_replica(self) -> None:
        """With ``representative`` or ``tp_representative``: the ports are exactly the
        simulated ranks (replica 0's, or every replica's; each stage's tp rank 0, or all)."""
        p = self.params
        if not self._represents():
            return
        tp, dp = p["tp"], p["dp"]
        replicas = 1 if p["representative"] else dp
        tps = 1 if p["tp_representative"] else tp
        want = sorted(t + tp * d + s * tp * dp for s in range(p["pp"])
                      for d in range(replicas) for t in range(tps))
        if sorted(self.links) != want:
            odd = sorted(set(self.links) ^ set(want))[0]
            what = " and ".join(k for k in ("representative", "tp_representative") if p[k])
            whose = ("replica 0's ranks" if tps == tp else
                     "tp rank 0 of each stage" + (" of replica 0" if replicas < dp else ""))
            raise ValueError(f"{self.name} ({self.type_name()}): {what}: the ports must be "
                             f"{whose} ({ranks_text(want)}), but gpu{odd} "
                             f"is {'connected' if odd in self.links else 'not connected'}")

    def members(self, kind: str, index: int) -> tuple[int, ...]:
        """The simulated members of group ``index`` of ``kind``: all its ranks, or with
        ``representative`` those of replica 0 (one rank of a dp group), with
        ``tp_representative`` its tp rank 0 (one rank of a tp group)."""
        key = (kind, index)
        out = self.simulated.get(key)
        if out is None:
            out = tuple(r for r in self.groups[kind][index] if r in self.links)
            self.simulated[key] = out
        return out

    def _arrivals_of(self, rank: int) -> Callable[[CollectiveIssue], None]:
        """The handler of rank ``rank``'s port."""
        def arrived(issue: CollectiveIssue) -> None:
            self._arrived(rank, issue)
        return arrived

    def _build_cluster(self) -> Cluster:
        """The cluster's graph; its ranks fit its GPUs."""
        p = self.params
        try:
            cluster = build_cluster(p["node"], p["nodes"], p["fabric"],
                                    p["oversubscription"] or None)
        except ClusterError as exc:
            raise ValueError(f"{self.name} ({self.type_name()}): {exc}") from None
        if self._world() > cluster.gpus:
            what = "ranks" if self._represents() else "GPUs on its ports"
            raise ValueError(f"{self.name} ({self.type_name()}): {self._world()} {what}, but "
                             f"nodes={p['nodes']} of {p['node']} hold {cluster.gpus}")
        return cluster

    def _layout_groups(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The process groups of the layout, by kind; tp x pp x dp must be the ranks."""
        p = self.params
        tp, pp, dp = p["tp"], p["pp"], p["dp"]
        where = f"{self.name} ({self.type_name()})"
        if dp and tp * pp * dp != self.world:
            raise ValueError(f"{where}: tp {tp} x pp {pp} x dp {dp} = {tp * pp * dp} ranks, but "
                             f"{self.world} GPUs are on its ports")
        if not dp and self.world % (tp * pp):
            raise ValueError(f"{where}: {self.world} GPUs on its ports are no multiple of tp {tp} "
                             f"x pp {pp} = {tp * pp}: no dp fits")
        dp = dp or self.world // (tp * pp)
        tables = process_groups(ParallelLayout(tp=tp, pp=pp, dp=dp))
        return {kind: getattr(tables, kind) for kind in GROUP_KINDS}

    # -- init and setup ---------------------------------------------------------------------
    def init(self, phase: int) -> None:
        """Collect each rank's hello: its GPU and the group kinds its collectives name."""
        for rank, link in self.links.items():
            while (msg := link.recv_untimed()) is not None:
                if not isinstance(msg, CollectiveHello):
                    raise ConfigError(f"{self.name}: port gpu{rank} is not wired to a "
                                      "cdma.CollectivePort (a GPU's 'collectives' slot)")
                self.hellos[rank] = msg

    def setup(self) -> None:
        """Check every rank said hello, and every group its collectives name is one of the
        layout's kinds that the model can price (as many ranks on each node it spans)."""
        for port in self.nic_ports:
            rank = int(port[3:])
            if rank not in self.links:
                raise ConfigError(f"{self.name}: port {port} holds a network card, but rank "
                                  f"{rank} is not a GPU on its gpuN ports")
            self.nics[rank] = self.peer_provider(port, NetworkCard)
        used: set[str] = set()
        for rank in self.links:
            hello = self.hellos.get(rank)
            if hello is None:
                raise ConfigError(f"{self.name}: port gpu{rank} is not wired to a "
                                  "cdma.CollectivePort (a GPU's 'collectives' slot)")
            for kind in hello.groups:
                if kind not in self.groups:
                    raise ConfigError(f"{self.name}: {hello.gpu} (rank {rank}) names "
                                      f"group={kind}, which is none of "
                                      f"{', '.join(GROUP_KINDS)}")
                if self.group_of[kind][rank] < 0:
                    raise ConfigError(f"{self.name}: {hello.gpu} (rank {rank}) names "
                                      f"group={kind}, but rank {rank} is in no {kind} group "
                                      "(the embedding group holds each pipeline's first and "
                                      "last stage)")
            used.update(hello.groups)
        for kind in sorted(used):
            for index, ranks in enumerate(self.groups[kind]):
                if not any(r in self.links for r in ranks):
                    continue  # no simulated member: never priced
                try:
                    group_shape(self.cluster, ranks)
                except ClusterError as exc:
                    raise ConfigError(f"{self.name}: {kind} group {index} (ranks "
                                      f"{ranks_text(ranks)}) cannot be priced: {exc}") from None

    # -- the rendezvous -----------------------------------------------------------------------
    def _arrived(self, rank: int, issue: CollectiveIssue) -> None:
        """Rank ``rank``'s collective reached the fabric: match it with its group's others;
        once all have come, answer each at the last arrival plus the priced time."""
        index = self.group_of[issue.group][rank]
        ranks = self.members(issue.group, index)
        key = (issue.group, index, issue.seq)
        members = self.pending.setdefault(key, {})
        if members:
            first_rank, first = next(iter(members.items()))
            if (issue.op, issue.nbytes) != (first.op, first.nbytes):
                raise SimulationError(
                    f"{self.name}: {issue.group} group {index} collective #{issue.seq}: rank "
                    f"{first_rank} issued {first.op} {first.tensor} ({first.nbytes} bytes), "
                    f"rank {rank} issued {issue.op} {issue.tensor} ({issue.nbytes} bytes): the "
                    "ranks' streams disagree")
        members[rank] = issue
        if len(members) == len(ranks):
            del self.pending[key]
            self._complete(key, ranks, members)

    def _complete(self, key: tuple[str, int, int], simulated: tuple[int, ...],
                  members: dict[int, CollectiveIssue]) -> None:
        """Every simulated member has issued the collective: price it over the whole group
        and answer each simulated member."""
        kind, index, seq = key
        ranks = self.groups[kind][index]
        first = next(iter(members.values()))
        cost = self._price(ranks, first.op, first.nbytes, kind, index)
        arrivals = [issue.issued_ps for issue in members.values()]
        cards = [self.nics[r] for r in simulated if r in self.nics]
        load = network_load(self.cluster, ranks, cost) if cards else None
        if load is None:
            self._answer(key, simulated, first, arrivals, cost, 0)
            return
        self.network.run(cards, *load, lambda delay: self._answer(
            key, simulated, first, arrivals, cost, delay), label=f"{kind}{index}#{seq}")

    def _answer(self, key: tuple[str, int, int], simulated: tuple[int, ...],
                first: CollectiveIssue, arrivals: list[int], cost: CollectiveCost,
                delay: int) -> None:
        """Answer each simulated member: the collective ends at the last arrival plus the
        priced time plus ``delay`` (its network flows' loss), and record it."""
        kind, index, seq = key
        last = max(arrivals)
        end = last + math.ceil(cost.time_s * PS_PER_S) + delay
        now = self.sim.now
        for rank in simulated:
            link = self.links[rank]
            link.send(CollectiveDone(kind, seq, end), max(0, end - now - link.latency))
        self.result.collectives.append(CollectiveRecord(
            kind, index, seq, first.op, first.tensor, first.nbytes, self.groups[kind][index],
            min(arrivals), last, end, cost, delay))
        self.stat_time.add_data(end - last)
        self.stat_bytes.add_data(first.nbytes)

    def _price(self, ranks: tuple[int, ...], op: str, nbytes: int, kind: str,
               index: int) -> CollectiveCost:
        """The cost of ``op`` of ``nbytes`` over ``ranks`` by the slot's algorithm (each
        distinct one priced once)."""
        memo = (ranks, op, nbytes)
        cost = self.prices.get(memo)
        if cost is None:
            try:
                cost = self.collective.cost(self.cluster, ranks, op, nbytes)
            except (ClusterError, CollectiveError) as exc:
                raise SimulationError(f"{self.name}: {op} over {kind} group {index} (ranks "
                                      f"{ranks_text(ranks)}): {exc}") from None
            self.prices[memo] = cost
        return cost

    # -- the end ----------------------------------------------------------------------------
    def finish(self) -> None:
        """Report a deadlock (the run ran out of events with ranks waiting in a collective),
        else publish what the fabric priced."""
        if self.pending and self.sim.end_reason == NO_EVENTS_LEFT:
            raise SimulationError(self._deadlock())
        self.publish(self.result)

    def _deadlock(self) -> str:
        """One line: the first collective still waiting, its ranks that wait and those that
        never issued it."""
        (kind, index, seq), members = min(self.pending.items())
        ranks = self.groups[kind][index]
        first = next(iter(members.values()))
        absent = [r for r in self.members(kind, index) if r not in members]
        more = len(self.pending) - 1
        tail = f" ({more} more collective(s) waiting)" if more else ""
        return (f"{self.name}: deadlock: rank(s) {ranks_text(sorted(members))} wait in "
                f"{first.op} {first.tensor} ({first.nbytes} bytes), collective #{seq} of "
                f"{kind} group {index} (ranks {ranks_text(ranks)}), which rank(s) "
                f"{ranks_text(absent)} never issued{tail}")


def _index(groups: Sequence[tuple[int, ...]], world: int) -> list[int]:
    """Each rank's group number in one kind's table (-1: in none of them)."""
    out = [-1] * world
    for number, ranks in enumerate(groups):
        for rank in ranks:
            out[rank] = number
    return out


def ranks_text(ranks: Sequence[int]) -> str:
    """Ranks as runs: ``0-6``, ``0, 8``, ``0-3, 8-11``."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
