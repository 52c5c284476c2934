"""ZeRO's arithmetic per data-parallel rank, and the ZeRO-3 (FSDP) schedule as data.

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
(SC 2020), section 5 and Figure 1: with mixed precision and Adam a model of Ψ parameters holds
2Ψ bytes of 16-bit weights, 2Ψ of 16-bit gradients and KΨ of optimizer state (K = 12: fp32
master weights, momentum and variance) on every data-parallel rank. Stage 1 (P_os) divides the
optimizer state by the data-parallel degree N_d, stage 2 (P_os+g) the gradients too, stage 3
(P_os+g+p) the weights too. Section 7: a step moves 2Ψ per rank at stages 0-2 (an all-reduce, or
a reduce-scatter of the gradients and an all-gather of the updated weights, Ψ each) and 3Ψ at
stage 3 (the weights all-gathered before the forward and again before the backward, the
gradients reduce-scattered). The bytes per parameter are the iteration's own
(:func:`~workloads.dtypes.itemsize` for weights and gradients, the optimizer's
:meth:`~workloads.vdnn.Optimizer.state_bytes`), so K = 12 is not restated here.

:func:`fsdp_schedule` lays ZeRO-3's collectives out per FSDP unit (a transformer block, or a
weighted layer outside the blocks) in the order PyTorch FSDP issues them with its defaults: each
unit's weights all-gathered one unit ahead (the all-gather of unit i+1 issued before unit i's
forward; ``BackwardPrefetch.BACKWARD_PRE`` in the backward), freed after the unit's forward and
again after its backward, its gradients reduce-scattered after its backward (per unit, or in
buckets of ``bucket_bytes``). docs/zero.md shows the formulas, their sources and a table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

from ..dtypes import itemsize
from ..errors import WorkloadError
from ..transformer import split_name
from ..vdnn import OPTIMIZERS

__all__ = ["ZERO_STAGES", "SHARDED", "COLLECTIVE_KINDS", "ShardOp", "StateBytes", "Collective",
           "FsdpUnit", "WeightedLayer", "check_zero", "bytes_per_param", "model_state_bytes",
           "step_collectives", "step_volume_bytes", "fsdp_units", "fsdp_schedule", "model_state_table"]

#: ZeRO's stages: 0 plain data parallelism, 1 P_os, 2 P_os+g, 3 P_os+g+p (FSDP's FULL_SHARD)
ZERO_STAGES = (0, 1, 2, 3)
#: the model states each stage shards over the data-parallel ranks (paper section 5)
SHARDED: dict[int, frozenset[str]] = {
    0: frozenset(), 1: frozenset({"optimizer"}), 2: frozenset({"optimizer", "gradients"}),
    3: frozenset({"optimizer", "gradients", "weights"})}
#: the collectives a step of ZeRO issues on the data-parallel group
COLLECTIVE_KINDS = ("all_reduce", "reduce_scatter", "all_gather")
#: the process group every ZeRO collective runs on
DP_GROUP = "dp"


def check_zero(stage: int, dp: int, params: int = 0) -> None:
    """A :class:`WorkloadError` naming the parameter and its value for a ZeRO stage outside
    :data:`ZERO_STAGES`, a data-parallel degree below 1 or a negative parameter count."""
    if isinstance(stage, bool) or not isinstance(stage, int) or stage not in ZERO_STAGES:
        raise WorkloadError(f"zero stage {stage!r}: expected one of "
                            f"{', '.join(map(str, ZERO_STAGES))}")
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise WorkloadError(f"dp {dp!r}: the data-parallel degree must be a positive integer")
    if isinstance(params, bool) or not isinstance(params, int) or params < 0:
        raise WorkloadError(f"params {params!r}: a parameter count is a non-negative integer")


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes of one rank (or of one parameter): the 16-bit (or fp32) weights, their
    gradients and the optimizer's state (with mixed precision its fp32 master copy)."""

    weights: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        """All three together."""
        return self.weights + self.gradients + self.optimizer


def bytes_per_param(dtype: str = "float16", optimizer: str = "adam") -> StateBytes:
    """The bytes one parameter's states take in a ``dtype`` iteration with ``optimizer``: the
    iteration's own sizes (float16/bfloat16 with Adam: 2 + 2 + 12, ZeRO's 2Ψ + 2Ψ + KΨ)."""
    if optimizer not in OPTIMIZERS:
        raise WorkloadError(f"optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
    step = OPTIMIZERS[optimizer]
    size = itemsize(dtype)
    return StateBytes(size, size, step.state_bytes(1, dtype) if step else 0)


def _shard(params: int, dp: int) -> int:
    """Parameters of the largest of ``dp`` equal shards: Ψ / N_d rounded up."""
    return -(-params // dp)


def model_state_bytes(params: int, dp: int, stage: int, dtype: str = "float16",
                      optimizer: str = "adam") -> StateBytes:
    """The model-state bytes one rank holds under ZeRO ``stage`` with ``dp`` data-parallel
    ranks, for a model (or a tensor- and pipeline-parallel shard of one) of ``params``
    parameters: each state :data:`SHARDED` at the stage takes the largest 1/dp shard, the
    others the whole."""
    check_zero(stage, dp, params)
    per = bytes_per_param(dtype, optimizer)
    shard = _shard(params, dp)

    def held(state: str) -> int:
        return shard if state in SHARDED[stage] else params

    return StateBytes(held("weights") * per.weights, held("gradients") * per.gradients,
                      held("optimizer") * per.optimizer)


@dataclass(frozen=True)
class Collective:
    """One collective of a ZeRO step on the data-parallel group: its kind, what it carries
    (``gradients`` or ``weights``), when (``forward``, ``backward`` or ``step``: after the
    optimizer's update) and its volume per rank in elements as the paper counts it (Ψ for a
    reduce-scatter or an all-gather of Ψ elements, 2Ψ for an all-reduce)."""

    kind: str
    tensor: str
    phase: str
    volume: int


def step_collectives(params: int, stage: int) -> tuple[Collective, ...]:
    """The collectives of one step under ZeRO ``stage`` for ``params`` parameters (paper
    section 7): stage 0 all-reduces the gradients; stages 1 and 2 reduce-scatter them and
    all-gather the updated weights; stage 3 all-gathers the weights before the forward and
    again before the backward and reduce-scatters the gradients."""
    check_zero(stage, 1, params)
    if stage == 0:
        return (Collective("all_reduce", "gradients", "backward", 2 * params),)
    scatter = Collective("reduce_scatter", "gradients", "backward", params)
    if stage < 3:
        return scatter, Collective("all_gather", "weights", "step", params)
    return (Collective("all_gather", "weights", "forward", params),
            Collective("all_gather", "weights", "backward", params), scatter)


def step_volume_bytes(params: int, stage: int, dtype: str = "float16") -> int:
    """Bytes one rank moves per step under ZeRO ``stage``: the volumes of
    :func:`step_collectives` in ``dtype`` elements (2Ψ or 3Ψ elements)."""
    return sum(c.volume for c in step_collectives(params, stage)) * itemsize(dtype)


class WeightedLayer(Protocol):
    """What the FSDP units need of a layer: its name, its parameters and their bytes (a
    :class:`~workloads.network.LayerInfo`, or a stage stream's layer)."""

    @property
    def name(self) -> str: ...
    @property
    def params(self) -> int: ...
    @property
    def weight_bytes(self) -> int: ...


@dataclass(frozen=True)
class FsdpUnit:
    """The layers sharded and gathered together (an FSDP unit): its name, its layers in
    forward order (weightless ones of a block included), its parameters and weight bytes."""

    name: str
    layers: tuple[str, ...]
    params: int
    weight_bytes: int


@dataclass(frozen=True)
class ShardOp:
    """One step of the ZeRO-3 schedule for the integrator to turn into stream ops.

    ``kind``: ``all_gather`` (the unit's weights, ``bytes`` the gathered, unsharded size: each
    rank contributes ``bytes / dp``), ``free`` (the gathered weights dropped, ``bytes`` freed)
    or ``reduce_scatter`` (the gradients of ``units``, ``bytes`` their unsharded size). ``group``
    is the process group (``dp``); ``phase`` ``forward`` or ``backward``. The op is issued just
    ``before`` that layer's kernel of the phase, or just ``after`` it (one of the two is set);
    ``needed_by`` is the layer whose kernel waits for an all-gather to finish (its unit's first
    layer of the phase), None for the others."""

    kind: str
    group: str
    bytes: int
    units: tuple[str, ...]
    phase: str
    before: Optional[str] = None
    after: Optional[str] = None
    needed_by: Optional[str] = None


def fsdp_units(infos: Sequence[WeightedLayer]) -> tuple[FsdpUnit, ...]:
    """The FSDP units of layers ``infos`` (forward order): one per transformer block
    ``blk{i}/`` (as FSDP's transformer auto-wrap policy wraps each block), and one per weighted
    layer outside the blocks (the embedding, the final norm, the LM head: that policy's
    outermost unit holds them together; docs/zero.md); weightless layers outside the blocks
    belong to none."""
    units: list[list[WeightedLayer]] = []
    keys: list[str] = []
    for info in infos:
        block, _ = split_name(info.name)
        key = f"blk{block}" if block is not None else info.name
        if block is None and not info.params:
            continue
        if keys and keys[-1] == key:
            units[-1].append(info)
        else:
            keys.append(key)
            units.append([info])
    return tuple(FsdpUnit(k, tuple(i.name for i in u), sum(i.params for i in u),
                          sum(i.weight_bytes for i in u))
                 for k, u in zip(keys, units) if any(i.params for i in u))


def _gathers(units: Sequence[FsdpUnit], phase: str) -> list[ShardOp]:
    """The all-gathers and frees of one phase over ``units`` in that phase's order: unit k's
    gather issued before unit k-1's first kernel (one unit of prefetch; the first unit's before
    its own), its weights freed after its last kernel."""
    def first(u: FsdpUnit) -> str:
        return u.layers[0] if phase == "forward" else u.layers[-1]

    def last(u: FsdpUnit) -> str:
        return u.layers[-1] if phase == "forward" else u.layers[0]

    ops: list[ShardOp] = []
    for k, unit in enumerate(units):
        issue = first(units[k - 1]) if k else first(unit)
        ops.append(ShardOp("all_gather", DP_GROUP, unit.weight_bytes, (unit.name,), phase,
                           before=issue, needed_by=first(unit)))
        ops.append(ShardOp("free", DP_GROUP, unit.weight_bytes, (unit.name,), phase,
                           after=last(unit)))
    return ops


def _scatters(backward: Sequence[FsdpUnit], bucket_bytes: int) -> list[ShardOp]:
    """The reduce-scatters of the gradients, units in backward order: each after the backward
    of its bucket's last unit; a bucket closes at ``bucket_bytes`` (0: every unit its own)."""
    ops: list[ShardOp] = []
    bucket: list[FsdpUnit] = []
    for k, unit in enumerate(backward):
        bucket.append(unit)
        size = sum(u.weight_bytes for u in bucket)
        if size >= bucket_bytes or k == len(backward) - 1:
            ops.append(ShardOp("reduce_scatter", DP_GROUP, size,
                               tuple(u.name for u in bucket), "backward",
                               after=unit.layers[0]))
            bucket = []
    return ops


def fsdp_schedule(infos: Sequence[WeightedLayer], bucket_bytes: int = 0) -> tuple[ShardOp, ...]:
    """ZeRO-3's collectives over layers ``infos`` (forward order, with their weight bytes in
    the iteration's dtype): the forward's gathers and frees, then the backward's gathers,
    frees and gradient reduce-scatters, each list in issue order (docs/zero.md)."""
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 0:
        raise WorkloadError(f"bucket_bytes {bucket_bytes!r}: a bucket size is a non-negative "
                            "number of bytes (0: one reduce-scatter per unit)")
    units = fsdp_units(infos)
    backward = units[::-1]
    return tuple(_gathers(units, "forward") + _gathers(backward, "backward")
                 + _scatters(backward, bucket_bytes))


def model_state_table(params: int, dps: Sequence[int], dtype: str, optimizer: str) -> str:
    """Markdown: the per-rank model-state GB (10^9 bytes) of each stage at each dp degree."""
    head = ("| dp | stage 0 | stage 1 (P_os) | stage 2 (P_os+g) | stage 3 (P_os+g+p) |\n"
            "|---|---|---|---|---|")
    rows = [f"| {dp} | " + " | ".join(
        f"{model_state_bytes(params, dp, s, dtype, optimizer).total / 1e9:.2f}"
        for s in ZERO_STAGES) + " |" for dp in dps]
    return "\n".join([head, *rows])
