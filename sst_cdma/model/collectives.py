"""The cost of collectives on a cluster of NVSwitch nodes, in the alpha-beta form: a latency
per step and the bytes each rank moves over its bottleneck link, per algorithm (ring, double
binary tree, hierarchical) and operation (all-reduce, reduce-scatter, all-gather, send/recv).

Bytes per rank follow nccl-tests' bus-bandwidth convention (NVIDIA/nccl-tests
doc/PERFORMANCE.md): an all-reduce moves 2(n-1)/n of the buffer per rank, a reduce-scatter and
an all-gather (n-1)/n of the whole buffer, a send/recv the buffer. Step counts and how latency
and bandwidth combine across nodes follow NCCL's own tuning model (NVIDIA/nccl
src/graph/tuning.cc): a ring takes 2(n-1) steps for an all-reduce, 2(nodes-1) of them across
the network; a tree 2((n/nodes - 1) intra + log2(nodes) inter) step latencies and moves twice
the buffer per rank; NCCL prices each protocol (low-latency and simple) and runs the fastest.

Each tier carries two lines, low-latency (LL) and simple: inside a node they are FITTED to
published nccl-tests sweeps of the systems (``calibration_data/nccl_tests.json``, the fit:
:func:`fit_dataset`, its residuals: ``python -m sst_cdma.tools.collective_fit --fit``); across
nodes no published sweep of a DGX was found, so the network tier is the NIC's line rate times
the share of it NVIDIA states NCCL gets per NDR NIC (46-48 of 50 GB/s), with NCCL's own
per-step network latencies (tuning.cc), flagged ``fitted=False``. docs/clusters.md
says where every number comes from."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from sst_cdma.engine.file_reads import MIB, FileKind, load_json
from sst_cdma.model.cluster_graph import Cluster, group_shape, rank_place
from sst_cdma.model.clusters import nic_preset, node_preset

__all__ = ["OPS", "ALGORITHMS", "DATA_PATH", "CollectiveError", "Line", "Tier", "SystemTiers",
           "Phase", "CollectiveCost", "bus_factor", "busbw_from_algbw", "algbw_from_busbw",
           "ring_steps", "bytes_per_rank", "ring_cost", "tree_cost", "hierarchical_cost",
           "send_recv_cost", "collective_cost", "group_cost", "network_share",
           "with_network_share", "Dataset", "Fit", "load_datasets",
           "fit_dataset", "fits", "network_efficiency", "system_tiers", "fit_table", "residual_table"]

OPS = ("all_reduce", "reduce_scatter", "all_gather", "send_recv")
ALGORITHMS = ("ring", "tree", "hierarchical")
DATA_PATH = Path(__file__).with_name("calibration_data") / "nccl_tests.json"
DATA_FILE = FileKind("an nccl-tests data file", 4 * MIB)
FORMAT = "sst-cdma-nccl-tests"
#: NCCL's per-step network latency of a ring, in seconds, per protocol (NVIDIA/nccl
#: src/graph/tuning.cc, hwLat[NCCL_HW_NET][Ring]: LL 2.7 us, Simple 9.6 us)
NET_STEP_LATENCY_S = {"LL": 2.7e-6, "simple": 9.6e-6}
#: the share of the network's bandwidth NCCL's ring gets with the LL protocol across nodes
#: (tuning.cc: ``busBw *= 1.0/4.0`` for Ring/LL when nNodes > 1)
NET_LL_SHARE = 0.25
#: the two lines of a tier, in order (NCCL's low-latency and simple protocols)
PROTOCOLS = ("LL", "simple")
#: NCCL's fixed latency of one collective, in seconds, per algorithm and protocol (tuning.cc,
#: baseLat: Ring LL 3.6 us, Simple 8.4 us; Tree LL 4.4 us, Simple 0): the rest of a fitted
#: latency is spread over the ring's steps
BASE_LATENCY_S = {"ring": {"LL": 3.6e-6, "simple": 8.4e-6},
                  "tree": {"LL": 4.4e-6, "simple": 0.0}}
#: sizes from which the large-message residuals are reported (256 MiB)
LARGE_BYTES = 1 << 28


class CollectiveError(ValueError):
    """A collective asked with a bad input: the message names the parameter and the fault."""


@dataclass(frozen=True)
class Line:
    """One protocol's alpha-beta line: latency per step (s) and bus bandwidth (B/s)."""

    protocol: str
    step_latency_s: float
    busbw_Bps: float


@dataclass(frozen=True)
class Tier:
    """The lines of one tier (inside a node, or one NIC across nodes), whether they were
    fitted to measurements, and where they come from."""

    lines: tuple[Line, ...]
    fitted: bool
    source: str

    def line(self, protocol: str) -> Line:
        """The tier's line of ``protocol``."""
        return next(line for line in self.lines if line.protocol == protocol)


@dataclass(frozen=True)
class SystemTiers:
    """A system's tiers: ``intra`` (NVLink through NVSwitch, per GPU) and ``inter`` (one NIC
    per GPU), and its GPUs per node."""

    system: str
    gpus_per_node: int
    intra: Tier
    inter: Tier


@dataclass(frozen=True)
class Phase:
    """One phase of a collective: what it is, on which tier, its steps, the bytes each rank
    moves over that tier, and its time (s) with the protocol that gives it."""

    name: str
    tier: str
    steps: int
    bytes_per_rank: float
    time_s: float
    protocol: str


@dataclass(frozen=True)
class CollectiveCost:
    """The cost of one collective: its phases and its time (the phases one after another, or
    overlapped where the algorithm pipelines them)."""

    algorithm: str
    op: str
    nbytes: float
    ranks: int
    time_s: float
    phases: tuple[Phase, ...] = field(default_factory=tuple)

    @property
    def algbw_Bps(self) -> float:
        """Buffer bytes over time (nccl-tests' algorithm bandwidth); 0 when it costs nothing."""
        return self.nbytes / self.time_s if self.time_s else 0.0

    @property
    def busbw_Bps(self) -> float:
        """The algorithm bandwidth times the operation's bus factor."""
        return busbw_from_algbw(self.op, self.algbw_Bps, self.ranks)


def _check(op: str, nbytes: float, n: int) -> None:
    if op not in OPS:
        raise CollectiveError(f"op: {op!r} is no collective; choose from {', '.join(OPS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CollectiveError(f"ranks: {n!r} must be a whole number >= 1")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) \
            or not math.isfinite(nbytes) or nbytes < 0:
        raise CollectiveError(f"nbytes: {nbytes!r} must be a finite number of bytes >= 0")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: 2(n-1)/n for an all-reduce, (n-1)/n for a
    reduce-scatter or an all-gather, 1 for a send/recv (doc/PERFORMANCE.md)."""
    _check(op, 0, n)
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op == "send_recv":
        return 1.0
    return (n - 1) / n


def busbw_from_algbw(op: str, algbw: float, n: int) -> float:
    """Bus bandwidth of an algorithm bandwidth (``algbw`` x the bus factor)."""
    return algbw * bus_factor(op, n)


def algbw_from_busbw(op: str, busbw: float, n: int) -> float:
    """Algorithm bandwidth of a bus bandwidth; a one-rank collective moves nothing (0)."""
    factor = bus_factor(op, n)
    return busbw / factor if factor else 0.0


def ring_steps(op: str, n: int) -> int:
    """The ring's latency-bound steps: 2(n-1) for an all-reduce, n-1 for a reduce-scatter or
    an all-gather, 1 for a send/recv between two ranks (0 on one rank)."""
    _check(op, 0, n)
    if n == 1:
        return 0
    return {"all_reduce": 2 * (n - 1), "send_recv": 1}.get(op, n - 1)


def bytes_per_rank(op: str, nbytes: float, n: int) -> float:
    """Bytes each rank sends (and receives as much) over its bottleneck link: the buffer
    times the bus factor."""
    _check(op, nbytes, n)
    return nbytes * bus_factor(op, n)


def _best(cost: Callable[[str], float]) -> tuple[float, str]:
    """The least time over the protocols of ``cost(protocol)`` and that protocol."""
    return min((cost(p), p) for p in PROTOCOLS)


def _span(ranks: int, nodes: int, tiers: SystemTiers) -> int:
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise CollectiveError(f"nodes: {nodes!r} must be a whole number >= 1")
    if ranks % nodes:
        raise CollectiveError(f"ranks: {ranks} ranks do not spread evenly over {nodes} nodes")
    per_node = ranks // nodes
    if per_node > tiers.gpus_per_node:
        raise CollectiveError(f"ranks: {per_node} ranks per node, but a {tiers.system} node "
                              f"has {tiers.gpus_per_node} GPUs")
    return per_node


def _cross_bw(tiers: SystemTiers, protocol: str, per_node: int) -> float:
    """Bus bandwidth of rings crossing nodes: NCCL runs one ring per NIC, each crossing
    through its own NIC, so the crossings share ``per_node`` NICs; NVLink caps it."""
    return min(tiers.intra.line(protocol).busbw_Bps,
               per_node * tiers.inter.line(protocol).busbw_Bps)


def ring_cost(op: str, nbytes: float, ranks: int, nodes: int,
              tiers: SystemTiers) -> CollectiveCost:
    """A ring over ``ranks`` ranks on ``nodes`` nodes: its steps, 2(nodes-1) (all-reduce) or
    nodes-1 of them across the network at the network's step latency, and the bytes per rank
    at the intra-node bus bandwidth, or the rings' share of the NICs across nodes."""
    _check(op, nbytes, ranks)
    per_node = _span(ranks, nodes, tiers)
    if ranks == 1 or nbytes == 0:
        return CollectiveCost("ring", op, nbytes, ranks, 0.0)
    steps = ring_steps(op, ranks)
    inter_steps = 0 if nodes == 1 else ring_steps(op, nodes)
    moved = bytes_per_rank(op, nbytes, ranks)

    def time(p: str) -> float:
        bw = tiers.intra.line(p).busbw_Bps if nodes == 1 else _cross_bw(tiers, p, per_node)
        return (BASE_LATENCY_S["ring"][p] + (steps - inter_steps) * tiers.intra.line(p).step_latency_s
                + inter_steps * tiers.inter.line(p).step_latency_s + moved / bw)

    t, p = _best(time)
    tier = "intra" if nodes == 1 else "inter"
    return CollectiveCost("ring", op, nbytes, ranks, t, (Phase("ring", tier, steps, moved, t, p),))


def tree_cost(op: str, nbytes: float, ranks: int, nodes: int,
              tiers: SystemTiers) -> CollectiveCost:
    """NCCL's double binary tree, for all-reduce only (NCCL runs the others as rings): a
    chain of 2(n/nodes - 1) intra-node steps and 2 floor(log2 nodes) network steps, and twice
    the buffer per rank (tuning.cc: algorithm bandwidth half the bus bandwidth)."""
    _check(op, nbytes, ranks)
    if op != "all_reduce":
        raise CollectiveError(f"algorithm: the tree runs all_reduce only, not {op} "
                              "(NCCL runs the other collectives as rings)")
    per_node = _span(ranks, nodes, tiers)
    if ranks == 1 or nbytes == 0:
        return CollectiveCost("tree", op, nbytes, ranks, 0.0)
    intra_steps, inter_steps = 2 * (per_node - 1), 2 * int(math.log2(nodes))
    moved = 2.0 * nbytes

    def time(p: str) -> float:
        bw = tiers.intra.line(p).busbw_Bps if nodes == 1 else _cross_bw(tiers, p, per_node)
        return (BASE_LATENCY_S["tree"][p] + intra_steps * tiers.intra.line(p).step_latency_s
                + inter_steps * tiers.inter.line(p).step_latency_s + moved / bw)

    t, p = _best(time)
    phase = Phase("tree", "intra" if nodes == 1 else "inter", intra_steps + inter_steps,
                  moved, t, p)
    return CollectiveCost("tree", op, nbytes, ranks, t, (phase,))


def _phase(name: str, tier_name: str, op: str, nbytes: float, n: int, tier: Tier) -> Phase:
    """A ring phase of ``op`` over ``n`` ranks on one tier, at its best protocol."""
    steps, moved = ring_steps(op, n), bytes_per_rank(op, nbytes, n)
    if steps == 0:
        return Phase(name, tier_name, 0, 0.0, 0.0, PROTOCOLS[-1])
    t, p = min((BASE_LATENCY_S["ring"][p] + steps * tier.line(p).step_latency_s
                + moved / tier.line(p).busbw_Bps, p) for p in PROTOCOLS)
    return Phase(name, tier_name, steps, moved, t, p)


def _hierarchical_phases(op: str, nbytes: float, per_node: int, nodes: int,
                         tiers: SystemTiers) -> list[Phase]:
    shard = nbytes / per_node
    intra, inter = tiers.intra, tiers.inter
    if op == "all_reduce":
        return [_phase("intra reduce-scatter", "intra", "reduce_scatter", nbytes, per_node,
                       intra),
                _phase("inter all-reduce", "inter", "all_reduce", shard, nodes, inter),
                _phase("intra all-gather", "intra", "all_gather", nbytes, per_node, intra)]
    if op == "reduce_scatter":
        return [_phase("intra reduce-scatter", "intra", op, nbytes, per_node, intra),
                _phase("inter reduce-scatter", "inter", op, shard, nodes, inter)]
    return [_phase("inter all-gather", "inter", op, shard, nodes, inter),
            _phase("intra all-gather", "intra", op, nbytes, per_node, intra)]


def hierarchical_cost(op: str, nbytes: float, ranks: int, nodes: int, tiers: SystemTiers,
                      overlap: bool = False) -> CollectiveCost:
    """Inside each node a reduce-scatter, across nodes the collective on each GPU's shard
    over its own rail (the GPUs of a node each on their own NIC, in parallel), inside each
    node an all-gather (all-reduce; a reduce-scatter stops after the network phase, an
    all-gather starts with it). ``overlap``: the phases pipelined chunk by chunk, so the time
    is their latencies plus the busier tier's bandwidth time (NVLink carries both intra
    phases); else one phase after the other."""
    _check(op, nbytes, ranks)
    if op == "send_recv":
        raise CollectiveError("algorithm: send_recv has no hierarchical form")
    per_node = _span(ranks, nodes, tiers)
    if ranks == 1 or nbytes == 0:
        return CollectiveCost("hierarchical", op, nbytes, ranks, 0.0)
    phases = _hierarchical_phases(op, nbytes, per_node, nodes, tiers)
    total = sum(ph.time_s for ph in phases)
    if overlap:
        latency, busy = 0.0, {"intra": 0.0, "inter": 0.0}
        for ph in phases:
            tier = tiers.intra if ph.tier == "intra" else tiers.inter
            line = tier.line(ph.protocol)
            latency += BASE_LATENCY_S["ring"][ph.protocol] + ph.steps * line.step_latency_s
            busy[ph.tier] += ph.bytes_per_rank / line.busbw_Bps
        total = latency + max(busy.values())
    return CollectiveCost("hierarchical", op, nbytes, ranks, total, tuple(phases))


def send_recv_cost(nbytes: float, same_node: bool, tiers: SystemTiers) -> CollectiveCost:
    """A send/recv of ``nbytes`` between two GPUs: one step and the buffer over NVLink, or
    over the sender's NIC."""
    _check("send_recv", nbytes, 2)
    if nbytes == 0:
        return CollectiveCost("p2p", "send_recv", nbytes, 2, 0.0)
    phase = _phase("send/recv", "intra" if same_node else "inter", "send_recv", nbytes, 2,
                   tiers.intra if same_node else tiers.inter)
    return CollectiveCost("p2p", "send_recv", nbytes, 2, phase.time_s, (phase,))


def with_network_share(tiers: SystemTiers, share: float) -> SystemTiers:
    """``tiers`` with the network tier's bandwidths times ``share`` (0 < share <= 1): what
    an oversubscribed fabric leaves each NIC where the traffic crosses its spines."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) \
            or not 0 < share <= 1:
        raise CollectiveError(f"network_share: {share!r} must be a number in (0, 1]")
    if share == 1:
        return tiers
    lines = tuple(replace(line, busbw_Bps=line.busbw_Bps * share) for line in tiers.inter.lines)
    return replace(tiers, inter=replace(tiers.inter, lines=lines))


def collective_cost(algorithm: str, op: str, nbytes: float, ranks: int, nodes: int,
                    system: str, overlap: bool = False,
                    network_share: float = 1.0) -> CollectiveCost:
    """The cost of ``op`` on ``nbytes`` over ``ranks`` ranks spread evenly over ``nodes``
    nodes of ``system`` (a node preset) with ``algorithm`` (ring, tree, hierarchical);
    ``overlap`` pipelines the hierarchical phases; ``network_share`` scales the network's
    bandwidth (:func:`with_network_share`). A send/recv is between two ranks."""
    if algorithm not in ALGORITHMS:
        raise CollectiveError(f"algorithm: {algorithm!r} is none of {', '.join(ALGORITHMS)}")
    tiers = with_network_share(system_tiers(system), network_share)
    if op == "send_recv":
        if ranks != 2 or nodes not in (1, 2):
            raise CollectiveError(f"ranks: a send_recv is between 2 ranks on 1 or 2 nodes, "
                                  f"not {ranks} on {nodes}")
        return send_recv_cost(nbytes, nodes == 1, tiers)
    if algorithm == "ring":
        return ring_cost(op, nbytes, ranks, nodes, tiers)
    if algorithm == "tree":
        return tree_cost(op, nbytes, ranks, nodes, tiers)
    return hierarchical_cost(op, nbytes, ranks, nodes, tiers, overlap)


def network_share(cluster: Cluster, ranks: Sequence[int]) -> float:
    """The share of each NIC's bandwidth a group's traffic gets from the fabric: 1 while its
    NICs sit on leaves that reach each other without spines (one scalable unit of a
    rail-optimized fabric, one leaf of a fat-tree), else the leaves' up:down port ratio (the
    worst case: every flow crosses the spines)."""
    fabric = cluster.fabric
    nodes = {rank_place(cluster, r).node for r in ranks}
    if fabric.kind == "rail_optimized":
        units = {node // fabric.down_ports for node in nodes}
        local = len(units) == 1
    else:
        per = cluster.node.gpus
        leaves = {(node * per + j) // fabric.down_ports for node in nodes for j in range(per)}
        local = len(leaves) == 1
    return 1.0 if local else min(1.0, fabric.up_ports / fabric.down_ports)


def group_cost(cluster: Cluster, ranks: Sequence[int], algorithm: str, op: str,
               nbytes: float, overlap: bool = False) -> CollectiveCost:
    """The cost of ``op`` over the process group ``ranks`` of a built cluster: its shape
    (nodes, ranks per node) from the ranks' places, its system from the cluster's preset,
    the network's share from where its NICs sit on the fabric (:func:`network_share`)."""
    nodes, per_node = group_shape(cluster, ranks)
    return collective_cost(algorithm, op, nbytes, nodes * per_node, nodes, cluster.preset,
                           overlap, network_share(cluster, ranks))


@dataclass(frozen=True)
class Dataset:
    """One published nccl-tests data set: its system, use (``fit`` or ``check``), operation,
    ranks, nodes, source and points (sizes in bytes, times in s, from the fit column)."""

    id: str
    system: str
    use: str
    op: str
    ranks: int
    nodes: int
    source: dict[str, Any]
    sizes: tuple[float, ...]
    times_s: tuple[float, ...]
    busbw_Bps: tuple[float, ...]


@dataclass(frozen=True)
class Fit:
    """The two lines fitted to a data set (latency of the whole collective, s; bus
    bandwidth, B/s), the size from which the simple line serves, and the relative residual
    of every point (model / measured - 1)."""

    dataset: Dataset
    lines: tuple[tuple[float, float], tuple[float, float]]
    switch_bytes: float
    residuals: tuple[float, ...]

    def predict(self, nbytes: float) -> float:
        """The fitted time (s) of one collective of ``nbytes``: the faster line."""
        factor = bus_factor(self.dataset.op, self.dataset.ranks)
        return min(a + nbytes * factor / b for a, b in self.lines)

    @property
    def max_residual(self) -> float:
        """The largest |relative residual| over all points."""
        return max(abs(r) for r in self.residuals)

    @property
    def max_large_residual(self) -> float:
        """The largest |relative residual| over the points of 256 MiB and more."""
        return max(abs(r) for s, r in zip(self.dataset.sizes, self.residuals)
                   if s >= LARGE_BYTES)

    def tier(self) -> Tier:
        """The fitted lines as a tier: each line's latency less NCCL's base latency of a
        ring, spread over the ring's steps (at least 0)."""
        steps = ring_steps(self.dataset.op, self.dataset.ranks)
        src = self.dataset.source
        lines = tuple(Line(p, max(0.0, a - BASE_LATENCY_S["ring"][p]) / steps, b)
                      for p, (a, b) in zip(PROTOCOLS, self.lines))
        return Tier(lines, True, f"fitted to {src['repository']} {src.get('path', '')}".strip())


def _dataset(raw: dict[str, Any]) -> Dataset:
    """A data set of the file; times come from its fit column (a time in us, or a bus
    bandwidth in GB/s turned into the time it stands for)."""
    columns, points = raw["columns"], raw["points"]
    factor = bus_factor(raw["op"], raw["ranks"])
    head = (raw["id"], raw["system"], raw["use"], raw["op"], raw["ranks"], raw["nodes"],
            raw["source"])
    if "bytes" not in columns:      # a peak figure without its size
        busbw = tuple(row[columns.index("busbw_GBps")] * 1e9 for row in points)
        return Dataset(*head, (), (), busbw)
    column = columns.index(raw["fit_column"])
    sizes = tuple(float(row[columns.index("bytes")]) for row in points)
    if raw["fit_column"].startswith("time"):
        times = tuple(row[column] * 1e-6 for row in points)
    else:
        times = tuple(s * factor / (row[column] * 1e9) for s, row in zip(sizes, points))
    if any(not t > 0 for t in times) or any(not s > 0 for s in sizes):
        raise CollectiveError(f"data set {raw['id']}: sizes and times must be > 0")
    return Dataset(*head, sizes, times, tuple(s * factor / t for s, t in zip(sizes, times)))


@functools.lru_cache(maxsize=4)
def load_datasets(path: Optional[str] = None) -> tuple[Dataset, ...]:
    """The data sets of the nccl-tests data file (the shipped one by default)."""
    doc = load_json(path or DATA_PATH, DATA_FILE)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != 1:
        raise CollectiveError(f"{path or DATA_PATH}: not an {FORMAT} file of version 1")
    try:
        return tuple(_dataset(raw) for raw in doc["datasets"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        if isinstance(exc, CollectiveError):
            raise
        raise CollectiveError(f"{path or DATA_PATH}: a data set lacks or garbles a field "
                              f"({type(exc).__name__}: {exc})") from None


def _line(sizes: np.ndarray, times: np.ndarray, factor: float) -> tuple[float, float]:
    """(latency, bus bandwidth) of t = a + S f / B, least squares on relative error."""
    design = np.column_stack([1.0 / times, sizes * factor / times])
    (a, inv_b), *_ = np.linalg.lstsq(design, np.ones_like(times), rcond=None)
    return float(a), (float(1.0 / inv_b) if inv_b > 0 else math.inf)


def fit_dataset(data: Dataset) -> Fit:
    """Two alpha-beta lines fitted to a sweep: the points below a split size to one, those
    from it to the other, each by least squares on relative error; the model is the faster
    line at each size (as NCCL runs the faster protocol), and the split is the one whose
    model has the least sum of squared relative residuals over all points."""
    sizes, times = np.array(data.sizes), np.array(data.times_s)
    factor = bus_factor(data.op, data.ranks)
    best: Optional[tuple[float, tuple[tuple[float, float], tuple[float, float]], int]] = None
    for split in range(2, len(sizes) - 1):
        lines = (_line(sizes[:split], times[:split], factor),
                 _line(sizes[split:], times[split:], factor))
        if any(a <= 0 or not math.isfinite(b) or b <= 0 for a, b in lines):
            continue
        model = np.min([a + sizes * factor / b for a, b in lines], axis=0)
        error = float(np.sum((model / times - 1.0) ** 2))
        if best is None or error < best[0]:
            best = (error, lines, split)
    if best is None:
        raise CollectiveError(f"{data.id}: no two positive lines fit the data")
    _, lines, split = best
    model = np.min([a + sizes * factor / b for a, b in lines], axis=0)
    return Fit(data, lines, float(sizes[split]), tuple(float(r) for r in model / times - 1.0))


@functools.lru_cache(maxsize=1)
def fits() -> dict[str, Fit]:
    """The fit of every shipped data set marked for fitting, by system."""
    return {d.system: fit_dataset(d) for d in load_datasets() if d.use == "fit"}


@functools.lru_cache(maxsize=1)
def network_efficiency() -> float:
    """The share of a NIC's line rate NCCL's rings get across nodes: the mean of the shipped
    ``network`` figures (per-NIC bus bandwidth NVIDIA states for NDR) over the line rate of
    their system's NIC; applied to every NIC preset."""
    shares = [bw / nic_preset(node_preset(d.system).nic).line_rate_Bps
              for d in load_datasets() if d.use == "network" for bw in d.busbw_Bps]
    if not shares:
        raise CollectiveError(f"{DATA_PATH}: no network data set to calibrate the NICs with")
    return sum(shares) / len(shares)


@functools.lru_cache(maxsize=8)
def system_tiers(system: str) -> SystemTiers:
    """The tiers of a node preset: inside the node, the fit to its nccl-tests sweep; across
    nodes, its NIC's line rate times :func:`network_efficiency` with NCCL's network step
    latencies (not fitted to a sweep)."""
    node = node_preset(system)
    if system not in fits():
        raise CollectiveError(f"system: {system!r} has no nccl-tests data to fit")
    nic = nic_preset(node.nic)
    rate = nic.line_rate_Bps * network_efficiency()
    inter = Tier((Line("LL", NET_STEP_LATENCY_S["LL"], rate * NET_LL_SHARE),
                  Line("simple", NET_STEP_LATENCY_S["simple"], rate)), False,
                 f"{nic.name}: {network_efficiency():.0%} of its line rate; NCCL tuning.cc "
                 "network step latencies")
    return SystemTiers(system, node.gpus, fits()[system].tier(), inter)


def fit_table(fitted: Sequence[Fit]) -> list[str]:
    """The markdown lines of the fits: per data set, the two lines (latency per ring step,
    bus bandwidth), the split size and the residuals."""
    out = ["| data set | points | LL: latency/step, busbw | simple: latency/step, busbw "
           "| simple from | max residual | max residual >= 256 MiB |",
           "|---|---|---|---|---|---|---|"]
    for f in fitted:
        tier = f.tier()
        cells = [f"{line.step_latency_s * 1e6:.2f} us, {line.busbw_Bps / 1e9:.1f} GB/s"
                 for line in tier.lines]
        out.append(f"| {f.dataset.id} | {len(f.dataset.sizes)} | {cells[0]} | {cells[1]} | "
                   f"{f.switch_bytes:.0f} B | {f.max_residual:.1%} | "
                   f"{f.max_large_residual:.1%} |")
    return out


def residual_table(f: Fit) -> list[str]:
    out = [f"Residuals of {f.dataset.id}:", "",
           "| bytes | measured (us) | model (us) | residual |", "|---|---|---|---|"]
    for size, t, r in zip(f.dataset.sizes, f.dataset.times_s, f.residuals):
        out.append(f"| {size:.0f} | {t * 1e6:.2f} | {t * (1 + r) * 1e6:.2f} | {r:+.1%} |")
    return out
