"""The interface of the GPU's ``workload`` slot: where the iteration's workload stream comes
from. ``cdma.NetworkWorkload`` (components/network_workload.py) renders a network,
``cdma.StreamWorkload`` (components/stream_workload.py) reads a stream file; the GPU executes
what either gives it and makes no stream itself."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from sst_cdma.engine.element import SubComponent
from sst_cdma.engine.flows import FlowNetwork
from workloads.stats import REPORTED_CHOICES, tensor_choices
from workloads.schedule import single_pass
from workloads.vdnn import wgrad_name

from .interfaces import MemoryPool, TransferCosts
from .messages import MovedTensor, OffloadManifest

if TYPE_CHECKING:
    # the types of what a workload gives the GPU, for the components modules that may not
    # import workloads themselves (tests/core/test_import_rules.py)
    from workloads.model_states import ModelStatePlan
    from workloads.network import Network
    from workloads.schedule import Step
    from workloads.stream import Stream
    from workloads.stream_schema import StreamOp

    from .kernel_times import KernelTimes

__all__ = ["WorkloadSource", "ModelStatePlan", "Step", "Stream", "StreamOp"]


class WorkloadSource(SubComponent):
    """The interface of the GPU's ``workload`` slot: gives the GPU its iteration's stream."""

    ABSTRACT = True
    #: the optimizer step ending the iteration, as the GPU reports it
    optimizer = "none"
    #: the GPU memory allocation mode, as the GPU reports it
    allocation = "stream"

    @classmethod
    def needs_host_cpu(cls, params: Mapping[str, Any]) -> bool:
        """True when a workload with ``params`` (this element's, validated) has a host CPU
        step model states, so the GPU needs one on its ``cpu`` port; a stream brings no
        model states."""
        return False

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        #: policy auto: the planner's predicted iteration time and peaks ({} otherwise)
        self.planner: dict[str, Any] = {}

    @property
    def kernels(self) -> "KernelTimes":
        """The kernel times of the parent GPU (its ``kernels`` slot)."""
        return self.owner.subcomponent("kernels")  # type: ignore[return-value]

    @property
    def modelled_times(self) -> bool:
        """True when the stream's kernel times are modelled (their DRAM traffic shares HBM
        bandwidth with the DMA engine); measured or given ones are timers."""
        return False

    def hbm_bandwidth(self) -> float:
        """The parent GPU's HBM bandwidth (B/s) its memory-bound kernels run at."""
        memory = self.owner.peer_provider("hbm", MemoryPool)
        return self.service(FlowNetwork).resources[memory.bandwidth_resource].capacity

    def planner_kernel_ps(self) -> Callable[[Any], int]:
        """Prices a compute op as the GPU runs it, for policy auto's planner: the kernels
        slot's time and, since the stream synchronizes after every layer, the launch latency a
        layer's first kernel waits (components/gpu.py, an idle compute stream); each distinct
        kernel priced once (the planner asks of every plan alike)."""
        kernels = self.kernels
        dram_bw = self.hbm_bandwidth()
        priced: dict[tuple[Optional[int], int, int], int] = {}

        def kernel_ps(op: Any) -> int:
            key = (op.time_ps, op.flops or 0, op.dram or 0)
            ps = priced.get(key)
            if ps is None:
                modelled = op.time_ps is None or self.modelled_times
                ps = priced[key] = kernels.kernel_ps(op.time_ps, key[1], key[2], dram_bw) + \
                    kernels.after_sync_ps(modelled)
            return ps
        return kernel_ps

    def planner_copy_costs(self, network: "Network", batch: int, dtype: str
                           ) -> Optional[dict[str, Any]]:
        """Each tensor of ``network``'s copy costs from the engine on the GPU's ``dma`` port,
        for policy auto's planner (None without an engine: keep and recompute only)."""
        gpu = self.owner
        if "dma" not in gpu.connected_ports():
            return None
        tensors = network.tensors(batch, dtype)
        return gpu.peer_provider("dma", TransferCosts).transfer_costs(OffloadManifest(
            gpu=gpu.name, network=network.name, dtype=dtype, batch=batch,
            tensors=tuple(MovedTensor(t.name, t.bytes, t.sparse, t.shape)
                          for t in tensors.values()), tier=gpu.params["offload_to"]))

    def kernel_times_source(self) -> str:
        """Where the stream's kernel times come from, as the reports say it."""
        raise NotImplementedError

    def stream(self, memory_capacity: Optional[int]) -> "Stream":
        """The iteration's stream for a GPU with ``memory_capacity`` bytes of memory (None:
        unlimited); called once, from the GPU's init. Raises ConfigError naming this element
        and what is at fault."""
        raise NotImplementedError

    def weight_gradients(self, stream: "Stream") -> dict[str, str]:
        """The weight gradients of ``stream`` (``LAYER:dw`` tensor -> layer), in layer order:
        what a data-parallel GPU hands the all-reduce."""
        tensors = stream.tensors
        layers = [t.layer for t in tensors.values() if t.kind == "weight" and t.layer]
        return {wgrad_name(layer): layer for layer in layers if wgrad_name(layer) in tensors}

    def model_states(self, stream: "Stream") -> Optional["ModelStatePlan"]:
        """The model states the GPU moves besides its stream (the placement and the gradient
        buckets the host CPU steps), or None when every state is on the GPU."""
        plan = stream.plan
        return plan.model_states if plan is not None else None

    def states_after(self, stream: "Stream") -> int:
        """How many ops at the end of the scheduled stream wait for the model states' copies
        and the host CPU's steps: the plan's epilogue (which frees the weights and
        gradients)."""
        plan = stream.plan
        assert plan is not None, "model states come from a rendered stream's plan"
        return len(plan.epilogue)

    def final_gradients(self, ops: list["StreamOp"]) -> Optional[dict[int, tuple[str, ...]]]:
        """Where the model states' weight gradients are final in ``ops`` (the stream in its
        schedule's order): op index -> the gradients that leave for the host once it ends;
        None: every kernel of the step's last micro-batch makes final those it writes."""
        return None

    def schedule(self, stream: "Stream") -> list["Step"]:
        """The order one optimizer step runs the spans of ``stream.ops`` in: the plan's
        (several micro-batches: each one's forward and backward passes in turn), or the
        stream once as it stands (a parsed one)."""
        plan = stream.plan
        return plan.schedule() if plan is not None else single_pass(len(stream.ops))

    def tensor_choices(self, stream: "Stream") -> tuple[dict[str, str], dict[str, int]]:
        """What ``stream`` does with each activation tensor (keep, offload, compress,
        recompute or free), and the bytes of the tensors of each reported choice."""
        choices = tensor_choices(stream)
        choice_bytes = {c: sum(stream.tensors[t].bytes for t, v in choices.items() if v == c)
                        for c in REPORTED_CHOICES}
        return choices, choice_bytes
