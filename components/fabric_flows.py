"""The inter-node part of a collective as flows on its members' network cards (``cdma.NIC``),
so that it shares each GPU's link to its PCIe switch with the GPU's offload copies
(docs/clusters.md, "The PCIe switch a GPU shares with its NIC").

The model prices a collective alone (sst_cdma/model/collectives.py). Its network phase keeps
each member's NIC busy at a rate for a time: a ring or a tree across nodes runs one ring per
NIC, so each of a node's ``per_node`` NICs carries ``1/per_node`` of the phase's bus bandwidth
and of the bytes each rank moves; the hierarchical form's network phase runs each GPU's shard
over its own NIC, at the tier's bandwidth. That load becomes one flow per simulated member,
capped at that rate, loading its card and its GPU link both ways (a ring sends and receives
as much). Alone it ends exactly when the priced bandwidth time does; what it loses to other
flows on the way (an offload copy on the GPU's link) is the collective's delay: the group
ends when its slowest member's flow has."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from sst_cdma.engine.flows import Flow, FlowNetwork, isolated_duration_ps
from sst_cdma.model.cluster_graph import Cluster, group_shape
from sst_cdma.model.collectives import (CollectiveCost, network_share, system_tiers,
                                        with_network_share)

from .interfaces import NetworkCard

__all__ = ["network_load", "NetworkFlows"]


def network_load(cluster: Cluster, ranks: Sequence[int],
                 cost: CollectiveCost) -> Optional[tuple[float, float]]:
    """(bytes, rate in B/s) each member's NIC carries in the network phases of ``cost``, a
    collective over ``ranks`` of ``cluster``; None when it crosses no network."""
    inter = [ph for ph in cost.phases if ph.tier == "inter" and ph.bytes_per_rank > 0]
    if not inter:
        return None
    _, per_node = group_shape(cluster, ranks)
    tiers = with_network_share(system_tiers(cluster.preset), network_share(cluster, ranks))
    nbytes = seconds = 0.0
    for phase in inter:
        nic = tiers.inter.line(phase.protocol).busbw_Bps
        if cost.algorithm == "hierarchical":
            bus, share = nic, 1
        else:  # one ring a NIC, NVLink capping the node's crossings
            bus = min(tiers.intra.line(phase.protocol).busbw_Bps, per_node * nic)
            share = per_node
        nbytes += phase.bytes_per_rank / share
        seconds += phase.bytes_per_rank / bus
    return nbytes, nbytes / seconds


class NetworkFlows:
    """Runs collectives' network phases as flows: for each, one flow per member card, and
    a callback with the delay (ps) of the slowest one once all have ended."""

    def __init__(self, flows: FlowNetwork) -> None:
        self.flows = flows

    def run(self, cards: Sequence[NetworkCard], nbytes: float, rate: float,
            done: Callable[[int], None], label: str = "") -> None:
        """Start a flow of ``nbytes`` at most ``rate`` on each of ``cards`` (both ways);
        ``done(delay)`` when the last has ended, ``delay`` the most any lost beyond its
        isolated duration."""
        start = self.flows.sim.now
        left = [len(cards), 0]

        def ended(card: NetworkCard, flow: Flow) -> None:
            card.charge(flow, card.pcie_resources())
            alone = isolated_duration_ps(nbytes, list(flow.route.shape), rate)
            left[1] = max(left[1], self.flows.sim.now - start - alone)
            left[0] -= 1
            if left[0] == 0:
                done(left[1])

        for card in cards:
            weights = {**card.send_weights(), **card.recv_weights()}
            self.flows.start(nbytes, weights, _bind(ended, card), cap=rate, label=label)


def _bind(ended: Callable[[NetworkCard, Flow], None],
          card: NetworkCard) -> Callable[[Flow], None]:
    """``ended`` for one card's flow."""
    return lambda flow: ended(card, flow)

