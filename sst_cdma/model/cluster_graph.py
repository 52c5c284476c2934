"""The graph of a many-node cluster (networkx): per node its GPUs, the NVSwitch fabric (one
vertex for the node's NVSwitch chips), its PCIe switches, one NIC per GPU, its CPU sockets and
their host memory; the leaf, spine and (beyond two tiers) core switches of the scale-out
network. Edges carry ``bandwidth_Bps`` (per direction; None where no source gives it),
``latency_s`` (0: link latencies are not modelled here, the fitted per-step latency of the
collectives carries them: docs/clusters.md) and ``kind``.

Routes between two GPUs come from networkx shortest paths: inside a node through the NVSwitch,
across nodes from the GPU through its PCIe switch to its own NIC, over the fabric (leaf, and
spine or core where the NICs are on different leaves) and down the same way. The links a route
crosses name what it shares with another route: a GPU's offload copies (GPU -> PCIe switch ->
CPU -> host memory) and its GPUDirect RDMA traffic (GPU -> PCIe switch -> NIC) share the
GPU's own link to its switch; the offloads of the GPUs of one switch share its uplink.

Construction is O(GPUs): nothing is stored per pair of GPUs, routes are computed on demand."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import networkx as nx

from sst_cdma.engine.units import parse_bandwidth
from sst_cdma.model.clusters import (ClusterError, FabricSpec, NodeSpec, fabric_preset,
                                     nic_preset, node_preset)
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.links import HOST_LINKS, PCIeLink

__all__ = ["Cluster", "RankPlace", "build_cluster", "host_link_Bps", "route", "links_of",
           "shared_links", "offload_route", "nic_route", "place_ranks", "rank_place",
           "group_shape", "FABRIC_KINDS_OF_VERTEX"]

#: the vertex kinds of the scale-out fabric (routes between NICs stay among them)
FABRIC_KINDS_OF_VERTEX = frozenset({"nic", "leaf", "spine", "core"})
Edge = tuple[str, str, dict[str, object]]
Vertex = tuple[str, dict[str, object]]


@dataclass(frozen=True)
class Cluster:
    """A built cluster: its node preset, fabric preset, node count, graph and the name of
    its node preset (what the collectives' fits are keyed by)."""

    node: NodeSpec
    fabric: FabricSpec
    nodes: int
    graph: nx.Graph
    preset: str = ""

    @property
    def gpus(self) -> int:
        """GPUs in the cluster."""
        return self.nodes * self.node.gpus

    def gpu(self, node: int, local: int) -> str:
        """The vertex of GPU ``local`` of node ``node``."""
        if not (0 <= node < self.nodes and 0 <= local < self.node.gpus):
            raise ClusterError(f"gpu: node {node}, local GPU {local} is not in a cluster of "
                               f"{self.nodes} nodes of {self.node.gpus} GPUs")
        return f"n{node}/gpu{local}"

    def pcie_switch_of(self, gpu: str) -> str:
        """The PCIe switch a GPU (and its NIC) sits behind."""
        node, local = _split(gpu)
        return f"n{node}/pcie{local // self.node.gpus_per_pcie_switch}"

    def nic_of(self, gpu: str) -> str:
        """The GPU's own NIC."""
        node, local = _split(gpu)
        return f"n{node}/nic{local}"

    def socket_of(self, gpu: str) -> str:
        """The CPU socket the GPU's PCIe switch hangs on (the first half of the switches on
        socket 0)."""
        node, local = _split(gpu)
        switch = local // self.node.gpus_per_pcie_switch
        return f"n{node}/cpu{switch * self.node.cpus // self.node.pcie_switches}"


@dataclass(frozen=True)
class RankPlace:
    """Where a rank runs: its node, its GPU in the node and the GPU's vertex."""

    rank: int
    node: int
    local: int
    gpu: str


def _split(gpu: str) -> tuple[int, int]:
    head, _, tail = gpu.partition("/gpu")
    if not head.startswith("n") or not tail.isdigit():
        raise ClusterError(f"gpu: {gpu!r} is no GPU vertex (n<node>/gpu<local>)")
    return int(head[1:]), int(tail)


def host_link_Bps(key: str) -> float:
    """Payload bytes per second, one direction, of a PCIe host-link preset (``pcie4x16``)."""
    link = HOST_LINKS[key]
    if link["protocol"] != "pcie":
        raise ClusterError(f"host link {key!r} is no PCIe link")
    generation, lanes = link["generation"], link["lanes"]
    assert isinstance(generation, int) and isinstance(lanes, int)
    return PCIeLink(generation, lanes).effective


def _edge(u: str, v: str, kind: str, bandwidth: Optional[float]) -> Edge:
    return u, v, {"kind": kind, "bandwidth_Bps": bandwidth, "latency_s": 0.0}


def _node_vertices(spec: NodeSpec, i: int) -> Iterator[Vertex]:
    p = f"n{i}/"
    yield p + "nvswitch", {"kind": "nvswitch", "node": i, "chips": spec.nvswitches}
    for j in range(spec.gpus):
        yield f"{p}gpu{j}", {"kind": "gpu", "node": i, "local": j}
        yield f"{p}nic{j}", {"kind": "nic", "node": i, "local": j}
    for k in range(spec.pcie_switches):
        yield f"{p}pcie{k}", {"kind": "pcie_switch", "node": i}
    for s in range(spec.cpus):
        yield f"{p}cpu{s}", {"kind": "cpu", "node": i}
        yield f"{p}mem{s}", {"kind": "host_memory", "node": i}


def _node_edges(spec: NodeSpec, i: int, rates: dict[str, Optional[float]]) -> Iterator[Edge]:
    p = f"n{i}/"
    for j in range(spec.gpus):
        switch = f"{p}pcie{j // spec.gpus_per_pcie_switch}"
        yield _edge(f"{p}gpu{j}", p + "nvswitch", "nvlink", rates["nvlink"])
        yield _edge(f"{p}gpu{j}", switch, "pcie", rates["gpu_pcie"])
        yield _edge(f"{p}nic{j}", switch, "pcie", rates["nic_pcie"])
    for k in range(spec.pcie_switches):
        yield _edge(f"{p}pcie{k}", f"{p}cpu{k * spec.cpus // spec.pcie_switches}", "pcie",
                    rates["uplink"])
    for s in range(spec.cpus):
        yield _edge(f"{p}cpu{s}", f"{p}mem{s}", "memory", rates["memory"])
        if s:
            yield _edge(f"{p}cpu{s - 1}", f"{p}cpu{s}", "socket", None)


def _leaf_of(spec: NodeSpec, fabric: FabricSpec, node: int, local: int) -> int:
    if fabric.kind == "rail_optimized":
        return (node // fabric.down_ports) * spec.gpus + local
    return (node * spec.gpus + local) // fabric.down_ports


def _fabric(fabric: FabricSpec, leaves: int) -> tuple[list[Vertex], list[Edge]]:
    """The spine (and core) switches and the leaf-spine(-core) bundles above ``leaves``."""
    radix, up, rate = fabric.switch_radix, fabric.up_ports, fabric.port_rate_Bps
    vertices: list[Vertex] = []
    edges: list[Edge] = []
    if leaves <= 1:
        return vertices, edges
    if leaves <= radix:
        spines = math.ceil(leaves * up / radix)
        width = max(1, up // spines)
        vertices += [(f"spine{s}", {"kind": "spine"}) for s in range(spines)]
        edges += [_edge(f"leaf{leaf}", f"spine{s}", "network", width * rate)
                  for s in range(spines) for leaf in range(leaves)]
        return vertices, edges
    pod = radix // 2
    pods = math.ceil(leaves / pod)
    if pods > radix:
        raise ClusterError(f"nodes: {leaves} leaves of radix {radix} need more than three "
                           "tiers of switches, which this model does not build")
    cores = math.ceil(pods * pod / radix)
    width = max(1, pod // cores)
    vertices += [(f"core{g}.{c}", {"kind": "core"}) for g in range(up) for c in range(cores)]
    for q in range(pods):
        for g in range(up):
            spine = f"spine{q}.{g}"
            vertices.append((spine, {"kind": "spine"}))
            edges += [_edge(f"leaf{leaf}", spine, "network", rate)
                      for leaf in range(q * pod, min(leaves, (q + 1) * pod))]
            edges += [_edge(spine, f"core{g}.{c}", "network", width * rate)
                      for c in range(cores)]
    return vertices, edges


def _rates(spec: NodeSpec) -> dict[str, Optional[float]]:
    nic = nic_preset(spec.nic)
    memory = spec.host_memory_bandwidth
    return {"nvlink": spec.nvlink_Bps, "gpu_pcie": host_link_Bps(GPUS[spec.gpu].host_link),
            "nic_pcie": host_link_Bps(nic.host_link),
            "uplink": host_link_Bps(spec.pcie_switch_uplink),
            "memory": parse_bandwidth(memory) if memory else None}


def build_cluster(node: str = "dgx_h100", nodes: int = 1, fabric: str = "rail_ndr",
                  oversubscription: Optional[float] = None) -> Cluster:
    """The graph of ``nodes`` nodes of preset ``node`` on the scale-out ``fabric``
    (``oversubscription`` replaces the fabric preset's leaf down:up ratio when given)."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ClusterError(f"nodes: {nodes!r} must be a whole number >= 1")
    spec, net = node_preset(node), fabric_preset(fabric, oversubscription)
    nic_rate = min(nic_preset(spec.nic).line_rate_Bps, net.port_rate_Bps)
    rates = _rates(spec)
    g = nx.Graph(cluster=spec.name, fabric=net.name)
    leaves = 1 + max(_leaf_of(spec, net, nodes - 1, j) for j in range(spec.gpus))
    g.add_nodes_from((f"leaf{k}", {"kind": "leaf"}) for k in range(leaves))
    for i in range(nodes):
        g.add_nodes_from(_node_vertices(spec, i))
        g.add_edges_from(_node_edges(spec, i, rates))
        g.add_edges_from(_edge(f"n{i}/nic{j}", f"leaf{_leaf_of(spec, net, i, j)}", "network",
                               nic_rate) for j in range(spec.gpus))
    vertices, edges = _fabric(net, leaves)
    g.add_nodes_from(vertices)
    g.add_edges_from(edges)
    return Cluster(spec, net, nodes, g, node)


def route(cluster: Cluster, a: str, b: str) -> list[str]:
    """The vertices from GPU ``a`` to GPU ``b``: through the NVSwitch inside a node; across
    nodes from ``a``'s PCIe switch and own NIC, the fabric's shortest path between the two
    NICs, and ``b``'s NIC and PCIe switch."""
    node_a, _ = _split(a)
    node_b, _ = _split(b)
    g = cluster.graph
    for gpu in (a, b):
        if gpu not in g:
            raise ClusterError(f"route: {gpu!r} is no GPU of the cluster")
    if a == b:
        return [a]
    if node_a == node_b:
        return list(nx.shortest_path(g, a, b))
    nic_a, nic_b = cluster.nic_of(a), cluster.nic_of(b)
    fabric = nx.subgraph_view(g, filter_node=lambda v: g.nodes[v]["kind"]
                              in FABRIC_KINDS_OF_VERTEX)
    middle = list(nx.shortest_path(fabric, nic_a, nic_b))
    return [a, cluster.pcie_switch_of(a), *middle, cluster.pcie_switch_of(b), b]


def offload_route(cluster: Cluster, gpu: str) -> list[str]:
    """The vertices of a GPU's offload copy to host memory: its PCIe switch, the switch's
    CPU socket and that socket's memory."""
    socket = cluster.socket_of(gpu)
    return [gpu, cluster.pcie_switch_of(gpu), socket, socket.replace("/cpu", "/mem")]


def nic_route(cluster: Cluster, gpu: str, gpudirect: bool = True) -> list[str]:
    """The vertices from a GPU to its own NIC: with GPUDirect RDMA through its PCIe switch;
    without, staged in host memory (up the switch's uplink to the socket's memory and down
    again to the NIC)."""
    switch, nic = cluster.pcie_switch_of(gpu), cluster.nic_of(gpu)
    if gpudirect:
        return [gpu, switch, nic]
    socket = cluster.socket_of(gpu)
    memory = socket.replace("/cpu", "/mem")
    return [gpu, switch, socket, memory, socket, switch, nic]


def links_of(path: Sequence[str]) -> list[tuple[str, str]]:
    """The directed links a path of vertices crosses, in order."""
    return list(zip(path, path[1:]))


def shared_links(first: Sequence[str], second: Sequence[str],
                 directed: bool = True) -> list[tuple[str, str]]:
    """The links both paths cross (in the first path's order); ``directed``: only where they
    cross them the same way (links are full duplex)."""
    other = set(links_of(second))
    if not directed:
        other |= {(v, u) for u, v in other}
    return [link for link in links_of(first) if link in other]


def rank_place(cluster: Cluster, rank: int) -> RankPlace:
    """Where rank ``rank`` runs: ranks fill nodes in order (rank r on node r // GPUs per
    node, GPU r % GPUs per node), so consecutive ranks share a node."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < cluster.gpus:
        raise ClusterError(f"rank: {rank!r} is not in 0..{cluster.gpus - 1}")
    node, local = divmod(rank, cluster.node.gpus)
    return RankPlace(rank, node, local, f"n{node}/gpu{local}")


def place_ranks(cluster: Cluster, world: int) -> list[RankPlace]:
    """The places of ranks 0..``world``-1 (at most the cluster's GPUs)."""
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= cluster.gpus:
        raise ClusterError(f"world: {world!r} ranks do not fit a cluster of {cluster.gpus} "
                           "GPUs (at least 1)")
    return [rank_place(cluster, r) for r in range(world)]


def group_shape(cluster: Cluster, ranks: Sequence[int]) -> tuple[int, int]:
    """(nodes, ranks per node) of a process group: the shape the collectives price. The
    group must hold the same number of ranks on each node it spans."""
    if not ranks or len(set(ranks)) != len(ranks):
        raise ClusterError("ranks: a group needs at least one rank, each once")
    per_node: dict[int, int] = {}
    for r in ranks:
        place = rank_place(cluster, r)
        per_node[place.node] = per_node.get(place.node, 0) + 1
    counts = set(per_node.values())
    if len(counts) != 1:
        raise ClusterError(f"ranks: the group holds {sorted(counts)} ranks on different nodes; "
                           "the collectives price groups with as many ranks on each node")
    return len(per_node), counts.pop()
