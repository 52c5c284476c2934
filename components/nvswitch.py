"""The NVLink/NVSwitch fabric of a data-parallel node and the gradient all-reduce it carries:
DDP-style gradient buckets, each all-reduced by the algorithm in the fabric's ``collective``
slot (a ring by default: components/ring_allreduce.py), as flows that share each GPU's HBM
bandwidth with its kernels and its cDMA engine (docs/model.md, "Data-parallel all-reduce")."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import (MAX_EXACT_COUNT, MAX_EXACT_COUNT_WHY, MIN_FRACTION,
                              MIN_FRACTION_WHY, Component, Param, Port, StatisticSpec,
                              SubComponentSlot)
from sst_cdma.engine.flows import FlowNetwork, Route, isolated_duration_ps
from sst_cdma.engine.records import Record, record
from sst_cdma.model.links import nvlink_bandwidth

from .collective import CollectiveAlgorithm
from .messages import AllReduceDone, GradientManifest, GradientReady


@record
class AllReduceResult(Record):
    """What a fabric measured over the iteration: the GPUs of its ring (in ring order), its
    per-direction bandwidth and per-step latency, the buckets (raw bytes, start, end and the
    time the bucket takes alone on an idle node, in ps) and when the last weight gradient of
    any GPU was ready."""

    system: str
    gpus: list[str]
    bandwidth_Bps: float
    step_latency_ps: int
    bucket_cap_bytes: int
    gradient_bytes: int
    bytes_per_gpu: float
    last_gradient_ps: int
    buckets: list[tuple[int, int, int, int]] = field(default_factory=list, repr=False)

    @property
    def time_ps(self) -> int:
        """Time a bucket was being reduced (buckets run one after another)."""
        return sum(end - start for _, start, end, _ in self.buckets)

    @property
    def idle_ps(self) -> int:
        """What the same buckets take, each alone on an idle node."""
        return sum(idle for *_, idle in self.buckets)

    @property
    def overlap_ps(self) -> int:
        """All-reduce time before the last weight gradient was ready: hidden behind the
        backward pass."""
        return sum(max(0, min(end, self.last_gradient_ps) - start)
                   for _, start, end, _ in self.buckets)

    def busy(self) -> list[tuple[int, int]]:
        """The (start, end) intervals the all-reduce ran."""
        return [(start, end) for _, start, end, _ in self.buckets]


class NVSwitch(Component):
    """NVSwitch fabric: every GPU has ``nvlink_links`` NVLink bricks to it, and the GPUs on
    its ports reduce their weight gradients in DDP buckets with the all-reduce algorithm in
    the ``collective`` slot."""

    PARAMS = (
        Param("nvlink_links", "int", 18, "NVLink bricks from each GPU to the switches (H100 "
              "SXM5: 18)", minimum=1, maximum=MAX_EXACT_COUNT,
              why_maximum=MAX_EXACT_COUNT_WHY),
        Param("nvlink_rate", "bandwidth", "25GB/s", "per-brick, per-direction signalling rate "
              "(NVLink4: 25GB/s)", minimum=0, exclusive_minimum=True),
        Param("nvlink_efficiency", "float", 0.9, "NVLink payload efficiency (headers), as the "
              "host-link NVLink preset's", minimum=MIN_FRACTION, maximum=1,
              why_minimum=MIN_FRACTION_WHY),
        Param("step_latency", "time", "2us", "fixed time of each step of the all-reduce (the "
              "ring's 2(N-1)) (an assumption: docs/model.md)", minimum=0),
        Param("bucket", "bytes", "25MiB", "gradient bucket size: layers' weight gradients "
              "join a bucket in reverse layer order until it holds at least this much "
              "(PyTorch DDP's bucket_cap_mb default)", minimum=0, exclusive_minimum=True),
        Param("first_bucket", "bytes", "1MiB", "size of the first bucket, the first gradients "
              "ready (DDP's default, dist._DEFAULT_FIRST_BUCKET_BYTES; DDP given a bucket_cap_mb "
              "uses that for the first too); 0: 'bucket'", minimum=0),
    )
    PORTS = (Port("gpu%d", "a GPU's NVLink port; the ring visits the GPUs in port order"),)
    SLOTS = (SubComponentSlot("collective", "the all-reduce algorithm a bucket crosses the "
                              "fabric with", accepts=CollectiveAlgorithm,
                              default="cdma.RingAllReduce"),)
    STATISTICS = (
        StatisticSpec("bucket_time_ps", "time of each bucket's all-reduce", "ps", "f64", 1),
        StatisticSpec("bucket_bytes", "gradient bytes of each bucket", "B", "u64", 1),
        StatisticSpec("sent_bytes", "bytes each GPU sent over NVLink", "B", "f64", 1),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        ports = sorted((int(port[3:]), port) for port in self.connected_ports())
        if len(ports) < 2:
            raise ValueError(f"{name} ({self.type_name()}): data parallel needs at least 2 GPUs "
                             f"on its gpuN ports, {len(ports)} connected")
        self.ports = [port for _, port in ports]
        self.collective: CollectiveAlgorithm = self.subcomponent("collective")  # type: ignore[assignment]
        self.links = [self.connected_link(port, self._gradient_ready) for port in self.ports]
        self.bandwidth = nvlink_bandwidth(p["nvlink_links"], p["nvlink_rate"],
                                          p["nvlink_efficiency"])
        flows = self.flows = self.service(FlowNetwork)
        self.tx = [flows.resource(f"{name}.{port}.tx", self.bandwidth) for port in self.ports]
        self.rx = [flows.resource(f"{name}.{port}.rx", self.bandwidth) for port in self.ports]
        n = len(self.ports)
        self.registered: list[Optional[GradientManifest]] = [None] * n
        self.bucket_of: dict[str, int] = {}   # layer -> its bucket
        self.bucket_bytes: list[int] = []
        self.missing: list[int] = []          # per bucket: gradients not yet ready, all GPUs
        self.next_bucket = 0
        self.running = False
        self.flows_left = 0
        self.routes: list[Route] = []
        self.last_gradient = 0
        self.done: list[tuple[int, int, int, int]] = []
        self.stat_time = self.register_statistic("bucket_time_ps")
        self.stat_bytes = self.register_statistic("bucket_bytes")
        self.stat_sent = self.register_statistic("sent_bytes")

    # -- init: each GPU's gradients and memory; setup: buckets and routes ---------------------
    def init(self, phase: int) -> None:
        """Collect each GPU's registration: its name, system, HBM resource and weight
        gradients in the order its backward pass makes them ready."""
        for i, link in enumerate(self.links):
            while (msg := link.recv_untimed()) is not None:
                self.registered[i] = msg

    def setup(self) -> None:
        """Check every GPU registered the same gradients, cut them into buckets and resolve
        each GPU's route."""
        registered: list[GradientManifest] = []
        for port, reg in zip(self.ports, self.registered):
            if reg is None:
                raise ConfigError(f"{self.name}: the GPU on port {port} is not data parallel "
                                  "(set its 'data_parallel' param)")
            registered.append(reg)
        first = registered[0]
        for port, reg in zip(self.ports[1:], registered[1:]):
            if reg.gradients != first.gradients:
                raise ConfigError(f"{self.name}: the GPU on port {port} ({reg.gpu}) has other "
                                  f"weight gradients than {first.gpu}: data-parallel replicas "
                                  "train the same model")
        cap = self.params["first_bucket"] or self.params["bucket"]
        size = 0
        for layer, nbytes in first.gradients:
            if size == 0:
                self.bucket_bytes.append(0)
            self.bucket_of[layer] = len(self.bucket_bytes) - 1
            self.bucket_bytes[-1] += nbytes
            size += nbytes
            if size >= cap:  # DDP closes a bucket once it holds its limit or more
                size = 0
                cap = self.params["bucket"]
        n = len(self.ports)
        per_bucket = [0] * len(self.bucket_bytes)
        for layer, _ in first.gradients:
            per_bucket[self.bucket_of[layer]] += 1
        self.missing = [count * n for count in per_bucket]
        # one flow per GPU: what it sends on its link out, receives on its link in (as much)
        # and reads and writes in its own HBM; GPUs share no resource, so a GPU's contention
        # never couples the flow solution across the ring (linear cost in the GPU count)
        for i in range(n):
            self.routes.append(self.flows.route(
                {self.tx[i].name: 1.0, self.rx[i].name: 1.0,
                 registered[i].hbm_resource: self.collective.hbm_per_byte_sent()},
                f"{self.name} {i}"))
        if not self.bucket_bytes:
            self.schedule_at(0, lambda _: self._all_done())

    # -- the ring ---------------------------------------------------------------------------
    def _gradient_ready(self, msg: GradientReady) -> None:
        b = self.bucket_of.get(msg.layer)
        if b is None:
            raise ConfigError(f"{self.name}: a GPU made the weight gradient of {msg.layer!r} "
                              "ready, which it did not register")
        self.last_gradient = self.sim.now
        self.missing[b] -= 1
        self._start_next()

    def _start_next(self) -> None:
        b = self.next_bucket
        if self.running or b >= len(self.bucket_bytes) or self.missing[b]:
            return
        self.running = True
        start = self.sim.now
        self.schedule_at(start + self._latency_ps(), self._transfer, (b, start))

    def _latency_ps(self) -> int:
        """The all-reduce's latency-bound steps, at the fabric's step latency each."""
        return self.collective.steps(len(self.ports)) * self.params["step_latency"]

    def ring_bytes(self, nbytes: int) -> float:
        """Bytes each GPU sends (and receives) to all-reduce ``nbytes`` (the ring: 2(N-1)
        steps of a 1/N chunk)."""
        return self.collective.bytes_per_gpu(nbytes, len(self.ports))

    def _transfer(self, job: tuple[int, int]) -> None:
        b, start = job
        amount = self.ring_bytes(self.bucket_bytes[b])
        self.flows_left = len(self.routes)
        for route in self.routes:
            self.flows.launch(amount, route, lambda f: self._gpu_done(b, start),
                              label=f"allreduce bucket {b}")

    def idle_ps(self, nbytes: int) -> int:
        """A bucket of ``nbytes`` alone on an idle node: the step latencies and the bytes each
        GPU sends at the rate its most loaded resource allows every GPU at once (NVLink, or
        HBM carrying a GPU's send and receive)."""
        load: dict[str, list[float]] = {}
        for route in self.routes:
            for res, w in route.pairs:
                load.setdefault(res.name, [res.capacity, 0.0])[1] += w
        return self._latency_ps() + \
            isolated_duration_ps(self.ring_bytes(nbytes), [tuple(v) for v in load.values()])  # type: ignore[misc]

    def _gpu_done(self, b: int, start: int) -> None:
        self.flows_left -= 1
        if self.flows_left:
            return
        now = self.sim.now
        nbytes = self.bucket_bytes[b]
        self.done.append((nbytes, start, now, self.idle_ps(nbytes)))
        self.stat_time.add_data(now - start)
        self.stat_bytes.add_data(nbytes)
        self.running = False
        self.next_bucket += 1
        if self.next_bucket == len(self.bucket_bytes):
            self._all_done()
        else:
            self._start_next()

    def _all_done(self) -> None:
        for link in self.links:
            link.send(AllReduceDone())

    def finish(self) -> None:
        """Record the bytes each GPU sent and publish the result record."""
        first = self.registered[0] or GradientManifest("", "main", "", ())
        total = sum(nbytes for nbytes, *_ in self.done)
        for _ in self.ports:
            self.stat_sent.add_data(self.ring_bytes(total))
        self.publish(AllReduceResult(
            system=first.system,
            gpus=[reg.gpu if reg else "" for reg in self.registered],
            bandwidth_Bps=self.bandwidth, step_latency_ps=self.params["step_latency"],
            bucket_cap_bytes=self.params["bucket"],
            gradient_bytes=sum(nbytes for _, nbytes in first.gradients),
            bytes_per_gpu=self.ring_bytes(total), last_gradient_ps=self.last_gradient,
            buckets=list(self.done)))


def stretch_beside(copies: list[tuple[int, int, int]], busy: list[tuple[int, int]]) -> int:
    """Of the time the copies (start, end, ps lost at the GPU's HBM) lost at the GPU's HBM,
    the share of each copy's time that it ran beside the all-reduce (``busy`` intervals)."""
    total = 0.0
    for start, end, stretch in copies:
        length = end - start
        if stretch <= 0 or length <= 0:
            continue
        beside = sum(max(0, min(end, b) - max(start, a)) for a, b in busy)
        total += stretch * beside / length
    return int(round(total))


def allreduce_fields(main: AllReduceResult, oracle: Optional[AllReduceResult],
                     copies: list[list[tuple[int, int, int]]]) -> dict[str, Any]:
    """``summary.json``'s ``allreduce``: the main system's all-reduce, how much its buckets
    were stretched beyond their idle time, the part the offloads caused (against the oracle,
    the same all-reduce without offloads) and, the other way, how much the copies of each GPU
    (``copies``: (start, end, ps lost at the HBM) per engine) were stretched beside it."""
    ps = 1e-12
    contention = main.time_ps - main.idle_ps
    out: dict[str, Any] = {
        "gpus": len(main.gpus), "buckets": len(main.buckets),
        "bucket_cap_bytes": main.bucket_cap_bytes, "gradient_bytes": main.gradient_bytes,
        "bytes_per_gpu": int(round(main.bytes_per_gpu)), "bandwidth_Bps": main.bandwidth_Bps,
        "step_latency_s": main.step_latency_ps * ps,
        "time_s": main.time_ps * ps, "idle_time_s": main.idle_ps * ps,
        "contention_s": contention * ps, "overlap_s": main.overlap_ps * ps,
        "exposed_s": (main.time_ps - main.overlap_ps) * ps,
    }
    if oracle is not None:
        out["slowed_by_offloads_s"] = (contention - (oracle.time_ps - oracle.idle_ps)) * ps
    busy = main.busy()
    stretches = [stretch_beside(c, busy) for c in copies]
    out["offloads_slowed_s"] = (max(stretches) if stretches else 0) * ps
    return out


def allreduce_line(a: dict[str, Any]) -> str:
    """The console line of the all-reduce."""
    ms = 1e3
    text = (f"{a['buckets']} bucket(s), {a['bytes_per_gpu'] / 1e6:.1f} MB per GPU, "
            f"{a['time_s'] * ms:.3f} ms ({a['idle_time_s'] * ms:.3f} ms idle), "
            f"{a['overlap_s'] * ms:.3f} ms beside backward, {a['exposed_s'] * ms:.3f} ms exposed")
    if "slowed_by_offloads_s" in a:
        text += f"; offloads slowed it {a['slowed_by_offloads_s'] * ms:.3f} ms"
    text += f", it slowed copies {a['offloads_slowed_s'] * ms:.3f} ms"
    return f"{'all-reduce:':<16} {text}"
