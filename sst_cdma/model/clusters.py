"""Presets of many-node machines: the network cards (InfiniBand HDR and NDR, RoCE at 200 and
400 Gb/s), the nodes (DGX A100, DGX H100: eight GPUs on NVLink/NVSwitch, one NIC per GPU, GPUs
and NICs behind shared PCIe switches) and the scale-out networks (rail-optimized and fat-tree
leaf/spine(/core) fabrics of a given switch radix and oversubscription). Every figure and its
source: docs/clusters.md; a figure no source was found for says so there.

The graph of a cluster built from these presets is ``sst_cdma.model.cluster_graph``; the cost of
collectives over it, ``sst_cdma.model.collectives``."""
from __future__ import annotations

import math
from dataclasses import dataclass

from sst_cdma.engine.units import parse_bandwidth
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.links import HOST_LINKS

__all__ = ["NICSpec", "NodeSpec", "FabricSpec", "NICS", "NODES", "FABRICS", "FABRIC_KINDS",
           "ClusterError", "nic_preset", "node_preset", "fabric_preset"]


class ClusterError(ValueError):
    """A cluster asked for that cannot be built: the message names the parameter and the
    fault."""


@dataclass(frozen=True)
class NICSpec:
    """A network card of the compute fabric: its protocol, its line rate per direction and
    the host link (a key of ``HOST_LINKS``) it sits on."""

    name: str
    protocol: str       # "infiniband" or "roce"
    line_rate: str      # per direction, text with units
    host_link: str

    @property
    def line_rate_Bps(self) -> float:
        """Line rate in bytes per second, one direction."""
        return parse_bandwidth(self.line_rate)


@dataclass(frozen=True)
class NodeSpec:
    """A GPU node: its GPUs (a key of ``GPUS``) on NVLink through NVSwitch chips, one compute
    NIC per GPU, ``gpus_per_pcie_switch`` GPUs (each with its NIC) behind each PCIe switch,
    each switch on an uplink (a key of ``HOST_LINKS``) to one of the CPU sockets, and the
    host memory of each socket."""

    name: str
    gpu: str
    gpus: int
    nvswitches: int
    nvlink_links: int          # per GPU
    nvlink_rate: str           # per link, per direction
    nic: str
    gpus_per_pcie_switch: int
    pcie_switch_uplink: str
    cpus: int
    cpu: str
    #: per socket; empty: no source found (docs/clusters.md)
    host_memory_bandwidth: str = ""

    @property
    def nics(self) -> int:
        """Compute NICs: one per GPU."""
        return self.gpus

    @property
    def pcie_switches(self) -> int:
        """PCIe switches holding the GPUs and their NICs."""
        return self.gpus // self.gpus_per_pcie_switch

    @property
    def nvlink_Bps(self) -> float:
        """NVLink bytes per second, one direction, of one GPU (line rate, all links)."""
        return self.nvlink_links * parse_bandwidth(self.nvlink_rate)


@dataclass(frozen=True)
class FabricSpec:
    """A scale-out network of one switch model (``switch_radix`` ports, each at
    ``port_rate``): leaves take ``down`` ports of NICs and ``up`` ports to spines, their
    ratio the oversubscription. ``kind``: ``rail_optimized`` (NIC r of every node of a
    scalable unit on the unit's leaf r) or ``fat_tree`` (NICs on leaves in node order). Two
    tiers while the leaves fit the spines' ports, three (spine groups under cores) beyond."""

    name: str
    kind: str
    switch: str
    switch_radix: int
    port_rate: str
    oversubscription: float = 1.0

    @property
    def down_ports(self) -> int:
        """Leaf ports facing NICs."""
        return math.floor(self.switch_radix * self.oversubscription
                          / (1.0 + self.oversubscription))

    @property
    def up_ports(self) -> int:
        """Leaf ports facing spines."""
        return self.switch_radix - self.down_ports

    @property
    def port_rate_Bps(self) -> float:
        """Port rate in bytes per second, one direction."""
        return parse_bandwidth(self.port_rate)


NICS = {
    "ib_hdr_200": NICSpec("ConnectX-6 HDR InfiniBand", "infiniband", "200Gb/s", "pcie4x16"),
    "ib_ndr_400": NICSpec("ConnectX-7 NDR InfiniBand", "infiniband", "400Gb/s", "pcie5x16"),
    "roce_200": NICSpec("ConnectX-6 Dx 200GbE (RoCE)", "roce", "200Gb/s", "pcie4x16"),
    "roce_400": NICSpec("ConnectX-7 400GbE (RoCE)", "roce", "400Gb/s", "pcie5x16"),
}

NODES = {
    "dgx_a100": NodeSpec("DGX A100", "a100_80gb", 8, 6, 12, "25GB/s", "ib_hdr_200", 2,
                         "pcie4x16", 2, "AMD EPYC 7742"),
    "dgx_h100": NodeSpec("DGX H100", "hopper", 8, 4, 18, "25GB/s", "ib_ndr_400", 2,
                         "pcie5x16", 2, "Intel Xeon Platinum 8480C", "307.2GB/s"),
}

FABRIC_KINDS = ("rail_optimized", "fat_tree")

FABRICS = {
    "rail_ndr": FabricSpec("rail-optimized NDR (DGX SuperPOD H100 style)", "rail_optimized",
                           "Quantum-2 QM9700", 64, "400Gb/s"),
    "fat_tree_ndr": FabricSpec("fat-tree NDR", "fat_tree", "Quantum-2 QM9700", 64, "400Gb/s"),
    "rail_hdr": FabricSpec("rail-optimized HDR", "rail_optimized", "Quantum QM8700", 40,
                           "200Gb/s"),
    "fat_tree_hdr": FabricSpec("fat-tree HDR", "fat_tree", "Quantum QM8700", 40, "200Gb/s"),
}


def _preset(table: dict[str, object], name: str, what: str) -> object:
    if name not in table:
        raise ClusterError(f"{what} {name!r} is no preset; choose from {', '.join(sorted(table))}")
    return table[name]


def nic_preset(name: str) -> NICSpec:
    """The NIC preset ``name``; a :class:`ClusterError` naming the choices if there is none."""
    spec = _preset(dict(NICS), name, "nic")
    assert isinstance(spec, NICSpec)
    return spec


def node_preset(name: str) -> NodeSpec:
    """The node preset ``name``; a :class:`ClusterError` naming the choices if there is none."""
    spec = _preset(dict(NODES), name, "node")
    assert isinstance(spec, NodeSpec)
    return spec


def fabric_preset(name: str, oversubscription: float | None = None) -> FabricSpec:
    """The fabric preset ``name``, with its oversubscription replaced when given (leaf down
    ports : up ports, at least 1)."""
    spec = _preset(dict(FABRICS), name, "fabric")
    assert isinstance(spec, FabricSpec)
    if oversubscription is None:
        return spec
    if not math.isfinite(oversubscription) or oversubscription < 1.0:
        raise ClusterError(f"oversubscription: {oversubscription!r} must be a number >= 1 "
                           "(leaf down ports : up ports)")
    return FabricSpec(spec.name, spec.kind, spec.switch, spec.switch_radix, spec.port_rate,
                      oversubscription)


def _check_tables() -> None:
    """The presets name GPUs, NICs and host links that exist (checked at import)."""
    for node in NODES.values():
        assert node.gpu in GPUS and node.nic in NICS, node
        assert node.pcie_switch_uplink in HOST_LINKS and node.gpus % node.gpus_per_pcie_switch == 0
    for nic in NICS.values():
        assert nic.host_link in HOST_LINKS, nic
    for fabric in FABRICS.values():
        assert fabric.kind in FABRIC_KINDS, fabric


_check_tables()
