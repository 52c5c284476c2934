"""The contracts between the cdma elements, in one module: the events they send over their
links, the messages of the untimed init phase, and what one element's query returns to another
(the interfaces those queries belong to are in :mod:`components.interfaces`). Every one is a
dataclass, so a mistake shows as a wrong field where it is made, in every configuration; each
takes its comparison, hash and ``repr`` from :mod:`sst_cdma.engine.records` rather than having
them written and compiled for it at import."""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Optional

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record

if TYPE_CHECKING:
    from .interfaces import HostStore

#: where a transfer's far end is: ``host`` (the pinned host pool on the engine's ``pcie`` path)
#: or ``nvme`` (the SSDs on the engine's ``nvme%d`` ports, striped)
TIERS = ("host", "nvme")


# -- init phase ---------------------------------------------------------------------------------
@frozen_record
class MovedTensor(FrozenRecord):
    """One tensor a GPU's iteration moves through its DMA engine: its name, uncompressed size,
    whether it is sparse (a ReLU output, priced by the density profile), its shape (batch first;
    None where a workload stream does not say it), and whether the workload copies it raw
    (``codec=none``: no densities needed)."""

    name: str
    raw_bytes: int
    sparse: bool
    shape: Optional[tuple[int, ...]] = None
    plain: bool = False


@frozen_record
class OffloadManifest(FrozenRecord):
    """GPU -> DMA engine, at init: which tensors the iteration offloads, of which network,
    element type and batch (the engine sizes every tensor's wire bytes from it). The planner's
    cost query (:meth:`components.interfaces.TransferCosts.transfer_costs`) takes the same
    record, for the tensors it may move."""

    gpu: str
    network: str
    dtype: str
    batch: int
    tensors: tuple[MovedTensor, ...] = ()
    #: where the offloads go (:data:`TIERS`): a cost query prices the path to that tier
    tier: str = "host"
    #: model states that start on the ``nvme`` tier, ``(key, bytes)``: the engine stores them
    #: on its SSDs before the first event (ZeRO-Infinity's states and weights)
    resident: tuple[tuple[str, int], ...] = ()

    def shapes(self) -> dict[str, Optional[tuple[int, ...]]]:
        """Tensor name -> shape (None: not known)."""
        return {t.name: t.shape for t in self.tensors}


@frozen_record
class GradientManifest(FrozenRecord):
    """GPU -> NVLink fabric, at init (data parallel): the GPU, the system it belongs to, the
    flow resource of its HBM bandwidth and its weight gradients ``(layer, bytes)`` in the order
    its backward pass makes them ready."""

    gpu: str
    system: str
    hbm_resource: str
    gradients: tuple[tuple[str, int], ...]


@frozen_record
class ModelStatesManifest(FrozenRecord):
    """GPU -> host CPU, at init (optimizer states on the host): the GPU and the pinned host
    buffers its model states take for the whole run, ``(role, bytes)``."""

    gpu: str
    buffers: tuple[tuple[str, int], ...]


# -- query results --------------------------------------------------------------------------------
@frozen_record
class CopyCost(FrozenRecord):
    """What moving one tensor costs on this machine (engine and host link), each transfer alone
    on the path: picoseconds of an offload and of a prefetch, as a plain copy and through the
    codec, and the bytes that cross the link through the codec. Where SM kernels (de)compress
    (Blackwell's Decompression Engine: an offload's compression, a decompression the engine
    does not take), a packed transfer's time includes its kernel, which the copy waits for, and
    ``sm_out_ps`` / ``sm_in_ps`` are that kernel's time on the compute stream (0: none)."""

    plain_out_ps: int
    plain_in_ps: int
    packed_out_ps: int
    packed_in_ps: int
    wire_bytes: int
    sm_out_ps: int = 0
    sm_in_ps: int = 0


@frozen_record
class CodecKernel(FrozenRecord):
    """An SM kernel a transfer needs beside its copy (the engine says so when the GPU issues
    the transfer): Blackwell's Decompression Engine leaves an offload's compression
    (``compress``, before the copy engine moves the compressed bytes) and the decompression of
    buffers it does not take (``decompress``, after the copy) to the SMs. The kernel runs on the
    compute stream, lasting ``time_ps`` alone and moving ``dram_bytes`` of GPU memory."""

    kind: str
    tensor: str
    time_ps: int
    dram_bytes: int


@record
class PathInfo(Record):
    """The way from a GPU-side DMA engine to its host store: the flow resources a transfer
    loads in each direction (GPU to host ``d2h``, host to GPU ``h2d``), the start-up latency
    the links on the way add up to, the store at the end and the names of the links, nearest
    the GPU first."""

    d2h: list[str] = field(default_factory=list)
    h2d: list[str] = field(default_factory=list)
    latency_ps: int = 0
    host: Optional["HostStore"] = None
    link_names: list[str] = field(default_factory=list)


@record
class DrivePath(Record):
    """An SSD as a DMA engine reaches it (``StorageDrive.drive_path()``): the flow resources of
    its media read and write bandwidth (each limited by the queue depth the host keeps), the
    latency of one command each way, the start-up latency of its own PCIe link, and
    ``to_host``, the path from the drive's own link to the host store (``d2h`` towards the host:
    what the drive's reads cross; ``h2d`` towards the drive: its writes; the drive's link
    first, then the switches and root complex above it, host DRAM last)."""

    name: str
    read: str
    write: str
    read_latency_ps: int
    write_latency_ps: int
    link_latency_ps: int
    to_host: PathInfo


# -- timed events -------------------------------------------------------------------------------


@record
class TransferRequest(Record):
    """GPU -> cDMA engine: move a tensor. ``direction`` is ``offload`` (GPU to the tier) or
    ``prefetch`` (the tier to GPU); ``codec`` ``none`` asks for a plain copy that bypasses the
    engine's codec ('' = the engine's codec); ``tier`` is where the far end is (:data:`TIERS`:
    ``host``, the pinned host pool, or ``nvme``, the engine's SSDs over its ``nvme_path``)."""

    direction: str
    tensor: str
    raw_bytes: int
    layer: str
    sparse: bool = False
    codec: str = ""
    tier: str = "host"
    #: the GPU stream issuing it: '' the copy stream; ``gradients`` (GPU to host) or
    #: ``weights`` (host to GPU), the model-state streams, each its own copy engine queue
    stream: str = ""
    #: the near end: ``gpu`` (GPU memory) or ``host`` (host DRAM: the host CPU's optimizer
    #: states read from and written to the ``nvme`` tier, SSD <-> host DRAM only)
    near: str = "gpu"
    #: the bytes it crosses the link as, where the sender sized it (a compressed model-state
    #: copy, from the model-state profile); 0: the engine's own plan
    wire_bytes: int = 0


@record
class TransferDone(Record):
    """cDMA engine -> GPU: the transfer finished; ``wire_bytes`` crossed the host link (or, on
    the ``nvme`` tier, reached the SSDs)."""

    request: TransferRequest
    wire_bytes: int
    started_ps: int
    finished_ps: int


@record
class GradientReady(Record):
    """GPU -> NVSwitch fabric: the weight gradient of ``layer`` is computed (data parallel)."""

    layer: str


@record
class AllReduceDone(Record):
    """NVSwitch fabric -> GPU: every gradient bucket is reduced; the iteration may end."""


@record
class CpuStepRequest(Record):
    """GPU -> host CPU: run the optimizer step of gradient bucket ``bucket`` (``params``
    parameters, ``dram_bytes`` of host DRAM read and written)."""

    bucket: str
    params: int
    dram_bytes: int
    #: ``state_compression=host``: the CPU codec that decompresses the bucket's
    #: ``decompress_bytes`` of gradients before the step and compresses its ``compress_bytes``
    #: of weights after it, on ``dtype`` data ('' : none)
    codec: str = ""
    dtype: str = ""
    decompress_bytes: int = 0
    compress_bytes: int = 0


@record
class CpuStepDone(Record):
    """Host CPU -> GPU: the step of ``request``'s bucket ran from ``started_ps`` to
    ``finished_ps``."""

    request: CpuStepRequest
    started_ps: int
    finished_ps: int
