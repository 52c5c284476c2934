"""``cdma.PipelineStageWorkload``: one pipeline stage, with the sends and recvs that carry
activations and gradients between stages and the stage's order of passes (GPipe, 1F1B or
interleaved 1F1B) as its schedule (docs/parallel.md, "The simulated pipeline"): of a chain of
identical layers, each of a given forward and backward time and activation size, or with
``network`` of a transformer's blocks, cut from its single-GPU render with the kernels priced
by the GPU's ``kernels`` slot, and with ``tp`` above 1 of one tensor-parallel rank's shard
with its collectives over its tp group (docs/parallel.md, "Stages of a transformer")."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Mapping, Optional, cast

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import MAX_EXACT_COUNT, MAX_EXACT_COUNT_WHY, Param
from sst_cdma.model.dtypes import DTYPES
from sst_cdma.model.kernel_model import ModelError
from workloads import WorkloadError, load_network
from workloads.layer_times import kernel_times_source
from workloads.parallel import SCHEDULES, LayoutError, ModelShape, ParallelLayout, make_layout
from workloads.network import Network
from workloads.parallel.stage_planner import StageMemoryPlan, StageProblem, plan_stage
from workloads.parallel.stage_states import place_optimizer_states
from workloads.parallel.stage_stream import StageStream, UniformLayers, uniform_stage_stream
from workloads.parallel.tensor import TP_GROUP, shard_transformer
from workloads.model_states import ModelStatePlan, Placement
from workloads.parallel.zero import DP_GROUP
from workloads.parallel.zero_offload import OFFLOAD_ZERO, final_gradient_ops
from workloads.parallel.transformer_stages import (shard_plan, tied_head, transformer_blocks,
                                                   transformer_stage_stream)
from workloads.plan import Plan
from workloads.policies import check_policy
from workloads.render import iteration_stream
from workloads.stream import Stream, StreamError
from workloads.stream_schema import StreamOp

from .collective_ops import CollectivePort
from .interfaces import TransferCosts
from .pipeline_report import PipelineStageResult
from .workload_source import WorkloadSource

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import Step

__all__ = ["PipelineStageWorkload", "held_at_once", "tp_collectives",
           "hidden_collectives_ps"]


#: the params in which the GPUs of one stage differ (their streams do not)
TWIN_PARAMS = ("tp_rank", "dp_rank")
#: per simulation: the stage streams built, by what they depend on
#: (:meth:`PipelineStageWorkload._twin_key`), shared by the GPUs of a stage
_BUILT: "weakref.WeakKeyDictionary[Any, dict[tuple[object, ...], StageStream]]" = \
    weakref.WeakKeyDictionary()
#: per simulation: the stage memory plans of policy auto, by the stream they made
_PLANNED: "weakref.WeakKeyDictionary[Any, dict[int, StageMemoryPlan]]" = \
    weakref.WeakKeyDictionary()


def _stage_policy(policy: str) -> None:
    """A policy a pipeline stage renders: any the renderer takes by name, or ``auto`` (each
    stage plans its own memory); a ``plan`` file is one GPU's plan."""
    if policy == "plan":
        raise ValueError("policy 'plan' reads one plan file for one GPU; a pipeline stage "
                         "plans its own with auto, or takes none, all, conv, recompute or "
                         "CHOICE-GROUP terms")
    try:
        check_policy(policy)
    except WorkloadError as exc:
        raise ValueError(str(exc)) from None


def tp_collectives(gpu: "GPU", kind: str = TP_GROUP) -> tuple[int, int]:
    """The GPU's collectives over its group of ``kind`` (its tp group by default), from its
    fabric port's records: how many, and the time its stream spent in them (each from its
    compute stream draining to the group's answer: the rank's exposed communication over
    that group); (0, 0) without a port."""
    port = gpu.subcomponent("collectives")
    if not isinstance(port, CollectivePort):
        return 0, 0
    mine = [1 for _, group, *_ in port.result.collectives if group == kind]
    return len(mine), port.result.waited.get(kind, 0)


def hidden_collectives_ps(gpu: "GPU", kind: str = DP_GROUP) -> int:
    """The time the GPU's collectives over its group of ``kind`` ran while its stream went
    on (their time at the fabric less the stream's waits in them); 0 without a port."""
    port = gpu.subcomponent("collectives")
    if not isinstance(port, CollectivePort):
        return 0
    total = sum(end - start for _, group, _, _, _, start, end in port.result.collectives
                if group == kind)
    return total - port.result.waited.get(kind, 0)


def held_at_once(spans: list[tuple[int, int]]) -> int:
    """The most of ``spans`` ([start, end) times) open at one time; one ending when another
    starts does not overlap it."""
    events = sorted([(end, -1) for _, end in spans] + [(start, 1) for start, _ in spans])
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    return peak


class PipelineStageWorkload(WorkloadSource):
    """One stage of a pipeline of identical layers: its chunks' passes in the schedule's
    order, with the sends and recvs to its neighbour stages."""

    PARAMS = (
        Param("pp", "int", 1, "pipeline stages", minimum=1, maximum=MAX_EXACT_COUNT,
              why_maximum=f"a stage count is {MAX_EXACT_COUNT_WHY}"),
        Param("stage", "int", 0, "this GPU's stage (0 first)", minimum=0),
        Param("micro_batches", "int", 1, "micro-batches per optimizer step", minimum=1,
              maximum=4096, why_maximum="each micro-batch's passes are simulated in turn"),
        Param("schedule", "str", "1f1b", "pipeline schedule: gpipe, 1f1b or interleaved "
              "(virtual stages)", choices=SCHEDULES),
        Param("vpp", "int", 1, "model chunks (virtual stages) per stage; more than 1 needs "
              "schedule interleaved", minimum=1),
        Param("layers", "int", 8, "layers of the whole chain, split evenly over pp x vpp "
              "virtual stages", minimum=1, maximum=MAX_EXACT_COUNT,
              why_maximum=f"a layer count is {MAX_EXACT_COUNT_WHY}"),
        Param("forward_time", "time", "1ms", "each layer's forward kernel time", minimum=0),
        Param("backward_time", "time", "2ms", "each layer's backward kernel time",
              minimum=0),
        Param("activation", "bytes", "16MiB", "bytes of each layer's output (and of its "
              "input's gradient): what a stage sends", minimum=1),
        Param("network", "str", "", "a transformer (shipped name or .yaml) whose blocks the "
              "stages split ('': the chain of identical layers)"),
        Param("batch", "int", 1, "micro-batch size (samples of each micro-batch) of the "
              "network", minimum=1, maximum=MAX_EXACT_COUNT,
              why_maximum=f"a batch is {MAX_EXACT_COUNT_WHY}"),
        Param("seq_len", "int", 0, "sequence length of the network (0: its definition's)",
              minimum=0, maximum=MAX_EXACT_COUNT,
              why_maximum=f"a sequence length is {MAX_EXACT_COUNT_WHY}"),
        Param("dtype", "str", "float32", "element type of the network", choices=tuple(DTYPES)),
        Param("policy", "str", "none", "memory policy of each chunk of the network: a vDNN "
              "offload policy (none, all, conv), recompute or CHOICE-GROUP terms joined by "
              "'+' (docs/workloads.md), or auto: each stage plans its own for the passes it "
              "holds at once (docs/parallel.md); not plan", check=_stage_policy),
        Param("optimizer", "str", "adam", "optimizer step ending the network's step; its "
              "states count in each stage's memory (none: forward and backward only)",
              choices=("none", "sgd", "momentum", "adam")),
        Param("stage_split", "str", "", "blocks of each virtual stage, comma-separated, in "
              "virtual-stage order ('': even)"),
        Param("tp", "int", 1, "tensor-parallel size: each stage renders one tensor-parallel "
              "rank's shard of the network and runs its collectives over its tp group (the "
              "GPU's collectives slot on a cdma.ClusterFabric)", minimum=1,
              maximum=MAX_EXACT_COUNT, why_maximum=f"a rank count is {MAX_EXACT_COUNT_WHY}"),
        Param("tp_rank", "int", 0, "this GPU's tensor-parallel rank in its stage (0 first; "
              "every rank of a stage runs the same shard stream)", minimum=0),
        Param("dp", "int", 1, "data-parallel size: the stage's weight gradients are "
              "reduced over its dp group after its last backward pass (ZeRO's collectives; "
              "the GPU's collectives slot on a cdma.ClusterFabric)", minimum=1,
              maximum=MAX_EXACT_COUNT, why_maximum=f"a rank count is {MAX_EXACT_COUNT_WHY}"),
        Param("dp_rank", "int", 0, "this GPU's data-parallel rank (0 first; every replica "
              "runs the same stream)", minimum=0),
        Param("zero", "int", 0, "ZeRO stage over dp: 0 all-reduces the gradients; 1 and 2 "
              "reduce-scatter them, all-gather the updated weights and hold 1/dp of the "
              "optimizer states; 3 holds 1/dp of every model state, all-gathers each unit's "
              "weights ahead of use and reduce-scatters its gradients beside the backward",
              minimum=0, maximum=3),
        Param("sequence_parallel", "bool", False, "sequence parallelism (needs tp above 1): "
              "norms and residuals on sequence / tp, all-gathers and reduce-scatters in place "
              "of the all-reduces"),
        Param("optimizer_states", "str", "gpu", "where the optimizer states (the fp32 master "
              "weights and moments) of the stage's layers live: gpu, host (ZeRO-Offload: "
              "each rank's 1/dp partition in pinned host memory, stepped by the host CPU on "
              "the model_states driver's port 'cpu'; needs a network and adam) or nvme "
              "(ZeRO-Infinity: that partition on the engine's SSDs, read into host memory "
              "around the CPU's step) or auto (policy auto: on the GPU, unless no plan of the "
              "stage fits with them there; then on the host, as host)",
              choices=("gpu", "host", "nvme", "auto")),
        Param("delayed_update", "bool", False, "ZeRO-Offload's one-step delayed parameter "
              "update (optimizer_states host): the host CPU's step of the previous iteration "
              "overlaps this one"),
    )

    @classmethod
    def needs_host_cpu(cls, params: Mapping[str, Any]) -> bool:
        """True when the host CPU steps the stage's optimizer states (ZeRO-Offload)."""
        return params["optimizer_states"] != "gpu"

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        if p["network"]:
            self.optimizer = p["optimizer"]
        try:
            self.layout = make_layout(self._shape(), tp=p["tp"], pp=p["pp"], dp=p["dp"],
                                      zero=p["zero"], vpp=p["vpp"],
                                      schedule=p["schedule"], micro_batches=p["micro_batches"],
                                      micro_batch_size=p["batch"],
                                      stage_split=self._stage_split(),
                                      sequence_parallel=p["sequence_parallel"])
        except (LayoutError, WorkloadError, OSError) as exc:
            raise ValueError(f"{name} ({self.type_name()}): {exc}") from None
        for param, size in (("stage", "pp"), ("tp_rank", "tp"), ("dp_rank", "dp")):
            if p[param] >= p[size]:
                raise ValueError(f"{name} ({self.type_name()}): {param} {p[param]} is not one "
                                 f"of {size} {p[size]} ranks (0 to {p[size] - 1})")
        self.uniform = UniformLayers(p["forward_time"], p["backward_time"], p["activation"])
        self.built: Optional[StageStream] = None
        #: optimizer_states auto: the placement a stage no plan fits on the GPU tries
        self.auto_host: Optional[Placement] = None
        self.placement = self._placement(name)
        #: the GPU's memory the stage plans for under policy auto (None: unlimited)
        self.capacity: Optional[int] = None

    def _placement(self, name: str) -> Optional[Placement]:
        """The model states' placement with the optimizer states off the GPU (None: on it),
        checked: a network's stages, Adam, and at dp above 1 ZeRO 1, 2 or 3."""
        p = self.params
        if p["optimizer_states"] == "gpu":
            if p["delayed_update"]:
                raise ValueError(f"{name} ({self.type_name()}): delayed_update overlaps the "
                                 "host CPU's step with the next iteration: it needs "
                                 "optimizer_states host")
            return None
        where = f"{name} ({self.type_name()}): optimizer_states {p['optimizer_states']}"
        if not p["network"]:
            raise ValueError(f"{where}: the chain of identical layers has no weights; give "
                             "a network")
        if p["dp"] > 1 and p["zero"] not in OFFLOAD_ZERO:
            raise ValueError(f"{where} with dp {p['dp']}: ZeRO-Offload keeps each rank's "
                             f"partition of the optimizer states on its host: zero 1, 2 or 3, "
                             f"not {p['zero']}")
        auto = p["optimizer_states"] == "auto"
        if auto and p["policy"] != "auto":
            raise ValueError(f"{where}: each stage's planner places them: it needs policy "
                             f"auto, not {p['policy']}")
        placement = Placement("host" if auto else p["optimizer_states"],
                              delayed_update=p["delayed_update"])
        try:
            placement.check(p["optimizer"])
        except WorkloadError as exc:
            raise ValueError(f"{name} ({self.type_name()}): {exc}") from None
        if auto:  # on the GPU until the stage's planner finds no plan fits there
            self.auto_host = placement
            return None
        return placement

    def _shape(self) -> ModelShape:
        """The model the layout is checked against: the chain's ``layers``, or the network's
        blocks, heads, KV heads, widths and vocabulary."""
        p = self.params
        if not p["network"]:
            return ModelShape(layers=p["layers"], heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
        from workloads.parallel.tensor import transformer_dims

        d = transformer_dims(load_network(p["network"], p["seq_len"]))
        return ModelShape(layers=d.blocks, heads=d.heads, kv_heads=d.kv_heads, hidden=d.hidden,
                          ffn=d.ffn, vocab=d.vocab)

    def _stage_split(self) -> Optional[tuple[int, ...]]:
        """The ``stage_split`` param as layer counts (None: even)."""
        text = self.params["stage_split"].strip()
        if not text:
            return None
        try:
            return tuple(int(part) for part in text.split(","))
        except ValueError:
            raise LayoutError(f"stage_split {text!r}: expected layer counts separated by "
                              "commas, e.g. 4,4,2,2") from None

    @property
    def modelled_times(self) -> bool:
        """True when the kernels slot's fitted model priced a network's kernels (the chain's
        times are given: timers)."""
        return bool(self.params["network"]) and self.kernels.models_times

    def kernel_times_source(self) -> str:
        """The chain's ``forward_time`` and ``backward_time``, or the kernels slot's model or
        measurement for a network."""
        p = self.params
        if not p["network"]:
            return (f"synthetic pipeline stage: every layer {p['forward_time'] * 1e-9:g} ms "
                    f"forward, {p['backward_time'] * 1e-9:g} ms backward")
        kernels = self.kernels
        try:
            tf32 = kernels.model.tf32 if kernels.model is not None else ""
            return kernel_times_source(kernels.model_name, self.owner.params["gpu_preset"],
                                       kernels.layer_times, p["dtype"], tf32, "")
        except (ModelError, WorkloadError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    def rendered_plan(self, policy: str = "", choices: Optional[Mapping[str, str]] = None
                      ) -> Plan:
        """The network's single-GPU plan of one micro-batch, as ``cdma.NetworkWorkload``
        renders it for this GPU's kernels slot (with ``tp`` above 1, of one tensor-parallel
        rank's shard); ``policy`` (default: the param's) and ``choices`` (its per-tensor
        choices) as the stage planner asks."""
        p, kernels = self.params, self.kernels
        policy = policy or p["policy"]
        if p["tp"] > 1:
            if kernels.layer_times:
                raise ConfigError(f"{self.name}: measured layer times are of the whole "
                                  f"network; tp {p['tp']} renders a shard: give the fitted "
                                  "model or the roofline")
            net = load_network(p["network"], p["seq_len"])
            return shard_plan(net, p["tp"], p["batch"], p["dtype"], policy, p["optimizer"],
                              kernels.model, kernels.workspace_limit, p["sequence_parallel"],
                              self.placement, choices)
        stream = iteration_stream(p["network"], p["batch"], p["dtype"], policy,
                                  kernels.layer_times, p["optimizer"], 0, "liveness",
                                  kernels.model, kernels.workspace_limit, None,
                                  None if choices is None else tuple(sorted(choices.items())),
                                  seq_len=p["seq_len"], placement=self.placement)
        assert stream.plan is not None, "a rendered stream keeps its plan"
        return stream.plan

    def _twin_key(self) -> tuple[object, ...]:
        """What the stage's stream depends on: every param but the GPU's tp and dp ranks
        (the ranks of a stage run one stream), the GPU preset and its kernels slot (the
        element and its params)."""
        p, kernels = self.params, self.kernels
        mine = tuple(sorted((k, repr(v)) for k, v in p.items() if k not in TWIN_PARAMS))
        theirs = tuple(sorted((k, repr(v)) for k, v in kernels.params.items()))
        return (self.owner.params["gpu_preset"], kernels.type_name(), theirs, mine,
                self.capacity if p["policy"] == "auto" else None)

    def stage_stream(self) -> StageStream:
        """The stage's stream and schedule (built once, and shared with the GPUs of the same
        stage in this simulation: the same params and kernels give the same stream)."""
        if self.built is not None:
            return self.built
        shared = _BUILT.setdefault(self.sim, {})
        key = self._twin_key()
        if key in shared:
            self.built = shared[key]
            return self.built
        self.built = shared[key] = self._build_stage_stream()
        return self.built

    def _build_stage_stream(self) -> StageStream:
        """The stage's stream and schedule, built."""
        p = self.params
        if not p["network"]:
            return uniform_stage_stream(self.layout, p["layers"], p["stage"], self.uniform,
                                        self.name)
        try:
            net = load_network(p["network"], p["seq_len"])
            shard = None
            if p["tp"] > 1:
                shard = shard_transformer(net, p["tp"], p["sequence_parallel"])
                net = shard.network
            fabric = isinstance(self.owner.subcomponent("collectives"), CollectivePort)

            def cut(plan: Plan, layout: ParallelLayout) -> StageStream:
                transformer_blocks(plan)
                # offloaded: the head's copy is stepped with the stage's other states, on
                # the host; with a fabric port its gradient is all-reduced with the first
                # stage's
                tied = tied_head(net, "none" if self.placement else p["optimizer"],
                                 all_reduce=fabric)
                return transformer_stage_stream(plan, layout, p["stage"], self.name, tied,
                                                shard, p["optimizer"], self.placement)
            if p["policy"] == "auto" and self.capacity is not None:
                return self._plan_memory(net, cut)
            return cut(self.rendered_plan("none" if p["policy"] == "auto" else ""), self.layout)
        except ConfigError:
            raise
        except OSError as exc:
            raise ConfigError(f"{self.name}: cannot read workload: {exc}") from None
        except (StreamError, WorkloadError, ValueError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    def _plan_memory(self, net: Network, cut: Any) -> StageStream:
        """Policy auto: the stage's own plan for its GPU's memory and the passes it holds at
        once (:func:`~workloads.parallel.stage_planner.plan_stage`), kept for the summary;
        with optimizer_states auto, with its optimizer states where
        :func:`~workloads.parallel.stage_states.place_optimizer_states` puts them."""
        if self.auto_host is None:
            made = self._plan_stage(net, cut)
        else:
            def plan_on(placement: Optional[Placement]) -> StageMemoryPlan:
                self.placement = placement
                return self._plan_stage(net, cut)
            made, self.placement = place_optimizer_states(plan_on, self.auto_host)
        _PLANNED.setdefault(self.sim, {})[id(made.built)] = made
        return made.built

    def _plan_stage(self, net: Network, cut: Any) -> StageMemoryPlan:
        """The stage's plan with its model states where :attr:`placement` puts them."""
        assert self.capacity is not None
        problem = StageProblem(net, self.rendered_plan("none"), self.layout,
                               self.params["stage"], self.planner_kernel_ps(),
                               self.planner_copy_costs(net, self.params["batch"],
                                                       self.params["dtype"]),
                               lambda c: self.rendered_plan("auto", c),
                               cut)
        return plan_stage(problem, self.capacity, f"{self.name}: stage "
                          f"{self.params['stage']} policy auto")

    def memory_plan(self) -> Optional[StageMemoryPlan]:
        """Policy auto: the stage's memory plan (None under any other policy)."""
        return _PLANNED.get(self.sim, {}).get(id(self.stage_stream()))

    def stream(self, memory_capacity: Optional[int]) -> Stream:
        """The stage's stream (the same for any memory, but under policy auto, which plans
        for ``memory_capacity``)."""
        self.capacity = memory_capacity
        return self.stage_stream().stream

    def schedule(self, stream: Stream) -> list["Step"]:
        """The stage's passes in its schedule's order."""
        return list(self.stage_stream().steps)

    def model_states(self, stream: Stream) -> Optional[ModelStatePlan]:
        """With the optimizer states on the host: the buckets of this rank's partition the
        host CPU steps (None otherwise)."""
        return self.stage_stream().model_states

    def states_after(self, stream: Stream) -> int:
        """The weights' all-gathers and the epilogue: they wait for the host's step."""
        return self.stage_stream().after_states

    def final_gradients(self, ops: list[StreamOp]) -> Optional[dict[int, tuple[str, ...]]]:
        """A gradient's partition leaves for the host after its reduce-scatter (dp above 1)
        or its last kernel (:func:`~workloads.parallel.zero_offload.final_gradient_ops`)."""
        plan = self.stage_stream().model_states
        return None if plan is None else final_gradient_ops(ops, plan)

    def held_spans(self, gpu: "GPU") -> list[tuple[int, int]]:
        """For each (micro-batch, chunk): from its first forward kernel's start to its last
        backward kernel's end, as the GPU ran them (its compute events map one to one, in
        order, onto the compute ops of its scheduled stream)."""
        built = self.stage_stream()
        pass_of: list[tuple[int, int]] = []
        for step in built.steps:
            if step.micro_batch is not None:
                pass_of += [(step.micro_batch, step.chunk)] * sum(
                    1 for op in built.stream.ops[step.start:step.end] if op.op == "compute")
        kernels = [(a, b) for kind, _, a, b in gpu.timeline if kind == "compute"]
        first: dict[tuple[int, int], int] = {}
        last: dict[tuple[int, int], int] = {}
        for key, (start, end) in zip(pass_of, kernels):
            first.setdefault(key, start)
            last[key] = end
        return [(first[key], last[key]) for key in first]

    def finish(self) -> None:
        """Publish what the stage ran."""
        gpu = cast("GPU", self.owner)
        p = self.params
        end = gpu.finished_at if gpu.finished_at is not None else self.sim.now
        self.publish(PipelineStageResult(gpu.name, p["stage"], p["pp"], p["vpp"], p["schedule"],
                                         p["micro_batches"], end, gpu.kernel_total,
                                         held_at_once(self.held_spans(gpu)), gpu.memory.peak,
                                         gpu.memory.capacity, gpu.memory.oom, p["tp"],
                                         p["tp_rank"], *tp_collectives(gpu), p["dp"],
                                         p["dp_rank"], *tp_collectives(gpu, DP_GROUP),
                                         *self._tokens_and_params(), self._peak_flops(),
                                         hidden_collectives_ps(gpu),
                                         self._host_fields(gpu, end), self._planner_entry()))

    def _host_fields(self, gpu: "GPU", end: int) -> dict[str, Any]:
        """With the optimizer states on the host: this rank's host CPU figures
        (:class:`~components.pipeline_report.PipelineStageResult`'s ``host``); {} without."""
        states = gpu.states
        if states is None:
            return {}
        f = states.fields(end)
        cpu = states.host_cpu()
        span = f["cpu_step_span_ps"]
        return {"cpu": cpu.name if cpu else "", "gpus_on_cpu": cpu.gpus_stepped() if cpu else 0,
                "cpu_step_ps": f["cpu_step_time_ps"], "cpu_step_alone_ps": f["cpu_step_alone_ps"],
                "cpu_step_span_ps": span[1] - span[0] if span else 0,
                "cpu_wait_ps": f["host_cpu_wait_ps"],
                "gradients_to_host_bytes": f["gradients_to_host_bytes"],
                "weights_to_gpu_bytes": f["weights_to_gpu_bytes"]}

    def _planner_entry(self) -> Optional[dict[str, Any]]:
        """Policy auto: what the stage's planner chose and why, with the engine's codec (the
        summary's ``pipeline.stages[].planner``); None otherwise."""
        made = self.memory_plan() if self.params["network"] else None
        if made is None:
            return None
        gpu = self.owner
        codec = getattr(gpu.peer_provider("dma", TransferCosts), "algorithm", "none") \
            if "dma" in gpu.connected_ports() else "none"
        return {**made.as_dict(), "codec": codec}

    def _tokens_and_params(self) -> tuple[int, int]:
        """For tokens/s and MFU: the tokens of one micro-batch (batch x sequence) and the
        whole network's parameters; zeros for the chain of identical layers."""
        p = self.params
        if not p["network"]:
            return 0, 0
        from workloads.parallel.tensor import transformer_dims

        net = load_network(p["network"], p["seq_len"])
        return p["batch"] * transformer_dims(net).seq_len, net.param_count()

    def _peak_flops(self) -> float:
        """The GPU preset's dense peak FLOP/s in the run's dtype: its tensor cores' for
        float16/bfloat16 (where it has them), its fp32 peak otherwise."""
        from sst_cdma.model.gpus import GPUS

        spec = GPUS[self.owner.params["gpu_preset"]]
        low = self.params["dtype"] in ("float16", "bfloat16") and spec.tensor_flops
        return spec.tensor_flops if low else spec.peak_flops
