"""How a DMA engine's transfer reaches its SSDs: the flow resources an ``nvme``-tier offload or
prefetch crosses, with the bytes each carries per byte on the wire, and the start-up latency,
for the two paths servers use (docs/storage.md):

- ``bounce``: through a pinned host buffer. The bytes cross the GPU's path to the host, host
  DRAM twice (in from one side, out to the other) and the drive's path from the host; the two
  copies pipeline through the buffer, so the slowest leg sets the rate.
- ``gds``: GPUDirect Storage. The bytes go peer to peer from the GPU up to the lowest switch
  (or root port) the GPU and the drive share and down to the drive: no host DRAM, and none of
  the links above that branching point.

Transfers stripe across the drives in equal shares (RAID-0 with a stripe per drive): each
drive's resources carry 1/N of the bytes.
"""
from __future__ import annotations

from dataclasses import field

from sst_cdma.engine.interfaces import InterfaceError
from sst_cdma.engine.records import Record, record

from .messages import DrivePath, PathInfo

#: the two ways to an SSD (``cdma.CDMAEngine``'s ``nvme_path``)
NVME_PATHS = ("bounce", "gds")


@record
class StorageRoute(Record):
    """The ``nvme`` tier as one engine reaches it: per direction (``offload``: GPU to the
    drives, ``prefetch``: back), the bytes each flow resource carries per byte on the wire and
    the start-up latency; the names of the drives and links on the way."""

    weights: dict[str, dict[str, float]] = field(default_factory=dict)
    latency_ps: dict[str, int] = field(default_factory=dict)
    link_names: list[str] = field(default_factory=list)
    #: the same for a transfer between the drives and host DRAM (the host CPU's optimizer
    #: states: ``offload`` host to the drives, ``prefetch`` back), whatever the path
    host_weights: dict[str, dict[str, float]] = field(default_factory=dict)
    host_latency_ps: dict[str, int] = field(default_factory=dict)


def _hops(path: PathInfo, who: str) -> list[tuple[str, str, str]]:
    """(link name, its resource towards the host, its resource away from it) of each link on
    ``path``, nearest the start first (the host DRAM that ends it is left out)."""
    if len(path.d2h) != len(path.link_names) + 1 or len(path.h2d) != len(path.d2h):
        raise InterfaceError(f"{who}: its path to the host does not list one resource per "
                             "link each way and the host memory last")
    return list(zip(path.link_names, path.d2h, path.h2d))


def _branch(gpu: list[tuple[str, str, str]], drive: list[tuple[str, str, str]]
            ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """The links of each side below the lowest element both share (peer-to-peer traffic turns
    there, crossing nothing above it)."""
    g, d = list(gpu), list(drive)
    while g and d and g[-1][0] == d[-1][0]:
        g.pop()
        d.pop()
    return g, d


def _add(weights: dict[str, float], resource: str, w: float) -> None:
    weights[resource] = weights.get(resource, 0.0) + w


def storage_route(engine: str, gpu: PathInfo, drives: list[DrivePath], via: str
                  ) -> StorageRoute:
    """The ``nvme`` tier of the engine named ``engine`` whose host path is ``gpu``, striped over
    ``drives``, by ``via`` (:data:`NVME_PATHS`)."""
    if not drives:
        raise InterfaceError(f"{engine}: a transfer to the nvme tier needs an SSD on a port "
                             "nvme0, nvme1, ... (a cdma.NVMe's dma port)")
    gpu_hops = _hops(gpu, engine)
    share = 1.0 / len(drives)
    offload: dict[str, float] = {}
    prefetch: dict[str, float] = {}
    if via == "bounce":  # the GPU's whole way to the host memory, host DRAM included
        for res in gpu.d2h:
            _add(offload, res, 1.0)
        for res in gpu.h2d:
            _add(prefetch, res, 1.0)
    out_ps = in_ps = 0
    for drive in drives:
        if drive.to_host.host is not gpu.host:
            raise InterfaceError(f"{engine}: SSD {drive.name} sits on another host than the "
                                 "engine's GPU: wire each engine to the drives of its own host")
        down = drive.to_host
        if via == "bounce":  # from the host memory (DRAM again) down to the drive
            for res in down.h2d:
                _add(offload, res, share)
            for res in down.d2h:
                _add(prefetch, res, share)
            latency = gpu.latency_ps + down.latency_ps
        else:
            ours, theirs = _branch(gpu_hops, _hops(down, drive.name))
            for _, up, back in ours:
                _add(offload, up, share)
                _add(prefetch, back, share)
            for _, up, back in theirs:
                _add(offload, back, share)
                _add(prefetch, up, share)
            latency = gpu.latency_ps + drive.link_latency_ps
        _add(offload, drive.write, share)
        _add(prefetch, drive.read, share)
        out_ps = max(out_ps, latency + drive.write_latency_ps)
        in_ps = max(in_ps, latency + drive.read_latency_ps)
    names = list(dict.fromkeys([*gpu.link_names, *(d.name for d in drives)]))
    host_weights, host_latency = _host_route(drives, share)
    return StorageRoute({"offload": offload, "prefetch": prefetch},
                        {"offload": out_ps, "prefetch": in_ps}, names, host_weights,
                        host_latency)


def _host_route(drives: list[DrivePath], share: float
                ) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Host DRAM to the drives (``offload``) and back (``prefetch``): each drive's link path
    to the host memory (host DRAM included) and its write or read side, 1/N of the bytes
    each; the latency of the slowest drive."""
    write: dict[str, float] = {}
    read: dict[str, float] = {}
    out_ps = in_ps = 0
    for drive in drives:
        for res in drive.to_host.h2d:
            _add(write, res, share)
        for res in drive.to_host.d2h:
            _add(read, res, share)
        _add(write, drive.write, share)
        _add(read, drive.read, share)
        out_ps = max(out_ps, drive.to_host.latency_ps + drive.write_latency_ps)
        in_ps = max(in_ps, drive.to_host.latency_ps + drive.read_latency_ps)
    return {"offload": write, "prefetch": read}, {"offload": out_ps, "prefetch": in_ps}
