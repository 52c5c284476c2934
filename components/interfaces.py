"""The interfaces of the cdma element library: what one of its elements may ask of another
(GPU memory, the host store, the path to it, what a transfer would cost). Elements declare them
on their ports and ask with ``self.peer_provider(port, Interface)``
(:mod:`sst_cdma.engine.interfaces` checks the wiring); the records the queries return are in
:mod:`components.messages`."""
from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from .messages import (CodecKernel, CopyCost, CpuStepRequest, DrivePath, OffloadManifest,
                       PathInfo)

__all__ = ["CodecKernels", "HostPath", "HostStore", "MemoryPool", "StorageDrive",
           "TransferCosts", "HostTier", "HostStep", "StateCodec", "NetworkCard"]


@runtime_checkable
class MemoryPool(Protocol):
    """GPU memory (``cdma.HBM``): capacity with allocation tracking, and the flow resource
    carrying its bandwidth. The GPU allocates, frees and reports through it; a DMA engine
    loads its ``bandwidth_resource`` with the bytes it reads and writes."""

    name: str
    #: the largest allocated total so far, in bytes
    peak: int
    #: None, or the first point memory ran out: ``layer``, ``tensor``, ``bytes_short``,
    #: ``time_ps``
    oom: Optional[dict[str, Any]]

    @property
    def capacity(self) -> int:
        """Capacity in bytes."""
        ...

    @property
    def unlimited(self) -> bool:
        """True when allocations never run out (only the peak is tracked against capacity)."""
        ...

    @property
    def bandwidth_resource(self) -> str:
        """Name of the flow-network resource that carries the memory's achievable bandwidth."""
        ...

    def allocate(self, tensor: str, nbytes: int, layer: str) -> None:
        """Allocate ``nbytes`` for ``tensor`` (issued by ``layer``)."""
        ...

    def free(self, tensor: str) -> None:
        """Release ``tensor``'s memory."""
        ...

    def average_usage(self, end_ps: int) -> int:
        """Time-weighted average of the bytes in use over [0, ``end_ps``]."""
        ...

    def usage_curve(self) -> list[tuple[int, int]]:
        """(time_ps, bytes in use) at every time the allocation changed."""
        ...


@runtime_checkable
class HostStore(Protocol):
    """Where offloaded tensors land (``cdma.HostMemory``): a DMA engine stores each offload's
    wire bytes (and, in functional mode, the compressed payload) under a key, loads the
    payload back on prefetch and releases it."""

    name: str

    def store(self, key: str, nbytes: int, payload: Optional[bytes] = None) -> None:
        """Keep ``nbytes`` (and the bytes themselves when given) under ``key``."""
        ...

    def load(self, key: str) -> Optional[bytes]:
        """The payload stored under ``key`` (None when only sizes are modelled)."""
        ...

    def release(self, key: str) -> None:
        """Drop ``key``."""
        ...


@runtime_checkable
class HostPath(Protocol):
    """Something on the way to host memory, or host memory itself: it describes the path from
    itself to the host store. A link element extends what its own host-side peer describes
    (``cdma.PCIeBridge``, ``cdma.PCIeSwitch``); the store starts it (``cdma.HostMemory``)."""

    name: str

    def host_path(self) -> PathInfo:
        """The path from this element to the host store (a fresh object on every call)."""
        ...


@runtime_checkable
class StorageDrive(Protocol):
    """An SSD a DMA engine stripes its ``nvme``-tier transfers across (``cdma.NVMe``): where it
    sits (its :class:`DrivePath`: its flow resources, latencies and the way from its PCIe link to
    the host), and a store like the host's for what the engine leaves on it, with the drive's
    capacity enforced."""

    name: str

    def drive_path(self) -> DrivePath:
        """The drive as the engine reaches it (a fresh object on every call)."""
        ...

    def store(self, key: str, nbytes: int, payload: Optional[bytes] = None) -> None:
        """Keep ``nbytes`` (and the bytes themselves when given) under ``key``; more than the
        capacity is a SimulationError naming the drive and the bytes short."""
        ...

    def load(self, key: str) -> Optional[bytes]:
        """The payload stored under ``key`` (None when only sizes are modelled)."""
        ...

    def release(self, key: str) -> None:
        """Drop ``key``."""
        ...


@runtime_checkable
class TransferCosts(Protocol):
    """What moving tensors would cost (``cdma.CDMAEngine``): the planner of policy ``auto``
    asks before the iteration is scheduled, so it prices offloads with the engine's own wire
    sizes, codec throughput and host path."""

    name: str

    def transfer_costs(self, workload: OffloadManifest) -> dict[str, CopyCost]:
        """Per tensor of ``workload``: its :class:`CopyCost` (plain and compressed offload and
        prefetch times in ps, wire bytes), each transfer alone on the path. A pure function of
        the manifest and the configured machine: asking changes nothing in the engine."""
        ...

    def state_copy_ps(self, direction: str, raw: int, route: str = "gpu-host") -> int:
        """Picoseconds a plain copy of ``raw`` bytes of model state takes alone on ``route``:
        ``gpu-host`` (``offload``: to the host), ``gpu-nvme`` (the weights straight from the
        SSDs) or ``host-nvme`` (``offload``: host DRAM to the drives), as the engine moves the
        ZeRO-Offload and ZeRO-Infinity copies."""
        ...


@runtime_checkable
class CodecKernels(Protocol):
    """Which transfers need SM kernels beside their copy (``cdma.CDMAEngine``): none on a
    compressing cDMA engine; on Blackwell's Decompression Engine, every offload's compression
    and the decompression of buffers too big for the engine. The GPU asks as it issues each
    transfer, so the kernel takes its place on the compute stream."""

    name: str

    def codec_kernel(self, direction: str, tensor: str, raw_bytes: int
                     ) -> Optional[CodecKernel]:
        """The SM kernel moving ``tensor`` (``raw_bytes`` uncompressed) ``direction``
        (``offload`` or ``prefetch``) through the codec needs; None: the copy engine does it
        all."""
        ...


@runtime_checkable
class StateCodec(Protocol):
    """The codec a compressed model-state copy goes through (``cdma.CDMAEngine``,
    the workload's ``state_compression``): the GPU sizes the copies' wire bytes from the model-state
    profile's ratio of that codec."""

    name: str

    def state_codec(self) -> tuple[str, float, bool]:
        """(the codec's algorithm, ``none`` for a plain copy engine; the training progress
        ratios are taken at; whether data that would grow is sent raw)."""
        ...


@runtime_checkable
class HostTier(Protocol):
    """Pinned host memory holding model states (``cdma.HostMemory``): allocations tracked as
    the GPU memory's are, against the pinned pool's capacity."""

    name: str
    #: the flow resource of the host DRAM's bandwidth
    resource: Any
    #: bytes of the pinned pool
    capacity: int

    def allocate(self, tensor: str, nbytes: int, layer: str) -> None:
        """Allocate ``nbytes`` of pinned memory for ``tensor``; past capacity, note the first
        out-of-memory point."""
        ...

    def tier_usage(self, end_ps: int) -> dict[str, Any]:
        """Peak, time-weighted average over [0, ``end_ps``], capacity and out-of-memory point
        of the pinned pool's allocations."""
        ...


@runtime_checkable
class HostStep(Protocol):
    """The host CPU's optimizer step (``cdma.HostCPU``): what one step takes alone, and the
    pinned memory it holds the model states in."""

    name: str

    def step_ps(self, params: int) -> int:
        """Picoseconds the step of ``params`` parameters takes at the CPU's Adam throughput."""
        ...

    def step_alone_ps(self, params: int, dram_bytes: int) -> int:
        """The step alone on the host DRAM: its compute time, or longer where the DRAM
        cannot feed its ``dram_bytes``."""
        ...

    def codec_ps(self, req: CpuStepRequest) -> int:
        """The CPU codec work of a step request (``state_compression=host``), 0 without."""
        ...

    def request_alone_ps(self, req: CpuStepRequest) -> int:
        """A step request alone: its CPU codec work and its step."""
        ...

    def tier_usage(self, end_ps: int) -> dict[str, Any]:
        """The host memory's :meth:`HostTier.tier_usage`."""
        ...

    def host_room(self) -> int:
        """Bytes of the pinned pool one GPU's model states may take: the pool shared evenly
        by the GPUs this CPU steps for."""
        ...

    def gpus_stepped(self) -> int:
        """The GPUs whose optimizer steps this CPU runs (they share its cores, one step at
        a time, and its DRAM)."""
        ...


@runtime_checkable
class NetworkCard(Protocol):
    """A GPU's network card behind the PCIe switch it shares with that GPU (``cdma.NIC``):
    the flow resources its traffic loads, sending (the card's transmit side and the GPU's link
    to the switch, GPU to switch) and receiving (its receive side and the GPU's link, switch
    to GPU), so that inter-node traffic and the GPU's offload copies share that link; and a
    place to note the flows it carried."""

    name: str

    def send_weights(self) -> dict[str, float]:
        """{flow resource: weight} of bytes leaving the GPU through this card."""
        ...

    def recv_weights(self) -> dict[str, float]:
        """{flow resource: weight} of bytes this card delivers into the GPU's memory."""
        ...

    def pcie_resources(self) -> tuple[str, ...]:
        """The flow resources of the GPU's link to the shared PCIe switch (none without one)."""
        ...

    def charge(self, flow: Any, pcie: Any) -> None:
        """Note a finished flow of this card's traffic and the time it lost at the PCIe
        resources ``pcie`` (the names of the links it crossed)."""
        ...
