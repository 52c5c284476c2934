"""Declared interfaces between elements: what one element may ask of another, and how it asks.

An element *provides* an interface on a port: it lists the interface in that port's
declaration (``Port("gpu", ..., provides=(MemoryPool,))``) and implements its members. An
element that *needs* one asks for the peer on one of its own ports, from ``init()`` on:
``self.peer_provider("hbm", MemoryPool)`` returns the element at the far end of that link,
typed as the interface, or raises :class:`InterfaceError` naming both elements, both ports and
the interface. Simulation-wide services (the flow network) are not peers: an element gets one
with ``self.service(FlowNetwork)`` (:class:`sst_cdma.kernel.Service`).

docs/model.md ("Interfaces between elements") lists who provides and who uses each one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Optional, Protocol, TypeVar, runtime_checkable

from .config import ConfigError
from .kernel import Service

if TYPE_CHECKING:
    from .element import Element

__all__ = ["HostPath", "HostStore", "InterfaceError", "MemoryPool", "PathInfo", "Service",
           "TransferCosts", "interface_members", "resolve_peer"]

P = TypeVar("P")


class InterfaceError(ConfigError):
    """An element asked a peer for an interface the peer does not provide (or asked on a port
    that is not declared or not connected): a wiring fault of the configuration."""


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


@dataclass
class PathInfo:
    """The way from a GPU-side DMA engine to its host store: the flow resources a transfer
    loads in each direction (GPU to host ``d2h``, host to GPU ``h2d``), the start-up latency
    the links on the way add up to, the store at the end and the names of the links, nearest
    the GPU first."""

    d2h: list[str] = field(default_factory=list)
    h2d: list[str] = field(default_factory=list)
    latency_ps: int = 0
    host: Optional[HostStore] = None
    link_names: list[str] = field(default_factory=list)


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
class TransferCosts(Protocol):
    """What moving tensors would cost (``cdma.CDMAEngine``): the planner of ``--policy auto``
    asks before the iteration is scheduled, so it prices offloads with the engine's own wire
    sizes, codec throughput and host path."""

    name: str

    def transfer_costs(self, workload: dict[str, Any]) -> dict[str, Any]:
        """Per tensor of ``workload["offloaded"]`` ((name, raw bytes, sparse) triples, with
        ``network``, ``dtype``, ``batch``): a ``CopyCost`` (plain and compressed offload and
        prefetch times in ps, wire bytes), each transfer alone on the path."""
        ...


def interface_members(interface: type) -> list[str]:
    """The public names an interface requires (methods, properties and attributes), sorted."""
    names: set[str] = set()
    for base in interface.__mro__:
        if base in (object, Protocol, Generic):
            continue
        names.update(n for n in vars(base) if not n.startswith("_"))
        names.update(n for n in getattr(base, "__annotations__", {}) if not n.startswith("_"))
    return sorted(names)


def _label(element: "Element") -> str:
    return f"{element.name} ({element.type_name()})"


def resolve_peer(asker: "Element", port: str, interface: type[P]) -> P:
    """The element on the far end of ``asker``'s ``port``, checked to provide ``interface``
    on its own port (what ``Element.peer_provider`` does)."""
    iface = interface.__name__
    if asker.find_port(port) is None:
        raise InterfaceError(f"{_label(asker)}: asks for {iface} on undeclared port {port!r}")
    if asker.sim.phase == "construct":
        raise InterfaceError(f"{_label(asker)}: asks for {iface} on port {port!r} while the "
                             "simulation is being built; ask from init() or setup() on")
    found = asker.simulation.peer(asker.name, port)
    if found is None:
        raise InterfaceError(f"{_label(asker)}: port {port!r} is not connected; it needs a "
                             f"{iface}")
    peer, peer_port = found
    decl = peer.find_port(peer_port)
    offered = decl.provides if decl is not None else ()
    if not any(interface in provided.__mro__ for provided in offered):
        offers = ", ".join(p.__name__ for p in offered) or "nothing"
        raise InterfaceError(f"{_label(asker)}: port {port!r} is connected to {_label(peer)} "
                             f"port {peer_port!r}, which does not provide {iface} (it "
                             f"provides {offers})")
    missing = [m for m in interface_members(interface) if not hasattr(peer, m)]
    if missing:
        raise InterfaceError(f"{_label(peer)}: declares {iface} on port {peer_port!r} but "
                             f"lacks {', '.join(missing)} (asked by {asker.name} on port "
                             f"{port!r})")
    return peer  # type: ignore[return-value]
