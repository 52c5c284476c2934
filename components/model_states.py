"""The interface of the GPU's ``model_states`` slot: what drives the model states that live off
the GPU (ZeRO-Offload, ZeRO-Infinity) beside the GPU's workload stream.

The element in the slot owns the links the model states travel on (its own ports to the cDMA
engine and to the host CPU) and talks to the GPU through two declared interfaces: what the GPU
asks of it (:class:`ModelStates`, this slot's base class) and what it may ask of the GPU
(:class:`StatesGPU`, a Protocol the GPU implements). It is never handed the GPU itself.
``cdma.ModelStateDriver`` (components/model_state_driver.py) is today's; the GPU fills nothing
into the slot by itself and uses it only when its workload's plan keeps states off the GPU."""
from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from sst_cdma.engine.element import SubComponent

from .interfaces import HostStep, MemoryPool

if TYPE_CHECKING:
    from .workload_source import ModelStatePlan

__all__ = ["ModelStates", "StatesGPU"]


class StatesGPU(Protocol):
    """What the element in a GPU's ``model_states`` slot uses of the GPU: its memory (a
    gradient bucket is freed there once copied), its compute stream's busy spans (the report),
    its timeline (each copy and step the slot's element saw end) and a nudge to re-check what
    its stream waits for."""

    @property
    def memory(self) -> MemoryPool:
        """The GPU memory holding the gradients."""
        ...

    def compute_spans(self) -> list[tuple[int, int]]:
        """[start, end] of every kernel the compute stream ran."""
        ...

    def record(self, kind: str, label: str, start_ps: int, end_ps: int) -> None:
        """Note a model-state copy (``kind``: its copy stream) or a host CPU step (``cpu``)
        of ``label`` over [start, end] on the GPU's timeline."""
        ...

    def resume(self) -> None:
        """Something the stream may wait for happened: it issues on if it was that."""
        ...

    def elementwise(self, label: str, flops: int, dram: int,
                    done: Callable[[], None]) -> None:
        """Run a memory-bound kernel of ``flops`` and ``dram`` bytes beside the compute
        stream (on a stream of its own, sharing the HBM), priced as the stream's memory-bound
        kernels are; ``done`` once it ends."""
        ...


class ModelStates(SubComponent):
    """The interface of the GPU's ``model_states`` slot: the gradient copies, host CPU steps
    and weight copies of one GPU's optimizer step, driven beside its stream."""

    ABSTRACT = True

    @abstractmethod
    def take(self, gpu: StatesGPU, plan: ModelStatePlan, dtype: str) -> None:
        """At init (phase 0): drive ``plan``'s model states (of ``dtype`` elements) for
        ``gpu``; refuse ports the plan needs that are not connected, and tell the host CPU
        the host buffers the states take."""

    @abstractmethod
    def host_cpu(self) -> Optional[HostStep]:
        """The host CPU that steps the states (None: none is connected); asked from init on,
        by the policy auto planner too, before :meth:`take`."""

    @property
    @abstractmethod
    def resident(self) -> tuple[tuple[str, int], ...]:
        """The model states that start on the SSDs (the engine's manifest names them)."""

    @abstractmethod
    def start(self) -> None:
        """At setup: start what runs from time 0 (the delayed update's steps)."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """True once every copy and step of the step has ended."""

    @abstractmethod
    def holds_back(self, tensors: tuple[str, ...]) -> bool:
        """True while an op allocating or writing ``tensors`` must wait for a copy."""

    @abstractmethod
    def written(self, tensors: tuple[str, ...], last: bool = True) -> None:
        """A backward kernel wrote ``tensors``: of the step's last micro-batch, or (``last``
        False, asked only while :attr:`accumulates`) of an earlier one."""

    @property
    @abstractmethod
    def accumulates(self) -> bool:
        """True when every micro-batch's gradients leave the GPU (they accumulate on the
        host), not only the last one's."""

    @abstractmethod
    def micro_batch_starts(self) -> None:
        """The stream starts a micro-batch of the step (with more than one)."""

    @abstractmethod
    def settled(self) -> bool:
        """True when no copy or kernel of the micro-batch before is still running: the next
        one may start (DeepSpeed synchronizes at the end of each backward pass)."""

    @abstractmethod
    def stream_ended(self) -> None:
        """The GPU issued its last op before the epilogue."""

    @abstractmethod
    def fields(self, end_ps: int) -> dict[str, Any]:
        """The result's model-state figures at ``end_ps`` (``host``: the host tier's memory,
        which the GPU files under its tiers)."""
