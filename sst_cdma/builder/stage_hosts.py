"""The hosts of a pipeline's stages (:mod:`sst_cdma.builder.pipeline`): the host memory each
stage's offload path ends in and, with the optimizer states on the host (ZeRO-Offload), the
host CPU that steps its rank's partition (docs/parallel.md, "ZeRO-Offload under data
parallelism").

Where the run puts its GPUs on cluster nodes (tp or dp above 1, or a cluster topology), the
GPUs of one node share its hosts as the machine has them: each CPU socket is one host (one
``cdma.HostMemory``, the socket's DRAM, with its ``cdma.HostCPU``), the node's GPUs split
evenly over its sockets in local-rank order (a DGX's PCIe switches, two GPUs each, hang off
the sockets in turn: docs/clusters.md), the host platform the node's
(:data:`NODE_PLATFORMS`, its figures in docs/host_cpu.md). Global rank r sits on node
``r // gpus`` (nodes filled in rank order, as the cluster fabric places them). Without nodes
each stage has a host of its own (``host<rank>``, its CPU ``cpu<rank>``), as before. With
``--nvme N`` each host has N SSDs of ``--nvme-preset`` on its root ports (``<host>.nvme<d>``),
every engine of the host on every drive (ZeRO-Infinity's tier: ``--optimizer-states nvme``).
"""
from __future__ import annotations

import argparse
from typing import Any, Optional

from sst_cdma.builder.model_options import HOST_CPU, HOST_MEMORY, NVME
from sst_cdma.model.clusters import NODES
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.hosts import DEFAULT_PLATFORM, PLATFORMS, HostPlatform

__all__ = ["NODE_PLATFORMS", "StageHosts", "replicas_share_hosts"]

#: each cluster node preset's host platform (sst_cdma/model/hosts.py)
NODE_PLATFORMS = {"dgx_h100": "dgx-h100", "dgx_a100": "dgx-a100"}


def replicas_share_hosts(node: Optional[str], tp: int, pp: int, dp: int) -> bool:
    """True when a GPU of data-parallel replica 0 shares a node's socket with a GPU of
    another replica (so a run of replica 0 alone would leave out its twins' host load); the
    rank of (t, s, d) is t + tp x d + tp x dp x s (Megatron's order)."""
    if node is None or dp == 1:
        return False
    spec = NODES[node]
    per_socket = spec.gpus // spec.cpus
    replica0 = {t + tp * dp * s for s in range(pp) for t in range(tp)}
    sockets = {r // per_socket for r in replica0}
    total = tp * pp * dp
    return any(r not in replica0 for k in sockets
               for r in range(k * per_socket, min((k + 1) * per_socket, total)))


class StageHosts:
    """The hosts of the stages' GPUs, made as GPUs ask for them: :meth:`host` gives a GPU's
    host memory and the port it takes there, :meth:`cpu` its host CPU and port."""

    def __init__(self, sst: Any, o: argparse.Namespace, node: Optional[str],
                 states: bool = False) -> None:
        self.sst, self.o, self.node, self.states = sst, o, node, states
        self.platform = self._platform()
        self.hosts: dict[str, Any] = {}
        self.cpus: dict[str, Any] = {}
        self.ports: dict[str, int] = {}
        #: each host's SSDs and the engines on them so far
        self.drives: dict[str, list[Any]] = {}
        self.engines: dict[str, int] = {}

    def _platform(self) -> HostPlatform:
        """The node's host platform; without nodes the GPU's node preset's where there is
        one, else the default host."""
        name = self.node or next((n for n, spec in sorted(NODES.items())
                                  if spec.gpu == self.o.gpu), None)
        return PLATFORMS[NODE_PLATFORMS[name]] if name else DEFAULT_PLATFORM

    def _where(self, rank: int) -> tuple[str, str]:
        """The names of rank ``rank``'s host memory and host CPU."""
        if self.node is None:
            return f"host{rank}", f"cpu{rank}"
        spec = NODES[self.node]
        n, local = divmod(rank, spec.gpus)
        socket = local // (spec.gpus // spec.cpus)
        return f"node{n}.host{socket}", f"node{n}.cpu{socket}"

    def host_name(self, rank: int) -> str:
        """The name of rank ``rank``'s host memory."""
        return self._where(rank)[0]

    def host(self, rank: int) -> tuple[Any, str]:
        """Rank ``rank``'s host memory and its next free ``pcie`` port there."""
        name, _ = self._where(rank)
        if name not in self.hosts:
            host = self.sst.Component(name, HOST_MEMORY)
            host.addParams(self._memory_params())
            self.hosts[name] = host
            self.ports[name] = 0
            self._add_drives(name)
        port = self.ports[name]
        self.ports[name] = port + 1
        return self.hosts[name], f"pcie{port}"

    def _add_drives(self, host_name: str) -> None:
        """``--nvme`` SSDs of ``--nvme-preset`` on the host's first root ports."""
        host = self.hosts[host_name]
        self.drives[host_name] = []
        self.engines[host_name] = 0
        for d in range(self.o.nvme):
            drive = self.sst.Component(f"{host_name}.nvme{d}", NVME)
            drive.addParams({"preset": self.o.nvme_preset})
            port = self.ports[host_name]
            self.ports[host_name] = port + 1
            self.sst.Link(f"{host_name}.nvme{d}.l_host", "0ps").connect(
                (drive, "host"), (host, f"pcie{port}"))
            self.drives[host_name].append(drive)

    def engine_on_drives(self, name: str, rank: int) -> None:
        """GPU ``name``'s engine (``<name>.dma``) on every SSD of rank ``rank``'s host."""
        host_name, _ = self._where(rank)
        engine = self.sst.findComponentByName(f"{name}.dma")
        g = self.engines[host_name]
        self.engines[host_name] = g + 1
        for d, drive in enumerate(self.drives[host_name]):
            self.sst.Link(f"{name}.dma.l_nvme{d}", "0ps").connect((engine, f"nvme{d}"),
                                                                   (drive, f"dma{g}"))

    def _memory_params(self) -> dict[str, Any]:
        """A host memory's params: with nodes or a host CPU (``states``) one socket's DRAM of
        the platform, the one the CPU steps on; else the GPU preset's host memory as before;
        the pinned pool the GPU preset's where it names one."""
        spec = GPUS[self.o.gpu]
        bandwidth = self.platform.dram_text if self.node or self.states \
            else spec.host_memory_bandwidth
        return {k: v for k, v in (("bandwidth", bandwidth),
                                  ("pinned_capacity", spec.host_memory_capacity)) if v}

    def cpu(self, rank: int) -> tuple[Any, str]:
        """Rank ``rank``'s host CPU (on its host memory's ``cpu`` port) and the ``gpu`` port
        the rank takes there."""
        host_name, name = self._where(rank)
        if name not in self.cpus:
            cpu = self.sst.Component(name, HOST_CPU)
            cpu.addParams({"platform": self.platform.name})
            host = self.hosts[host_name]
            self.sst.Link(f"{name}.l_memory", "0ps").connect((cpu, "memory"), (host, "cpu"))
            self.cpus[name] = [cpu, 0]
        entry = self.cpus[name]
        entry[1] += 1
        return entry[0], f"gpu{entry[1] - 1}"

    def model_states(self, gpu: Any, name: str, rank: int) -> None:
        """GPU ``name``'s ``model_states`` slot: the driver of its partition's copies (on its
        engine's ``states`` port) and host CPU steps (on its host CPU)."""
        cpu, port = self.cpu(rank)
        driver = gpu.setSubComponent("model_states", "cdma.ModelStateDriver")
        dma = self.sst.findComponentByName(f"{name}.dma")
        self.sst.Link(f"{name}.l_states", "0ps").connect((driver, "dma"), (dma, "states"))
        self.sst.Link(f"{name}.l_cpu", "0ps").connect((driver, "cpu"), (cpu, port))
