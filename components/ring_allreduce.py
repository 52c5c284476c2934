"""Ring all-reduce (reduce-scatter, then all-gather): NCCL's ring algorithm, the collective of
a DDP gradient bucket on one NVSwitch node. Each of ``n`` GPUs sends 2(n-1) chunks of 1/n of
the bucket, one per step (docs/model.md, "Data-parallel all-reduce")."""
from __future__ import annotations

from .collective import CollectiveAlgorithm

__all__ = ["RingAllReduce", "SEND_HBM", "RECEIVE_HBM"]

#: HBM bytes per byte a GPU sends over NVLink: it reads what it sends
SEND_HBM = 1.0
#: HBM bytes per byte a GPU receives: the write of the incoming chunk, plus, in the
#: reduce-scatter half of the steps, the reads of that chunk and of the local chunk the kernel
#: adds it to (reduce-scatter 3, all-gather 1: 1.5 on average per received byte; with the
#: sender's read, 2.5 per byte at every GPU)
RECEIVE_HBM = 1.5


class RingAllReduce(CollectiveAlgorithm):
    """Ring all-reduce: 2(n-1) steps, each GPU sending a 1/n chunk of the bucket per step."""

    def steps(self, n: int) -> int:
        """2(n-1): n-1 steps of reduce-scatter, n-1 of all-gather."""
        return 2 * (n - 1)

    def bytes_per_gpu(self, nbytes: float, n: int) -> float:
        """2(n-1) chunks of ``nbytes``/n."""
        return self.steps(n) * nbytes / n

    def hbm_per_byte_sent(self) -> float:
        """The send's read and the receive's write and reduction reads (a GPU receives as
        much as it sends)."""
        return SEND_HBM + RECEIVE_HBM
