"""The compressing DMA engine (cDMA): reads a feature map from GPU DRAM, compresses it on the fly
and sends only the compressed bytes over the host link; on prefetch it decompresses while
writing back. With ``algorithm=none`` it is vDNN's plain copy engine."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from sst_cdma.config import ConfigError
from sst_cdma.element import Component, Param, Port, StatisticSpec
from sst_cdma.flows import Flow, FlowNetwork, Route
from sst_cdma.kernel import SimulationError
from sst_cdma.model.compression import ALGORITHMS, ratio_from_density, wire_bytes
from sst_cdma.model.links import MIN_DMA_BURST

from .interfaces import HostPath, HostStore, MemoryPool, TransferCosts
from .messages import CopyCost, OffloadManifest, PathInfo, TransferDone, TransferRequest


@dataclass
class EngineResult:
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
    ratio_by_algorithm: dict[str, float] = field(default_factory=dict)
    #: functional mode only: prefetches whose real bytes were checked bit for bit against
    #: what was offloaded, and those that matched (None outside functional mode)
    functional_checks: Optional[int] = None
    functional_matches: Optional[int] = None
    #: every transfer's (start, end, time it lost at the GPU's HBM) in ps: how much sharing
    #: the memory stretched it (flow mode; the all-reduce's summary reads it)
    copies: list[tuple[int, int, int]] = field(default_factory=list, repr=False)


class CDMAEngine(Component):
    """Compressing DMA engine between GPU DRAM and the host link."""

    PARAMS = (
        Param("algorithm", "str", "zvc", "compression algorithm", choices=ALGORITHMS),
        Param("codec_units", "int", 8, "compression/decompression units in the engine (one per memory controller)", minimum=1),
        Param("codec_unit_throughput", "bandwidth", "32GB/s", "uncompressed bytes per second each "
              "unit compresses or decompresses", minimum=0, exclusive_minimum=True),
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
        Param("bypass_incompressible", "bool", "true", "send data that would grow uncompressed"),
        Param("tensors", "str", "", "real tensors named as in the workload — an NPZ file or a "
              "folder written by 'sst-cdma capture --samples': compress their real bytes "
              "instead of estimating from density (each must be the simulated tensor: same "
              "network where recorded, dtype and shape, batch included)"),
        Param("functional", "bool", "false", "store the real compressed bytes in host memory "
              "and check every prefetch bit for bit against what was offloaded"),
    )
    PORTS = (Port("gpu", "requests from and completions to the GPU", required=True,
                  provides=(TransferCosts,)),
             Port("hbm", "the GPU DRAM the engine reads and writes", required=True),
             Port("pcie", "the host link", required=True))
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

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        if p["buffer"] < p["burst"]:
            raise ValueError(f"{name}: 'buffer' ({p['buffer']} bytes) must hold at least one "
                             f"'burst' ({p['burst']} bytes)")
        self.flows = self.service(FlowNetwork)
        self.codec = None
        if p["algorithm"] != "none":
            self.codec = self.flows.resource(f"{name}.codec", p["codec_units"] * p["codec_unit_throughput"])
        self.gpu = self.configure_link("gpu", self._request)
        self.hbm_link = self.configure_link("hbm", self.refuse_event)
        self.pcie = self.configure_link("pcie", self.refuse_event)
        self.hbm_resource = ""
        self.path: Optional[PathInfo] = None
        self.host: Optional[HostStore] = None
        self.queue: deque[TransferRequest] = deque()
        self.busy = False
        self.wire: dict[str, int] = {}
        self.ratios: dict[str, dict[str, float]] = {}
        self.raw_bytes: dict[str, int] = {}  # offloaded tensor -> uncompressed bytes
        self.plain: set[str] = set()  # tensors the workload copies raw (codec=none)
        self.served_gpu = ""
        self.densities: dict[str, float] = {}
        self.real: dict[str, np.ndarray] = {}
        self.samples: Any = None  # the SampleSet the real tensors came from
        self.payload_of: dict[str, bytes] = {}
        self.transfers: list[tuple[str, str, int, int, int, int]] = []
        self.copies: list[tuple[int, int, int]] = []
        self.stat_raw = self.register_statistic("offload_raw_bytes")
        self.stat_wire = self.register_statistic("offload_wire_bytes")
        self.stat_pwire = self.register_statistic("prefetch_wire_bytes")
        self.stat_time = self.register_statistic("transfer_time_ps")
        self.stat_bursts = self.register_statistic("bursts")
        self.stat_checks = self.register_statistic("functional_checks")
        self.stat_matches = self.register_statistic("functional_matches")
        self.functional_checks = 0   # prefetches checked bit for bit (functional mode)
        self.functional_matches = 0  # of those, the ones that matched
        if p["functional"] and not p["tensors"]:
            raise ValueError(f"{name}: functional mode needs 'tensors' (an NPZ of real tensors)")
        if p["tensors"]:
            self.samples = self._load_tensors(p["tensors"])
            self.real = self.samples.arrays

    def _load_tensors(self, source: str) -> Any:
        """Real tensors from an NPZ file or a capture samples folder (a ``SampleSet``)."""
        from sst_cdma.profiles import ProfileError, load_sample_set

        try:
            return load_sample_set(source)
        except ProfileError as exc:
            raise ValueError(f"{self.name}: cannot read tensors: {exc}") from None

    def _check_real(self, workload: OffloadManifest) -> None:
        """Refuse real tensors that are not the ones simulated: samples of another network,
        element type, shape or batch (functional mode would check a different tensor)."""
        from sst_cdma.profiles import ProfileError

        shapes = workload.shapes()
        p = self.params
        coded = [t.name for t in workload.tensors if t.name not in self.plain]
        if p["functional"] and p["algorithm"] != "none" and coded and \
                not any(t in self.real for t in coded):
            raise ConfigError(f"{self.name}: functional mode has nothing to check: none of the "
                              f"{len(self.real)} tensors in {p['tensors']} "
                              f"({', '.join(sorted(self.real)[:4])}"
                              f"{', ...' if len(self.real) > 4 else ''}) is one this run "
                              f"compresses ({', '.join(coded[:4])}"
                              f"{', ...' if len(coded) > 4 else ''})")
        try:
            self.samples.check_network(workload.network)
            for t in workload.tensors:
                if t.name in self.real:
                    self.samples.check(t.name, dtype=workload.dtype, shape=shapes.get(t.name),
                                       nbytes=t.raw_bytes)
        except ProfileError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    # -- init: learn the workload; setup: the memory and the path ------------------------------
    def init(self, phase: int) -> None:
        """Collect the GPU's list of offloaded tensors."""
        while (msg := self.gpu.recv_untimed()) is not None:
            self._plan(msg)

    def _plan(self, workload: OffloadManifest) -> None:
        """Decide the wire size of every tensor the workload offloads."""
        from sst_cdma.profiles import ProfileError, load_profile

        p = self.params
        dtype = workload.dtype
        offloaded = [(t.name, t.raw_bytes, t.sparse) for t in workload.tensors]
        self.served_gpu = workload.gpu
        # plain copies (codec=none) cross the link raw and need no densities
        self.plain.update(t.name for t in workload.tensors if t.plain)
        for tensor, raw, _ in offloaded:
            if tensor in self.plain:
                self.wire[tensor] = raw
        offloaded = [entry for entry in offloaded if entry[0] not in self.plain]
        self.raw_bytes.update((t, raw) for t, raw, _ in offloaded)
        if self.samples is not None:
            self._check_real(workload)
        need_profile = [t for t, _, sparse in offloaded if sparse and t not in self.real]
        profile = None
        if need_profile:
            source = p["profile"] or workload.network
            try:
                profile = load_profile(source)
                profile.require_network(workload.network)
                profile.require_tensors(need_profile)
            except ProfileError as exc:
                if p["algorithm"] == "none":  # a plain copy engine needs no densities
                    for tensor, raw, _ in offloaded:
                        self.wire[tensor] = raw
                    return
                raise self._profile_fault(exc, source) from None
        elif any(t not in self.real for t, _, _ in offloaded):
            # also for a plain copy engine: its ratio by algorithm covers the same tensors
            profile = self._dense_profile(workload.network)
        known = profile.tensors if profile is not None else {}
        for tensor, raw, sparse in offloaded:
            if tensor in self.real:
                self._plan_real(tensor, raw, dtype)
                continue
            # a dense tensor takes the profile's numbers only where it measured ratios in this
            # run's dtype (transformers: bf16 LZ4/zstd/byte-plane); else density 1.0
            measured_dense = not sparse and tensor in known and any(
                profile.ratio(tensor, algo, p["progress"], dtype=dtype) for algo in ALGORITHMS[1:])
            use_profile = sparse or measured_dense
            density = profile.density(tensor, p["progress"]) if use_profile else 1.0
            self.densities[tensor] = density
            ratios = {}
            for algo in ALGORITHMS:
                # ratios measured in another element type are not reused: derived from the
                # density for this run's dtype instead (docs/profiles.md)
                measured = profile.ratio(tensor, algo, p["progress"], dtype=dtype) \
                    if (profile is not None and use_profile and algo != "none") else None
                ratios[algo] = measured if measured else ratio_from_density(algo, density, dtype)
            self.ratios[tensor] = ratios
            self.wire[tensor] = wire_bytes(raw, ratios[p["algorithm"]], p["bypass_incompressible"])

    def transfer_costs(self, workload: OffloadManifest) -> dict[str, CopyCost]:
        """Each tensor's offload and prefetch time alone on the path, as a plain copy and
        through the codec, with the wire size the engine would send (the same ratios and the
        same flow arithmetic as the transfers themselves; the planner of ``--policy auto``
        asks before the workload is scheduled). Leaves the engine's plan untouched."""
        from sst_cdma.flows import isolated_duration_ps

        saved = (self.wire, self.ratios, self.raw_bytes, self.densities, self.plain,
                 self.payload_of, self.served_gpu)
        self.wire, self.ratios, self.raw_bytes, self.densities = {}, {}, {}, {}
        self.plain, self.payload_of = set(), {}
        try:
            self._plan(replace(workload, tensors=tuple(replace(t, plain=False)
                                                       for t in workload.tensors)))
            wire = self.wire
        finally:
            (self.wire, self.ratios, self.raw_bytes, self.densities, self.plain,
             self.payload_of, self.served_gpu) = saved
        hbm_resource, path = self.hbm_resource, self.path
        self.hbm_resource = self.peer_provider("hbm", MemoryPool).bandwidth_resource
        self.path = self.peer_provider("pcie", HostPath).host_path()
        capacity = {name: res.capacity for name, res in self.flows.resources.items()}

        def ps(direction: str, raw: int, size: int, codec: bool) -> int:
            pairs = [(capacity[r], w) for r, w in self.weights(direction, raw, size,
                                                               codec).items()]
            return self.path.latency_ps + (isolated_duration_ps(raw, pairs) if raw else 0)

        try:
            out = {}
            for t in workload.tensors:
                tensor, raw = t.name, t.raw_bytes
                size = wire.get(tensor, raw)
                out[tensor] = CopyCost(ps("offload", raw, raw, False),
                                       ps("prefetch", raw, raw, False),
                                       ps("offload", raw, size, True),
                                       ps("prefetch", raw, size, True), size)
            return out
        finally:
            self.hbm_resource, self.path = hbm_resource, path

    def _profile_fault(self, exc: Exception, source: str) -> ConfigError:
        """A profile error at ``source`` (the file, or a shipped profile's name), which the
        message names once, where the error says where."""
        message = str(exc)
        if message.startswith(f"{source}: "):
            message = message[len(source) + 2:]
        return ConfigError(f"{self.name}: {message}", source)

    def _dense_profile(self, network: str) -> Any:
        """The profile for a workload without sparse tensors: the ``profile`` parameter (which
        must load and describe ``network``), else the network's shipped one if there is one."""
        from sst_cdma.profiles import ProfileError, load_profile, shipped_profiles

        source = self.params["profile"]
        if not source and network not in shipped_profiles():
            return None
        try:
            profile = load_profile(source or network)
            profile.require_network(network)
        except ProfileError as exc:
            raise self._profile_fault(exc, source or network) from None
        return profile

    def _plan_real(self, tensor: str, raw: int, dtype: str) -> None:
        """Wire size (and, in functional mode, the payload) of a tensor from its real bytes."""
        from sst_cdma import codecs

        array = self.real[tensor]
        # raw bfloat16 words (uint16) go through the codecs tagged as what they are
        element_type = "bfloat16" if dtype == "bfloat16" and array.dtype == np.uint16 else None
        ratios = {"none": 1.0}
        for algo in ALGORITHMS[1:]:
            ratios[algo] = array.nbytes / codecs.compressed_size(array, algo,
                                                                 element_type=element_type)
        self.ratios[tensor] = ratios
        self.densities[tensor] = float(np.count_nonzero(array.view(
            np.dtype(f"u{array.dtype.itemsize}")))) / max(array.size, 1)
        algo = self.params["algorithm"]
        if algo == "none":
            self.wire[tensor] = raw
            return
        payload = codecs.compress(array, algo, element_type=element_type)
        if self.params["functional"]:
            self.payload_of[tensor] = payload
        # the sample is the simulated tensor (checked), so the stream is what crosses the link,
        # or the raw bytes where it would not be smaller and the engine bypasses compression
        size = len(payload)
        bypass = self.params["bypass_incompressible"] and size >= raw
        self.wire[tensor] = 0 if raw <= 0 else (raw if bypass else size)

    def ratio_by_algorithm(self) -> dict[str, float]:
        """The compression ratio (raw / wire bytes, bypass included) of every algorithm over the
        tensors this engine planned."""
        raw = {t: self.raw_bytes[t] for t in self.ratios if self.raw_bytes.get(t)}
        total = sum(raw.values())
        if not raw:
            return {}
        bypass = self.params["bypass_incompressible"]
        return {algo: total / sum(wire_bytes(raw[t], self.ratios[t][algo], bypass) for t in raw)
                for algo in ALGORITHMS[1:]}

    def finish(self) -> None:
        """Publish whom the engine served, how it was built and what compression reached."""
        p = self.params
        path = self.path
        self.publish(EngineResult(
            gpu=self.served_gpu, path=list(path.link_names) if path else [],
            host=path.host.name if path is not None and path.host is not None else "",
            algorithm=p["algorithm"], mode=p["mode"], codec_units=p["codec_units"],
            codec_unit_throughput_Bps=p["codec_unit_throughput"], progress=p["progress"],
            ratio_by_algorithm=self.ratio_by_algorithm(),
            functional_checks=self.functional_checks if p["functional"] else None,
            functional_matches=self.functional_matches if p["functional"] else None,
            copies=self.copies))

    def setup(self) -> None:
        """Find the GPU memory's bandwidth resource and the path to the host store."""
        self.hbm_resource = self.peer_provider("hbm", MemoryPool).bandwidth_resource
        self.path = self.peer_provider("pcie", HostPath).host_path()
        self.host = self.path.host

    # -- transfers -----------------------------------------------------------------------------
    def _request(self, req: TransferRequest) -> None:
        self.queue.append(req)
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if not self.queue:
            self.busy = False
            return
        self.busy = True
        req = self.queue.popleft()
        if req.tensor not in self.wire or req.codec == "none":
            self.wire[req.tensor] = req.raw_bytes
        wire = self.wire[req.tensor]
        start = self.sim.now
        self.schedule_at(start + self.path.latency_ps, self._move, (req, wire, start))

    def stage_weights(self, direction: str, raw: int, wire: int, codec: bool = True
                      ) -> tuple[dict[str, float], dict[str, float]]:
        """Bytes each resource carries per uncompressed byte of a transfer: (GPU DRAM and
        codec, at the raw size; the host link, at the compressed size). ``codec`` False: a
        plain copy that bypasses the codec."""
        inner = {self.hbm_resource: 1.0}
        if self.codec is not None and codec:
            inner[self.codec.name] = 1.0
        share = wire / raw if raw else 1.0
        outer: dict[str, float] = {}
        for res in (self.path.d2h if direction == "offload" else self.path.h2d):
            outer[res] = outer.get(res, 0.0) + share
        return inner, outer

    def weights(self, direction: str, raw: int, wire: int, codec: bool = True
                ) -> dict[str, float]:
        """Both stages' weights together: what one flow carrying the whole transfer loads
        (``codec`` False: a plain copy)."""
        inner, outer = self.stage_weights(direction, raw, wire, codec)
        for res, w in outer.items():
            inner[res] = inner.get(res, 0.0) + w
        return inner

    def _move(self, job: tuple[TransferRequest, int, int]) -> None:
        req, wire, start = job
        raw = req.raw_bytes
        if self.params["mode"] == "flow" or raw == 0:
            self.flows.start(raw, self.weights(req.direction, raw, wire, req.codec != "none"),
                             lambda f: self.transfer_done(req, wire, start,
                                                          f.lost_ps(self.hbm_resource)),
                             label=req.tensor)
        else:
            self._chunked(req, wire, start)

    def _chunked(self, req: TransferRequest, wire: int, start: int) -> None:
        """Bursts go through two stages — DRAM+codec, then the host link — with at most
        ``buffer`` bytes staged between them (backpressure stalls the first stage)."""
        inner, outer = self.stage_weights(req.direction, req.raw_bytes, wire,
                                          req.codec != "none")
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
        if req.direction == "offload":
            self.stat_raw.add_data(req.raw_bytes)
            self.stat_wire.add_data(wire)
            if self.host is not None:
                self.host.store(self.name + "/" + req.tensor, wire,
                                self.payload_of.get(req.tensor))
        else:
            self.stat_pwire.add_data(wire)
            self._check_prefetch(req)
        self.stat_time.add_data(now - start)
        self.transfers.append((req.direction, req.tensor, req.raw_bytes, wire, start, now))
        self.gpu.send(TransferDone(req, wire, start, now))
        self._next()

    def _check_prefetch(self, req: TransferRequest) -> None:
        """Functional mode: decompress what the host returns and compare bit for bit."""
        if not self.params["functional"] or req.tensor not in self.payload_of:
            return
        from sst_cdma import codecs

        key = self.name + "/" + req.tensor
        payload = self.host.load(key)
        try:
            restored = codecs.decompress(payload)
        except codecs.CodecError as exc:
            raise SimulationError(f"{self.name}: prefetch of {req.tensor!r}: the host returned a "
                                  f"corrupt compressed stream ({exc})") from None
        original = self.real[req.tensor]
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
        self.host.release(key)


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

    def _first_done(self, _flow: Flow) -> None:
        self.in_first = False
        self.staged += 1
        self.pump()

    def _second_done(self, _flow: Flow) -> None:
        self.in_second = False
        self.held -= 1
        self.landed += 1
        if self.landed == self.count:
            self.engine.stat_bursts.add_data(1, self.count)
            self.engine.transfer_done(self.req, self.wire, self.start)
        else:
            self.pump()
