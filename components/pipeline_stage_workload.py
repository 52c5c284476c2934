"""``cdma.PipelineStageWorkload``: one pipeline stage of a chain of identical layers, each of a
given forward and backward time and activation size, with the sends and recvs that carry
activations and gradients between stages and the stage's order of passes (GPipe, 1F1B or
interleaved 1F1B) as its schedule (docs/parallel.md, "The simulated pipeline")."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, cast

from sst_cdma.engine.element import MAX_EXACT_COUNT, MAX_EXACT_COUNT_WHY, Param
from workloads.parallel import SCHEDULES, LayoutError, ModelShape, make_layout
from workloads.parallel.stage_stream import StageStream, UniformLayers, uniform_stage_stream
from workloads.stream import Stream

from .pipeline_report import PipelineStageResult
from .workload_source import WorkloadSource

if TYPE_CHECKING:
    from .gpu import GPU
    from .workload_source import Step

__all__ = ["PipelineStageWorkload", "held_at_once"]


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
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        shape = ModelShape(layers=p["layers"], heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
        try:
            self.layout = make_layout(shape, pp=p["pp"], vpp=p["vpp"], schedule=p["schedule"],
                                      micro_batches=p["micro_batches"])
        except LayoutError as exc:
            raise ValueError(f"{name} ({self.type_name()}): {exc}") from None
        if p["stage"] >= p["pp"]:
            raise ValueError(f"{name} ({self.type_name()}): stage {p['stage']} is not one of "
                             f"pp {p['pp']} stages (0 to {p['pp'] - 1})")
        self.uniform = UniformLayers(p["forward_time"], p["backward_time"], p["activation"])
        self.built: Optional[StageStream] = None

    def kernel_times_source(self) -> str:
        """Every layer's kernels take the ``forward_time`` and ``backward_time`` params."""
        p = self.params
        return (f"synthetic pipeline stage: every layer {p['forward_time'] * 1e-9:g} ms "
                f"forward, {p['backward_time'] * 1e-9:g} ms backward")

    def stage_stream(self) -> StageStream:
        """The stage's stream and schedule (built once)."""
        if self.built is None:
            self.built = uniform_stage_stream(self.layout, self.params["layers"],
                                              self.params["stage"], self.uniform, self.name)
        return self.built

    def stream(self, memory_capacity: Optional[int]) -> Stream:
        """The stage's stream (the same for any memory)."""
        return self.stage_stream().stream

    def schedule(self, stream: Stream) -> list["Step"]:
        """The stage's passes in its schedule's order."""
        return list(self.stage_stream().steps)

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
                                         gpu.memory.capacity, gpu.memory.oom))
