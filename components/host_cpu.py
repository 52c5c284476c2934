"""``cdma.HostCPU``: the host's CPU running the optimizer step of model states kept in pinned
host memory (ZeRO-Offload's CPU Adam). A step of ``P`` parameters takes ``P / (Adam throughput
per core x cores)``; its DRAM traffic is a flow on the host memory's DRAM resource (and the
CPU's own memory bandwidth) capped at that rate, so it competes with the offload copies for
host DRAM bandwidth and slows when they saturate it. Steps run one at a time, in the order
the GPUs ask (every core on one bucket, as DeepSpeed's CPU Adam spreads a parameter group
over its threads). With the workload's ``state_compression`` ``host`` a step request also asks the CPU to
decompress the bucket's gradients before the step and compress its weights after it, at the
measured per-core codec throughput (:mod:`sst_cdma.model.cpu_codecs`) on every core: the
bucket's CPU time is the codecs' and the step's together."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import field
from typing import Any, Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Component, Param, Port, StatisticSpec
from sst_cdma.engine.flows import PS_PER_S, FlowNetwork, Route, isolated_duration_ps
from sst_cdma.engine.param_words import param_word
from sst_cdma.engine.records import Record, record
from sst_cdma.model.cpu_adam import (DEFAULT_CPU_ADAM, MAX_CORES, MAX_CORES_WHY, CpuAdamError,
                                     CpuAdamProfile, adam_rate_fault, load_cpu_adam)
from sst_cdma.model.cpu_codecs import cpu_codec_ps
from sst_cdma.model.hosts import (DEFAULT_PLATFORM, AdamOrigin, AdamScaling, adam_origin,
                                  platform, platform_fault)

from .interfaces import HostStep, HostTier
from .messages import CpuStepDone, CpuStepRequest, ModelStatesManifest

__all__ = ["HostCPU", "HostCPUResult", "host_cpu_fields"]


def _adam_throughput(rate: float) -> None:
    """``adam_throughput``: 0 (the file's measurement) or a rate a CPU can have."""
    if rate and adam_rate_fault(rate):
        raise ValueError(adam_rate_fault(rate))


def _platform(name: str) -> None:
    """``platform``: a host platform of :mod:`sst_cdma.model.hosts`."""
    if platform_fault(name):
        raise ValueError(platform_fault(name))


@record
class HostCPUResult(Record):
    """What a host CPU published at the end of the run: the GPUs it stepped for, its host
    platform, its cores and per-core Adam throughput and where they came from (the measured
    rate scaled by ``scale`` to the platform's cores), the DRAM bandwidth it stepped on, the
    rate its cores reach together bounded by that DRAM (``dram_bound``: the DRAM sets it),
    and every step (bucket, start, end, ps)."""

    cpu: str
    gpus: list[str]
    cores: int
    params_per_s_per_core: float
    adam_source: str
    platform: str = DEFAULT_PLATFORM.name
    platform_line: str = ""
    scale: float = 1.0
    dram_bandwidth: float = 0.0
    params_per_s: float = 0.0
    dram_bound: bool = False
    steps: list[tuple[str, int, int]] = field(default_factory=list, repr=False)
    #: the measurement: its implementation, the CPU it ran on, how its rate was carried to
    #: the platform's core (:data:`sst_cdma.model.hosts.SCALINGS`, or ``given``) and whether
    #: that CPU is another than the platform's
    implementation: str = ""
    measured_on: str = ""
    scaling: str = "given"
    other_cpu: bool = False

    @property
    def busy_ps(self) -> int:
        """Time the CPU spent stepping."""
        return sum(end - start for _, start, end in self.steps)


def host_cpu_fields(cpus: list[HostCPUResult]) -> dict[str, Any]:
    """``summary.json``'s ``host_cpu``: the host CPU that stepped the main GPUs' optimizer
    (the first host's; topologies build every host alike): its platform, cores, per-core Adam
    rate and the factor it was scaled by from the measured one, the DRAM it stepped on, the
    rate the cores reach on it and whether the DRAM sets it."""
    first = cpus[0]
    return {"hosts": len(cpus), "platform": first.platform, "system": first.platform_line,
            "cores": first.cores, "adam_per_core_params_per_s": first.params_per_s_per_core,
            "adam_scale": first.scale, "adam_source": first.adam_source,
            "adam_implementation": first.implementation, "adam_measured_on": first.measured_on,
            "adam_scaling": first.scaling, "adam_other_cpu": first.other_cpu,
            "dram_bandwidth_Bps": first.dram_bandwidth, "adam_params_per_s": first.params_per_s,
            "dram_bound": first.dram_bound}


class HostCPU(Component):
    """The host CPU stepping the optimizer of model states held in pinned host memory."""

    PARAMS = (
        Param("platform", "str", DEFAULT_PLATFORM.name, "the host platform this CPU is one "
              "socket of (sst_cdma/model/hosts.py; docs/host_cpu.md): its cores, their vector "
              "width and clock", check=_platform),
        Param("cores", "int", 0, "cores the optimizer step runs on (0: the platform's cores "
              "per socket)", minimum=0, maximum=MAX_CORES, why_minimum="0: the platform's",
              why_maximum=MAX_CORES_WHY),
        Param("adam_throughput", "float", 0.0, "CPU Adam throughput per core in parameters "
              "per second, taken as the platform's as given (0: the adam_file's measurement, "
              "scaled to the platform's cores)", minimum=0, check=_adam_throughput),
        Param("adam_file", "str", "", "CPU Adam measurement written by 'sst-cdma "
              "time-cpu-adam' ('': the shipped one; docs/host_cpu.md)"),
        Param("memory_bandwidth", "bandwidth", "0B/s", "DRAM bandwidth the CPU's cores can "
              "draw where it is below the host memory's (0: the host memory's, the "
              "platform's DRAM; its step's traffic loads the host memory's DRAM resource)",
              minimum=0),
    )
    PORTS = (Port("gpu%d", "GPUs whose optimizer step this CPU runs (the 'cpu' port of "
                  "the driver in each one's 'model_states' slot)",
                  provides=(HostStep,)),
             Port("memory", "the host memory holding the model states (its 'cpu' port)",
                  required=True))
    STATISTICS = (
        StatisticSpec("step_time_ps", "duration of each bucket's optimizer step", "ps", "f64",
                      1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p, kind = self.params, self.type_name()
        self.host = platform(p["platform"])
        self.cores = p["cores"] or self.host.cores_per_socket
        self.scale = 1.0
        self.origin: Optional[AdamOrigin] = None
        self.implementation = ""
        if p["adam_throughput"] > 0 and p["adam_file"]:
            raise ConfigError(f"{name} ({kind}): {param_word(kind, 'adam_throughput')} "
                              f"contradicts {param_word(kind, 'adam_file')}: each sets the "
                              "CPU's Adam rate; give one")
        if p["adam_throughput"] > 0:
            self.rate, self.source = p["adam_throughput"], "adam_throughput param"
        else:
            try:
                profile = load_cpu_adam(p["adam_file"] or DEFAULT_CPU_ADAM)
            except CpuAdamError as exc:
                raise ConfigError(f"{name} ({kind}): {param_word(kind, 'adam_file')}: "
                                  f"{exc}") from None
            # one thread's rate: the step spreads over this element's cores from it
            self.rate = profile.params_per_s_per_core
            self.implementation = profile.implementation
            self.source = f"{profile.implementation} Adam on {profile.machine}, {profile.date}"
            self.scale, note = self._scaling(profile)
            self.source += note
        #: the per-core rate as measured (or given), before it is carried to these cores
        self.measured = self.rate
        self.rate *= self.scale
        self.flows = self.service(FlowNetwork)
        self.own = self.flows.resource(f"{name}.membw", p["memory_bandwidth"]) \
            if p["memory_bandwidth"] > 0 else None
        self.memory_link = self.connected_link("memory", self.refuse_event)
        self.ports = [port for port in self.connected_ports() if port.startswith("gpu")]
        self.links = {port: self.connected_link(port, self._handler(port)) for port in self.ports}
        self.memory: Optional[HostTier] = None
        self.route: Optional[Route] = None
        self.queue: deque[tuple[str, CpuStepRequest]] = deque()
        self.busy = False
        self.manifests: list[ModelStatesManifest] = []
        self.steps: list[tuple[str, int, int]] = []
        #: parameters and host DRAM bytes of the steps asked for (their traffic a parameter)
        self.asked = [0, 0]
        self.stat_step = self.register_statistic("step_time_ps")

    def _scaling(self, profile: CpuAdamProfile) -> tuple[float, str]:
        """The factor that carries the file's one-core rate to one of this platform's cores
        (:meth:`sst_cdma.model.hosts.CpuCore.speed_of`: vector width and clock), and what the
        source says of it: 1 where it was measured on the platform's CPU, or on a CPU the
        platform table does not know (then taken as the platform's)."""
        origin = self.origin = adam_origin(profile.cpu, profile.shipped, self.host,
                                           profile.simd_bits, profile.cpu_mhz)
        if origin.scaling == "unscaled":
            return 1.0, (f" (a CPU the platform table does not know: taken as "
                         f"{self.host.core.name}'s)")
        if origin.factor == 1.0:
            return 1.0, ""
        how = "the vector width and clock its file recorded" \
            if origin.scaling.startswith("recorded") else "vector width and clock"
        return origin.factor, f", scaled x{origin.factor:.3f} to {self.host.core.name} by {how}"

    def _handler(self, port: str) -> Any:
        return lambda req: self._request(port, req)

    def init(self, phase: int) -> None:
        """Collect the GPUs' model-state manifests."""
        for link in self.links.values():
            while (msg := link.recv_untimed()) is not None:
                self.manifests.append(msg)

    def setup(self) -> None:
        """Allocate every GPU's model states in the host memory's pinned pool at time 0."""
        self.memory = self.peer_provider("memory", HostTier)
        for manifest in self.manifests:
            for role, nbytes in manifest.buffers:
                self.memory.allocate(f"{manifest.gpu}:{role}", nbytes, role)
        self._route()

    def step_ps(self, params: int) -> int:
        """Picoseconds a step of ``params`` parameters takes on every core, alone."""
        return math.ceil(params / (self.rate * self.cores) * PS_PER_S)

    def codec_ps(self, req: CpuStepRequest) -> int:
        """Picoseconds every core takes to decompress the request's gradients and compress its
        weights (0 without a CPU codec)."""
        if not req.codec:
            return 0
        return cpu_codec_ps(req.codec, req.dtype, req.decompress_bytes, req.compress_bytes,
                            self.cores)

    def request_alone_ps(self, req: CpuStepRequest) -> int:
        """Picoseconds ``req`` takes alone: its codec work and its step (see
        :meth:`step_alone_ps`)."""
        return self.step_alone_ps(req.params, req.dram_bytes, self.codec_ps(req))

    def step_alone_ps(self, params: int, dram_bytes: int, codec_ps: int = 0) -> int:
        """Picoseconds a step of ``params`` parameters moving ``dram_bytes`` of host DRAM takes
        alone (with ``codec_ps`` of CPU codec work): its compute time, or longer where the
        DRAM cannot feed it (the flow's own arithmetic, so the closed form and the simulation
        agree)."""
        alone = self.step_ps(params) + codec_ps
        if not dram_bytes or alone <= 0:
            return alone
        pairs = [(res.capacity, w) for res, w in self._route().pairs]
        return isolated_duration_ps(dram_bytes, pairs, self._cap(dram_bytes, alone))

    def _route(self) -> Route:
        """The step's flow route over the host DRAM (and the CPU's own memory bandwidth, where
        ``memory_bandwidth`` gives one; built on first use: the planner of policy ``auto``
        asks before setup)."""
        if self.route is None:
            memory = self.peer_provider("memory", HostTier)
            weights = {memory.resource.name: 1.0}
            if self.own is not None:
                weights[self.own.name] = 1.0
            self.route = self.flows.route(weights)
        return self.route

    def host_room(self) -> int:
        """Bytes of the pinned pool one GPU's model states may take (see :class:`HostStep`)."""
        return self.peer_provider("memory", HostTier).capacity // max(1, len(self.ports))

    def gpus_stepped(self) -> int:
        """The GPUs on this CPU's ``gpu%d`` ports (see :class:`HostStep`)."""
        return len(self.ports)

    @staticmethod
    def _cap(dram_bytes: int, duration: int) -> float:
        """The DRAM rate cap that makes a step alone end at its compute time (half a ps early:
        the flow's end rounds up to whole ps)."""
        return dram_bytes / ((duration - 0.5) / PS_PER_S)

    def tier_usage(self, end_ps: int) -> dict[str, Any]:
        """The host memory's pinned-pool figures (see :class:`HostTier`)."""
        if self.memory is None:
            raise ConfigError(f"{self.name}: asked for host memory figures before setup")
        return self.memory.tier_usage(end_ps)

    def _request(self, port: str, req: CpuStepRequest) -> None:
        self.asked[0] += req.params
        self.asked[1] += req.dram_bytes
        self.queue.append((port, req))
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if not self.queue:
            self.busy = False
            return
        self.busy = True
        port, req = self.queue.popleft()
        start = self.sim.now
        duration = self.step_ps(req.params) + self.codec_ps(req)

        def done(_: Any = None) -> None:
            self._step_done(port, req, start)
        if req.dram_bytes and duration > 0:
            cap = self._cap(req.dram_bytes, duration)
            self.flows.launch(float(req.dram_bytes), self._route(), lambda f: done(), cap,
                              f"{self.name} step {req.bucket}")
        else:
            self.schedule_at(start + duration, done)

    def _step_done(self, port: str, req: CpuStepRequest, start: int) -> None:
        now = self.sim.now
        self.steps.append((req.bucket, start, now))
        self.stat_step.add_data(now - start)
        self.links[port].send(CpuStepDone(req, start, now))
        self._next()

    def scaling(self) -> AdamScaling:
        """This CPU's Adam on its DRAM: the per-core rate, the factor it was scaled by, the
        cores, the host DRAM bandwidth (the CPU's own cap where lower) and the traffic a
        parameter of the steps asked for (none asked: no traffic, not DRAM-bound)."""
        memory = self.peer_provider("memory", HostTier)
        dram = memory.resource.capacity
        if self.own is not None:
            dram = min(dram, self.own.capacity)
        per_param = self.asked[1] / self.asked[0] if self.asked[0] else 0.0
        return AdamScaling(self.rate, self.scale, self.cores, per_param, dram)

    def finish(self) -> None:
        """Publish the CPU's steps, its platform and its Adam rate on its DRAM."""
        adam = self.scaling()
        self.publish(HostCPUResult(self.name, [m.gpu for m in self.manifests], self.cores,
                                   self.rate, self.source, self.host.name,
                                   self.host.describe(), self.scale, adam.dram, adam.rate,
                                   adam.dram_bound, list(self.steps), self.implementation,
                                   *self._origin_fields()))

    def _origin_fields(self) -> tuple[str, str, bool]:
        """The measurement's CPU, how its rate was scaled and whether that CPU is another
        than the platform's (a given rate: none, ``given``, False)."""
        if self.origin is None:
            return "", "given", False
        return self.origin.cpu, self.origin.scaling, self.origin.other_cpu
