"""Where policy ``auto`` puts the model states: the placements the machine can serve
(:func:`candidates`), each planned for its activations and priced with its model-state
traffic, and the fastest that fits the GPU and the host chosen (:func:`choose_placement`),
with a verdict for every one.

A placement of the model states is one choice for the whole model (ZeRO-Offload and
ZeRO-Infinity move every layer's states alike), so the planner enumerates the placements and,
for each, plans every activation tensor as before (keep, offload, compress, recompute) for
the GPU memory that placement leaves. A placement's predicted step is the activation plan's
iteration (its slot model, with the weights' prefetches where the weights are off the GPU)
followed by the model-state queues of :func:`sst_cdma.model.zero_offload.state_traffic`:
each bucket's gradients leave when the backward slot of its last layer ends; once the passes
and those copies are over the host CPU steps every bucket, then the weights come back (the
delayed update: both from time 0, beside the passes), as DeepSpeed's stage 1-2 optimizer
runs its ``step()``. With several micro-batches and the gradients on the host, every
micro-batch's buckets go through the reduction stream of
:mod:`sst_cdma.model.host_accumulation` (the sums copied in, added and copied out), and the
next micro-batch starts once its passes and that stream are over. docs/workloads.md ("The
planner's cost model") states the model and its limits.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable, Optional, Sequence

from sst_cdma.engine.records import FrozenRecord, Record, frozen_record, record
from sst_cdma.model.host_accumulation import accumulated_landing
from sst_cdma.model.zero_offload import state_traffic

from .model_states import ModelStatePlan, Placement, StateBucket
from .planner import PlanInfeasible, PlanResult

__all__ = ["StateCosts", "PlacementVerdict", "candidates", "describe", "predicted_step_ps",
           "choose_placement"]

GiB = 1024 ** 3
#: (optimizer states, gradients, weights) of the placements the planner weighs, fewest moves
#: first: everything on the GPU; ZeRO-Offload (the states on the host, then the gradients,
#: then the weights too); ZeRO-Infinity (the states on the SSDs, then the weights too)
HOST_PLACEMENTS = (("host", "gpu", "gpu"), ("host", "host", "gpu"), ("host", "host", "host"))
NVME_PLACEMENTS = (("nvme", "gpu", "gpu"), ("nvme", "host", "gpu"), ("nvme", "host", "nvme"))


@frozen_record
class StateCosts(FrozenRecord):
    """What the machine charges for model states beside the stream, each alone: a plain copy
    between GPU memory and host DRAM (``copy_ps(direction, bytes)``, ``offload``: to the
    host), the host CPU's step of a bucket (``step_ps(bucket)``), a copy between host DRAM
    and the SSDs (``storage_ps``; None: no SSD), the pinned host bytes one GPU's states
    may take, and the GPU's add of a bucket's accumulated gradients to its own
    (``add_ps(bucket)``; None: gradients accumulated on the host are not weighed)."""

    copy_ps: Callable[[str, int], int]
    step_ps: Callable[[StateBucket], int]
    host_room: int
    storage_ps: Optional[Callable[[str, int], int]] = None
    add_ps: Optional[Callable[[StateBucket], int]] = None


@record
class PlacementVerdict(Record):
    """One placement weighed: its predicted step (ps; None where it does not fit) and why
    it was chosen or not."""

    placement: Placement
    step_ps: Optional[float]
    reason: str
    chosen: bool = False

    def as_dict(self) -> dict[str, object]:
        """The verdict as the summary's planner block lists it."""
        return {"placement": describe(self.placement),
                "predicted_step_s": None if self.step_ps is None else self.step_ps * 1e-12,
                "chosen": self.chosen, "reason": self.reason}


def describe(placement: Placement) -> str:
    """A placement in the options' words, e.g. ``optimizer-states host, gradients host``
    (``every model state on the GPU`` for none moved)."""
    moved = [f"{name} {value}" for name, value in
             (("optimizer-states", placement.optimizer_states),
              ("gradients", placement.gradients), ("weights", placement.weights))
             if value != "gpu"]
    return ", ".join(moved) or "every model state on the GPU"


def candidates(options: Placement, host: bool, nvme: bool,
               accumulate: bool = True) -> list[Placement]:
    """The placements to weigh: every state on the GPU, then those the machine can serve
    (``host``: a host CPU to step the states; ``nvme``: SSDs to hold them), each with the
    options' micro-batches and bucket and, off the GPU, their delayed update and state
    compression. With several micro-batches the gradients on the host accumulate there
    (each micro-batch's copies and add on the reduction stream, docs/workloads.md section
    9): weighed unless ``accumulate`` is False (no price of the add)."""
    gpu = Placement(grad_accum=options.grad_accum, bucket_bytes=options.bucket_bytes)
    out = [gpu]
    tiers = (HOST_PLACEMENTS if host else ()) + (NVME_PLACEMENTS if host and nvme else ())
    for states, gradients, weights in tiers:
        if gradients == "host" and options.grad_accum > 1 and not accumulate:
            continue
        out.append(replace(options, optimizer_states=states, gradients=gradients,
                           weights=weights))
    return out


#: when a bucket's gradients leave the GPU: (bucket index, bucket, all written at, those
#: before it left at) -> ps
Landing = Callable[[int, StateBucket, int, list[int]], int]


def _micro_batch(result: PlanResult, held: int, start: float, land: Landing
                 ) -> tuple[list[int], list[int], float]:
    """One micro-batch of ``result``'s plan from ``start``: each bucket's gradients all
    written and gone (``land``), and how far the waits for the buffers (``held`` buckets at
    once; 0: no wait) moved its passes."""
    states = result.model_states
    assert states is not None, "only a plan with its states off the GPU has buckets"
    stream = result.predicted_time_ps
    ends = result.backward_end_ps  # in backward order
    order = {layer: k for k, layer in enumerate(ends)}
    layers = list(ends)
    shift = 0.0
    ready: list[int] = []
    landed: list[int] = []
    for k, bucket in enumerate(states.buckets):
        mine = [layer for layer in bucket.layers if layer in order]
        if held and k >= held and mine:
            first = order[min(mine, key=order.__getitem__)]
            at = start + shift + (ends[layers[first - 1]] if first else 0.0)
            shift += max(0.0, landed[k - held] - at)
        ready.append(round(start + shift + max((ends[layer] for layer in mine),
                                               default=stream)))
        landed.append(land(k, bucket, ready[-1], landed))
    return ready, landed, shift


def predicted_step_ps(result: PlanResult, placement: Placement, costs: StateCosts) -> float:
    """The step a placement's activation plan ``result`` predicts: its micro-batches, then
    the model-state queues after the last (see the module). With the gradients on the host the
    backward pass waits, as the GPU does, before a bucket whose gradients would exceed the
    plan's ``gradient_buffers`` until the bucket that many before has landed: every later slot
    moves by the wait. Accumulated on the host, every micro-batch's gradients go through the
    reduction stream (:func:`_accumulated_step_ps`)."""
    micro = placement.grad_accum
    stream = result.predicted_time_ps
    states = result.model_states
    if not placement.offloaded or states is None:
        return stream * micro
    if placement.accumulates_on_host:
        return _accumulated_step_ps(result, placement, costs)
    held = states.gradient_buffers if placement.gradients == "host" else 0

    def land(_k: int, bucket: StateBucket, ready: int, landed: list[int]) -> int:
        return max(ready, landed[-1] if landed else 0) + costs.copy_ps("offload",
                                                                        bucket.grad_bytes)
    ready, _, shift = _micro_batch(result, held, stream * (micro - 1), land)
    return _traffic_end(ready, round(stream * micro + shift), placement, costs, states)


def _accumulated_step_ps(result: PlanResult, placement: Placement, costs: StateCosts) -> float:
    """The step with the gradients accumulated on the host: each micro-batch's buckets
    through the reduction stream (:func:`~sst_cdma.model.host_accumulation.
    accumulated_landing`, the add priced by ``costs.add_ps``), the next micro-batch from when
    both its passes and the stream are over, then the host's step after the last."""
    states = result.model_states
    add_ps = costs.add_ps
    assert states is not None and add_ps is not None, \
        "accumulating on the host needs its states and the price of the add"
    micro = placement.grad_accum
    start = 0.0
    free = [0]  # the reduction stream, next free

    def land(m: int, k: int, bucket: StateBucket, ready: int, landed: list[int]) -> int:
        free[0] = accumulated_landing(ready, free[0], bucket, costs.copy_ps, add_ps, m == 0,
                                      m == micro - 1)
        return free[0]
    for m in range(micro):
        ready, landed, shift = _micro_batch(result, states.gradient_buffers, start,
                                            partial(land, m))
        passes = start + result.predicted_time_ps + shift
        start = max(passes, free[0])
    return _traffic_end(ready, round(passes), placement, costs, states, landed)


def _traffic_end(ready: list[int], stream_end: int, placement: Placement, costs: StateCosts,
                 states: ModelStatePlan, landed: Optional[list[int]] = None) -> float:
    """When the model-state queues after the passes end
    (:func:`~sst_cdma.model.zero_offload.state_traffic`)."""
    end, _ = state_traffic(ready, stream_end, states.buckets, costs.copy_ps, costs.step_ps,
                           placement.delayed_update, placement.weights != "host",
                           costs.storage_ps, placement.optimizer_states == "nvme",
                           placement.weights == "nvme", landed)
    return float(end)


def _host_bytes(result: PlanResult) -> int:
    states = result.model_states
    return sum(states.host_bytes.values()) if states is not None else 0


def choose_placement(options: Sequence[Placement],
                     plan: Callable[[Placement], PlanResult], costs: StateCosts
                     ) -> tuple[Placement, PlanResult, list[PlacementVerdict]]:
    """Plan every placement of ``options`` (``plan(placement)`` plans its activations, raising
    :class:`PlanInfeasible` where nothing fits the GPU) and choose the one with the shortest
    predicted step that fits the GPU and the host's pinned memory (the first of equals). A
    :class:`PlanInfeasible` naming the least shortfall when none fits."""
    verdicts: list[PlacementVerdict] = []
    results: list[Optional[PlanResult]] = []
    shortest: Optional[int] = None
    for placement in options:
        try:
            result = plan(placement)
        except PlanInfeasible as exc:
            verdicts.append(PlacementVerdict(placement, None, "does not fit the GPU: "
                                             f"{exc.short_bytes / GiB:.2f} GiB short"))
            results.append(None)
            shortest = exc.short_bytes if shortest is None else min(shortest, exc.short_bytes)
            continue
        host = _host_bytes(result)
        if host > costs.host_room:
            verdicts.append(PlacementVerdict(placement, None, "does not fit the host's pinned "
                                             f"memory: needs {host / GiB:.2f} GiB of "
                                             f"{costs.host_room / GiB:.2f} GiB"))
            results.append(None)
            continue
        verdicts.append(PlacementVerdict(placement, predicted_step_ps(result, placement, costs),
                                         ""))
        results.append(result)
    fitting = [k for k, v in enumerate(verdicts) if v.step_ps is not None]
    if not fitting:
        reasons = "; ".join(f"{describe(v.placement)}: {v.reason}" for v in verdicts)
        raise PlanInfeasible(f"no placement of the model states fits: {reasons}",
                             shortest or 0)
    best = min(fitting, key=lambda k: (verdicts[k].step_ps, k))
    best_ps = verdicts[best].step_ps
    assert best_ps is not None
    for k in fitting:
        v = verdicts[k]
        assert v.step_ps is not None
        v.reason = ("the fastest that fits" if k == best else
                    f"fits, {v.step_ps / best_ps:.2f}x the chosen step")
    verdicts[best].chosen = True
    chosen = results[best]
    assert chosen is not None
    return options[best], chosen, verdicts
