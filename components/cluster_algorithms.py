"""The collective algorithms of the cluster fabric's ``collective`` slot, each the model's
algorithm of the same name (sst_cdma/model/collectives.py, fitted to nccl-tests: docs/clusters.md):
a ring, NCCL's double binary tree, and the hierarchical form (inside each node, then across
nodes on each GPU's own rail, then inside each node again). Chosen with
``fabric.setSubComponent("collective", "cdma.ClusterTree")``."""
from __future__ import annotations

from typing import Sequence

from sst_cdma.engine.element import Param
from sst_cdma.model.cluster_graph import Cluster
from sst_cdma.model.collectives import CollectiveCost, group_cost

from .cluster_collective import ClusterCollective

__all__ = ["ClusterRing", "ClusterTree", "ClusterHierarchical"]


class ClusterRing(ClusterCollective):
    """A ring over the group's ranks: 2(n-1) steps for an all-reduce, n-1 for a
    reduce-scatter or an all-gather, those between nodes at the network's step latency."""

    def cost(self, cluster: Cluster, ranks: Sequence[int], op: str,
             nbytes: int) -> CollectiveCost:
        """The model's ring cost of the group."""
        return group_cost(cluster, ranks, "ring", op, nbytes)


class ClusterTree(ClusterCollective):
    """NCCL's double binary tree for an all-reduce; a reduce-scatter or an all-gather runs as
    a ring, as NCCL runs them (the model's tree prices all-reduce only)."""

    def cost(self, cluster: Cluster, ranks: Sequence[int], op: str,
             nbytes: int) -> CollectiveCost:
        """The model's tree cost of an all-reduce, its ring cost of the others."""
        return group_cost(cluster, ranks, "tree" if op == "all_reduce" else "ring", op, nbytes)


class ClusterHierarchical(ClusterCollective):
    """Inside each node, then across nodes (each GPU on its own rail), then inside each node
    again; one phase after the other, or pipelined (``overlap``)."""

    PARAMS = (Param("overlap", "bool", "false", "pipeline the phases chunk by chunk: the "
                    "time is their latencies plus the busier tier's bandwidth time (false: "
                    "one phase after the other)"),)

    def cost(self, cluster: Cluster, ranks: Sequence[int], op: str,
             nbytes: int) -> CollectiveCost:
        """The model's hierarchical cost of the group."""
        return group_cost(cluster, ranks, "hierarchical", op, nbytes, self.params["overlap"])
