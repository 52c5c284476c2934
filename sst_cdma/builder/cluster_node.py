"""A cluster GPU's network card (``cdma.NIC``) behind the PCIe switch it shares with the GPU:
the cluster topologies give each simulated GPU one, wired to the fabric (its collectives'
network phases) and, where neighbouring stages sit on other nodes, to its pipeline ports
(its sends), its traffic crossing the GPU's host link beside the offload copies
(docs/clusters.md, "The PCIe switch a GPU shares with its NIC")."""
from __future__ import annotations

import argparse
from typing import Any

from sst_cdma.model.clusters import NODES

__all__ = ["wire_nic", "stages_across_nodes"]


def stages_across_nodes(o: argparse.Namespace) -> bool:
    """Whether neighbouring pipeline stages sit on different nodes: they are tp x dp ranks
    apart, at least a node's GPUs."""
    return bool(o.cluster) and o.tp * o.dp >= NODES[o.cluster].gpus


def wire_nic(sst: Any, o: argparse.Namespace, name: str, rank: int, link: str, fabric: Any,
             ports: Any) -> None:
    """GPU ``name`` (global rank ``rank``)'s card: at the node's NIC rate as NCCL gets it (the
    network tier's large-message line, docs/clusters.md), its traffic on the GPU's host link
    ``link`` (a cdma.PCIeBridge), on the fabric's port ``nic<rank>`` and, with the stages
    across nodes, on the GPU's pipeline ports ``ports``."""
    from sst_cdma.model.collectives import system_tiers

    nic = sst.Component(f"{name}.nic", "cdma.NIC")
    line = system_tiers(o.cluster).inter.line("simple")
    nic.addParams({"bandwidth": f"{line.busbw_Bps:.0f}B/s", "gpu_link": link})
    sst.Link(f"{name}.l_nic", "0ps").connect((nic, "fabric"), (fabric, f"nic{rank}"))
    if o.pp > 1 and stages_across_nodes(o):
        sst.Link(f"{name}.l_nic_p2p", "0ps").connect((nic, "p2p"), (ports, "nic"))
