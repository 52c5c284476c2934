"""The compressing DMA engine (cDMA): reads a feature map from GPU DRAM, compresses it on the fly
and sends only the compressed bytes over the host link; on prefetch it decompresses while
writing back. The compression units are the subcomponent in its ``codec`` slot
(:mod:`components.codecs`); with the slot empty it is vDNN's plain copy engine."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import field, replace
from typing import Any, Mapping, Optional

import numpy as np

from sst_cdma.engine.element import Component, Param, ParamError, Port, StatisticSpec, SubComponentSlot
from sst_cdma.engine.flows import Flow, FlowNetwork, Route
from sst_cdma.engine.kernel import SimulationError
from sst_cdma.engine.param_words import param_word
from sst_cdma.engine.records import Record, record
from sst_cdma.model.links import MIN_DMA_BURST

from .codecs import Codec
from .copy_bounds import CopyBounds
from .interfaces import (CodecKernels, HostPath, HostStore, MemoryPool, StateCodec,
                         StorageDrive, TransferCosts)
from .messages import (TIERS, CodecKernel, CopyCost, DrivePath, OffloadManifest, PathInfo,
                       TransferDone, TransferRequest)
from .storage_path import NVME_PATHS, StorageRoute, storage_route
from .wire_plan import DensitySources, WirePlan, plan_wires


@record
class EngineResult(Record):
    """What a cDMA engine published at the end of the run: whom it served (the GPU on its
    ``gpu`` port and the links from its ``pcie`` port to the host memory, GPU side first), how
    it was built, and the compression ratio every algorithm would have reached on the bytes it
    offloaded (empty when it planned none)."""

    gpu: str
    path: list[str]
    host: str
    algorithm: str
    mode: str
    codec_units: int
    codec_unit_throughput_Bps: float
    progress: float
    #: where the codec runs: ``cdma`` (the copy engine compresses and decompresses) or
    #: ``blackwell-de`` (the copy engine decompresses, SM kernels compress)
    engine: str = "cdma"
    ratio_by_algorithm: dict[str, float] = field(default_factory=dict)
    #: functional mode only: prefetches whose real bytes were checked bit for bit against
    #: what was offloaded, and those that matched (None outside functional mode)
    functional_checks: Optional[int] = None
    functional_matches: Optional[int] = None
    #: every transfer's (start, end, time it lost at the GPU's HBM) in ps: how much sharing
    #: the memory stretched it (flow mode; the all-reduce's summary reads it)
    copies: list[tuple[int, int, int]] = field(default_factory=list, repr=False)
    #: the SSDs on its ``nvme%d`` ports, in port order, and how it reaches them (``nvme_path``;
    #: '' without drives)
    drives: list[str] = field(default_factory=list)
    nvme_path: str = ""
    #: bytes the engine read from and wrote to GPU DRAM: raw bytes, but the compressed ones
    #: where SM kernels (de)compress in DRAM (an offload on Blackwell's Decompression Engine
    #: reads the SMs' compressed buffer; a prefetch the engine decompresses writes raw bytes)
    dram_bytes: int = 0
    #: ps of the copies' flows bounded by each kind of resource: ``engine`` (the codec units),
    #: ``link``, ``HBM`` (:mod:`components.copy_bounds`)
    copy_bounds_ps: dict[str, float] = field(default_factory=dict)
    #: ps the codec units were busy (the bytes they (de)compressed at their full throughput;
    #: 0 for a plain copy engine)
    codec_busy_ps: float = 0.0
    #: ps the copies' flows lost to other flows at each resource they crossed (the GPU's
    #: host link shared with a network card's traffic, say): :mod:`components.copy_bounds`
    copy_lost_ps: dict[str, float] = field(default_factory=dict)
    #: where the densities of the tensors it planned came from (:func:`density_provenance`;
    #: empty when no profile was read)
    density_provenance: dict[str, Any] = field(default_factory=dict)


#: the engine params that moved to the codec in its ``codec`` slot
MOVED_TO_CODEC = ("algorithm", "codec_units", "codec_unit_throughput", "bypass_incompressible")


def transfer_weights(direction: str, raw: int, wire: int, hbm: str, codec: Optional[str],
                     path: PathInfo, packed_in_dram: bool = False
                     ) -> tuple[dict[str, float], dict[str, float]]:
    """Bytes each resource carries per uncompressed byte of a transfer: (GPU DRAM resource
    ``hbm`` and the ``codec`` resource, at the raw size; the host link of ``path``, at the
    compressed size). ``codec`` None: a plain copy, which bypasses the codec.
    ``packed_in_dram``: the copy engine moves the compressed bytes to or from GPU DRAM, as
    SM kernels (de)compress them there (Blackwell's Decompression Engine)."""
    share = wire / raw if raw else 1.0
    inner = {hbm: share if packed_in_dram else 1.0}
    if codec is not None:
        inner[codec] = 1.0
    outer: dict[str, float] = {}
    for res in (path.d2h if direction == "offload" else path.h2d):
        outer[res] = outer.get(res, 0.0) + share
    return inner, outer


def _declared(name: str) -> Param:
    """The engine's declaration of its param ``name``."""
    return next(p for p in CDMAEngine.PARAMS if p.name == name)


class CDMAEngine(Component):
    """Compressing DMA engine between GPU DRAM and the host link."""

    PARAMS = (
        Param("mode", "str", "flow", "flow: transfers share bandwidth max-min fairly as flows; "
              "chunk: transfers move in bursts through a bounded buffer",
              choices=("flow", "chunk")),
        Param("burst", "bytes", "1MiB", "burst size in chunk mode (uncompressed bytes; at least "
              "one 4 KiB page, docs/model.md)", minimum=MIN_DMA_BURST),
        Param("buffer", "bytes", "4MiB", "staging buffer between the two stages in chunk mode "
              "(uncompressed bytes, at least one burst): buffer/burst slots, each held from a "
              "burst's first-stage start to its second-stage end", minimum=MIN_DMA_BURST),
        Param("profile", "str", "", "density profile: a shipped network name or a JSON path "
              "(default: the workload's network)"),
        Param("progress", "float", 0.5, "point of training (0..1) the densities are taken at",
              minimum=0, maximum=1),
        Param("tensors", "str", "", "real tensors named as in the workload — an NPZ file or a "
              "folder of samples written by 'sst-cdma capture': compress their real bytes "
              "instead of estimating from density (each must be the simulated tensor: same "
              "network where recorded, dtype and shape, batch included)"),
        Param("functional", "bool", "false", "store the real compressed bytes in host memory "
              "and check every prefetch bit for bit against what was offloaded"),
        Param("nvme_path", "str", "bounce", "how transfers to the nvme tier reach the SSDs on "
              "the engine's nvme ports: bounce (through a pinned host buffer: host DRAM crossed twice) "
              "or gds (GPUDirect Storage: peer to peer through the switch or root complex; "
              "docs/storage.md)", choices=NVME_PATHS),
    )
    SLOTS = (SubComponentSlot("codec", "the compression units, one algorithm (empty: vDNN's "
                              "plain copy engine)", accepts=Codec),)
    PORTS = (Port("gpu", "requests from and completions to the GPU", required=True,
                  provides=(TransferCosts, CodecKernels)),
             Port("states", "the model-state copies of the driver in the GPU's 'model_states' "
                  "slot (its port 'dma'), each on a queue of its copy stream",
                  provides=(StateCodec,)),
             Port("hbm", "the GPU DRAM the engine reads and writes", required=True),
             Port("pcie", "the host link", required=True),
             Port("nvme%d", "the SSDs (cdma.NVMe, port dma%d) the nvme-tier transfers stripe "
                  "across, in port order"))
    STATISTICS = (
        StatisticSpec("offload_raw_bytes", "uncompressed bytes offloaded per transfer", "B", "f64",
                      1),
        StatisticSpec("offload_wire_bytes", "bytes on the wire per offload", "B", "f64", 1),
        StatisticSpec("prefetch_wire_bytes", "bytes on the wire per prefetch", "B", "f64", 1),
        StatisticSpec("transfer_time_ps", "duration of each transfer", "ps", "f64", 2),
        StatisticSpec("bursts", "bursts moved in chunk mode", "bursts", "u64", 2),
        StatisticSpec("functional_checks", "functional mode: prefetches whose real bytes were "
                      "checked bit for bit against what was offloaded", "prefetches", "u64", 1),
        StatisticSpec("functional_matches", "functional mode: checked prefetches that matched",
                      "prefetches", "u64", 1),
    )

    @classmethod
    def validate_params(cls, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The declared params; one that moved to the codec says where it is set now."""
        moved = next((key for key in given if key in MOVED_TO_CODEC), None)
        if moved == "algorithm":
            raise ParamError(f"{where}: parameter 'algorithm' is the codec slot's now: fill it "
                             "with setSubComponent('codec', 'cdma.ZVC') (or another codec "
                             "element), or leave it empty for a plain copy engine (none)")
        if moved is not None:
            raise ParamError(f"{where}: parameter {moved!r} is the codec's now: set it on the "
                             "subcomponent in slot 'codec' (setSubComponent('codec', "
                             "'cdma.ZVC').addParam(...); overrides name it ENGINE:codec[0])")
        return super().validate_params(given, where)

    @classmethod
    def check_params(cls, values: Mapping[str, Any], given: Mapping[str, Any]) -> Optional[str]:
        """The staging buffer holds a burst; functional mode has real tensors to move."""
        me = cls.type_name()
        if values["buffer"] < values["burst"]:
            burst = given.get("burst", _declared("burst").default)
            return (f"{param_word(me, 'buffer', given.get('buffer', _declared('buffer').default))}"
                    f" is smaller than one {param_word(me, 'burst')} ({burst}): the staging "
                    "buffer must hold a burst")
        if values["functional"] and not values["tensors"]:
            return (f"{param_word(me, 'functional', True)} needs {param_word(me, 'tensors')}: "
                    "functional mode moves and checks real tensors' bytes")
        return None

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.flows = self.service(FlowNetwork)
        self.codec: Optional[Codec] = self.subcomponent("codec")  # type: ignore[assignment]
        self.gpu = self.connected_link("gpu", self._request)
        self.states = self.configure_link("states", self._request)
        self.hbm_link = self.connected_link("hbm", self.refuse_event)
        self.pcie = self.connected_link("pcie", self.refuse_event)
        self.nvme_ports = sorted((port for port in self.connected_ports()
                                  if port.startswith("nvme")), key=lambda port: int(port[4:]))
        for port in self.nvme_ports:
            self.configure_link(port, self.refuse_event)
        self.drives: list[DrivePath] = []
        #: the SSDs on the nvme ports, in port order: they keep what the nvme tier stores
        self.drive_stores: list[StorageDrive] = []
        self.storage: Optional[StorageRoute] = None
        self.hbm_resource = ""
        self.path: Optional[PathInfo] = None
        self.host: Optional[HostStore] = None
        self.queue: deque[TransferRequest] = deque()
        self.busy = False
        #: the GPU's model-state streams (``TransferRequest.stream``), each a queue of its own
        #: served beside the copy stream's, as a GPU's further copy engines are
        self.lanes: dict[str, deque[TransferRequest]] = {}
        self.lanes_busy: set[str] = set()
        #: model states that start on the SSDs (``OffloadManifest.resident``)
        self.resident: list[tuple[str, int]] = []
        self.plan = WirePlan()
        self.wire: dict[str, int] = {}  # what each tensor crosses the link as in this run
        self.transfers: list[tuple[str, str, int, int, int, int]] = []
        self.copies: list[tuple[int, int, int]] = []
        self.dram_bytes = 0  # read from and written to GPU DRAM by the transfers
        self.bounds = CopyBounds({})
        self.stat_raw = self.register_statistic("offload_raw_bytes")
        self.stat_wire = self.register_statistic("offload_wire_bytes")
        self.stat_pwire = self.register_statistic("prefetch_wire_bytes")
        self.stat_time = self.register_statistic("transfer_time_ps")
        self.stat_bursts = self.register_statistic("bursts")
        self.stat_checks = self.register_statistic("functional_checks")
        self.stat_matches = self.register_statistic("functional_matches")
        self.functional_checks = 0   # prefetches checked bit for bit (functional mode)
        self.functional_matches = 0  # of those, the ones that matched
        p = self.params
        samples = self._load_tensors(p["tensors"]) if p["tensors"] else None
        self.sources = DensitySources(name, p["profile"], p["progress"], p["tensors"],
                                      p["functional"], samples,
                                      samples.arrays if samples is not None else {})

    def _load_tensors(self, source: str) -> Any:
        """Real tensors from an NPZ file or a capture samples folder (a ``SampleSet``)."""
        from sst_cdma.profiles import ProfileError, load_sample_set

        try:
            return load_sample_set(source)
        except ProfileError as exc:
            raise ValueError(f"{self.name}: cannot read tensors: {exc}") from None

    @property
    def algorithm(self) -> str:
        """The codec's algorithm, ``none`` for a plain copy engine."""
        return self.codec.algorithm if self.codec is not None else "none"

    # -- init: learn the workload; setup: the memory and the path ------------------------------
    def init(self, phase: int) -> None:
        """Plan the wire size of every tensor the GPU's manifest lists."""
        while (msg := self.gpu.recv_untimed()) is not None:
            self.plan = self.plan.merged(plan_wires(msg, self.sources, self.codec))
            self.wire.update(self.plan.wire)
            self.resident.extend(msg.resident)

    def transfer_costs(self, workload: OffloadManifest) -> dict[str, CopyCost]:
        """Each tensor's offload and prefetch time alone on the path, as a plain copy and
        through the codec, with the wire size the engine would send and the SM kernels a
        transfer through the codec runs on the compute stream (the same ratios and the
        same flow arithmetic as the transfers themselves; the planner of policy
        ``auto`` asks before the workload is scheduled). A fresh plan, dropped after: asking changes
        nothing in the engine."""
        wire = plan_wires(replace(workload, tensors=tuple(replace(t, plain=False)
                                                          for t in workload.tensors)),
                          self.sources, self.codec).wire
        hbm = self.peer_provider("hbm", MemoryPool).bandwidth_resource
        path = self.peer_provider("pcie", HostPath).host_path()
        capacity = {name: res.capacity for name, res in self.flows.resources.items()}
        storage = self._storage_for(workload.tier, path)

        def sm_ps(direction: str, raw: int, size: int) -> int:
            kernel = self.codec.sm_kernel(direction, "", raw, size) \
                if self.codec is not None else None
            return kernel.time_ps if kernel is not None else 0

        priced: dict[tuple[str, int, int, bool], int] = {}

        def ps(direction: str, raw: int, size: int, coded: bool) -> int:
            key = (direction, raw, size, coded)  # tensors of a size alike: priced once
            if key not in priced:
                priced[key] = copy_ps(direction, raw, size, coded)
            return priced[key]

        def copy_ps(direction: str, raw: int, size: int, coded: bool) -> int:
            codec, packed = self._codec_stage(direction, coded)
            inner, outer = transfer_weights(direction, raw, size, hbm, codec, path, packed)
            latency = path.latency_ps
            if storage is not None:
                outer = _storage_weights(storage, direction, raw, size)
                latency = storage.latency_ps[direction]
            # an SM (de)compression runs before (offload) or after (prefetch) its copy
            return _alone_ps(raw, _together(inner, outer), capacity, latency) + \
                (sm_ps(direction, raw, size) if coded else 0)

        out = {}
        for t in workload.tensors:
            raw = t.raw_bytes
            size = wire.get(t.name, raw)
            out[t.name] = CopyCost(ps("offload", raw, raw, False), ps("prefetch", raw, raw, False),
                                   ps("offload", raw, size, True), ps("prefetch", raw, size, True),
                                   size, sm_ps("offload", raw, size), sm_ps("prefetch", raw, size))
        return out

    def state_copy_ps(self, direction: str, raw: int, route: str = "gpu-host") -> int:
        """A plain model-state copy of ``raw`` bytes alone (see :class:`TransferCosts`), with
        the flows' own arithmetic, as the planner of policy ``auto`` prices a placement."""
        if route not in STATE_ROUTES:
            raise ValueError(f"{self.name}: unknown model-state route {route!r}")
        path = self.peer_provider("pcie", HostPath).host_path()
        capacity = {name: res.capacity for name, res in self.flows.resources.items()}
        hbm = self.peer_provider("hbm", MemoryPool).bandwidth_resource
        inner, outer = transfer_weights(direction, raw, raw, hbm, None, path, False)
        latency = path.latency_ps
        if route != "gpu-host":
            storage = self._storage_for("nvme", path)  # no SSD: an InterfaceError says so
            assert storage is not None
            if route == "host-nvme":
                inner = {}
                outer = storage.host_weights[direction]
                latency = storage.host_latency_ps[direction]
            else:
                outer = _storage_weights(storage, direction, raw, raw)
                latency = storage.latency_ps[direction]
        return _alone_ps(raw, _together(inner, outer), capacity, latency)

    def _storage_for(self, tier: str, path: PathInfo) -> Optional[StorageRoute]:
        """The route to the SSDs for a cost query of ``tier`` (None: the host tier), asked of
        the drives afresh (the planner asks before setup)."""
        if tier != "nvme":
            return None
        drives = [self.peer_provider(port, StorageDrive).drive_path()
                  for port in self.nvme_ports]
        return storage_route(self.name, path, drives, self.params["nvme_path"])

    def codec_kernel(self, direction: str, tensor: str, raw_bytes: int
                     ) -> Optional[CodecKernel]:
        """The SM kernel a transfer of ``tensor`` through the codec needs beside its copy (the
        ``CodecKernels`` interface): on Blackwell's Decompression Engine an offload's
        compression, and a decompression of buffers the engine does not take."""
        if self.codec is None:
            return None
        return self.codec.sm_kernel(direction, tensor, raw_bytes,
                                    self.wire.get(tensor, raw_bytes))

    def _codec_stage(self, direction: str, coded: bool) -> tuple[Optional[str], bool]:
        """What a transfer through the codec (``coded``) loads in the copy engine: the codec
        resource (None: the units do no work on it) and whether the copy engine moves the
        compressed bytes to or from GPU DRAM (SM kernels (de)compress them there)."""
        codec = self.codec
        if not coded or codec is None:
            return None, False
        if codec.decompression_engine and (direction == "offload" or
                                           not codec.decompresses_in_engine):
            return None, True
        return codec.resource.name, False

    def state_codec(self) -> tuple[str, float, bool]:
        """The codec model-state copies go through (``none``: a plain copy engine), the point
        of training their measured ratios are taken at, and whether data that would grow is
        sent raw."""
        return self.algorithm, self.params["progress"], self._bypass()

    def ratio_by_algorithm(self) -> dict[str, float]:
        """The compression ratio (raw / wire bytes, bypass included) of every algorithm over the
        tensors this engine planned."""
        return self.plan.ratio_by_algorithm(self._bypass())

    def _bypass(self) -> bool:
        """Whether incompressible data bypasses compression: the codec's setting (a plain copy
        engine counts its ratio by algorithm as a codec of the default would send)."""
        if self.codec is not None:
            return self.codec.bypass
        return Codec.validate_params({}, self.name)["bypass_incompressible"]

    def finish(self) -> None:
        """Publish whom the engine served, how it was built and what compression reached."""
        p = self.params
        path = self.path
        # a plain copy engine reports the codec a default one would have: the system's shape
        # reads the same for vDNN and cDMA runs
        codec = self.codec.params if self.codec is not None else \
            Codec.validate_params({}, self.name)
        self.publish(EngineResult(
            gpu=self.plan.gpu, path=list(path.link_names) if path else [],
            host=path.host.name if path is not None and path.host is not None else "",
            algorithm=self.algorithm, mode=p["mode"], codec_units=codec["codec_units"],
            codec_unit_throughput_Bps=codec["codec_unit_throughput"], progress=p["progress"],
            engine=codec["engine"], dram_bytes=self.dram_bytes,
            ratio_by_algorithm=self.ratio_by_algorithm(),
            functional_checks=self.functional_checks if p["functional"] else None,
            functional_matches=self.functional_matches if p["functional"] else None,
            copies=self.copies, drives=[d.name for d in self.drives],
            nvme_path=p["nvme_path"] if self.drives else "",
            copy_bounds_ps=dict(self.bounds.ps), copy_lost_ps=dict(self.bounds.lost_at),
            codec_busy_ps=self._codec_busy_ps(),
            density_provenance=dict(self.plan.provenance)))

    def _codec_busy_ps(self) -> float:
        """Picoseconds the codec units' resource was busy, at its capacity."""
        if self.codec is None:
            return 0.0
        res = self.codec.resource
        return res.busy_units / res.capacity * 1e12

    def setup(self) -> None:
        """Find the GPU memory's bandwidth resource and the path to the host store."""
        self.hbm_resource = self.peer_provider("hbm", MemoryPool).bandwidth_resource
        self.path = self.peer_provider("pcie", HostPath).host_path()
        self.host = self.path.host
        self.drive_stores = [self.peer_provider(port, StorageDrive) for port in self.nvme_ports]
        self.drives = [drive.drive_path() for drive in self.drive_stores]
        if self.drives:
            self.storage = storage_route(self.name, self.path, self.drives,
                                         self.params["nvme_path"])
        kinds = {self.hbm_resource: "HBM"}
        if self.codec is not None:
            kinds[self.codec.resource.name] = "engine"
        self.bounds = CopyBounds(kinds)
        for key, nbytes in self.resident:
            if self.storage is None:
                raise SimulationError(f"{self.name}: model state {key!r} starts on the nvme "
                                      "tier, and no SSD is wired to this engine's nvme0 port")
            self._store_striped(self.name + "/" + key, nbytes, None)

    # -- transfers -----------------------------------------------------------------------------
    def _request(self, req: TransferRequest) -> None:
        if req.tier != "host":
            self._check_tier(req)
        if req.stream:
            self.lanes.setdefault(req.stream, deque()).append(req)
            if req.stream not in self.lanes_busy:
                self._next(req.stream)
            return
        self.queue.append(req)
        if not self.busy:
            self._next()

    def _next(self, stream: str = "") -> None:
        queue = self.lanes[stream] if stream else self.queue
        if not queue:
            if stream:
                self.lanes_busy.discard(stream)
            else:
                self.busy = False
            return
        if stream:
            self.lanes_busy.add(stream)
        else:
            self.busy = True
        req = queue.popleft()
        if req.wire_bytes:  # sized by the sender (a compressed model-state copy)
            self.wire[req.tensor] = req.wire_bytes
        elif req.tensor not in self.wire or req.codec == "none":
            self.wire[req.tensor] = req.raw_bytes
        wire = self.wire[req.tensor]
        start = self.sim.now
        if req.tier == "host":
            latency = self.path_to_host.latency_ps
        elif req.near == "host":
            latency = self.route_to_drives.host_latency_ps[req.direction]
        else:
            latency = self.route_to_drives.latency_ps[req.direction]
        self.schedule_at(start + latency, self._move, (req, wire, start))

    @property
    def path_to_host(self) -> PathInfo:
        """The path to the host store (the peer on port 'pcie'), from setup on."""
        if self.path is None:
            raise SimulationError(f"{self.name}: the path to the host is asked for before "
                                  "setup")
        return self.path

    @property
    def route_to_drives(self) -> StorageRoute:
        """The route to the SSDs, from setup on; a transfer on the nvme tier without one is
        refused by :meth:`_check_tier` on arrival."""
        if self.storage is None:
            raise SimulationError(f"{self.name}: the nvme tier is used, and no SSD is wired to "
                                  "this engine's nvme0 port")
        return self.storage

    def _check_tier(self, req: TransferRequest) -> None:
        """A request for a tier this engine cannot reach stops the run naming it."""
        if req.tier not in TIERS:
            raise SimulationError(f"{self.name}: {req.direction} of {req.tensor!r} names tier "
                                  f"{req.tier!r} (one of {', '.join(TIERS)})")
        if req.tier == "nvme" and self.storage is None:
            raise SimulationError(f"{self.name}: {req.direction} of {req.tensor!r} goes to the "
                                  "nvme tier, and no SSD is wired to this engine's nvme0 port")

    def _codec_of(self, req: TransferRequest) -> Optional[Codec]:
        """The codec ``req`` goes through (None: a plain copy, with no codec or none asked)."""
        return self.codec if req.codec != "none" else None

    def stage_weights(self, direction: str, raw: int, wire: int, codec: bool = True,
                      tier: str = "host") -> tuple[dict[str, float], dict[str, float]]:
        """:func:`transfer_weights` of a transfer on this engine's memory, codec and path
        (``codec`` False: a plain copy that bypasses the codec); ``tier`` ``nvme``: the outer
        stage is the route to the SSDs, at the compressed size."""
        resource, packed = self._codec_stage(direction, codec)
        inner, outer = transfer_weights(direction, raw, wire, self.hbm_resource, resource,
                                        self.path_to_host, packed)
        if tier == "nvme":
            outer = _storage_weights(self.route_to_drives, direction, raw, wire)
        return inner, outer

    def dram_side_bytes(self, direction: str, raw: int, wire: int, codec: bool = True) -> int:
        """Bytes a transfer moves to or from GPU DRAM: the compressed ``wire`` bytes where SM
        kernels (de)compress them in DRAM, else the ``raw`` ones (the weight
        :func:`transfer_weights` gives the DRAM resource, times ``raw``)."""
        return wire if self._codec_stage(direction, codec)[1] else raw

    def weights(self, direction: str, raw: int, wire: int, codec: bool = True,
                tier: str = "host") -> dict[str, float]:
        """Both stages' weights together: what one flow carrying the whole transfer loads
        (``codec`` False: a plain copy; the closed form prices a transfer with it)."""
        return _together(*self.stage_weights(direction, raw, wire, codec, tier))

    def _move(self, job: tuple[TransferRequest, int, int]) -> None:
        req, wire, start = job
        raw = req.raw_bytes
        if req.near == "host":  # SSD <-> host DRAM: one flow, no GPU side to stage through
            route = self.route_to_drives.host_weights
            self.flows.start(raw, dict(route[req.direction]),
                             lambda f: self.transfer_done(req, wire, start), label=req.tensor)
        elif self.params["mode"] == "flow" or raw == 0:
            self.flows.start(raw, self.weights(req.direction, raw, wire, req.codec != "none",
                                               req.tier),
                             lambda f: self._flow_done(req, wire, start, f),
                             label=req.tensor)
        else:
            self._chunked(req, wire, start)

    def _flow_done(self, req: TransferRequest, wire: int, start: int, flow: Flow) -> None:
        """A flow-mode transfer's one flow has ended: note what bounded it, and finish."""
        self.bounds.add(flow)
        self.transfer_done(req, wire, start, flow.lost_ps(self.hbm_resource))

    def _chunked(self, req: TransferRequest, wire: int, start: int) -> None:
        """Bursts go through two stages — DRAM+codec, then the host link — with at most
        ``buffer`` bytes staged between them (backpressure stalls the first stage)."""
        inner, outer = self.stage_weights(req.direction, req.raw_bytes, wire,
                                          req.codec != "none", req.tier)
        offload = req.direction == "offload"
        # offload: DRAM/codec first, link second; prefetch: link first, codec/DRAM second
        first, second = (inner, outer) if offload else (outer, inner)
        _BurstPipeline(self, req, wire, start, self.flows.route(first, req.tensor),
                       self.flows.route(second, req.tensor)).pump()

    def transfer_done(self, req: TransferRequest, wire: int, start: int,
                      hbm_lost_ps: float = 0.0) -> None:
        """The last byte of ``req`` has moved: record it, leave an offload in host memory or
        check a prefetch, tell the GPU and start the next transfer."""
        now = self.sim.now
        self.copies.append((start, now, int(round(hbm_lost_ps))))
        self.dram_bytes += self.dram_side_bytes(req.direction, req.raw_bytes, wire,
                                                req.codec != "none")
        codec = self._codec_of(req)
        if codec is not None:
            codec.count(req.raw_bytes, wire)
        if req.direction == "offload":
            self.stat_raw.add_data(req.raw_bytes)
            self.stat_wire.add_data(wire)
            if req.tier == "nvme":
                self._store_striped(self.name + "/" + req.tensor, wire,
                                    self.plan.payloads.get(req.tensor))
            elif self.host is not None and not req.stream:  # model states: the host CPU's buffers
                self.host.store(self.name + "/" + req.tensor, wire,
                                self.plan.payloads.get(req.tensor))
        else:
            self.stat_pwire.add_data(wire)
            self._check_prefetch(req)
        self.stat_time.add_data(now - start)
        self.transfers.append((req.direction, req.tensor, req.raw_bytes, wire, start, now))
        # a model-state copy (on a stream) came from the driver on port 'states'
        reply = self.states if req.stream and self.states is not None else self.gpu
        reply.send(TransferDone(req, wire, start, now))
        self._next(req.stream)

    def _store_striped(self, key: str, nbytes: int, payload: Optional[bytes]) -> None:
        """Leave ``nbytes`` on the SSDs in equal stripes (the first drives take the remainder;
        a functional-mode payload is kept whole on the first drive)."""
        count = len(self.drive_stores)
        part, extra = divmod(nbytes, count)
        for i, drive in enumerate(self.drive_stores):
            drive.store(key, part + (1 if i < extra else 0), payload if i == 0 else None)

    def _store_of(self, tier: str) -> Any:
        """Where a tier's payloads are kept: the host store, or the first SSD."""
        return self.drive_stores[0] if tier == "nvme" else self.host

    def _check_prefetch(self, req: TransferRequest) -> None:
        """Functional mode: decompress what the host returns and compare bit for bit."""
        codec = self.codec  # a payload is what the codec wrote: none without one
        if not self.params["functional"] or codec is None or req.tensor not in self.plan.payloads:
            return
        from sst_cdma import codecs

        key = self.name + "/" + req.tensor
        store = self._store_of(req.tier)
        payload = store.load(key)
        try:
            restored = codec.decompress(payload)
        except codecs.CodecError as exc:
            raise SimulationError(f"{self.name}: prefetch of {req.tensor!r}: the host returned a "
                                  f"corrupt compressed stream ({exc})") from None
        original = self.sources.real[req.tensor]
        # raw bfloat16 words come back as bfloat16 (ml_dtypes) or uint16: same bits either way
        same_type = restored.dtype == original.dtype or (
            original.dtype == np.uint16 and restored.dtype.name in ("bfloat16", "uint16"))
        same = (same_type and restored.shape == original.shape and
                restored.tobytes() == original.tobytes())
        self.functional_checks += 1
        self.stat_checks.add_data(1)
        if not same:
            raise SimulationError(f"{self.name}: prefetch of {req.tensor!r} returned data that "
                                  "differs from what was offloaded")
        self.functional_matches += 1
        self.stat_matches.add_data(1)
        if req.tier == "nvme":
            for drive in self.drive_stores:
                drive.release(key)
        else:
            store.release(key)


#: the routes a model-state copy takes (:meth:`CDMAEngine.state_copy_ps`): GPU memory and
#: host DRAM, GPU memory and the SSDs, host DRAM and the SSDs
STATE_ROUTES = ("gpu-host", "gpu-nvme", "host-nvme")


def _storage_weights(storage: StorageRoute, direction: str, raw: int, wire: int
                     ) -> dict[str, float]:
    """The resources on the way to the SSDs, loaded per uncompressed byte at the compressed
    size (the outer stage of an ``nvme``-tier transfer)."""
    share = wire / raw if raw else 1.0
    return {res: w * share for res, w in storage.weights[direction].items()}


def _alone_ps(raw: int, weights: Mapping[str, float], capacity: Mapping[str, float],
              latency: int) -> int:
    """Picoseconds a transfer of ``raw`` bytes takes alone on resources loaded ``weights`` per
    byte: its start-up ``latency`` and the flow's own arithmetic."""
    from sst_cdma.engine.flows import isolated_duration_ps

    pairs = [(capacity[r], w) for r, w in weights.items()]
    return latency + (isolated_duration_ps(raw, pairs) if raw else 0)


def _together(inner: dict[str, float], outer: dict[str, float]) -> dict[str, float]:
    """Both stages' weights in one: what one flow carrying the whole transfer loads."""
    out = dict(inner)
    for res, w in outer.items():
        out[res] = out.get(res, 0.0) + w
    return out


class _BurstPipeline:
    """One chunk-mode transfer in flight. A burst holds a buffer slot from the moment the first
    stage starts producing it until the second stage has finished with it (the compressed bytes
    stay in the buffer until they have crossed the link; on a prefetch, until they are
    decompressed into DRAM), so the first stage starts a burst only when a slot is free: one
    slot serializes the stages, two overlap them."""

    __slots__ = ("engine", "launch", "req", "wire", "start", "burst", "last", "count", "slots",
                 "first", "second", "first_done", "second_done", "issued", "held", "staged",
                 "landed", "in_first", "in_second")

    def __init__(self, engine: CDMAEngine, req: TransferRequest, wire: int, start: int,
                 first: Route, second: Route) -> None:
        raw = req.raw_bytes
        self.engine = engine
        self.launch = engine.flows.launch
        self.req = req
        self.wire = wire
        self.start = start
        self.burst = min(engine.params["burst"], raw)
        self.count = -(-raw // self.burst)
        self.last = raw - self.burst * (self.count - 1)  # the last burst may be short
        self.slots = max(1, engine.params["buffer"] // self.burst)
        self.first = first
        self.second = second
        self.first_done = self._first_done
        self.second_done = self._second_done
        self.issued = 0     # bursts that entered the first stage
        self.held = 0       # buffer slots in use: bursts past their first start, not yet landed
        self.staged = 0     # bursts waiting in the buffer for the second stage
        self.landed = 0     # bursts through the second stage
        self.in_first = False
        self.in_second = False

    def pump(self) -> None:
        """Start whichever stages are idle and have work."""
        if not self.in_first and self.issued < self.count and self.held < self.slots:
            self.issued += 1
            self.held += 1
            self.in_first = True
            self.launch(self.burst if self.issued < self.count else self.last, self.first,
                        self.first_done, math.inf, self.req.tensor)
        if not self.in_second and self.staged:
            self.staged -= 1
            self.in_second = True
            self.launch(self.burst if self.landed + 1 < self.count else self.last, self.second,
                        self.second_done, math.inf, self.req.tensor)

    def _first_done(self, flow: Flow) -> None:
        self.engine.bounds.add(flow)
        self.in_first = False
        self.staged += 1
        self.pump()

    def _second_done(self, flow: Flow) -> None:
        self.engine.bounds.add(flow)
        self.in_second = False
        self.held -= 1
        self.landed += 1
        if self.landed == self.count:
            self.engine.stat_bursts.add_data(1, self.count)
            self.engine.transfer_done(self.req, self.wire, self.start)
        else:
            self.pump()
