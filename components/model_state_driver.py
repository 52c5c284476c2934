"""The GPU's side of ZeRO-Offload (Ren et al., USENIX ATC 2021): the model-state traffic the
GPU drives beside its workload stream when the optimizer states live in host memory, by the
subcomponent in its ``model_states`` slot (``cdma.ModelStateDriver``, on links of its own to
the engine and the host CPU; components/model_states.py declares how the two talk).

The schedule is DeepSpeed's stage 1-2 optimizer's with the optimizer offloaded to the CPU
(``deepspeed/runtime/zero/stage_1_and_2.py``; docs/workloads.md section 9). Each gradient
bucket (reverse layer order, :func:`workloads.model_states.state_buckets`) is copied to the
host as soon as the backward kernel writing its last weight gradient ends, on the GPU's
``gradients`` copy stream (a queue of its own in the engine, as DeepSpeed's ``overlap_comm``
copies each full bucket on a stream of its own in ``reduce_ipg_grads``, so the
layer-boundary synchronizations of the compute and copy streams do not wait for it). Once
the backward pass has ended and every bucket is on the host, the host CPU steps the whole
partition (DeepSpeed's ``step()``: ``DeepSpeedCPUAdam`` over the fp32 partition), bucket
after bucket; once the last bucket is stepped, the updated 16-bit weights are copied back on
the ``weights`` stream, and the iteration ends when they are back.

With the one-step delayed update (ZeRO-Offload's paper, section 5) the CPU steps the previous
iteration's gradients (already on the host) from time 0, beside this iteration's forward and
backward passes, and copies their weights back as soon as the whole step is done; the
iteration ends when those and this iteration's gradient copies are done: one iteration of the
steady state, never longer than the immediate update's. With the weights on the host too
(``weights`` ``host``) the stream prefetches each layer's weights for its use and the CPU's
step updates them where they are: nothing is copied back, and the iteration ends when the
steps are done.

ZeRO-Infinity (Rajbhandari et al., SC 2021) puts the states on the SSDs (``optimizer_states``
``nvme``): each bucket's states are read from the drives into a host buffer (two buffers: a
bucket's read may start once the bucket two before it was written back) on the ``states_in``
stream, from when the step opens (after the backward pass; delayed: from time 0), the CPU
steps it once its states are on the host, and its states go back to the drives on
the ``states_out`` stream. With the weights on the SSDs too (``weights`` ``nvme``) the stream
prefetches each layer's weights from the drives and the stepped 16-bit weights are
written to the drives (``weights`` stream, host to SSD) instead of copied to the GPU.

With ``state_compression`` ``engine`` or ``host`` (:class:`StateCompression`) the gradient and
weight copies go through the engine's codec, each crossing the link as its raw bytes over the
model-state profile's ratio of that codec for its role and element type; with ``host`` the
host CPU also decompresses each bucket's gradients before its step and compresses its
weights after it."""
from __future__ import annotations

from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any, Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import Element, Port
from sst_cdma.engine.kernel import LinkEnd, SimulationError
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.compression import wire_bytes
from sst_cdma.model.element_params import network_word
from sst_cdma.model.cpu_codecs import CpuCodecError, cpu_codec_rates

from .interfaces import HostStep, StateCodec
from .messages import (CpuStepDone, CpuStepRequest, ModelStatesManifest, TransferDone,
                       TransferRequest)
from .model_states import ModelStates, StatesGPU

if TYPE_CHECKING:
    from .workload_source import ModelStatePlan

__all__ = ["ModelStateDriver", "StateCompression", "state_compression",
           "COPY_STREAMS", "idle_overlap"]


#: the model-state copy streams the driver sends on (a request's ``stream``), each with what it
#: moves: the GPU's timeline records each copy under its stream, and the Chrome trace draws
#: one thread per stream (components.trace), so a stream added here gets its thread there
COPY_STREAMS = {"gradients": "gradient copies", "weights": "weight copies",
                "states_in": "optimizer states from NVMe",
                "states_out": "optimizer states to NVMe"}
#: the model-state profile role each copy stream moves
STREAM_ROLES = {"gradients": "gradients", "weights": "weights"}


@frozen_record
class StateCompression(FrozenRecord):
    """How the model-state copies are compressed: ``mode`` (``none``, ``engine``, ``host``),
    the engine's ``codec``, the element type, the measured ratio per copy stream and whether
    data that would grow is sent raw."""

    mode: str = "none"
    codec: str = "none"
    dtype: str = ""
    ratios: dict[str, float] = field(default_factory=dict)
    bypass: bool = True

    @property
    def coded(self) -> bool:
        """True when the copies go through the engine's codec."""
        return self.mode != "none"

    def wire(self, stream: str, raw: int) -> int:
        """The bytes a copy of ``raw`` bytes on ``stream`` crosses the link as."""
        if not self.coded:
            return raw
        return wire_bytes(raw, self.ratios[stream], self.bypass)


def state_compression(driver: Element, plan: ModelStatePlan, dtype: str) -> StateCompression:
    """The compression ``plan``'s placement asks for, with the codec of the engine on
    ``driver``'s ``dma`` port and the shipped model-state profile's ratios for ``dtype``; a codec
    that cannot serve it is a one-line ConfigError naming the option."""
    mode = plan.placement.compression
    if mode == "none":
        return StateCompression()
    from sst_cdma.profiles import ProfileError
    from sst_cdma.profiles.model_states import model_state_ratio

    where = f"{driver.name}: {network_word('state_compression', mode)}"
    codec, progress, bypass = driver.peer_provider("dma", StateCodec).state_codec()
    if codec == "none":
        raise ConfigError(f"{where}: the copies go through the cDMA engine's codec, and the "
                          "engine's codec slot is empty (a plain copy engine); fill it with a codec, "
                          "e.g. bplane_zstd")
    try:
        ratios = {stream: model_state_ratio(role, codec, dtype, progress)
                  for stream, role in STREAM_ROLES.items()}
        if mode == "host":
            cpu_codec_rates(codec, dtype)
    except (ProfileError, CpuCodecError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return StateCompression(mode, codec, dtype, ratios, bypass)


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` merged where they overlap or touch, in order."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def idle_overlap(busy: list[tuple[int, int]], waits: list[tuple[int, int]], end: int) -> int:
    """The time in [0, ``end``] covered by ``waits`` but by none of ``busy``: how long the GPU's
    compute stream (busy in ``busy``) sat idle while a step of its was at the host CPU."""
    total = 0
    kernels = _union(busy)
    for a, b in _union([(max(0, a), min(b, end)) for a, b in waits]):
        total += b - a - sum(max(0, min(b, k1) - max(a, k0)) for k0, k1 in kernels
                             if k0 < b and k1 > a)
    return total


class ModelStateDriver(ModelStates):
    """Drives a GPU's model states kept off it (ZeRO-Offload, ZeRO-Infinity), in its slot.

    The gradient copies, CPU steps and weight copies of one GPU's optimizer step, on links of
    its own: to the cDMA engine's ``states`` port (port ``dma``) and to the host CPU (port
    ``cpu``); the GPU reaches it as :class:`ModelStates` and it reaches the GPU as
    :class:`StatesGPU`, nothing more."""

    PORTS = (Port("dma", "the cDMA engine's 'states' port: the model-state copies, each on its "
                  "copy stream"),
             Port("cpu", "the host CPU (cdma.HostCPU, a 'gpu%d' port) running the optimizer "
                  "step of model states kept on the host (needed with optimizer_states host "
                  "or nvme)"))

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.dma = self.configure_link("dma", self._copied)
        self.cpu_end = self.configure_link("cpu", self._stepped)
        self._gpu: Optional[StatesGPU] = None
        self.cpu: Optional[HostStep] = None

    @property
    def gpu(self) -> StatesGPU:
        """The GPU whose model states this drives, from init on."""
        if self._gpu is None:
            raise SimulationError(f"{self.name}: the GPU is asked for before init")
        return self._gpu

    def take(self, gpu: StatesGPU, plan: ModelStatePlan, dtype: str) -> None:
        """Drive ``plan``'s model states for ``gpu``: they need the CPU on port 'cpu' and a
        host link through the engine on port 'dma'; the CPU learns the host buffers they
        take."""
        where = f"{self.name}: {network_word('optimizer_states', plan.placement.optimizer_states)}"
        if self.dma is None:
            raise ConfigError(f"{where}: the gradients and weights cross a host link, and port "
                              "'dma' is not connected to an engine with one")
        if self.cpu_end is None:
            raise ConfigError(f"{where}: the optimizer step runs on the host CPU, and port "
                              "'cpu' is not connected to a cdma.HostCPU")
        self._gpu = gpu
        self._load(plan, state_compression(self, plan, dtype))
        self.cpu_end.send_untimed(self.manifest())

    def _load(self, plan: ModelStatePlan, compression: StateCompression) -> None:
        """The bookkeeping of ``plan``'s buckets, none of them moved yet."""
        self.compression = compression
        self.plan = plan
        self.placement = plan.placement
        self.delayed = plan.placement.delayed_update
        self.buckets = {b.name: b for b in plan.buckets}
        self.bucket_of = {w: b.name for b in plan.buckets for w in b.wgrads}
        self.left = {b.name: len(b.wgrads) for b in plan.buckets}
        self.gradients_left = len(plan.buckets)
        self.steps_left = len(plan.buckets)
        #: weights on the host: the CPU's step updates them there, nothing comes back; on the
        #: SSDs: they are written there from the host
        self.weights_back = plan.placement.weights != "host"
        self.weights_left = len(plan.buckets) if self.weights_back else 0
        #: ZeRO-Infinity: the states are read from the SSDs before and written after the step
        self.states_nvme = plan.placement.optimizer_states == "nvme"
        self.order = [b.name for b in plan.buckets]
        self.states_left = len(plan.buckets) if self.states_nvme else 0
        self.landed: set[str] = set()   # gradients on the host
        self.read_in: set[str] = set()  # states on the host
        self.written_back: set[str] = set()
        self.reads_asked: set[str] = set()
        self.wanted: list[str] = []     # buckets whose states read waits for a buffer
        self.stream_over = False
        #: buckets stepped, their weights waiting for the last step to end; the step opened
        #: (the backward pass over and every gradient on the host; delayed: at time 0)
        self.ready: list[str] = []
        self.opened = False
        self.moved = dict.fromkeys(COPY_STREAMS, 0)
        self.wired = dict.fromkeys(COPY_STREAMS, 0)
        self.cpu_steps: list[tuple[int, int]] = []
        #: when each bucket's step was asked of the CPU, and [asked, finished] of each step:
        #: the time the GPU's step was at the host CPU (queued behind other GPUs' or running)
        self.asked: dict[str, int] = {}
        self.at_cpu: list[tuple[int, int]] = []
        #: gradients accumulated on the host over the micro-batches: the micro-batch the
        #: stream is in, whether it is the step's last, and each bucket's actions queued on
        #: the reduction stream, one at a time (see :meth:`_accumulate`)
        self._accumulates = plan.placement.accumulates_on_host
        self.micro = -1
        self.last_micro = False
        self.reduction: deque[tuple[str, str]] = deque()
        self.reducing = False
        self.gradients_in = 0  # accumulated gradient bytes copied back to the GPU

    def host_cpu(self) -> Optional[HostStep]:
        """The host CPU on port 'cpu' (None: the port is not connected)."""
        return self.peer_provider("cpu", HostStep) if self.cpu_end is not None else None

    @property
    def resident(self) -> tuple[tuple[str, int], ...]:
        """The model states that start on the SSDs (ZeRO-Infinity)."""
        return self.plan.nvme_resident

    @property
    def done(self) -> bool:
        """True when every bucket's gradients went out, was stepped and its weights came
        back."""
        return self.weights_left == 0 and self.gradients_left == 0 and \
            self.steps_left == 0 and self.states_left == 0

    @property
    def _engine(self) -> LinkEnd:
        """The link to the cDMA engine (init refuses model states while it is unconnected)."""
        assert self.dma is not None, "take() refuses an unconnected 'dma' port"
        return self.dma

    @property
    def _host_cpu(self) -> LinkEnd:
        """The link to the host CPU (init refuses model states while it is unconnected)."""
        assert self.cpu_end is not None, "take() refuses an unconnected 'cpu' port"
        return self.cpu_end

    def manifest(self) -> ModelStatesManifest:
        """The host buffers the states take for the whole run (under the GPU's name)."""
        return ModelStatesManifest(self.owner.name, tuple(self.plan.host_bytes.items()))

    def start(self) -> None:
        """At time 0: with the delayed update, ask the CPU for the previous iteration's
        steps."""
        self.cpu = self.host_cpu()
        if self.delayed:
            self._open()

    def _open(self) -> None:
        """The step opens (DeepSpeed's ``step()``): every bucket is asked of the CPU in order,
        on the SSDs once its states are read in."""
        self.opened = True
        for bucket in self.plan.buckets:
            if self.states_nvme:
                self._want_states(bucket.name)
            else:
                self._step(bucket.name)

    def _open_if_ready(self) -> None:
        """Without the delayed update the step opens once the backward pass has ended and
        every bucket's gradients are on the host."""
        if not self.opened and self.stream_over and self.gradients_left == 0:
            self._open()

    def holds_back(self, tensors: tuple[str, ...]) -> bool:
        """True while an op allocating or writing ``tensors`` must wait: with the gradients on
        the host it starts a bucket while the bucket the plan's ``gradient_buffers`` before it
        is still on the GPU (DeepSpeed's double buffer: the backward pass waits for the copy)."""
        if self.placement.gradients != "host":
            return False
        for tensor in tensors:
            name = self.bucket_of.get(tensor)
            if name is None or self.left[name] != len(self.buckets[name].wgrads):
                continue  # not a gradient, or its bucket already started
            at = self.order.index(name)
            held = self.plan.gradient_buffers
            if at >= held and self.order[at - held] not in self.landed:
                return True
        return False

    def written(self, tensors: tuple[str, ...], last: bool = True) -> None:
        """A backward kernel (of the step's last micro-batch, or accumulating on the host of
        any) wrote ``tensors``: a bucket whose last gradient that was leaves for the host."""
        for tensor in tensors:
            name = self.bucket_of.get(tensor)
            if name is None:
                continue
            self.left[name] -= 1
            if self.left[name] == 0 and self._accumulates:
                self._accumulate(name, last)
            elif self.left[name] == 0:
                self._copy("gradients", name)

    @property
    def accumulates(self) -> bool:
        """True with the gradients on the host and several micro-batches: each micro-batch's
        gradients leave the GPU to accumulate on the host."""
        return self._accumulates

    def micro_batch_starts(self) -> None:
        """A micro-batch starts: accumulating, its buckets are all still to be written and
        none of its gradients has left the GPU."""
        if not self._accumulates:
            return
        self.micro += 1
        self.left = {b.name: len(b.wgrads) for b in self.plan.buckets}
        self.landed.clear()

    def settled(self) -> bool:
        """True when the reduction stream has nothing of the micro-batch before left."""
        return not self.reducing and not self.reduction

    def _accumulate(self, name: str, last: bool) -> None:
        """Bucket ``name``'s gradients of this micro-batch, on the reduction stream, as
        DeepSpeed's ``async_accumulate_grad_in_cpu_via_gpu`` runs each of its parameters:
        from the second micro-batch on the sum so far copied from the host buffer to the GPU
        and added to them there; the sum copied to the host buffer (every micro-batch, the
        last one's too); in the last micro-batch then the step's copy as without
        accumulation (``async_inplace_copy_grad_to_fp32_buffer_from_gpu``)."""
        self.last_micro = last
        actions = (("in", "add") if self.micro > 0 else ()) + ("out",) + \
            (("final",) if last else ())
        self.reduction.extend((action, name) for action in actions)
        self._reduce_next()

    def _reduce_next(self) -> None:
        """Start the reduction stream's next action, if it is idle."""
        if self.reducing or not self.reduction:
            return
        action, name = self.reduction.popleft()
        self.reducing = True
        bucket = self.buckets[name]
        if action == "final":
            self._copy("gradients", name)
        elif action == "add":  # read both, write the sum
            label, start = f"{name} (accumulate)", self.sim.now
            self.gpu.elementwise(label, bucket.params, 3 * bucket.grad_bytes,
                                 lambda: self._added(label, start))
        else:
            self._engine.send(TransferRequest(
                "offload" if action == "out" else "prefetch", f"{name}:acc",
                bucket.grad_bytes, bucket.layers[-1], codec="none", stream="gradients"))

    def _added(self, label: str, start: int) -> None:
        """An accumulation's add ended on the GPU."""
        self.gpu.record("gradients", label, start, self.sim.now)
        self._reduced()
        self.gpu.resume()

    def _reduced(self) -> None:
        """The reduction stream's action ended: the next one starts."""
        self.reducing = False
        self._reduce_next()

    def _accumulated(self, req: TransferRequest) -> None:
        """An accumulation copy ended: a sum copied out of a micro-batch before the last
        frees its gradients on the GPU (the last one's go on to the step's copy)."""
        if req.direction == "prefetch":
            self.gradients_in += req.raw_bytes
        else:
            self.moved["gradients"] += req.raw_bytes
            self.wired["gradients"] += req.raw_bytes
            if not self.last_micro:
                self._gradients_left_gpu(req.tensor.split(":")[0])
        self._reduced()

    def _gradients_left_gpu(self, name: str) -> None:
        """Bucket ``name``'s gradients are on the host: with the gradients on the host their
        GPU memory is freed."""
        if self.placement.gradients == "host":
            for tensor in self.buckets[name].wgrads:
                self.gpu.memory.free(tensor)
        self.landed.add(name)

    def _copy(self, stream: str, name: str) -> None:
        bucket = self.buckets[name]
        gradients = stream == "gradients"
        if not gradients and self.placement.weights == "nvme":  # host to the SSDs
            self._storage("offload", f"{name}:w", bucket.weight_bytes, stream)
            return
        raw = bucket.grad_bytes if gradients else bucket.weight_bytes
        coded = self.compression.coded
        self._engine.send(TransferRequest(
            "offload" if gradients else "prefetch", name if gradients else f"{name}:w",
            raw, bucket.layers[-1], codec="" if coded else "none", stream=stream,
            wire_bytes=self.compression.wire(stream, raw) if coded else 0))

    def step_request(self, name: str) -> CpuStepRequest:
        """The CPU's work on bucket ``name``: its step and, with ``state_compression``
        ``host``, the decompression of its gradients and the compression of its weights (when
        they go back)."""
        bucket = self.buckets[name]
        c = self.compression
        if c.mode != "host":
            return CpuStepRequest(name, bucket.params, bucket.step_dram_bytes)
        return CpuStepRequest(name, bucket.params, bucket.step_dram_bytes, c.codec, c.dtype,
                              bucket.grad_bytes, bucket.weight_bytes if self.weights_back else 0)

    def _storage(self, direction: str, key: str, nbytes: int, stream: str) -> None:
        """A plain copy between host DRAM and the SSDs (``offload``: to the drives)."""
        layer = self.buckets[key.split(":")[0]].layers[-1]
        self._engine.send(TransferRequest(direction, key, nbytes, layer, codec="none",
                                               tier="nvme", stream=stream, near="host"))

    def _want_states(self, name: str) -> None:
        """Bucket ``name``'s states are wanted on the host: read once a buffer is free (the
        bucket two before it written back)."""
        self.wanted.append(name)
        self._read_wanted()

    def _read_wanted(self) -> None:
        while self.wanted:
            name = self.wanted[0]
            at = self.order.index(name)
            if at >= 2 and self.order[at - 2] not in self.written_back:
                return
            self.wanted.pop(0)
            self.reads_asked.add(name)
            self._storage("prefetch", f"{name}:s", self.buckets[name].state_bytes, "states_in")

    def _step_if_ready(self, name: str) -> None:
        """Step bucket ``name`` once the step is open and, on the SSDs, its states are on the
        host."""
        if not self.opened or (self.states_nvme and name not in self.read_in):
            return
        self._step(name)

    def _step(self, name: str) -> None:
        self.asked[name] = self.sim.now
        self._host_cpu.send(self.step_request(name))

    def _copied(self, done: TransferDone) -> None:
        """A copy ended at the engine: the GPU's timeline notes it, then its stream looks
        again at what it waits for."""
        req = done.request
        self.gpu.record(req.stream, req.tensor, done.started_ps, done.finished_ps)
        self.copied(req)
        self.gpu.resume()

    def _stepped(self, done: CpuStepDone) -> None:
        """The host CPU stepped a bucket: the GPU's timeline notes it, then its stream looks
        again at what it waits for."""
        self.gpu.record("cpu", done.request.bucket, done.started_ps, done.finished_ps)
        self.stepped(done.request, done.started_ps, done.finished_ps)
        self.gpu.resume()

    def copied(self, req: TransferRequest) -> None:
        """A model-state copy ended."""
        if req.tensor.endswith(":acc"):
            self._accumulated(req)
            return
        self.moved[req.stream] += req.raw_bytes
        self.wired[req.stream] += req.wire_bytes or req.raw_bytes
        if req.stream == "weights":
            self.weights_left -= 1
            return
        name = req.tensor.split(":")[0]
        if req.stream == "states_in":
            self.read_in.add(name)
            self._step_if_ready(name)
            return
        if req.stream == "states_out":
            self.states_left -= 1
            self.written_back.add(name)
            self._read_wanted()
            return
        self.gradients_left -= 1
        self._gradients_left_gpu(name)
        if self._accumulates:
            self._reduced()
        if not self.delayed:  # delayed: this iteration's gradients are the next one's step
            self._open_if_ready()

    def stepped(self, req: CpuStepRequest, started_ps: int, finished_ps: int) -> None:
        """The CPU stepped a bucket: once the last is stepped, the weights come back."""
        self.cpu_steps.append((started_ps, finished_ps))
        self.at_cpu.append((self.asked.pop(req.bucket, started_ps), finished_ps))
        self.steps_left -= 1
        if self.states_nvme:
            self._storage("offload", f"{req.bucket}:s", self.buckets[req.bucket].state_bytes,
                          "states_out")
        if not self.weights_back:
            return
        self.ready.append(req.bucket)
        if self.steps_left == 0:  # the whole partition is stepped (DeepSpeed's step())
            for name in self.ready:
                self._copy("weights", name)
            self.ready.clear()

    def stream_ended(self) -> None:
        """The GPU's passes are over (it waits at its epilogue): without the delayed update
        the step opens once every gradient is on the host too."""
        if self.stream_over:
            return
        self.stream_over = True
        if not self.delayed:
            self._open_if_ready()

    def fields(self, end_ps: int) -> dict[str, Any]:
        """The result's model-state figures: placement, buckets, bytes moved, the CPU's steps
        and the host tier's memory."""
        p = self.placement
        steps = self.cpu_steps
        alone = sum(self.cpu.request_alone_ps(self.step_request(b.name))
                    for b in self.plan.buckets) if self.cpu else 0
        return {**self._compression_fields(),
            "placement": {"optimizer_states": p.optimizer_states, "weights": p.weights,
                          "gradients": p.gradients, "delayed_update": p.delayed_update},
            "buckets": len(self.plan.buckets),
            "bucket_bytes": [b.grad_bytes for b in self.plan.buckets],
            "gradients_to_host_bytes": self.moved["gradients"],
            "weights_to_gpu_bytes": self.moved["weights"] if p.weights == "gpu" else 0,
            **({"gradients_to_gpu_bytes": self.gradients_in} if self._accumulates else {}),
            "host_state_bytes": self.plan.host_bytes,
            "cpu_step_time_ps": sum(b - a for a, b in steps),
            "cpu_step_alone_ps": alone,
            "cpu_step_span_ps": [min(a for a, _ in steps), max(b for _, b in steps)]
            if steps else [],
            "host_cpu_wait_ps": idle_overlap(self.gpu.compute_spans(), self.at_cpu, end_ps),
            "host": self.cpu.tier_usage(end_ps) if self.cpu else {},
            **self._nvme_fields(),
        }

    def _nvme_fields(self) -> dict[str, Any]:
        """ZeRO-Infinity's figures (none unless a state is on the SSDs): what lives on the
        drives and the bytes read from and written to them around the steps."""
        if not self.plan.nvme_resident:
            return {}
        return {"nvme_state_bytes": dict(self.plan.nvme_resident),
                "states_from_nvme_bytes": self.moved["states_in"],
                "states_to_nvme_bytes": self.moved["states_out"],
                "weights_to_nvme_bytes": self.moved["weights"]
                if self.placement.weights == "nvme" else 0}

    def _compression_fields(self) -> dict[str, Any]:
        """With ``state_compression``: the mode, codec and ratios, the bytes that crossed
        the link and the CPU's codec time ({} without)."""
        c = self.compression
        if not c.coded:
            return {}
        codec_ps = sum(self.cpu.codec_ps(self.step_request(b.name))
                       for b in self.plan.buckets) if self.cpu else 0
        return {"state_compression": {"mode": c.mode, "codec": c.codec, "dtype": c.dtype,
                                      "gradients_ratio": c.ratios["gradients"],
                                      "weights_ratio": c.ratios["weights"]},
                "gradients_wire_bytes": self.wired["gradients"],
                "weights_wire_bytes": self.wired["weights"],
                "cpu_codec_time_ps": codec_ps}
