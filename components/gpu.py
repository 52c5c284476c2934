"""GPU cores executing one training iteration's workload stream with vDNN's rules: kernels on a
compute stream, offloads and prefetches on a copy stream, synchronization at layer boundaries.
The stream comes from the subcomponent in the GPU's ``workload`` slot and the kernel times from
the one in its ``kernels`` slot; the GPU executes a stream, it does not make one."""
from __future__ import annotations

from collections import deque
from dataclasses import field
import enum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Component, Param, ParamError, Port, StatisticSpec, SubComponentSlot
from sst_cdma.engine.flows import FlowNetwork, PS_PER_S
from sst_cdma.engine.kernel import LinkEnd, SimulationError
from sst_cdma.engine.param_words import param_word
from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record
from sst_cdma.model.element_params import network_word
from sst_cdma.model.gpus import GPUS

from .interfaces import CodecKernels, MemoryPool
from .kernel_times import KernelTimes, gpu_spec
from .messages import (TIERS, AllReduceDone, CodecKernel, GradientManifest, GradientReady,
                       MovedTensor, OffloadManifest, TransferDone, TransferRequest)
from .model_states import ModelStates
from .workload_source import WorkloadSource

if TYPE_CHECKING:
    from .collective_ops import CollectiveWait
    from .pipeline_p2p import PeerWait
    from .workload_source import Step, Stream, StreamOp


#: the systems a GPU can belong to: the one studied and its two baselines
SYSTEMS = ("main", "oracle", "vdnn")

_NETWORK = "'cdma.NetworkWorkload'"
_KERNELS = "'cdma.FittedKernels', 'cdma.RooflineKernels' or 'cdma.MeasuredKernels'"
#: params the GPU had before its workload and kernel times became subcomponents: param ->
#: (the slot whose element takes it now, the element types, the param's name there)
MOVED_PARAMS: dict[str, tuple[str, str, str]] = {
    **{name: ("workload", _NETWORK, name)
       for name in ("network", "batch", "seq_len", "attention", "dtype", "policy", "plan",
                    "optimizer", "workspace", "allocation", "write_stream")},
    "workload": ("workload", "'cdma.StreamWorkload'", "file"),
    "layer_times": ("kernels", "'cdma.MeasuredKernels'", "layer_times"),
    "kernel_model": ("kernels", _KERNELS, ""),
    "workspace_limit": ("kernels", "'cdma.FittedKernels' or 'cdma.MeasuredKernels'",
                        "workspace_limit"),
    "compute_efficiency": ("kernels", _KERNELS, "compute_efficiency"),
    "kernel_overhead": ("kernels", _KERNELS, "kernel_overhead"),
}


class WaitReason(enum.Enum):
    """What the GPU's stream can wait for before its next op."""

    SYNC = "sync"            # a layer's end: both streams idle
    ALLREDUCE = "allreduce"  # data parallel: the gradients' all-reduce
    STATES = "states"        # the model states' copies and the host CPU's steps
    GRADIENTS = "gradients"  # a gradient bucket's buffer still being copied to the host
    SETTLE = "settle"        # the micro-batch before's gradient accumulation on the host
    PREFETCH = "prefetch"    # a tensor's prefetch landing


@frozen_record
class Wait(FrozenRecord):
    """Why the GPU's stream is waiting: the reason, and for a prefetch the tensor's name."""

    reason: WaitReason
    tensor: str = ""


@record
class GPUResult(Record):
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
    #: time the compute stream spent in SM (de)compression kernels of the engine's codec
    #: (Blackwell's Decompression Engine; part of ``compute_time_ps``)
    codec_kernel_time_ps: int = 0
    #: model states placed off the GPU or several micro-batches: placements, per-tier memory,
    #: the host CPU's step and the micro-batch times ({} for today's iteration)
    model_states: dict[str, Any] = field(default_factory=dict)


# The ops of a GPU that works with others (a pipeline stage's send and recv, a collective) are
# issued by the modules of the subcomponents that carry them, loaded by the first such op: a GPU
# alone never loads them.
def _issue_send(gpu: GPU, op: StreamOp) -> bool:
    """A send to a neighbour stage (:mod:`components.pipeline_p2p`)."""
    from .pipeline_p2p import issue_send

    return issue_send(gpu, op)


def _issue_recv(gpu: GPU, op: StreamOp) -> bool:
    """A recv from a neighbour stage (:mod:`components.pipeline_p2p`)."""
    from .pipeline_p2p import issue_recv

    return issue_recv(gpu, op)


def _issue_collective(gpu: GPU, op: StreamOp) -> bool:
    """An all-reduce, reduce-scatter or all-gather (:mod:`components.collective_ops`)."""
    from .collective_ops import issue_collective

    return issue_collective(gpu, op)


def _issue_collective_wait(gpu: GPU, op: StreamOp) -> bool:
    """A wait for an asynchronous collective (:mod:`components.collective_wait`)."""
    from .collective_wait import issue_collective_wait

    return issue_collective_wait(gpu, op)


def _peer_pending(gpu: GPU, wait: PeerWait | CollectiveWait) -> bool:
    """Whether a recv's tensor or a collective has not come yet (only an op issued by the
    functions above blocks the stream on one, so their modules are loaded)."""
    from .pipeline_p2p import PeerWait, recv_pending

    if isinstance(wait, PeerWait):
        return recv_pending(gpu, wait)
    from .collective_ops import collective_pending

    return collective_pending(gpu, wait)


class GPU(Component):
    """GPU cores running one training iteration of a workload stream (vDNN semantics)."""

    PARAMS = (
        Param("gpu_preset", "str", "pascal", "GPU preset whose SM count, DRAM bandwidth and "
              "fitted kernel parameters the kernel model uses (peak_flops is this element's)",
              choices=tuple(sorted(GPUS))),
        Param("sms", "int", 0, "streaming multiprocessors (0: the preset's)", minimum=0),
        Param("peak_flops", "float", 0.0, "peak FLOP/s (fp32; 0: the GPU preset's)",
              minimum=0),
        Param("hbm_contention", "bool", "true", "kernels' DRAM traffic competes with the DMA "
              "engine for HBM bandwidth (false: kernels are timers)"),
        Param("system", "str", "main", "the system this GPU belongs to: main (the system "
              "studied), oracle (nothing offloaded, unlimited memory) or vdnn (offload without "
              "compression); reports compare main against the others", choices=SYSTEMS),
        Param("data_parallel", "bool", "false", "one replica of data-parallel training: each "
              "weight gradient goes to the all-reduce on port 'nvlink' as the backward pass "
              "makes it, and the iteration (or its optimizer step) waits for the last bucket"),
        Param("offload_to", "str", "host", "where the workload's offloads go and its prefetches "
              "come from: host (the pinned host pool) or nvme (the SSDs on the DMA engine's "
              "nvme ports, FlashNeuron/G10 style; docs/storage.md)", choices=TIERS),
    )
    PORTS = (Port("hbm", "the GPU's DRAM", required=True),
             Port("dma", "the DMA/cDMA engine (needed when the workload moves tensors)"),
             Port("nvlink", "the NVLink fabric reducing gradients (needed with data_parallel)"))
    SLOTS = (
        SubComponentSlot("workload", "the iteration's workload stream: a network rendered "
                         "for this GPU's memory, or a stream file", accepts=WorkloadSource,
                         required=True),
        SubComponentSlot("kernels", "the kernel times: the fitted model, the roofline or "
                         "measured layer times", accepts=KernelTimes,
                         default="cdma.FittedKernels"),
        SubComponentSlot("model_states", "the model states kept off the GPU (ZeRO-Offload, "
                         "ZeRO-Infinity): their copies and the host CPU's steps, on the "
                         "subcomponent's own ports 'dma' and 'cpu' (used when the workload "
                         "places states off the GPU)", accepts=ModelStates),
        SubComponentSlot("p2p", "ports to the neighbour pipeline stages, for the stream's "
                         "send and recv ops", accepts="cdma.PipelinePorts"),
        SubComponentSlot("collectives", "the port to the cluster fabric, for the stream's "
                         "collective ops", accepts="cdma.CollectivePort"),
    )
    STATISTICS = (
        StatisticSpec("iteration_time_ps", "time of one training iteration", "ps", "f64", 1),
        StatisticSpec("kernel_time_ps", "duration of each kernel", "ps", "f64", 1),
        StatisticSpec("stall_time_ps", "time the compute stream waited for copies", "ps", "f64",
                      1),
        StatisticSpec("layer_time_ps", "time between layer boundaries", "ps", "f64", 2),
    )

    @classmethod
    def validate_params(cls, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The declared params' check, and for a param the GPU no longer takes the slot whose
        element takes it now."""
        for key in given:
            if key in MOVED_PARAMS:
                slot, types, param = MOVED_PARAMS[key]
                renamed = f" (its param {param!r})" if param and param != key else ""
                raise ParamError(f"{where}: parameter {key!r} belongs to the {slot} now: "
                                 f"setSubComponent({slot!r}, {types}){renamed}")
        return super().validate_params(given, where)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        #: peak FLOP/s: the param, or the preset's
        self.peak_flops: float = gpu_spec(self.params).peak_flops
        self.workload: WorkloadSource = self.subcomponent("workload")  # type: ignore[assignment]
        self.kernels: KernelTimes = self.subcomponent("kernels")  # type: ignore[assignment]
        #: the iteration's workload stream and its ops, from the workload at init once the
        #: GPU knows its memory (the fitted model picks algorithms whose workspace fits)
        self._stream: Optional[Stream] = None
        self.ops: list[StreamOp] = []
        self.op_layer: list[str] = []
        #: where the kernel times come from, as the reports say it
        self.kernel_times = self.workload.kernel_times_source()
        self.hbm_link = self.configure_link("hbm", self.refuse_event)
        self.dma = self.configure_link("dma", self._transfer_done)
        self.nvlink = self.configure_link("nvlink", self._reduced)
        #: the model states moved besides the stream (optimizer states on the host): the
        #: subcomponent in slot 'model_states', once init found the workload places them so
        self.states: Optional[ModelStates] = None
        #: the op the model states' traffic must end before (the epilogue's first; -1: none)
        self.states_at = -1
        #: where the model states' gradients are final, where the workload says (the op's
        #: identity in :attr:`ops` -> the gradients; None: each kernel of the last
        #: micro-batch makes those it writes final)
        self.final_grads: Optional[dict[int, tuple[str, ...]]] = None
        self.micro_starts: dict[int, int] = {}
        self.micro_times: list[int] = []
        if self.params["data_parallel"] and self.nvlink is None:
            raise ConfigError(f"{name}: 'data_parallel' needs port 'nvlink' wired to an NVLink "
                              "fabric (cdma.NVSwitch)")
        #: weight gradients (stream tensor -> layer) sent to the all-reduce when written
        self.wgrads: dict[str, str] = {}
        #: weight gradients whose free waits for the all-reduce that still reads them
        self.frees_after_reduce: list[str] = []
        self.reduced = not self.params["data_parallel"]
        self.flows = self.service(FlowNetwork)
        self.hbm: Optional[MemoryPool] = None  # the peer on port 'hbm', from init on
        self.hbm_resource = ""
        self.pc = 0
        self.compute_q: deque = deque()
        self.copy_q: deque = deque()
        self.compute_busy = False
        #: True while the compute stream has run dry: the next kernel was not enqueued ahead
        #: of the GPU and pays the launch latency (the kernels slot's ``after_sync_ps``)
        self.compute_idle = True
        self.copy_busy = False
        #: what the stream waits for before its next op (None: it is not waiting)
        self.blocked: Optional[Wait | PeerWait | CollectiveWait] = None
        self.prefetched: set[str] = set()
        #: (time, phase) each time the issued ops changed phase, from (0, forward): with
        #: with several micro-batches the passes alternate once per micro-batch
        self.phase_changes: list[tuple[int, str]] = [(0, "forward")]
        self.update_at: Optional[int] = None
        self.finished_at: Optional[int] = None
        self.kernel_total = 0
        self.recompute_total = 0
        self.codec_kernel_total = 0
        #: the engine, asked which transfers need SM kernels (set up when 'dma' is wired)
        self.codec_kernels: Optional[CodecKernels] = None
        #: offloads whose SM compression has not ended: their copies wait
        self.compressing: set[str] = set()
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

    # -- wiring ------------------------------------------------------------------------------
    @property
    def stream(self) -> Stream:
        """The iteration's workload stream, from init on."""
        if self._stream is None:
            raise SimulationError(f"{self.name}: the workload stream is asked for before init")
        return self._stream

    @property
    def memory(self) -> MemoryPool:
        """The GPU memory (the peer on port 'hbm'), from init on."""
        if self.hbm is None:
            raise SimulationError(f"{self.name}: the GPU memory is asked for before init")
        return self.hbm

    @property
    def dma_link(self) -> LinkEnd:
        """The link to the DMA/cDMA engine on port 'dma' (init refuses a workload that needs
        it while the port is not connected)."""
        return self._connected(self.dma, "dma")

    @property
    def nvlink_link(self) -> LinkEnd:
        """The link to the NVLink fabric on port 'nvlink' (construction refuses data_parallel
        while the port is not connected)."""
        return self._connected(self.nvlink, "nvlink")

    def _connected(self, end: Optional[LinkEnd], port: str) -> LinkEnd:
        if end is None:
            raise ConfigError(f"{self.name}: port {port!r} is not connected")
        return end

    def _take_stream(self, memory_capacity: Optional[int]) -> None:
        """Take the iteration's stream from the workload (rendered, where it renders one,
        for ``memory_capacity`` bytes of GPU memory, None: unlimited), and note which layer
        each op belongs to."""
        self._stream = self.workload.stream(memory_capacity)
        self.ops = self._scheduled(self._stream.ops, self.workload.schedule(self._stream))
        states = self.workload.model_states(self.stream)
        if self.dma is None and states is not None and states.placement.weights != "gpu":
            raise ConfigError(f"{self.name}: {network_word('weights', states.placement.weights)}: each "
                              f"layer's weights are copied from the {states.placement.weights} "
                              "for its use, and port 'dma' is not connected to an engine with "
                              "a host link")
        if self.dma is None and any(op.op in ("offload", "prefetch") for op in self.ops):
            raise ConfigError(f"{self.name}: the workload moves tensors but port 'dma' is not "
                              "connected")
        # the layer each op belongs to: the next compute/sync at or after it
        self.op_layer = [""] * len(self.ops)
        upcoming = ""
        for i in range(len(self.ops) - 1, -1, -1):
            if self.ops[i].op in ("compute", "sync"):
                upcoming = self.ops[i].name
            self.op_layer[i] = upcoming

    def _scheduled(self, ops: list[StreamOp], steps: list[Step]) -> list[StreamOp]:
        """The stream's ops in the order of the workload's schedule (gradient accumulation: each
        micro-batch's passes in turn); with several micro-batches, notes where each one's
        forward pass starts (its first chunk's, with virtual pipeline stages)."""
        out: list[StreamOp] = []
        starts: dict[int, int] = {}
        for step in steps:
            if step.phase == "forward" and step.micro_batch is not None and step.chunk == 0:
                starts[len(out)] = step.micro_batch
            out.extend(ops[step.start:step.end])
        if len(starts) > 1:
            self.micro_starts = starts
        return out

    def _take_model_states(self) -> None:
        """Model states the workload places off the GPU: the subcomponent in slot
        'model_states' drives their copies and the host CPU's steps (it refuses its own ports
        unconnected); the epilogue waits for them."""
        plan = self.workload.model_states(self.stream)
        if plan is None or not plan.buckets:
            return
        states = self.subcomponent("model_states")
        if not isinstance(states, ModelStates):
            placed = param_word(self.workload.type_name(), "optimizer_states",
                                plan.placement.optimizer_states)
            raise ConfigError(f"{self.name}: {placed}: the model states' copies and the host "
                              "CPU's steps need a driver, and slot 'model_states' is empty: "
                              "setSubComponent('model_states', 'cdma.ModelStateDriver'), its "
                              "port 'dma' on the engine's 'states' and 'cpu' on a cdma.HostCPU")
        if plan.placement.accumulates_on_host and self.params["data_parallel"]:
            raise ConfigError(
                f"{self.name}: {network_word('gradients', 'host')} with "
                f"{network_word('grad_accum', plan.placement.grad_accum)} accumulates one GPU's "
                f"gradients on its host; with {param_word(self.type_name(), 'data_parallel', True)} "
                "each micro-batch's would be reduced over the replicas first, which is not "
                f"modelled: give {network_word('gradients', 'gpu')}")
        states.take(self, plan, self.stream.dtype)
        self.states = states
        self.states_at = len(self.ops) - self.workload.states_after(self.stream)
        final = self.workload.final_gradients(self.ops)
        if final is not None:
            self.final_grads = {id(self.ops[i]): grads for i, grads in final.items()}

    def init(self, phase: int) -> None:
        """Find the GPU memory, render the iteration for it and tell the engine which tensors
        this iteration offloads."""
        if phase != 0:
            return
        self.hbm = self.peer_provider("hbm", MemoryPool)
        self._take_stream(None if self.hbm.unlimited else self.hbm.capacity)
        self._take_model_states()
        self._register_gradients()
        if self.dma is not None:
            tensors = self.stream.tensors
            moved = tuple(MovedTensor(op.name, tensors[op.name].bytes, tensors[op.name].sparse,
                                      tensors[op.name].shape, op.codec == "none")
                          for op in self.ops if op.op == "offload")
            resident = self.states.resident if self.states is not None else ()
            self.dma.send_untimed(OffloadManifest(self.name, self.stream.network,
                                                  self.stream.dtype, self.stream.batch, moved,
                                                  resident=resident))

    def _register_gradients(self) -> None:
        """Data parallel: tell the fabric this GPU's weight gradients (``LAYER:dw``), in
        reverse layer order as DDP buckets them, and its HBM bandwidth resource."""
        if not self.params["data_parallel"]:
            return
        tensors = self.stream.tensors
        self.wgrads = self.workload.weight_gradients(self.stream)
        gradients = [(layer, tensors[name].bytes) for name, layer in self.wgrads.items()]
        self.nvlink_link.send_untimed(GradientManifest(self.name, self.params["system"],
                                                       self.memory.bandwidth_resource,
                                                       tuple(gradients[::-1])))

    def setup(self) -> None:
        """Check every tensor fits in the GPU memory on its own, then start issuing."""
        memory = self.memory
        self.hbm_resource = memory.bandwidth_resource
        if not memory.unlimited:
            for t in self.stream.tensors.values():
                if t.bytes > memory.capacity:
                    raise ConfigError(
                        f"{self.name}: tensor {t.name!r} of layer {t.layer} needs {t.bytes} bytes "
                        f"at batch {self.stream.batch}, more than the GPU memory "
                        f"({memory.capacity} bytes)")
        self.dram_bandwidth = self.flows.resources[self.hbm_resource].capacity
        if self.dma is not None:
            self.codec_kernels = self.peer_provider("dma", CodecKernels)
        self.kernel_route = self.flows.route({self.hbm_resource: 1.0})
        if self.states is not None:
            self.states.start()
        self.schedule_at(0, lambda _: self._issue())

    # -- issuing -----------------------------------------------------------------------------
    def _issue(self) -> None:
        """Issue the stream's ops in order until one must wait (:attr:`blocked` says for
        what) or the stream ends; each kind of op has its handler in :attr:`OP_HANDLERS`."""
        ops = self.ops
        while self.pc < len(ops):
            op = ops[self.pc]
            if self.pc in self.micro_starts:
                if self.states is not None and not self.states.settled():
                    self.blocked = Wait(WaitReason.SETTLE)
                    return
                self._micro_batch_starts()
            if self.pc == self.states_at and self.states is not None and not self.states.done:
                self._await_states(self.states)
                return
            if op.phase == "update" and not self.reduced:
                self.blocked = Wait(WaitReason.ALLREDUCE)
                return
            if self.states is not None and op.op in ("alloc", "compute") and \
                    self.states.holds_back(_gradients_named(op)):
                # its bucket's buffer is still being copied
                self.blocked = Wait(WaitReason.GRADIENTS)
                return
            handler = self.OP_HANDLERS.get(op.op)
            if handler is not None and not handler(self, op):
                return
            if self.final_grads and op.op != "compute":
                self._gradients_final(op)  # a collective reduced them
            self.pc += 1
            if self.update_at is None and op.phase != self.phase_changes[-1][1]:
                self.phase_changes.append((self.sim.now, op.phase))
                if op.phase == "update":
                    self.update_at = self.sim.now
        if not self.reduced:
            self.blocked = Wait(WaitReason.ALLREDUCE)
            return
        if self.pc == self.states_at and self.states is not None and \
                not self.states.done:  # an empty epilogue
            self._await_states(self.states)
            return
        self.finished_at = self.sim.now
        self.primary_ok_to_end()

    def _issue_compute(self, op: StreamOp) -> bool:
        """A kernel: onto the compute stream."""
        self.compute_q.append(op)
        self._kick_compute()
        return True

    def _issue_copy(self, op: StreamOp) -> bool:
        """An offload (compressed by SM kernels first where the engine asks) or a prefetch:
        onto the copy stream."""
        if op.op == "offload":
            self._compress_first(op)
        self.copy_q.append(op)
        self._kick_copy()
        return True

    def _issue_alloc(self, op: StreamOp) -> bool:
        """A tensor's allocation in the GPU memory."""
        self.memory.allocate(op.name, self.stream.tensors[op.name].bytes,
                             op.layer or self.op_layer[self.pc])
        return True

    def _issue_free(self, op: StreamOp) -> bool:
        """A tensor's free; a weight gradient the all-reduce still reads is freed after it."""
        if not self.reduced and op.name in self.wgrads:
            self.frees_after_reduce.append(op.name)
        else:
            self.memory.free(op.name)
        return True

    def _issue_sync(self, op: StreamOp) -> bool:
        """A layer's end: waits until both streams are idle."""
        if self._streams_busy():
            self.blocked = Wait(WaitReason.SYNC)
            return False
        self._layer_boundary(op)
        return True

    def _issue_wait(self, op: StreamOp) -> bool:
        """Waits until the tensor's prefetch has landed."""
        if op.name not in self.prefetched:
            self.blocked = Wait(WaitReason.PREFETCH, op.name)
            return False
        return True

    #: the handler of each kind of stream op: issues it and says whether the stream goes on
    #: (False: it waits, and :attr:`blocked` says for what); a kind without one is passed
    OP_HANDLERS: ClassVar[dict[str, Callable[[GPU, StreamOp], bool]]] = {
        "compute": _issue_compute,
        "offload": _issue_copy,
        "prefetch": _issue_copy,
        "alloc": _issue_alloc,
        "free": _issue_free,
        "sync": _issue_sync,
        "wait": _issue_wait,
        "send": _issue_send,
        "recv": _issue_recv,
        "all_reduce": _issue_collective,
        "reduce_scatter": _issue_collective,
        "all_gather": _issue_collective,
        "collective_wait": _issue_collective_wait,
    }

    def _streams_busy(self) -> bool:
        """Whether a kernel or a copy is running or queued."""
        return bool(self.compute_busy or self.copy_busy or self.compute_q or self.copy_q)

    def _still_waiting(self, wait: Wait | PeerWait | CollectiveWait) -> bool:
        """Whether what ``wait`` waits for has not happened yet."""
        if not isinstance(wait, Wait):
            return _peer_pending(self, wait)
        reason = wait.reason
        if reason is WaitReason.SYNC:
            return self._streams_busy()
        if reason is WaitReason.ALLREDUCE:
            return not self.reduced
        if reason in (WaitReason.STATES, WaitReason.GRADIENTS, WaitReason.SETTLE):
            states = self.states
            assert states is not None, "only a GPU with model states waits for them"
            if reason is WaitReason.STATES:
                return not states.done
            if reason is WaitReason.SETTLE:
                return not states.settled()
            return states.holds_back(_gradients_named(self.ops[self.pc]))
        return wait.tensor not in self.prefetched

    def record(self, kind: str, label: str, start_ps: int, end_ps: int) -> None:
        """Note a model-state copy (``kind``: its copy stream) or a host CPU step (``cpu``)
        of ``label`` on the timeline (what the slot 'model_states' saw end)."""
        self.timeline.append((kind, label, start_ps, end_ps))

    def elementwise(self, label: str, flops: int, dram: int,
                    done: Callable[[], None]) -> None:
        """A memory-bound kernel beside the compute stream (the model-state slot's: DeepSpeed
        adds the accumulated gradients on its reduction stream): priced as the stream's
        memory-bound kernels (the kernels slot's roofline at the HBM's bandwidth, at least a
        launch), its DRAM bytes a flow on the HBM where kernels contend for it."""
        duration = self.kernels.kernel_ps(None, flops, dram, self.dram_bandwidth)
        overhead = self.kernels.overhead_ps(False)
        if self.params["hbm_contention"] and dram and duration > overhead:
            cap = dram / ((duration - overhead - 0.5) / PS_PER_S)
            self.schedule_at(self.sim.now + overhead, lambda _: self.flows.launch(
                float(dram), self.kernel_route, lambda f: done(), cap, label))
        else:
            self.schedule_at(self.sim.now + duration, lambda _: done())

    def resume(self) -> None:
        """Something the stream may wait for happened outside the GPU (a model-state copy or
        step, a pipeline peer's message landing): issue on if it was that."""
        self._unblock()

    def _unblock(self) -> None:
        """Something the stream may wait for happened: issue on if it was that."""
        if self.blocked is None or self._still_waiting(self.blocked):
            return
        self.blocked = None
        self._issue()

    def _await_states(self, states: ModelStates) -> None:
        """The passes are over: the epilogue (which frees the weights and gradients) waits
        for the model states' copies and the host CPU's steps."""
        if self.update_at is None:
            self.update_at = self.sim.now
        self.blocked = Wait(WaitReason.STATES)
        states.stream_ended()

    def _micro_batch_starts(self) -> None:
        """A micro-batch begins: the previous one's prefetches are spent."""
        if self.micro_times or self.pc != min(self.micro_starts):
            self.micro_times.append(self.sim.now)
        self.prefetched.clear()
        if self.states is not None:
            self.states.micro_batch_starts()

    def _layer_boundary(self, op: StreamOp) -> None:
        now = self.sim.now
        entry = {"layer": op.name, "phase": op.phase, "start_ps": self.layer_start,
                 "end_ps": now, "kernel_ps": self._layer_kernel}
        if self._layer_algorithms:
            entry["kernel_algorithm"] = ", ".join(self._layer_algorithms)
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
        if self.compute_busy:
            return
        if not self.compute_q:
            self.compute_idle = True
            return
        op = self.compute_q.popleft()
        self.compute_busy = True
        if isinstance(op, CodecKernel):
            self._run_codec_kernel(op)
            return
        start = self.sim.now
        # The host enqueues kernels ahead of the GPU, so a kernel's launch is hidden behind the
        # one before it; a kernel issued to an idle stream (after a synchronization) waits its
        # launch latency first. Its time: the stream's, or the roofline (a memory-bound kernel
        # of the fitted model: at least one launch interval).
        timed = op.time_ps is not None
        # modelled kernels (roofline or fitted) share DRAM bandwidth with the DMA engine and
        # pay the launch; measured or given ones are timers that already hold both
        modelled = not timed or self.workload.modelled_times
        latency = self.kernels.after_sync_ps(modelled) if self.compute_idle else 0
        self.compute_idle = False
        overhead = self.kernels.overhead_ps(timed) + latency
        duration = self.kernels.kernel_ps(op.time_ps, op.flops or 0, op.dram or 0,
                                          self.dram_bandwidth) + latency
        label = f"{op.name} ({op.pass_}, {op.algorithm})" if op.algorithm else \
            f"{op.name} ({op.pass_})"
        if op.algorithm:
            self._layer_algorithms.append(f"{op.pass_} {op.algorithm}")
        kernel_done = self._recompute_done if op.pass_ == "recompute" else self._kernel_done

        def done(label: str, start: int) -> None:
            kernel_done(op, label, start)
        if self.params["hbm_contention"] and op.dram and modelled and duration > 0:
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

    def _recompute_done(self, op: StreamOp, label: str, start: int) -> None:
        """A recompute kernel (a forward kernel re-run in the backward pass) ended."""
        self.recompute_total += self.sim.now - start
        self._kernel_done(op, label, start)

    def _kernel_done(self, op: StreamOp, label: str, start: int) -> None:
        """Kernel ``op`` (one at a time on the compute stream) ended."""
        now = self.sim.now
        if self.wgrads:
            for tensor in op.writes:
                if tensor in self.wgrads:
                    self.nvlink_link.send(GradientReady(self.wgrads[tensor]))
        if self.states is not None:
            self._gradients_final(op)
        self.kernel_total += now - start
        self._layer_kernel += now - start
        self.stat_kernel.add_data(now - start)
        self.timeline.append(("compute", label, start, now))
        self.compute_busy = False
        self._kick_compute()
        self._unblock()

    def _gradients_final(self, op: StreamOp) -> None:
        """``op`` ended: the gradients it made final leave for the host (the workload's
        :meth:`~components.workload_source.WorkloadSource.final_gradients`, else those a
        kernel of the last micro-batch wrote)."""
        assert self.states is not None, "only a GPU with model states moves gradients"
        if self.final_grads is not None:
            if id(op) in self.final_grads:
                self.states.written(self.final_grads[id(op)])
        elif len(self.micro_times) + 1 >= len(self.micro_starts):
            self.states.written(op.writes)
        elif self.states.accumulates:
            self.states.written(op.writes, last=False)

    # -- SM kernels of the engine's codec -------------------------------------------------------
    def _codec_kernel(self, direction: str, tensor: str, codec: str) -> Optional[CodecKernel]:
        """The SM kernel the engine says moving ``tensor`` needs (None: none; ``codec``
        ``none``, a plain copy, needs none)."""
        if self.codec_kernels is None or codec == "none":
            return None
        return self.codec_kernels.codec_kernel(direction, tensor,
                                                self.stream.tensors[tensor].bytes)

    def _compress_first(self, op: StreamOp) -> None:
        """An offload the SMs compress: its kernel joins the compute stream ahead of the
        kernels issued after it, and the copy waits for it."""
        kernel = self._codec_kernel("offload", op.name, op.codec)
        if kernel is not None:
            self.compressing.add(op.name)
            self.compute_q.append(kernel)
            self._kick_compute()

    def _run_codec_kernel(self, kernel: CodecKernel) -> None:
        """Run an SM (de)compression kernel on the compute stream: its DRAM traffic a flow on
        HBM, capped so that alone it ends at its time."""
        start = self.sim.now
        label = f"{kernel.tensor} (sm {kernel.kind})"

        def done(_event: Any = None) -> None:
            self._codec_kernel_done(kernel, label, start)
        if self.params["hbm_contention"] and kernel.dram_bytes and kernel.time_ps > 0:
            cap = kernel.dram_bytes / ((kernel.time_ps - 0.5) / PS_PER_S)
            self.flows.launch(float(kernel.dram_bytes), self.kernel_route, done, cap, label)
        else:
            self.schedule_at(start + kernel.time_ps, done)

    def _codec_kernel_done(self, kernel: CodecKernel, label: str, start: int) -> None:
        now = self.sim.now
        self.codec_kernel_total += now - start
        self.kernel_total += now - start
        self._layer_kernel += now - start
        self.stat_kernel.add_data(now - start)
        self.timeline.append(("compute", label, start, now))
        self.compute_busy = False
        if kernel.kind == "compress":
            self.compressing.discard(kernel.tensor)
            self._kick_copy()
        else:
            self.prefetched.add(kernel.tensor)
        self._kick_compute()
        self._unblock()

    # -- copy stream ---------------------------------------------------------------------------
    def _kick_copy(self) -> None:
        if self.copy_busy or not self.copy_q or self.copy_q[0].name in self.compressing:
            return
        op = self.copy_q.popleft()
        self.copy_busy = True
        t = self.stream.tensors[op.name]
        self.dma_link.send(TransferRequest(op.op, op.name, t.bytes, op.layer or "", t.sparse,
                                           op.codec, op.tier or self.params["offload_to"]))

    def _transfer_done(self, done: TransferDone) -> None:
        req = done.request
        if req.direction == "offload":
            self.offloaded_raw += req.raw_bytes
            self.offloaded_wire += done.wire_bytes
        else:
            self.prefetched_raw += req.raw_bytes
            self.prefetched_wire += done.wire_bytes
            kernel = self._codec_kernel("prefetch", req.tensor, req.codec)
            if kernel is None:
                self.prefetched.add(req.tensor)
            else:  # the tensor is there once the SMs have decompressed it
                self.compute_q.appendleft(kernel)
                self._kick_compute()
        self.timeline.append((req.direction, req.tensor, done.started_ps, done.finished_ps))
        self.copy_busy = False
        self._kick_copy()
        self._unblock()

    def _reduced(self, _done: AllReduceDone) -> None:
        self.reduced = True
        for name in self.frees_after_reduce:
            self.memory.free(name)
        self.frees_after_reduce = []
        self._unblock()

    # -- results -------------------------------------------------------------------------------
    def compute_spans(self) -> list[tuple[int, int]]:
        """[start, end] of every kernel the compute stream ran (network and SM codec kernels):
        the stream is idle everywhere else."""
        return [(a, b) for kind, _, a, b in self.timeline if kind == "compute"]

    def _model_state_fields(self, end: int) -> dict[str, Any]:
        """The result's ``model_states``: {} for today's iteration; else the placements, the
        micro-batches and their times, per-tier memory and the host CPU's steps."""
        count = len(self.micro_starts) or 1
        if self.states is None and count == 1:
            return {}
        memory = self.memory
        ends = self.micro_times + [self.update_at if self.update_at is not None else end]
        starts = [0] + self.micro_times
        out: dict[str, Any] = {
            "micro_batches": count, "step_time_ps": end,
            "micro_batch_time_ps": [b - a for a, b in zip(starts, ends)],
            "tiers": {"gpu": {"peak_bytes": memory.peak,
                              "average_bytes": memory.average_usage(end),
                              "capacity_bytes": memory.capacity,
                              "fits": memory.peak <= memory.capacity,
                              "out_of_memory": memory.oom}}}
        if self.states is not None:
            fields = self.states.fields(end)
            out["tiers"]["host"] = fields.pop("host")
            out.update(fields)
        else:
            out["placement"] = {"optimizer_states": "gpu", "weights": "gpu", "gradients": "gpu",
                                "delayed_update": False}
        return out

    def _pass_times(self, update: int) -> dict[str, int]:
        """The time the issued ops spent in the forward and in the backward pass before
        ``update`` (when the optimizer step began), summed over every micro-batch."""
        out = {"forward": 0, "backward": 0}
        changes = [*self.phase_changes, (update, "")]
        for (start, phase), (stop, _) in zip(changes, changes[1:]):
            if phase in out:
                out[phase] += max(0, min(stop, update) - start)
        return out

    def finish(self) -> None:
        """Record statistics and leave this GPU's results in the engine's reports."""
        end = self.finished_at if self.finished_at is not None else self.sim.now
        update = self.update_at if self.update_at is not None else end
        passes = self._pass_times(update)
        self.stat_iter.add_data(end)
        self.stat_stall.add_data(max(0, end - self.kernel_total))
        hbm = self.hbm
        p = self.params
        choices, choice_bytes = self.workload.tensor_choices(self.stream)
        self.publish(GPUResult(
            system=p["system"], preset=p["gpu_preset"], gpu_name=GPUS[p["gpu_preset"]].name,
            kernel_times=self.kernel_times,
            network=self.stream.network, batch=self.stream.batch, dtype=self.stream.dtype,
            policy=self.stream.policy, optimizer=self.workload.optimizer,
            completed=self.finished_at is not None,
            iteration_time_ps=end, forward_time_ps=passes["forward"],
            backward_time_ps=passes["backward"],
            update_time_ps=end - update,
            compute_time_ps=self.kernel_total, stall_time_ps=max(0, end - self.kernel_total),
            offloaded_bytes=self.offloaded_raw, wire_bytes=self.offloaded_wire,
            prefetched_bytes=self.prefetched_raw, prefetch_wire_bytes=self.prefetched_wire,
            peak_gpu_memory_bytes=hbm.peak if hbm else 0,
            gpu_memory_capacity_bytes=hbm.capacity if hbm else 0,
            fits_in_memory=bool(hbm and hbm.peak <= hbm.capacity),
            out_of_memory=hbm.oom if hbm else None,
            # GPU memory over the iteration [0, end]: allocation mode, average, the curve
            allocation=self.workload.allocation,
            average_gpu_memory_bytes=hbm.average_usage(end) if hbm else 0,
            memory_curve=hbm.usage_curve() if hbm else [],
            layers=self.layers, timeline=self.timeline, choices=choices,
            choice_bytes=choice_bytes, recompute_time_ps=self.recompute_total,
            planner=self.workload.planner, codec_kernel_time_ps=self.codec_kernel_total,
            model_states=self._model_state_fields(end)))
        if p["system"] == "main":
            self.declare_work_end(end)


def _gradients_named(op: StreamOp) -> tuple[str, ...]:
    """The tensors an op starts holding: a kernel's writes, an allocation's tensor."""
    return op.writes if op.op == "compute" else (op.name,)
