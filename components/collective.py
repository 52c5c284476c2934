"""The interface of a fabric's ``collective`` slot: the algorithm of the gradient all-reduce.

The fabric (``cdma.NVSwitch``) is a resource only: its links, its per-step latency and the
buckets DDP cuts the gradients into. The algorithm in its slot says how a bucket crosses it:
how many latency-bound steps, how many bytes each GPU sends (and receives), and how many HBM
bytes each sent byte costs at every GPU. ``cdma.RingAllReduce`` (components/ring_allreduce.py)
is today's; a tree or a hierarchical all-reduce is one more element filling this slot
(docs/topologies.md, "Adding a collective algorithm")."""
from __future__ import annotations

from abc import abstractmethod

from sst_cdma.engine.element import SubComponent

__all__ = ["CollectiveAlgorithm"]


class CollectiveAlgorithm(SubComponent):
    """The interface of the fabric's ``collective`` slot: how an all-reduce of a bucket over
    ``n`` GPUs crosses the fabric."""

    ABSTRACT = True

    @abstractmethod
    def steps(self, n: int) -> int:
        """The latency-bound steps of one all-reduce over ``n`` GPUs (each pays the fabric's
        step latency)."""

    @abstractmethod
    def bytes_per_gpu(self, nbytes: float, n: int) -> float:
        """Bytes each of ``n`` GPUs sends (and receives as much) to all-reduce ``nbytes``."""

    @abstractmethod
    def hbm_per_byte_sent(self) -> float:
        """HBM bytes a GPU reads and writes per byte it sends (what it sends, what it receives
        and what its reduction kernels read)."""
