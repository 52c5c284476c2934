"""The interface of the cluster fabric's ``collective`` slot: the algorithm a process group's
collective runs with on the cluster (``cdma.ClusterFabric``; docs/parallel.md, "Collectives on
the cluster fabric").

The fabric is a resource: the networkx graph of its nodes, NICs and switches, and where each
rank runs. The algorithm in its slot prices one collective of a group on it, with the model's
:func:`~sst_cdma.model.collectives.group_cost` (ring, tree or hierarchical, fitted to
nccl-tests; docs/clusters.md): ``cdma.ClusterRing``, ``cdma.ClusterTree`` and
``cdma.ClusterHierarchical`` (components/cluster_algorithms.py); another algorithm is one more
element filling this slot."""
from __future__ import annotations

from abc import abstractmethod
from typing import Sequence

from sst_cdma.engine.element import SubComponent
from sst_cdma.model.cluster_graph import Cluster
from sst_cdma.model.collectives import CollectiveCost

__all__ = ["ClusterCollective"]


class ClusterCollective(SubComponent):
    """The interface of the cluster fabric's ``collective`` slot: what a collective of a
    process group costs on the cluster."""

    ABSTRACT = True

    @abstractmethod
    def cost(self, cluster: Cluster, ranks: Sequence[int], op: str,
             nbytes: int) -> CollectiveCost:
        """The cost of ``op`` (all_reduce, reduce_scatter or all_gather) of ``nbytes`` (the
        whole buffer) over the process group ``ranks`` of ``cluster``; a
        :class:`~sst_cdma.model.collectives.CollectiveError` or
        :class:`~sst_cdma.model.clusters.ClusterError` when the group cannot be priced."""
