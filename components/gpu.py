"""GPU cores executing one training iteration's workload stream with vDNN's rules: kernels on a
compute stream, offloads and prefetches on a copy stream, synchronization at layer boundaries."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sst_cdma.config import ConfigError
from sst_cdma.element import Component, Param, Port, StatisticSpec
from sst_cdma.flows import FlowNetwork, PS_PER_S
from sst_cdma.interfaces import MemoryPool
from sst_cdma.model.gpus import GPUS

from .messages import AllReduceDone, GradientReady, TransferDone, TransferRequest

#: the systems a GPU can belong to: the one studied and its two baselines
SYSTEMS = ("main", "oracle", "vdnn")


def _check_policy(value: str) -> None:
    """The policy param's check: a vDNN policy, ``recompute``, ``auto``, ``plan`` or terms."""
    from workloads.policies import check_policy

    check_policy(value)


@dataclass
class GPUResult:
    """What a GPU measured over its iteration, published at the end of the run. Times are in
    ps, sizes in bytes; ``layers`` and ``timeline`` are the per-layer table and the
    (kind, label, start, end) events of the Chrome trace."""

    system: str
    preset: str
    gpu_name: str
    kernel_times: str
    network: str
    batch: int
    dtype: str
    policy: str
    optimizer: str
    completed: bool
    iteration_time_ps: int
    forward_time_ps: int
    backward_time_ps: int
    update_time_ps: int
    compute_time_ps: int
    stall_time_ps: int
    offloaded_bytes: int
    wire_bytes: int
    prefetched_bytes: int
    prefetch_wire_bytes: int
    peak_gpu_memory_bytes: int
    gpu_memory_capacity_bytes: int
    fits_in_memory: bool
    out_of_memory: Optional[dict[str, Any]]
    allocation: str
    average_gpu_memory_bytes: int
    memory_curve: list[tuple[int, int]] = field(repr=False)
    layers: list[dict[str, Any]] = field(repr=False)
    timeline: list[tuple[str, str, int, int]] = field(repr=False)
    #: activation tensor -> keep, offload, compress, recompute or free (what the stream does)
    choices: dict[str, str] = field(default_factory=dict, repr=False)
    #: bytes of the tensors of each choice
    choice_bytes: dict[str, int] = field(default_factory=dict)
    #: time the backward pass spent re-running forward kernels
    recompute_time_ps: int = 0
    #: policy auto: the planner's predicted iteration time, modelled and rendered peaks
    planner: dict[str, Any] = field(default_factory=dict)


def roofline_ps(flops: int, dram: int, peak_flops: float, efficiency: float,
                dram_bandwidth: float, overhead_ps: int = 0) -> int:
    """Kernel time: the slower of compute (FLOPs at peak x efficiency) and DRAM traffic at the
    achievable bandwidth, plus a fixed launch overhead."""
    t = max(flops / (peak_flops * efficiency), dram / dram_bandwidth if dram else 0.0)
    return math.ceil(t * PS_PER_S) + overhead_ps


class GPU(Component):
    """GPU cores running one training iteration of a workload stream (vDNN semantics)."""

    PARAMS = (
        Param("network", "str", "", "network to render the stream for (if no 'workload')"),
        Param("batch", "int", 64, "batch size (a transformer's micro-batch)", minimum=1),
        Param("seq_len", "int", 0, "sequence length of a transformer network (0: its "
              "definition's)", minimum=0),
        Param("attention", "str", "", "attention form of a transformer network: naive "
              "(scores, softmax and context layers) or fused (FlashAttention style); '': its "
              "definition's", choices=("", "naive", "fused")),
        Param("dtype", "str", "float32", "element type", choices=("float32", "float16",
                                                                   "bfloat16")),
        Param("policy", "str", "conv", "memory policy: a vDNN offload policy (none, all, conv), "
              "recompute, auto (the planner), plan (the 'plan' file) or CHOICE-GROUP terms "
              "joined by '+' (recompute-attn+offload-ffn; docs/workloads.md)",
              check=_check_policy),
        Param("plan", "str", "", "per-tensor plan: a JSON file mapping activation tensors to "
              "keep, offload, compress or recompute (sets policy 'plan')"),
        Param("workload", "str", "", "a workload stream file (overrides network/batch/...)"),
        Param("optimizer", "str", "none", "optimizer step ending the iteration (none: "
              "forward and backward only)", choices=("none", "sgd", "momentum", "adam")),
        Param("workspace", "bytes", "0B", "cuDNN workspace each convolution kernel gets under "
              "the roofline (allocated for the kernel's duration); the fitted model sizes "
              "each kernel's own workspace instead (see workspace_limit)", minimum=0),
        Param("allocation", "str", "liveness", "GPU memory allocation: liveness (a buffer from "
              "its birth to its death) or network-wide (vDNN's baseline: every buffer but the "
              "offloaded ones for the whole iteration)", choices=("liveness", "network-wide")),
        Param("layer_times", "str", "", "measured kernel times per layer and pass (a "
              "layer-times JSON file, e.g. from 'sst-cdma time-layers'); default: the kernel "
              "model"),
        Param("kernel_model", "str", "fitted", "how kernels are priced: 'fitted' (the "
              "algorithm-aware model fitted to measured cuDNN kernels; docs/kernel_model.md) "
              "or 'roofline' (peak_flops x compute_efficiency against DRAM bandwidth)",
              choices=("fitted", "roofline")),
        Param("gpu_preset", "str", "pascal", "GPU preset whose SM count, DRAM bandwidth and "
              "fitted kernel parameters the kernel model uses (peak_flops is this element's)",
              choices=tuple(sorted(GPUS))),
        Param("sms", "int", 0, "streaming multiprocessors (0: the preset's)", minimum=0),
        Param("workspace_limit", "str", "", "largest cuDNN workspace one convolution kernel may "
              "take when the fitted model picks its algorithm, e.g. 64MiB (default: no limit)"),
        Param("peak_flops", "float", 0.0, "peak FLOP/s (fp32; 0: the GPU preset's)",
              minimum=0),
        Param("compute_efficiency", "float", 0.6, "fraction of peak FLOP/s kernels reach",
              minimum=0, exclusive_minimum=True, maximum=1),
        Param("kernel_overhead", "time", "0ns", "fixed time added to every kernel (launch)",
              minimum=0),
        Param("hbm_contention", "bool", "true", "kernels' DRAM traffic competes with the DMA "
              "engine for HBM bandwidth (false: kernels are timers)"),
        Param("system", "str", "main", "the system this GPU belongs to: main (the system "
              "studied), oracle (nothing offloaded, unlimited memory) or vdnn (offload without "
              "compression); reports compare main against the others", choices=SYSTEMS),
        Param("write_stream", "bool", "true", "write the rendered stream into the output "
              "directory"),
        Param("data_parallel", "bool", "false", "one replica of data-parallel training: each "
              "weight gradient goes to the all-reduce on port 'nvlink' as the backward pass "
              "makes it, and the iteration (or its optimizer step) waits for the last bucket"),
    )
    PORTS = (Port("hbm", "the GPU's DRAM", required=True),
             Port("dma", "the DMA/cDMA engine (needed unless policy is none)"),
             Port("nvlink", "the NVLink fabric reducing gradients (needed with data_parallel)"))
    STATISTICS = (
        StatisticSpec("iteration_time_ps", "time of one training iteration", "ps", "f64", 1),
        StatisticSpec("kernel_time_ps", "duration of each kernel", "ps", "f64", 1),
        StatisticSpec("stall_time_ps", "time the compute stream waited for copies", "ps", "f64",
                      1),
        StatisticSpec("layer_time_ps", "time between layer boundaries", "ps", "f64", 2),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        #: peak FLOP/s: the param, or the preset's
        self.peak_flops: float = p["peak_flops"] or GPUS[p["gpu_preset"]].peak_flops
        self.kernel_model = None
        #: the fitted launch, added to the kernels the GPU prices itself (memory-bound ones)
        self.launch_ps = 0
        if p["kernel_model"] == "fitted" and not p["workload"]:
            self.kernel_model = self._fitted_model()
            self.launch_ps = math.ceil(self.kernel_model.params.launch_s * PS_PER_S)
        #: the iteration's workload stream and its ops, rendered at init once the GPU knows
        #: its memory (the fitted model picks algorithms whose workspace fits)
        self.stream: Any = None
        self.ops: list[Any] = []
        self.op_layer: list[str] = []
        #: where the kernel times come from, as the reports say it
        self.kernel_times = self._kernel_times_source()
        self.hbm_link = self.configure_link("hbm", self.refuse_event)
        self.dma = self.configure_link("dma", self._transfer_done)
        self.nvlink = self.configure_link("nvlink", self._reduced)
        if self.params["data_parallel"] and self.nvlink is None:
            raise ConfigError(f"{name}: 'data_parallel' needs port 'nvlink' wired to an NVLink "
                              "fabric (cdma.NVSwitch)")
        #: weight gradients (stream tensor -> layer) sent to the all-reduce when written
        self.wgrads: dict[str, str] = {}
        self.kernel_op: Any = None
        self.reduced = not self.params["data_parallel"]
        self.flows = self.service(FlowNetwork)
        self.hbm: Optional[MemoryPool] = None  # the peer on port 'hbm', from init on
        self.hbm_resource = ""
        self.pc = 0
        self.compute_q: deque = deque()
        self.copy_q: deque = deque()
        self.compute_busy = False
        self.copy_busy = False
        self.blocked: Optional[str] = None
        self.prefetched: set[str] = set()
        self.backward_at: Optional[int] = None
        self.update_at: Optional[int] = None
        self.finished_at: Optional[int] = None
        self.kernel_total = 0
        self.recompute_total = 0
        self.planner: dict[str, Any] = {}
        self.offloaded_raw = 0
        self.offloaded_wire = 0
        self.prefetched_raw = 0
        self.prefetched_wire = 0
        self.layer_start = 0
        self.layers: list[dict[str, Any]] = []
        self.timeline: list[tuple[str, str, int, int]] = []
        self._layer_kernel = 0
        self._layer_algorithms: list[str] = []
        self.register_as_primary()
        self.stat_iter = self.register_statistic("iteration_time_ps")
        self.stat_kernel = self.register_statistic("kernel_time_ps")
        self.stat_stall = self.register_statistic("stall_time_ps")
        self.stat_layer = self.register_statistic("layer_time_ps")

    def _fitted_model(self) -> Any:
        """The fitted kernel model of this GPU: its preset's family and SMs, this element's
        peak FLOP/s."""
        from dataclasses import replace

        from sst_cdma.model.fitted import kernel_model_for
        from sst_cdma.model.kernel_model import ModelError

        p = self.params
        preset = p["gpu_preset"]
        spec = replace(GPUS[preset], peak_flops=self.peak_flops,
                       sms=p["sms"] or GPUS[preset].sms)
        try:
            return kernel_model_for(preset, spec)
        except ModelError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def _kernel_times_source(self) -> str:
        from sst_cdma.model.kernel_model import ModelError
        from workloads.layer_times import kernel_times_source

        p = self.params
        if p["workload"]:
            return f"workload stream {p['workload']} (its time= keys, else roofline)"
        try:
            return kernel_times_source(p["kernel_model"], p["gpu_preset"], p["layer_times"],
                                       p["dtype"])
        except ModelError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def _workspace_limit(self) -> Optional[int]:
        from sst_cdma.units import UnitError, parse_bytes

        text = self.params["workspace_limit"]
        if not text:
            return None
        try:
            return parse_bytes(text)
        except UnitError as exc:
            raise ValueError(f"{self.name}: param 'workspace_limit': {exc}") from None

    # -- wiring ------------------------------------------------------------------------------
    def _render(self, memory_capacity: Optional[int]) -> None:
        """Read or render the iteration's workload stream (a rendered one with algorithms
        chosen for ``memory_capacity`` bytes of GPU memory, None: unlimited), and note which
        layer each op belongs to."""
        from workloads import WorkloadError
        from workloads.errors import not_utf8
        from workloads.render import iteration_stream, stream_text
        from workloads.stream import StreamError, parse_stream

        p = self.params
        name = self.name
        try:
            if p["workload"]:
                if p["layer_times"]:
                    raise ConfigError(f"{name}: 'layer_times' applies to a rendered 'network'; "
                                      "a 'workload' stream carries its own time= keys")
                if p["optimizer"] != "none" or p["workspace"]:
                    raise ConfigError(f"{name}: 'optimizer' and 'workspace' apply to a rendered "
                                      "'network'; a 'workload' stream declares its own")
                if p["allocation"] != "liveness":
                    raise ConfigError(f"{name}: 'allocation' applies to a rendered 'network'; a "
                                      "'workload' stream's alloc and free ops are its own")
                if p["seq_len"] or p["attention"]:
                    raise ConfigError(f"{name}: 'seq_len' and 'attention' apply to a rendered "
                                      "transformer 'network'; a 'workload' stream has its shapes")
                path = Path(p["workload"])
                try:
                    text = path.read_text(encoding="utf-8")
                except UnicodeDecodeError as exc:
                    raise WorkloadError(not_utf8(exc), file=str(path)) from None
                self.stream = parse_stream(text, str(path))
            else:
                if not p["network"]:
                    raise ConfigError(f"{name}: give a 'network' or a 'workload' stream")
                policy, choices = self._choices(memory_capacity)
                self.stream = iteration_stream(p["network"], p["batch"], p["dtype"],
                                               policy, p["layer_times"],
                                               p["optimizer"], p["workspace"],
                                               p["allocation"], self.kernel_model,
                                               self._workspace_limit(), memory_capacity,
                                               choices, seq_len=p["seq_len"],
                                               attention=p["attention"])
                out = self.simulation.output_directory
                if out is not None and p["write_stream"]:
                    (out / f"{name}.stream").write_text(stream_text(self.stream),
                                                        encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{name}: cannot read workload: {exc}") from None
        except (StreamError, WorkloadError, ValueError) as exc:
            raise ConfigError(f"{name}: {exc}") from None
        self.ops = self.stream.ops
        if self.dma is None and any(op.op in ("offload", "prefetch") for op in self.ops):
            raise ConfigError(f"{name}: the workload moves tensors but port 'dma' is not "
                              "connected")
        # the layer each op belongs to: the next compute/sync at or after it
        self.op_layer = [""] * len(self.ops)
        upcoming = ""
        for i in range(len(self.ops) - 1, -1, -1):
            if self.ops[i].op in ("compute", "sync"):
                upcoming = self.ops[i].name
            self.op_layer[i] = upcoming

    def _choices(self, memory_capacity: Optional[int]) -> tuple[str, Any]:
        """The policy to render and its per-tensor choices (``((tensor, choice), ...)``, None
        for the vDNN and term policies): a plan file's, or the planner's for ``auto``."""
        from workloads import load_network
        from workloads.policies import load_plan_file

        p = self.params
        if p["plan"]:
            if p["policy"] not in ("conv", "plan"):
                raise ConfigError(f"'plan' sets the policy; it contradicts policy "
                                  f"{p['policy']!r}")
            chosen = load_plan_file(p["plan"], load_network(p["network"], p["seq_len"], p["attention"]), p["batch"],
                                    p["dtype"])
            return "plan", tuple(sorted(chosen.items()))
        if p["policy"] == "plan":
            raise ConfigError("policy 'plan' needs a 'plan' file")
        if p["policy"] != "auto":
            return p["policy"], None
        if p["allocation"] != "liveness":
            raise ConfigError(f"policy auto plans liveness allocation, not "
                              f"{p['allocation']!r}")
        if memory_capacity is None:  # unlimited memory: everything stays
            return "auto", ()
        return "auto", tuple(sorted(self._auto_plan(memory_capacity).items()))

    def _auto_plan(self, capacity: int) -> dict[str, str]:
        """Run the planner for this GPU's memory, kernels and engine."""
        from sst_cdma.interfaces import TransferCosts
        from workloads import load_network
        from workloads.render import plan_auto

        p = self.params
        dram_bw = self.flows.resources[self.hbm.bandwidth_resource].capacity

        def kernel_ps(op: Any) -> int:
            if op.time_ps is not None:
                return op.time_ps + p["kernel_overhead"]
            return roofline_ps(op.flops or 0, op.dram or 0, self.peak_flops,
                               p["compute_efficiency"], dram_bw,
                               p["kernel_overhead"] + self.launch_ps)

        costs = None
        if self.dma is not None:
            engine = self.peer_provider("dma", TransferCosts)
            net = load_network(p["network"], p["seq_len"], p["attention"])
            tensors = net.tensors(p["batch"], p["dtype"])
            costs = engine.transfer_costs({
                "gpu": self.name, "network": net.name, "dtype": p["dtype"],
                "batch": p["batch"], "shapes": {t.name: t.shape for t in tensors.values()},
                "offloaded": [(t.name, t.bytes, t.sparse) for t in tensors.values()]})
        result = plan_auto(p["network"], p["batch"], p["dtype"], capacity, kernel_ps, costs,
                           p["layer_times"], p["optimizer"], p["workspace"], self.kernel_model,
                           self._workspace_limit(), label="policy auto",
                           seq_len=p["seq_len"], attention=p["attention"])
        self.planner = {"predicted_time_s": result.predicted_time_ps * 1e-12,
                        "model_peak_bytes": result.model_peak_bytes,
                        "rendered_peak_bytes": result.rendered_peak_bytes,
                        "rounds": result.rounds}
        return result.choices

    def init(self, phase: int) -> None:
        """Find the GPU memory, render the iteration for it and tell the engine which tensors
        this iteration offloads."""
        if phase != 0:
            return
        self.hbm = self.peer_provider("hbm", MemoryPool)
        self._render(None if self.hbm.unlimited else self.hbm.capacity)
        self._register_gradients()
        if self.dma is not None:
            tensors = self.stream.tensors
            offloaded = [(op.name, tensors[op.name].bytes, tensors[op.name].sparse)
                         for op in self.ops if op.op == "offload"]
            shapes = {op.name: tensors[op.name].shape for op in self.ops if op.op == "offload"}
            plain = [op.name for op in self.ops if op.op == "offload" and op.codec == "none"]
            self.dma.send_untimed({"gpu": self.name,
                                   "network": self.stream.network, "dtype": self.stream.dtype,
                                   "batch": self.stream.batch, "offloaded": offloaded,
                                   "shapes": shapes, "plain": plain})

    def _register_gradients(self) -> None:
        """Data parallel: tell the fabric this GPU's weight gradients (``LAYER:dw``), in
        reverse layer order as DDP buckets them, and its HBM bandwidth resource."""
        if not self.params["data_parallel"]:
            return
        from workloads.vdnn import wgrad_name

        tensors = self.stream.tensors
        layers = [t.layer for t in tensors.values() if t.kind == "weight" and t.layer]
        self.wgrads = {wgrad_name(layer): layer for layer in layers
                       if wgrad_name(layer) in tensors}
        gradients = [(layer, tensors[name].bytes) for name, layer in self.wgrads.items()]
        self.nvlink.send_untimed({"gpu": self.name, "system": self.params["system"],
                                  "hbm": self.hbm.bandwidth_resource,
                                  "gradients": gradients[::-1]})

    def setup(self) -> None:
        """Check every tensor fits in the GPU memory on its own, then start issuing."""
        self.hbm_resource = self.hbm.bandwidth_resource
        if not self.hbm.unlimited:
            for t in self.stream.tensors.values():
                if t.bytes > self.hbm.capacity:
                    raise ConfigError(
                        f"{self.name}: tensor {t.name!r} of layer {t.layer} needs {t.bytes} bytes "
                        f"at batch {self.stream.batch}, more than the GPU memory "
                        f"({self.hbm.capacity} bytes)")
        self.dram_bandwidth = self.flows.resources[self.hbm_resource].capacity
        self.kernel_route = self.flows.route({self.hbm_resource: 1.0})
        self.schedule_at(0, lambda _: self._issue())

    # -- issuing -----------------------------------------------------------------------------
    def _issue(self) -> None:
        ops = self.ops
        while self.pc < len(ops):
            op = ops[self.pc]
            kind = op.op
            if op.phase == "update" and not self.reduced:
                self.blocked = "allreduce"
                return
            if kind == "compute":
                self.compute_q.append(op)
                self._kick_compute()
            elif kind == "offload" or kind == "prefetch":
                self.copy_q.append(op)
                self._kick_copy()
            elif kind == "alloc":
                self.hbm.allocate(op.name, self.stream.tensors[op.name].bytes,
                                  op.layer or self.op_layer[self.pc])
            elif kind == "free":
                self.hbm.free(op.name)
            elif kind == "sync":
                if self.compute_busy or self.copy_busy or self.compute_q or self.copy_q:
                    self.blocked = "sync"
                    return
                self._layer_boundary(op)
            elif kind == "wait":
                if op.name not in self.prefetched:
                    self.blocked = op.name
                    return
            elif kind == "phase":
                pass
            self.pc += 1
            if op.phase != "forward":
                if self.backward_at is None:
                    self.backward_at = self.sim.now
                if self.update_at is None and op.phase == "update":
                    self.update_at = self.sim.now
        if not self.reduced:
            self.blocked = "allreduce"
            return
        self.finished_at = self.sim.now
        self.primary_ok_to_end()

    def _unblock(self) -> None:
        if self.blocked is None:
            return
        if self.blocked == "sync":
            if self.compute_busy or self.copy_busy or self.compute_q or self.copy_q:
                return
        elif self.blocked == "allreduce":
            if not self.reduced:
                return
        elif self.blocked not in self.prefetched:
            return
        self.blocked = None
        self._issue()

    def _layer_boundary(self, op: Any) -> None:
        now = self.sim.now
        entry = {"layer": op.name, "phase": op.phase, "start_ps": self.layer_start,
                 "end_ps": now, "kernel_ps": self._layer_kernel}
        if self._layer_algorithms:
            entry["algorithm"] = ", ".join(self._layer_algorithms)
            self._layer_algorithms = []
        self.layers.append(entry)
        self.stat_layer.add_data(now - self.layer_start)
        stall = (now - self.layer_start) - self._layer_kernel
        if stall > 0:
            self.timeline.append(("stall", op.name, now - stall, now))
        self.layer_start = now
        self._layer_kernel = 0

    # -- compute stream ------------------------------------------------------------------------
    def _kick_compute(self) -> None:
        if self.compute_busy or not self.compute_q:
            return
        op = self.compute_q.popleft()
        self.compute_busy = True
        self.kernel_op = op  # the kernel running (one at a time on the compute stream)
        p = self.params
        start = self.sim.now
        overhead = p["kernel_overhead"]
        if op.time_ps is not None:
            duration = op.time_ps + overhead
        else:  # the roofline, or a memory-bound kernel of the fitted model (plus its launch)
            overhead += self.launch_ps
            duration = roofline_ps(op.flops or 0, op.dram or 0, self.peak_flops,
                                   p["compute_efficiency"], self.dram_bandwidth, overhead)
        label = f"{op.name} ({op.pass_}, {op.algorithm})" if op.algorithm else \
            f"{op.name} ({op.pass_})"
        if op.algorithm:
            self._layer_algorithms.append(f"{op.pass_} {op.algorithm}")
        done = self._recompute_done if op.pass_ == "recompute" else self._kernel_done
        # Modelled kernels (roofline or fitted) share DRAM bandwidth with the DMA engine;
        # measured ones are timers: the measurement already holds their DRAM time.
        modelled = op.time_ps is None or self.kernel_model is not None and not p["layer_times"]
        if p["hbm_contention"] and op.dram and modelled and duration > 0:
            # The cap lets an uncontended kernel end exactly at its roofline time: the flow's
            # end is rounded up to whole ps, so aim half a picosecond early.
            cap = op.dram / ((duration - overhead - 0.5) / PS_PER_S)
            if overhead:
                self.schedule_at(start + overhead, lambda _: self.flows.launch(
                    float(op.dram), self.kernel_route, lambda f: done(label, start),
                    cap, label))
            else:
                self.flows.launch(float(op.dram), self.kernel_route,
                                  lambda f: done(label, start), cap, label)
        else:
            self.schedule_at(start + duration, lambda _: done(label, start))

    def _recompute_done(self, label: str, start: int) -> None:
        """A recompute kernel (a forward kernel re-run in the backward pass) ended."""
        self.recompute_total += self.sim.now - start
        self._kernel_done(label, start)

    def _kernel_done(self, label: str, start: int) -> None:
        now = self.sim.now
        if self.wgrads:
            for tensor in self.kernel_op.writes:
                if tensor in self.wgrads:
                    self.nvlink.send(GradientReady(self.wgrads[tensor]))
        self.kernel_total += now - start
        self._layer_kernel += now - start
        self.stat_kernel.add_data(now - start)
        self.timeline.append(("compute", label, start, now))
        self.compute_busy = False
        self._kick_compute()
        self._unblock()

    # -- copy stream ---------------------------------------------------------------------------
    def _kick_copy(self) -> None:
        if self.copy_busy or not self.copy_q:
            return
        op = self.copy_q.popleft()
        self.copy_busy = True
        t = self.stream.tensors[op.name]
        self.dma.send(TransferRequest(op.op, op.name, t.bytes, op.layer or "", t.sparse,
                                      op.codec))

    def _transfer_done(self, done: TransferDone) -> None:
        req = done.request
        if req.direction == "offload":
            self.offloaded_raw += req.raw_bytes
            self.offloaded_wire += done.wire_bytes
        else:
            self.prefetched_raw += req.raw_bytes
            self.prefetched_wire += done.wire_bytes
            self.prefetched.add(req.tensor)
        self.timeline.append((req.direction, req.tensor, done.started_ps, done.finished_ps))
        self.copy_busy = False
        self._kick_copy()
        self._unblock()

    def _reduced(self, _done: AllReduceDone) -> None:
        self.reduced = True
        self._unblock()

    # -- results -------------------------------------------------------------------------------
    def finish(self) -> None:
        """Record statistics and leave this GPU's results in the engine's reports."""
        end = self.finished_at if self.finished_at is not None else self.sim.now
        back = self.backward_at if self.backward_at is not None else end
        update = self.update_at if self.update_at is not None else end
        self.stat_iter.add_data(end)
        self.stat_stall.add_data(max(0, end - self.kernel_total))
        hbm = self.hbm
        p = self.params
        from workloads.stats import REPORTED_CHOICES, tensor_choices

        choices = tensor_choices(self.stream)
        choice_bytes = {c: sum(self.stream.tensors[t].bytes for t, v in choices.items()
                               if v == c) for c in REPORTED_CHOICES}
        self.publish(GPUResult(
            system=p["system"], preset=p["gpu_preset"], gpu_name=GPUS[p["gpu_preset"]].name,
            kernel_times=self.kernel_times,
            network=self.stream.network, batch=self.stream.batch, dtype=self.stream.dtype,
            policy=self.stream.policy, optimizer=p["optimizer"],
            completed=self.finished_at is not None,
            iteration_time_ps=end, forward_time_ps=back, backward_time_ps=update - back,
            update_time_ps=end - update,
            compute_time_ps=self.kernel_total, stall_time_ps=max(0, end - self.kernel_total),
            offloaded_bytes=self.offloaded_raw, wire_bytes=self.offloaded_wire,
            prefetched_bytes=self.prefetched_raw, prefetch_wire_bytes=self.prefetched_wire,
            peak_gpu_memory_bytes=hbm.peak if hbm else 0,
            gpu_memory_capacity_bytes=hbm.capacity if hbm else 0,
            fits_in_memory=bool(hbm and hbm.peak <= hbm.capacity),
            out_of_memory=hbm.oom if hbm else None,
            # GPU memory over the iteration [0, end]: allocation mode, average, the curve
            allocation="stream" if p["workload"] else p["allocation"],
            average_gpu_memory_bytes=hbm.average_usage(end) if hbm else 0,
            memory_curve=hbm.usage_curve() if hbm else [],
            layers=self.layers, timeline=self.timeline, choices=choices,
            choice_bytes=choice_bytes, recompute_time_ps=self.recompute_total,
            planner=self.planner))
        if p["system"] == "main":
            self.end_main_system(end)
