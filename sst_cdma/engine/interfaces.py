"""Declared interfaces between elements: how one element asks another for what it provides.

An interface is a ``typing.Protocol`` an element library declares (the cdma library's are in
``components/interfaces.py``). An element *provides* an interface on a port: it lists the
interface in that port's
declaration (``Port("gpu", ..., provides=(MemoryPool,))``) and implements its members. An
element that *needs* one asks for the peer on one of its own ports, from ``init()`` on:
``self.peer_provider("hbm", MemoryPool)`` returns the element at the far end of that link,
typed as the interface, or raises :class:`InterfaceError` naming both elements, both ports and
the interface. Simulation-wide services (the flow network) are not peers: an element gets one
with ``self.service(FlowNetwork)`` (:class:`sst_cdma.engine.kernel.Service`).

docs/model.md ("Interfaces between elements") lists who provides and who uses the cdma ones.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from sst_cdma.engine.errors import ConfigError
from sst_cdma.engine.kernel import Service

if TYPE_CHECKING:
    from typing_extensions import TypeForm  # an interface is a Protocol: abstract, never type[P]

    from sst_cdma.engine.element import Element

__all__ = ["InterfaceError", "Service", "interface_members", "resolve_peer"]

P = TypeVar("P")


class InterfaceError(ConfigError):
    """An element asked a peer for an interface the peer does not provide (or asked on a port
    that is not declared or not connected): a wiring fault of the configuration."""


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


def resolve_peer(asker: "Element", port: str, interface: TypeForm[P]) -> P:
    """The element on the far end of ``asker``'s ``port``, checked to provide ``interface``
    on its own port (what ``Element.peer_provider`` does)."""
    if not isinstance(interface, type):
        raise InterfaceError(f"{_label(asker)}: asks on port {port!r} for {interface!r}, which "
                             "is not an interface class")
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
