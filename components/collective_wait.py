"""The ``collective_wait TENSOR`` op: the stream waits for the asynchronous collective
(``async=1``) it issued last on ``TENSOR`` to end, and only for what is left of it; the
kernels issued between the two ran beside the collective (docs/parallel.md, "Asynchronous
collectives"). The port to the fabric (:class:`~components.collective_ops.CollectivePort`)
keeps the collective's handle and counts the stall as the stream's exposed time over its
group."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .collective_ops import collective_port

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import StreamOp

__all__ = ["issue_collective_wait"]


def issue_collective_wait(gpu: "GPU", op: "StreamOp") -> bool:
    """A ``collective_wait``: True (the stream goes on) once the tensor's asynchronous
    collective has ended; the stream waits in a
    :class:`~components.collective_ops.CollectiveWait` until then."""
    return collective_port(gpu, op).wait(op)
