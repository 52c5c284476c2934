"""Where an iteration's model states live, and the ZeRO-Offload buckets they move in.

Model states are the weights, their gradients and the optimizer's state (with mixed precision
its fp32 master copy of the weights): tensors of the iteration as activations are, each placed
on a tier (:data:`PLACES`). :class:`Placement` is what the workload's options ask for;
:func:`state_buckets` cuts the weight gradients into the buckets ZeRO-Offload (Ren et al.,
USENIX ATC 2021) copies to the host as the backward pass makes them, each stepped by the host
CPU and its updated weights copied back. docs/workloads.md states the schedule.
"""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence

from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.element_params import network_word

from .errors import WorkloadError

if TYPE_CHECKING:
    from .network import LayerInfo


class OptimizerStep(Protocol):
    """What a bucket needs of the optimizer (``vdnn.Optimizer``): its state and step bytes."""

    def state_bytes(self, params: int, dtype: str) -> int:
        """Bytes of optimizer state for ``params`` weights."""

    def dram_bytes(self, params: int, dtype: str) -> int:
        """Bytes the step of ``params`` weights reads and writes."""

__all__ = ["PLACES", "GRADIENT_PLACES", "STATE_COMPRESSION", "DEEPSPEED_BUCKET_ELEMENTS",
           "GRADIENT_BUFFERS",
           "Placement", "StateBucket",
           "ModelStatePlan", "state_buckets", "bucket_name"]

#: the tiers a model state may be placed on
PLACES = ("gpu", "host", "nvme")
#: the tiers gradients may be placed on (the CPU step reads them from host memory)
GRADIENT_PLACES = ("gpu", "host")
#: who compresses the gradient and weight copies of the host CPU's step
#: (the workload's ``state_compression``): nobody, the cDMA engine at both ends of the link, or the engine
#: at the GPU's end and the host CPU's codec at the host's (docs/workloads.md section 9)
STATE_COMPRESSION = ("none", "engine", "host")
#: gradient buckets the GPU holds at once with the gradients on the host: DeepSpeed's two
#: gradient buffers (``overlap_comm``: one filled by the backward pass while the other is
#: copied), so a backward kernel that starts bucket ``k`` waits until bucket ``k - 2``'s
#: gradients are on the host (DeepSpeed configuration documentation,
#: zero_optimization.overlap_comm)
GRADIENT_BUFFERS = 2
#: DeepSpeed's default ``reduce_bucket_size``, in elements: the gradient bucket when none is
#: given (DeepSpeed configuration documentation, zero_optimization.reduce_bucket_size)
DEEPSPEED_BUCKET_ELEMENTS = 500_000_000


@frozen_record
class Placement(FrozenRecord):
    """The tiers the workload's options place the model states on, the one-step delayed update,
    the micro-batches per optimizer step, the gradient bucket (bytes; 0: DeepSpeed's
    default) and who compresses the model-state copies (:data:`STATE_COMPRESSION`)."""

    optimizer_states: str = "gpu"
    weights: str = "gpu"
    gradients: str = "gpu"
    delayed_update: bool = False
    grad_accum: int = 1
    bucket_bytes: int = 0
    compression: str = "none"

    @property
    def offloaded(self) -> bool:
        """True when the optimizer step runs on the host CPU (ZeRO-Offload)."""
        return self.optimizer_states != "gpu"

    @property
    def accumulates_on_host(self) -> bool:
        """True when the gradients accumulate in a host buffer over the micro-batches
        (``gradients`` host with ``grad_accum`` above 1: DeepSpeed's
        ``async_accumulate_grad_in_cpu_via_gpu``, docs/workloads.md section 9)."""
        return self.gradients == "host" and self.grad_accum > 1

    @property
    def default(self) -> bool:
        """True for today's iteration: every state on the GPU, one micro-batch."""
        return self == Placement()

    def check(self, optimizer: str) -> None:
        """A :class:`WorkloadError` naming the param for a placement this model cannot run."""
        for param, value, allowed in (("optimizer_states", self.optimizer_states, PLACES),
                                      ("weights", self.weights, PLACES),
                                      ("gradients", self.gradients, GRADIENT_PLACES)):
            if value not in allowed:
                raise WorkloadError(f"{network_word(param, repr(value))}: expected one of "
                                    f"{', '.join(allowed)}")
        if self.compression not in STATE_COMPRESSION:
            raise WorkloadError(f"{network_word('state_compression', repr(self.compression))}: "
                                f"expected one of {', '.join(STATE_COMPRESSION)}")
        offloaded = f"{network_word('optimizer_states', 'host')} or nvme"
        if self.compression != "none" and not self.offloaded:
            raise WorkloadError(f"{network_word('state_compression', self.compression)} "
                                "compresses the gradient and weight copies of the host CPU's "
                                f"step: it needs {network_word('optimizer_states', 'host')}")
        if self.grad_accum < 1:
            raise WorkloadError(f"{network_word('grad_accum')} must be at least 1 "
                                f"(micro-batches per optimizer step), got {self.grad_accum}")
        if self.offloaded and optimizer != "adam":
            raise WorkloadError(f"{network_word('optimizer_states', self.optimizer_states)} "
                                "runs the optimizer step on the host CPU, whose throughput is "
                                f"measured for Adam: it needs {network_word('optimizer', 'adam')}"
                                f", not {optimizer!r}")
        if self.delayed_update and not self.offloaded:
            raise WorkloadError(f"{network_word('delayed_update', True)} overlaps the host CPU's "
                                f"optimizer step with the next iteration: it needs {offloaded}")
        if self.weights != "gpu" and not self.offloaded:
            raise WorkloadError(f"{network_word('weights', self.weights)}: the update kernels on "
                                "the GPU read and write the weights; with the weights off the "
                                f"GPU the host CPU steps them, which needs {offloaded}")
        if self.gradients == "host" and not self.offloaded:
            raise WorkloadError(f"{network_word('gradients', 'host')}: the gradients go to the "
                                "host for the CPU's optimizer step, which needs "
                                f"{offloaded}")


def bucket_name(index: int) -> str:
    """Stream-side name of gradient bucket ``index`` (its gradients; ``:w`` its weights)."""
    return f"bucket{index}"


@frozen_record
class StateBucket(FrozenRecord):
    """One bucket of weight gradients, in the order the backward pass completes them: its
    layers, their ``LAYER:dw`` tensors, the parameters it holds, the bytes of its gradients
    (copied to the host) and of its weights (copied back), the host state it updates and the
    host DRAM bytes the CPU's step of it reads and writes."""

    name: str
    layers: tuple[str, ...]
    wgrads: tuple[str, ...]
    params: int
    grad_bytes: int
    weight_bytes: int
    state_bytes: int
    step_dram_bytes: int


@frozen_record
class ModelStatePlan(FrozenRecord):
    """What the GPU drives besides its stream when the optimizer step runs on the host: the
    placement and the buckets (reverse layer order)."""

    placement: Placement
    buckets: tuple[StateBucket, ...] = field(default=())
    #: buckets of gradients the GPU holds at once with the gradients on the host
    gradient_buffers: int = GRADIENT_BUFFERS

    @property
    def host_bytes(self) -> dict[str, int]:
        """Bytes the host's pinned memory holds for the whole iteration, by role: the optimizer
        state (master weights and moments), the gradients' landing buffer and, accumulating
        on the host, the accumulation buffer (DeepSpeed's ``accumulated_grads_in_cpu``, in
        the gradients' 16-bit type)."""
        if self.placement.optimizer_states == "nvme":
            # two buckets' states at a time: one stepped while the next is read in
            largest = sorted((b.state_bytes for b in self.buckets), reverse=True)[:2]
            out = {"optimizer_state_buffers": sum(largest)}
        else:
            out = {"optimizer_states": sum(b.state_bytes for b in self.buckets)}
        out["gradients"] = sum(b.grad_bytes for b in self.buckets)
        if self.placement.accumulates_on_host:  # the 16-bit sum over the micro-batches
            out["accumulated_gradients"] = out["gradients"]
        if self.placement.weights == "host":
            out["weights"] = sum(b.weight_bytes for b in self.buckets)
        return out

    @property
    def nvme_resident(self) -> tuple[tuple[str, int], ...]:
        """What starts on the SSDs and stays there (ZeRO-Infinity), ``(key, bytes)`` per
        bucket: its optimizer states (``NAME:s``) and its 16-bit weights (``NAME:w``)."""
        out: list[tuple[str, int]] = []
        for b in self.buckets:
            if self.placement.optimizer_states == "nvme":
                out.append((f"{b.name}:s", b.state_bytes))
            if self.placement.weights == "nvme":
                out.append((f"{b.name}:w", b.weight_bytes))
        return tuple(out)


def state_buckets(weighted: Sequence["LayerInfo"], dtype: str, step: OptimizerStep,
                  placement: Placement, wgrad_name: Callable[[str], str]
                  ) -> tuple[StateBucket, ...]:
    """The weighted layers' gradients cut into buckets in backward order: a bucket takes
    layers until it holds at least ``placement.bucket_bytes`` of gradients (DeepSpeed's
    default of :data:`DEEPSPEED_BUCKET_ELEMENTS` elements when 0). A bucket larger than all
    the gradients is refused."""
    total = sum(i.weight_bytes for i in weighted)
    size = placement.bucket_bytes
    if size > total:
        raise WorkloadError(f"{network_word('gradient_bucket', size)} bytes is larger than "
                            f"the gradients "
                            f"({total} bytes): at most one bucket of all of them")
    itemsize = total // max(1, sum(i.params for i in weighted)) or 1
    cap = size or DEEPSPEED_BUCKET_ELEMENTS * itemsize
    buckets: list[StateBucket] = []
    group: list["LayerInfo"] = []

    def close() -> None:
        params = sum(i.params for i in group)
        grad = sum(i.weight_bytes for i in group)
        buckets.append(StateBucket(bucket_name(len(buckets)), tuple(i.name for i in group),
                                   tuple(wgrad_name(i.name) for i in group), params, grad,
                                   grad, step.state_bytes(params, dtype),
                                   step.dram_bytes(params, dtype)))
        group.clear()

    held = 0  # the group's gradient bytes
    for info in reversed(list(weighted)):
        group.append(info)
        held += info.weight_bytes
        if held >= cap:
            close()
            held = 0
    if group:
        close()
    return tuple(buckets)


def checked_placement(placement: Optional[Placement], optimizer: str) -> Placement:
    """``placement`` (the default when None), checked for ``optimizer``."""
    placement = placement or Placement()
    placement.check(optimizer)
    return placement
