"""``cdma.HostCPU``: the host's CPU running the optimizer step of model states kept in pinned
host memory (ZeRO-Offload's CPU Adam). A step of ``P`` parameters takes ``P / (Adam throughput
per core x cores)``; its DRAM traffic is a flow on the host memory's DRAM resource (and the
CPU's own memory bandwidth) capped at that rate, so it competes with the offload copies for
host DRAM bandwidth and slows when they saturate it. Steps run one at a time, in the order
the GPUs ask (every core on one bucket, as DeepSpeed's CPU Adam spreads a parameter group
over its threads)."""
from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sst_cdma.config import ConfigError
from sst_cdma.element import Component, Param, Port, StatisticSpec
from sst_cdma.flows import PS_PER_S, FlowNetwork

from .interfaces import HostStep, HostTier
from .messages import CpuStepDone, CpuStepRequest, ModelStatesManifest

__all__ = ["HostCPU", "HostCPUResult", "STANDIN_ADAM_FILE", "ADAM_FORMAT", "read_adam_file"]

#: the CPU Adam measurement the element reads when its ``adam_file`` is '' (a stand-in until
#: ``sst-cdma time-cpu-adam`` ships its default; docs/model.md)
STANDIN_ADAM_FILE = Path(__file__).resolve().parents[1] / "sst_cdma" / "model" / \
    "cpu_adam_standin.json"
#: the ``format`` a CPU Adam file must declare
ADAM_FORMAT = "sst-cdma cpu-adam standin 1"


def read_adam_file(path: str | Path) -> dict[str, Any]:
    """The measurement in CPU Adam file ``path``: its ``params_per_s_per_core`` (> 0) with
    the machine and date; a ConfigError naming the file and what is wrong otherwise."""
    where = f"adam_file (--cpu-adam-file) {str(path)!r}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != ADAM_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ConfigError(f"{where}: a CPU Adam measurement declares format {ADAM_FORMAT!r}, "
                          f"this file {found!r}")
    rate = data.get("params_per_s_per_core")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
        raise ConfigError(f"{where}: 'params_per_s_per_core' must be a positive number, got "
                          f"{rate!r}")
    return data


@dataclass
class HostCPUResult:
    """What a host CPU published at the end of the run: the GPUs it stepped for, its Adam
    throughput and where it came from, and every step (bucket, start, end, ps)."""

    cpu: str
    gpus: list[str]
    cores: int
    params_per_s_per_core: float
    adam_source: str
    steps: list[tuple[str, int, int]] = field(default_factory=list, repr=False)

    @property
    def busy_ps(self) -> int:
        """Time the CPU spent stepping."""
        return sum(end - start for _, start, end in self.steps)


class HostCPU(Component):
    """The host CPU stepping the optimizer of model states held in pinned host memory."""

    PARAMS = (
        Param("cores", "int", 32, "cores the optimizer step runs on", minimum=1),
        Param("adam_throughput", "float", 0.0, "CPU Adam throughput per core in parameters "
              "per second (0: the adam_file's measurement)", minimum=0),
        Param("adam_file", "str", "", "CPU Adam measurement (JSON; '': the shipped one, "
              "docs/model.md)"),
        Param("memory_bandwidth", "bandwidth", "76.8GB/s", "DRAM bandwidth the CPU's cores "
              "can draw (its step's traffic also loads the host memory's DRAM resource)",
              minimum=0, exclusive_minimum=True),
    )
    PORTS = (Port("gpu%d", "GPUs whose optimizer step this CPU runs (their 'cpu' port)",
                  provides=(HostStep,)),
             Port("memory", "the host memory holding the model states (its 'cpu' port)",
                  required=True))
    STATISTICS = (
        StatisticSpec("step_time_ps", "duration of each bucket's optimizer step", "ps", "f64",
                      1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        if p["adam_throughput"] > 0:
            self.rate, self.source = p["adam_throughput"], "adam_throughput param"
        else:
            path = p["adam_file"] or STANDIN_ADAM_FILE
            try:
                data = read_adam_file(path)
            except ConfigError as exc:
                raise ConfigError(f"{name} (cdma.HostCPU): {exc}") from None
            self.rate = float(data["params_per_s_per_core"])
            self.source = f"{Path(path).name} ({data.get('machine', '?')}, " \
                          f"{data.get('date', '?')})"
        self.flows = self.service(FlowNetwork)
        self.own = self.flows.resource(f"{name}.membw", p["memory_bandwidth"])
        self.memory_link = self.configure_link("memory", self.refuse_event)
        self.ports = [port for port in self.connected_ports() if port.startswith("gpu")]
        self.links = {port: self.configure_link(port, self._handler(port)) for port in self.ports}
        self.memory: Optional[HostTier] = None
        self.queue: deque[tuple[str, CpuStepRequest]] = deque()
        self.busy = False
        self.manifests: list[ModelStatesManifest] = []
        self.steps: list[tuple[str, int, int]] = []
        self.stat_step = self.register_statistic("step_time_ps")

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
        self.route = self.flows.route({self.memory.resource.name: 1.0, self.own.name: 1.0})

    def step_ps(self, params: int) -> int:
        """Picoseconds a step of ``params`` parameters takes on every core, alone."""
        return math.ceil(params / (self.rate * self.params["cores"]) * PS_PER_S)

    def tier_usage(self, end_ps: int) -> dict[str, Any]:
        """The host memory's pinned-pool figures (see :class:`HostTier`)."""
        if self.memory is None:
            raise ConfigError(f"{self.name}: asked for host memory figures before setup")
        return self.memory.tier_usage(end_ps)

    def _request(self, port: str, req: CpuStepRequest) -> None:
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
        duration = self.step_ps(req.params)

        def done(_: Any = None) -> None:
            self._step_done(port, req, start)
        if req.dram_bytes and duration > 0:
            # capped so that alone it ends at its compute time (half a ps early: the flow's
            # end rounds up to whole ps)
            cap = req.dram_bytes / ((duration - 0.5) / PS_PER_S)
            self.flows.launch(float(req.dram_bytes), self.route, lambda f: done(), cap,
                              f"{self.name} step {req.bucket}")
        else:
            self.schedule_at(start + duration, done)

    def _step_done(self, port: str, req: CpuStepRequest, start: int) -> None:
        now = self.sim.now
        self.steps.append((req.bucket, start, now))
        self.stat_step.add_data(now - start)
        self.links[port].send(CpuStepDone(req, start, now))
        self._next()

    def finish(self) -> None:
        """Publish the CPU's steps."""
        self.publish(HostCPUResult(self.name, [m.gpu for m in self.manifests],
                                   self.params["cores"], self.rate, self.source,
                                   list(self.steps)))
