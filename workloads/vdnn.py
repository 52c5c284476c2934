"""vDNN scheduling: which tensors are offloaded, prefetched, allocated and freed, and when.

:func:`plan_iteration` turns a network, batch, dtype and policy into a :class:`Plan` — the ops
of one training iteration grouped per layer — whose :meth:`~Plan.stream` the GPU executes.
The rules (vDNN, Rhu et al. MICRO 2016; docs/workloads.md has the full statement):

* Offload unit: a layer's input feature map X_l, i.e. a tensor. ``none`` offloads nothing;
  ``all`` offloads every tensor read by a (non-in-place) layer; ``conv`` every tensor read by
  a CONV layer; but only a tensor some backward kernel reads is copied out: one no backward
  kernel reads (a batchnorm output feeding only a residual add, the classifier's output
  feeding the loss) is freed after the layer-boundary sync of its last forward reader, never
  offloaded. A tensor is offloaded once, overlapping the compute of its first selected
  reader (after any in-place ReLU has run, so the post-ReLU data goes out), and freed after
  the layer-boundary sync of its last forward reader; so every offloaded tensor is
  prefetched.
* Backward, per layer l (reverse order): allocate gradient buffers for its inputs; for each
  tensor its backward kernel needs that was offloaded and not yet prefetched, prefetch it and
  ``wait`` (an on-demand stall); then prefetch ahead: search l-1, l-2, ... for the nearest
  layer whose needed offloaded tensors are not yet prefetched, stopping at the first CONV layer
  (inclusive); compute; sync; free l's output gradient and every tensor whose last backward
  use was l. An offloaded tensor is associated with ("anchored at") the latest layer whose
  backward needs it.
* Optimizer step (``optimizer`` other than ``none``): after the backward pass, phase ``update``
  runs one update kernel per layer with weights, reading its weights, weight gradient and
  optimizer state and writing weights and state (see :data:`OPTIMIZERS`).
* Workspace (``workspace`` bytes): each convolution kernel, forward and backward, gets that
  much cuDNN workspace, allocated just before the kernel and freed at its layer's sync.
* Memory: weights, weight gradients and optimizer state live all iteration; activations from
  production to their last backward use (or, offloaded, to their last forward reader and again
  from prefetch to last backward use); activation gradients from the backward of the tensor's
  last reader to the backward of its producer.
* Allocation (``allocation``): ``liveness`` is the memory rule above: vDNN's layer-wise
  memory manager (Rhu et al. 2016, section III), the allocation of every vDNN policy.
  ``network-wide`` is the vDNN paper's baseline: a schedule that moves no tensor (policy
  ``none``, or a policy that selects nothing) allocates every buffer (feature maps, gradient
  maps, weights, weight gradients, workspace, optimizer state) once before the forward pass
  and frees it after the last phase; a schedule that offloads, frees early or recomputes is a
  memory manager, which vDNN defines as layer-wise, so it keeps the ``liveness`` schedule. One
  ``network-wide`` run thus holds vDNN's comparison: the run on vDNN's memory manager, its
  oracle baseline (policy ``none``) on the network-wide baseline.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional

from sst_cdma.engine.progress import tick, timed
from sst_cdma.model.element_params import network_word
from sst_cdma.model.price_memo import PriceMemo

from .dtypes import itemsize
from .errors import WorkloadError
from .model_states import ModelStatePlan, Placement, StateBucket, checked_placement, state_buckets
from .network import LayerInfo, Network, TensorInfo
from .plan import Block, Plan
from .policies import VDNN_POLICIES as POLICIES  # the vDNN offload policies
from .policies import check_policy, is_vdnn, resolve_choices
from .stream_schema import StreamOp, StreamTensor

__all__ = ["POLICIES", "ALLOCATIONS", "OPTIMIZERS", "Optimizer", "Block", "Plan",
           "plan_iteration", "grad_name", "weight_name", "wgrad_name", "state_name",
           "workspace_name"]

#: GPU memory allocation modes: ``liveness`` allocates a buffer when it is born and frees it when
#: it dies (vDNN's layer-wise memory manager); ``network-wide`` (vDNN's baseline) holds every
#: buffer for the whole iteration where the schedule moves no tensor, and is ``liveness`` where
#: it does.
ALLOCATIONS = ("liveness", "network-wide")


@dataclass(frozen=True)
class Optimizer:
    """What one optimizer step costs: state buffers the size of the weights, and FLOPs per
    weight. In float32 the state is in float32 and the update reads the weights, their gradient
    and the state and writes weights and state. In float16/bfloat16 it is mixed precision's
    step: the state and a master copy of the weights are float32; the update reads the
    low-precision gradient, the master copy and the state, and writes master copy, state and
    the low-precision weights."""

    state_buffers: int
    flops: int

    def state_bytes(self, params: int, dtype: str) -> int:
        """Bytes of optimizer state for ``params`` weights (with the master copy, if any)."""
        if itemsize(dtype) >= 4:
            return self.state_buffers * params * itemsize(dtype)
        return (self.state_buffers + 1) * params * 4

    def dram_bytes(self, params: int, dtype: str) -> int:
        """Bytes the update kernel of ``params`` weights reads and writes."""
        size = itemsize(dtype)
        if size >= 4:
            return params * size * (3 + 2 * self.state_buffers)
        return params * (2 * size + 4 * (2 + 2 * self.state_buffers))


#: The optimizers an iteration can end with. ``sgd``: w -= lr*g. ``momentum``: v = mu*v + g;
#: w -= lr*v. ``adam``: moving averages m and v, bias correction, w -= lr*m/(sqrt(v)+eps).
#: ``none`` leaves the step out (the layers' forward and backward only, as vDNN and cDMA report).
OPTIMIZERS = {"none": None, "sgd": Optimizer(0, 2), "momentum": Optimizer(1, 4),
              "adam": Optimizer(2, 12)}


def grad_name(tensor: str) -> str:
    """Stream name of the gradient of activation ``tensor``."""
    return f"{tensor}:grad"


def weight_name(layer: str) -> str:
    """Stream name of ``layer``'s weights (weights and bias together)."""
    return f"{layer}:w"


def wgrad_name(layer: str) -> str:
    """Stream name of ``layer``'s weight gradient."""
    return f"{layer}:dw"


def workspace_name(layer: str, pass_: str = "fwd") -> str:
    """Stream name of ``layer``'s convolution workspace (of its forward kernel, or of its
    backward kernel when the kernel model sizes them separately)."""
    return f"{layer}:ws" if pass_ == "fwd" else f"{layer}:ws.{pass_}"


def state_name(layer: str) -> str:
    """Stream name of ``layer``'s optimizer state (all its buffers in one)."""
    return f"{layer}:state"



#: measured kernel times in picoseconds: layer -> {"fwd": ps, "bwd": ps}
Times = Mapping[str, Mapping[str, int]]
#: kernels priced by the kernel model: layer -> {"fwd": PricedKernel, "bwd": PricedKernel}
Kernels = Mapping[str, Mapping[str, Any]]


#: the networks' layers and tensors of the latest (network, batch, dtype), with the network
#: (see :func:`inferred`; a run's GPUs and its baselines share one or two)
_INFERRED = PriceMemo(8)


def inferred(network: Network, batch: int, dtype: str
             ) -> tuple[list[LayerInfo], dict[str, TensorInfo]]:
    """``network.infer(batch, dtype)`` and ``network.tensors(batch, dtype)``, worked out once
    per network (the object, held with them: a loaded network does not change) and shared by
    the schedules and the planner's models: treat them as read-only."""
    key = (id(network), batch, dtype)
    entry = _INFERRED.get(key)
    if entry is None:
        entry = (network, network.infer(batch, dtype), network.tensors(batch, dtype))
        _INFERRED.put(key, entry)
    return entry[1], entry[2]


class _Made(NamedTuple):
    """What every schedule of the same inputs makes alike: its plain ops (by kind, name and
    phase), its declarations and, by layer, its blocks' comments (by layer and pass), its
    forward kernels (by layer, pass and phase) and its backward kernel (by layer and whether
    its output gradient is allocated). Ops and tensors are frozen, so the plans share them."""

    plain: dict[tuple[str, str, str], StreamOp]
    #: by optimizer step and whether the host CPU steps: the declarations and ``scratch``
    declared: dict[tuple[Optional[Optimizer], bool],
                   tuple[list[StreamTensor], dict[str, dict[str, tuple[str, ...]]]]]
    comments: dict[tuple[str, str], str]
    forward: dict[tuple[str, str, str], StreamOp]
    backward: dict[tuple[str, bool], StreamOp]


#: :class:`_Made` by network, batch, element type, measured times, priced kernels (those
#: three held, so their identity stands for them) and workspace: a policy ``auto`` run
#: schedules one network 8 times over its placements
_MADE = PriceMemo(8)


def _made(network: Network, batch: int, dtype: str, times: Optional[Times],
          kernels: Optional[Kernels], workspace: int) -> _Made:
    key = (id(network), batch, dtype, id(times), id(kernels), workspace)
    entry = _MADE.get(key)
    if entry is None:
        entry = ((network, times, kernels), _Made({}, {}, {}, {}, {}))
        _MADE.put(key, entry)
    return entry[1]


@timed("planning_s")
def plan_iteration(network: Network, batch: int, dtype: str = "float32", policy: str = "conv",
                   times: Optional[Times] = None,
                   optimizer: str = "none", workspace: int = 0,
                   kernels: Optional[Kernels] = None,
                   allocation: str = "liveness",
                   choices: Optional[Mapping[str, str]] = None,
                   placement: Optional[Placement] = None) -> Plan:
    """Schedule one training iteration of ``network`` under vDNN ``policy``, ending with the
    step of ``optimizer`` (one of :data:`OPTIMIZERS`), giving each convolution kernel
    ``workspace`` bytes of cuDNN workspace, allocating GPU memory as ``allocation`` says (one
    of :data:`ALLOCATIONS`).

    ``times`` optionally maps layer -> {"fwd": ps, "bwd": ps} (measured kernel times in
    picoseconds, for calibration); they become the compute ops' ``time_ps``.

    ``kernels`` optionally maps layer -> {"fwd": k, "bwd": k} of kernels priced by the kernel
    model (:class:`~workloads.kernel_pricing.PricedKernel`: ``time_ps``,
    ``algorithm``, ``workspace``): their times become ``time_ps`` (unless ``times`` gives
    measured ones), their algorithms ``algorithm``, and each kernel gets the workspace its
    algorithm needs instead of ``workspace``.

    A per-tensor ``policy`` (:mod:`~workloads.policies`: ``recompute``,
    ``recompute-attn+offload-ffn``, ...) is resolved to ``choices`` (tensor -> keep, offload,
    compress, recompute) unless they are given (``plan`` and ``auto`` need them given).

    ``placement`` (:class:`~workloads.model_states.Placement`) puts the model states
    elsewhere than the GPU and sets the micro-batches per step; its default is today's
    iteration. With the optimizer states on the host the GPU holds neither them nor (with
    ``gradients`` host) the weight gradients beyond their bucket's copy, and runs no update
    kernel: the plan's ``model_states`` lists the buckets the GPU copies to the host CPU.
    """
    step, choices = _checked_request(network, batch, dtype, policy, optimizer, allocation,
                                     workspace, choices)
    placement = checked_placement(placement, optimizer)
    schedule = _Schedule(network, batch, dtype, policy, times, kernels, workspace, allocation,
                         step, choices, placement)
    decls = schedule.declarations()
    schedule.place_recomputation()
    schedule.select_offloads()
    schedule.mark_releases()
    prologue = schedule.prologue(decls)
    forward = schedule.forward()
    backward = schedule.backward()
    epilogue = schedule.epilogue(decls)
    update = schedule.update(optimizer)
    plan = schedule.plan(batch, decls, prologue, forward, backward, epilogue, update)
    return schedule.with_model_states(plan)


def _checked_request(network: Network, batch: int, dtype: str, policy: str, optimizer: str,
                     allocation: str, workspace: int, choices: Optional[Mapping[str, str]]
                     ) -> tuple[Optional[Optimizer], Optional[Mapping[str, str]]]:
    """The optimizer's step and the per-tensor choices (resolved from a per-tensor policy);
    a :class:`WorkloadError` for a bad policy, optimizer, allocation or workspace."""
    try:
        check_policy(policy)
    except WorkloadError as exc:
        raise WorkloadError(f"policy {policy!r}: {exc}") from None
    if not is_vdnn(policy) and choices is None:
        choices = resolve_choices(network, batch, dtype, policy)
    if optimizer not in OPTIMIZERS:
        raise WorkloadError(f"unknown optimizer {optimizer!r} (expected one of "
                            f"{', '.join(OPTIMIZERS)})")
    if allocation not in ALLOCATIONS:
        raise WorkloadError(f"unknown allocation {allocation!r} (expected one of "
                            f"{', '.join(ALLOCATIONS)})")
    if workspace < 0:
        raise WorkloadError(f"workspace must not be negative, got {workspace} bytes")
    return OPTIMIZERS[optimizer], choices


def _has_grad(t: TensorInfo) -> bool:
    return t.needs_grad and bool(t.consumers)


class _Schedule:
    """One iteration's schedule in the making: the network's layers and tensors, what the
    policy decided for each tensor, and the steps that lay the ops out phase by phase."""

    def __init__(self, network: Network, batch: int, dtype: str, policy: str,
                 times: Optional[Times], kernels: Optional[Kernels], workspace: int,
                 allocation: str, step: Optional[Optimizer],
                 choices: Optional[Mapping[str, str]],
                 placement: Placement = Placement()) -> None:
        self.network, self.dtype, self.policy, self.step = network, dtype, policy, step
        self.placement = placement
        #: the optimizer step runs on the host CPU (ZeRO-Offload): no state, no update kernel
        self.host_step = placement.offloaded
        self.times, self.kernels, self.workspace = times, kernels, workspace
        self.made = _made(network, batch, dtype, times, kernels, workspace)
        self.allocation = allocation
        #: every buffer allocated once for the iteration (decided once the offloads are known)
        self.wide = False
        self.per_tensor = not is_vdnn(policy)
        self.infos, self.tensors = inferred(network, batch, dtype)
        self.info: dict[str, LayerInfo] = {i.name: i for i in self.infos}
        self.idx = {i.name: k for k, i in enumerate(self.infos)}
        self.kind = {i.name: i.kind for i in self.infos}
        self.choice = dict(choices or {})
        self._check_names()
        self.weighted = [i for i in self.infos if i.params]
        #: layer -> its place among the weighted layers
        self.weighted_at = {i.name: k for k, i in enumerate(self.weighted)}
        self.stateful = [i for i in self.weighted
                         if step is not None and step.state_bytes(i.params, dtype)
                         and not self.host_step]
        #: weight gradients the GPU frees once their bucket is on the host (not the plan)
        self.host_grads = {wgrad_name(i.name) for i in self.weighted} \
            if placement.gradients == "host" else set()
        #: weights kept on the host, prefetched for each use (the layer's own on demand, the
        #: next weighted layer's ahead) and freed after it
        self.host_weights = {weight_name(i.name) for i in self.weighted} \
            if placement.weights != "gpu" else set()
        #: what the prologue and epilogue leave to the passes or the GPU
        self.off_gpu = self.host_grads | self.host_weights
        self.weights_coming: set[str] = set()
        #: the phase the epilogue's frees are in: the last one
        self.last_phase = "update" if step is not None and self.weighted and \
            not self.host_step else "backward"
        #: tensor -> the layer indices whose backward reads it
        self.need: dict[str, list[int]] = {t: [] for t in self.tensors}
        for i in self.infos:
            for t in i.bwd_needs:
                self.need[t].append(self.idx[i.name])
        self.scratch: dict[str, dict[str, tuple[str, ...]]] = {}
        self.recompute_at: dict[int, list[str]] = {}
        self.rebuild_inputs: dict[int, list[str]] = {}
        self.recomputed: set[str] = set()
        self.offload_at: dict[str, list[str]] = {}
        self.free_after_fwd: dict[str, list[str]] = {}
        self.offloaded: list[str] = []
        self.offloaded_set: set[str] = set()
        self.anchored: dict[int, list[str]] = {}
        self.release_at: dict[int, list[str]] = {}
        self.resident: set[str] = set()
        self.prefetched: set[str] = set()
        #: layer index -> where the prefetch-ahead walk goes on past it (see _ahead_stop)
        self._skip: dict[int, int] = {}
        self.grads: set[str] = set()

    def _check_names(self) -> None:
        """Times and choices name layers and tensors of the network."""
        if self.times:
            unknown = sorted(set(self.times) - set(self.info))
            if unknown:
                raise WorkloadError(f"times given for unknown layer(s) {unknown}",
                                    file=self.network.file)
            for layer, passes in self.times.items():
                for pass_, ps in passes.items():
                    if type(ps) is not int:
                        raise WorkloadError(f"layer {layer!r} {pass_}: a time is integer "
                                            f"picoseconds, got {ps!r}", file=self.network.file)
        unknown_choice = sorted(set(self.choice) - set(self.tensors))
        if unknown_choice:
            raise WorkloadError(f"choices given for unknown tensor(s) {unknown_choice}",
                                file=self.network.file)

    # -- declarations ---------------------------------------------------------------------
    def declarations(self) -> list[StreamTensor]:
        """Every tensor the iteration uses, in declaration order (made once per inputs,
        optimizer and where it steps; the convolutions' workspace noted in ``scratch``)."""
        key = (self.step, self.host_step)
        kept = self.made.declared.get(key)
        if kept is None:
            kept = self.made.declared[key] = (self._declared(), self.scratch)
        decls, self.scratch = kept
        return list(decls)

    def _declared(self) -> list[StreamTensor]:
        """:meth:`declarations` made."""
        decls: list[StreamTensor] = []
        for ti in self.tensors.values():
            # a tensor carrying statistics besides its elements declares its bytes only
            decls.append(StreamTensor(ti.name, ti.bytes, "activation", ti.producer,
                                      bool(ti.sparse),
                                      None if ti.stats_bytes else ti.shape or None))
        for ti in self.tensors.values():
            if _has_grad(ti):
                decls.append(StreamTensor(grad_name(ti.name), ti.bytes - ti.stats_bytes,
                                          "gradient", ti.producer, False, ti.shape or None))
        for i in self.weighted:
            decls.append(StreamTensor(weight_name(i.name), i.weight_bytes, "weight", i.name))
        for i in self.weighted:
            decls.append(StreamTensor(wgrad_name(i.name), i.weight_bytes, "gradient", i.name))
        for i in self.stateful:
            assert self.step is not None
            decls.append(StreamTensor(state_name(i.name),
                                      self.step.state_bytes(i.params, self.dtype), "state",
                                      i.name))
        return decls + self._workspaces()

    def _workspaces(self) -> list[StreamTensor]:
        """The convolution kernels' workspace buffers (noted per layer and pass in
        ``scratch``)."""
        kernels = self.kernels
        self.scratch = {i.name: {"fwd": (), "bwd": ()} for i in self.infos}
        decls = []
        for i in self.infos:
            for pass_ in ("fwd", "bwd"):
                if kernels is not None:
                    size = kernels[i.name][pass_].workspace if i.name in kernels else 0
                else:
                    size = self.workspace if i.kind == "conv" else 0
                if size:
                    name = workspace_name(i.name, "fwd" if kernels is None else pass_)
                    self.scratch[i.name][pass_] = (name,)
                    if pass_ == "fwd" or kernels is not None:
                        decls.append(StreamTensor(name, size, "workspace", i.name))
        return decls

    # -- what the policy does with each tensor -------------------------------------------------
    def place_recomputation(self) -> None:
        """A recomputed tensor is rebuilt just before its first backward use (the latest layer
        whose backward reads it): its producer's forward kernel, then its in-place modifiers',
        re-run there, so the producer's inputs must be resident then — that layer "needs"
        them too."""
        need, idx = self.need, self.idx
        for ti in sorted(self.tensors.values(), key=lambda t: idx[t.producer], reverse=True):
            if self.choice.get(ti.name) != "recompute" or not need[ti.name] or not ti.consumers:
                continue
            if self.kind[ti.producer] == "data":
                raise WorkloadError(f"tensor {ti.name!r} is the network input: it cannot be "
                                    "recomputed", file=self.network.file)
            anchor = max(need[ti.name])
            self.recompute_at.setdefault(anchor, []).insert(0, ti.name)
            for x in dict.fromkeys(self.info[ti.producer].inputs):
                if anchor not in need[x]:
                    need[x].append(anchor)
                self.rebuild_inputs.setdefault(anchor, []).append(x)
        self.recomputed = {t for ts in self.recompute_at.values() for t in ts}
        if self.recomputed and self.host_weights:
            where = self.placement.weights
            raise WorkloadError(f"{network_word('weights', where)} with a policy that "
                                "recomputes: a rebuild "
                                f"re-runs forward kernels whose weights are on the {where}; "
                                "give a vDNN "
                                "policy (none, all, conv)", file=self.network.file)

    def select_offloads(self) -> None:
        """Which tensors are offloaded (and where), and which are freed after their last
        forward reader. A selected tensor no backward kernel reads is not copied out: it is
        freed after its last forward reader (``dropped``), as vDNN's memory manager releases
        it."""
        idx = self.idx
        self.offload_at = {i.name: [] for i in self.infos}
        self.free_after_fwd = {i.name: [] for i in self.infos}
        dropped: set[str] = set()
        for ti in self.tensors.values():
            if self.per_tensor:
                selected = list(ti.consumers) if self.choice.get(ti.name, "keep") != "keep" else []
            else:
                selected = _selected_readers(self.policy, ti, self.kind)
            if not selected:
                continue
            self.free_after_fwd[max(ti.consumers, key=idx.__getitem__)].append(ti.name)
            if ti.name in self.recomputed:
                continue
            if self.need[ti.name] and self.choice.get(ti.name) != "recompute":
                self.offload_at[min(selected, key=idx.__getitem__)].append(ti.name)
                self.offloaded.append(ti.name)
            else:
                dropped.add(ti.name)
        self.offloaded_set = set(self.offloaded)
        # vDNN's baseline holds everything; a schedule that moves a tensor is vDNN's
        # layer-wise memory manager (section III of the paper)
        moved = self.offloaded_set | dropped | self.recomputed
        self.wide = self.allocation == "network-wide" and not moved

    def mark_releases(self) -> None:
        """Where each tensor is released in the backward pass, and the layer each offloaded
        tensor is anchored at (the latest whose backward needs it)."""
        for ti in self.tensors.values():
            need = self.need[ti.name]
            if need:
                at = min(need)
                if ti.name in self.offloaded_set:
                    self.anchored.setdefault(max(need), []).append(ti.name)
            else:
                users = [self.idx[u] for u in ti.consumers + ti.modifiers]
                at = min(users) if users else self.idx[ti.producer]
            self.release_at.setdefault(at, []).append(ti.name)

    def _codec(self, tensor: str) -> str:
        """``none`` for a tensor the plan offloads as a plain copy, '' for the engine's codec."""
        return "none" if self.choice.get(tensor) == "offload" else ""

    # -- kernels ------------------------------------------------------------------------------
    def _time(self, layer: str, pass_: str) -> Optional[int]:
        """The kernel's time in picoseconds: measured, else priced, else None (the GPU's)."""
        measured = self.times[layer].get(pass_) if self.times and layer in self.times else None
        if measured is not None or self.kernels is None or layer not in self.kernels:
            return measured
        return self.kernels[layer][pass_].time_ps

    def _algorithm(self, layer: str, pass_: str) -> str:
        if self.kernels is None or layer not in self.kernels:
            return ""
        return self.kernels[layer][pass_].algorithm

    def _op(self, kind: str, name: str, phase: str) -> StreamOp:
        """A plain op (alloc, free, sync or wait: no field but these), made once per inputs."""
        key = (kind, name, phase)
        op = self.made.plain.get(key)
        if op is None:
            op = self.made.plain[key] = StreamOp(kind, name, phase)
        return op

    def _comment(self, i: LayerInfo, pass_: str) -> str:
        """The comment of layer ``i``'s block of pass ``pass_`` (fwd or bwd)."""
        key = (i.name, pass_)
        text = self.made.comments.get(key)
        if text is None:
            text = self.made.comments[key] = _comment(i, pass_)
        return text

    def _forward_kernel(self, i: LayerInfo, pass_: str, phase: str) -> StreamOp:
        """Layer ``i``'s forward kernel (``pass_`` fwd, or recompute when it rebuilds its
        output in the backward pass)."""
        key = (i.name, pass_, phase)
        op = self.made.forward.get(key)
        if op is None:
            op = self.made.forward[key] = StreamOp(
                "compute", i.name, phase, pass_=pass_, flops=i.flops_fwd, dram=i.dram_fwd,
                time_ps=self._time(i.name, "fwd"), algorithm=self._algorithm(i.name, "fwd"),
                reads=tuple(dict.fromkeys(i.inputs)) + (
                    (weight_name(i.name),) if i.params else ()),
                writes=(i.output,) + self.scratch[i.name]["fwd"])
        return op

    def _backward_kernel(self, i: LayerInfo) -> StreamOp:
        """Layer ``i``'s backward kernel."""
        dy = grad_name(i.output)
        has_dy = dy in self.grads
        op = self.made.backward.get((i.name, has_dy))
        if op is None:
            op = self.made.backward[(i.name, has_dy)] = self._backward_op(i, dy, has_dy)
        return op

    def _backward_op(self, i: LayerInfo, dy: str, has_dy: bool) -> StreamOp:
        """:meth:`_backward_kernel` made."""
        reads = tuple(dict.fromkeys(i.bwd_needs)) + ((dy,) if has_dy else ()) + (
            (weight_name(i.name),) if i.params else ())
        if i.in_place:
            writes: tuple[str, ...] = (dy,) if has_dy else ()
        else:
            writes = tuple(dict.fromkeys(grad_name(t) for t in i.grad_inputs))
        writes += (wgrad_name(i.name),) if i.params else ()
        return StreamOp("compute", i.name, "backward", pass_="bwd", flops=i.flops_bwd,
                        dram=i.dram_bwd, time_ps=self._time(i.name, "bwd"),
                        algorithm=self._algorithm(i.name, "bwd"), reads=reads,
                        writes=writes + self.scratch[i.name]["bwd"])

    # -- the phases ---------------------------------------------------------------------------
    def prologue(self, decls: list[StreamTensor]) -> list[StreamOp]:
        """The allocations that live for the whole iteration."""
        if self.wide:  # every buffer, once, for the whole iteration
            return [self._op("alloc", d.name, "forward") for d in decls
                    if d.name not in self.off_gpu]
        ops = []
        for i in self.weighted:
            if weight_name(i.name) not in self.host_weights:
                ops.append(self._op("alloc", weight_name(i.name), "forward"))
            if wgrad_name(i.name) not in self.host_grads:
                ops.append(self._op("alloc", wgrad_name(i.name), "forward"))
        for i in self.stateful:
            ops.append(self._op("alloc", state_name(i.name), "forward"))
        return ops

    def forward(self) -> list[Block]:
        """The forward pass, one block per layer."""
        wide, resident = self.wide, self.resident
        blocks: list[Block] = []
        for i in self.infos:
            block = Block(i.name, i.kind, self._comment(i, "fwd"))
            ops = block.ops
            blocks.append(block)
            if i.kind == "data" or not i.in_place:
                if not wide:
                    ops.append(self._op("alloc", i.output, "forward"))
                resident.add(i.output)
            if i.kind == "data":
                continue
            for t in self.offload_at[i.name]:
                ops.append(StreamOp("offload", t, "forward", layer=i.name, codec=self._codec(t)))
            ws = self.scratch[i.name]["fwd"]
            if ws and not wide:
                ops.extend(self._op("alloc", t, "forward") for t in ws)
            self._weights_in(i, 1, "forward", ops)
            ops.append(self._forward_kernel(i, "fwd", "forward"))
            ops.append(self._op("sync", i.name, "forward"))
            if ws and not wide:
                ops.extend(self._op("free", t, "forward") for t in ws)
            self._weights_out(i, "forward", ops)
            for t in self.free_after_fwd[i.name]:
                ops.append(self._op("free", t, "forward"))
                resident.discard(t)
        return blocks

    def backward(self) -> list[Block]:
        """The backward pass, one block per layer with a backward, in reverse order."""
        layers = [i for i in reversed(self.infos) if i.kind != "data"]
        blocks = []
        for done, info in enumerate(layers, start=1):
            blocks.append(self._backward_block(info))
            tick("scheduling the backward pass: layer", done, len(layers))
        return blocks

    def _backward_block(self, i: LayerInfo) -> Block:
        wide = self.wide
        block = Block(i.name, i.kind, self._comment(i, "bwd"))
        ops = block.ops
        if not i.in_place:
            for t in i.grad_inputs:
                g = grad_name(t)
                if g not in self.grads:
                    if not wide:
                        ops.append(self._op("alloc", g, "backward"))
                    self.grads.add(g)
        here = self.idx[i.name]
        self._prefetch(i, here, ops)
        rebuilt_ws = self._recompute(here, ops)
        ws = self.scratch[i.name]["bwd"] if i.has_backward else ()
        if ws and not wide:
            ops.extend(self._op("alloc", t, "backward") for t in ws)
        if i.params and wgrad_name(i.name) in self.host_grads:
            ops.append(self._op("alloc", wgrad_name(i.name), "backward"))
        self._weights_in(i, -1, "backward", ops)
        if i.has_backward:
            ops.append(self._backward_kernel(i))
            ops.append(self._op("sync", i.name, "backward"))
        if ws and not wide:
            ops.extend(self._op("free", t, "backward") for t in ws)
        self._weights_out(i, "backward", ops)
        if rebuilt_ws:
            ops.extend(self._op("free", t, "backward") for t in rebuilt_ws)
        dy = grad_name(i.output)
        if not i.in_place and dy in self.grads and not wide:
            ops.append(self._op("free", dy, "backward"))
            self.grads.discard(dy)
        for t in self.release_at.get(here, []):
            if t in self.resident and not wide:
                ops.append(self._op("free", t, "backward"))
                self.resident.discard(t)
        return block

    def _weights_in(self, i: LayerInfo, order: int, phase: str, ops: list[StreamOp]) -> None:
        """Weights on the host: layer ``i``'s weights copied in (unless the layer before
        prefetched them) and waited for, then the next weighted layer's in ``order`` (1:
        forward, -1: backward) prefetched ahead, overlapping this layer's kernel."""
        w = weight_name(i.name)
        if w not in self.host_weights:
            return
        if w not in self.weights_coming:
            ops.append(self._op("alloc", w, phase))
            ops.append(StreamOp("prefetch", w, phase, layer=i.name, codec="none",
                                tier=self.placement.weights))
        self.weights_coming.discard(w)
        ops.append(self._op("wait", w, phase))
        at = self.weighted_at[i.name] + order
        if 0 <= at < len(self.weighted):
            ahead = weight_name(self.weighted[at].name)
            ops.append(self._op("alloc", ahead, phase))
            ops.append(StreamOp("prefetch", ahead, phase, layer=i.name, codec="none",
                                tier=self.placement.weights))
            self.weights_coming.add(ahead)

    def _weights_out(self, i: LayerInfo, phase: str, ops: list[StreamOp]) -> None:
        """Weights on the host: layer ``i``'s copy on the GPU is freed after its kernel."""
        if weight_name(i.name) in self.host_weights:
            ops.append(self._op("free", weight_name(i.name), phase))

    def _prefetch(self, i: LayerInfo, here: int, ops: list[StreamOp]) -> None:
        """Layer ``i``'s prefetches: on demand (with a ``wait``) what its backward (or a
        rebuild at it) needs and is still on the host, then ahead: the nearest earlier layer's
        offloaded tensors, searching back to the first CONV layer (inclusive)."""
        if not self.offloaded_set:  # nothing went out: nothing comes back
            return
        demand = [t for t in dict.fromkeys(i.bwd_needs + tuple(self.rebuild_inputs.get(here, ())))
                  if t in self.offloaded_set and t not in self.prefetched]
        k = self._ahead_stop(here - 1)
        ahead = [t for t in self.anchored.get(k, []) if t not in self.prefetched] if k >= 0 \
            else []
        for t in demand + ahead:
            ops.append(self._op("alloc", t, "backward"))
            ops.append(StreamOp("prefetch", t, "backward", layer=i.name, codec=self._codec(t)))
            self.prefetched.add(t)
            self.resident.add(t)
        for t in demand:
            ops.append(self._op("wait", t, "backward"))

    def _ahead_stop(self, start: int) -> int:
        """Where the search for tensors to prefetch ahead stops, walking down from layer index
        ``start``: the first layer with offloaded tensors not yet prefetched, or a CONV layer
        (per-tensor policies: ``start`` itself, one layer ahead); -1 past the first layer.
        Layers found spent (nothing left to prefetch, not CONV) stay spent, since prefetched
        tensors are never forgotten: each remembers where the walk went on (``_skip``), so the
        backward pass walks each layer a bounded number of times, not once per later layer."""
        if self.per_tensor:
            return start
        k, spent = start, []
        while k >= 0 and self.infos[k].kind != "conv" and \
                all(t in self.prefetched for t in self.anchored.get(k, ())):
            spent.append(k)
            k = self._skip.get(k, k - 1)
        for layer in spent:
            self._skip[layer] = k
        return k

    def _recompute(self, here: int, ops: list[StreamOp]) -> list[str]:
        """The rebuilds of the tensors recomputed at layer index ``here``; returns the
        workspace buffers their kernels hold until the layer's sync."""
        rebuilt_ws: list[str] = []
        for t in self.recompute_at.get(here, ()):
            ops.append(self._op("alloc", t, "backward"))
            self.resident.add(t)
            for layer in (self.tensors[t].producer,) + self.tensors[t].modifiers:
                ws = self.scratch[layer]["fwd"]
                ops.extend(self._op("alloc", w, "backward") for w in ws)
                rebuilt_ws.extend(ws)
                ops.append(self._forward_kernel(self.info[layer], "recompute", "backward"))
        return rebuilt_ws

    def epilogue(self, decls: list[StreamTensor]) -> list[StreamOp]:
        """The frees of what is still allocated after the last phase."""
        phase = self.last_phase
        if self.wide:  # everything, in declaration order
            return [self._op("free", d.name, phase) for d in decls
                    if d.name not in self.off_gpu]
        # several micro-batches: each one's backward ends with these frees (the plan's tail)
        ops = self.activation_frees(phase) if self.placement.grad_accum == 1 else []
        for i in self.weighted:
            if weight_name(i.name) not in self.host_weights:
                ops.append(self._op("free", weight_name(i.name), phase))
            if wgrad_name(i.name) not in self.host_grads:
                ops.append(self._op("free", wgrad_name(i.name), phase))
        for i in self.stateful:
            ops.append(self._op("free", state_name(i.name), phase))
        return ops

    def activation_frees(self, phase: str) -> list[StreamOp]:
        """The frees of the activations and activation gradients still allocated after the
        backward pass (with several micro-batches per step, issued after each one's backward:
        the plan's ``tail``)."""
        ops = [self._op("free", t, phase) for t in self.tensors if t in self.resident]
        return ops + [self._op("free", g, phase) for g in sorted(self.grads)]

    def update(self, optimizer: str) -> list[Block]:
        """The optimizer step: one update kernel per layer with weights (none when the host
        CPU steps)."""
        step = self.step
        if step is None or self.host_step:
            return []
        blocks = []
        for i in self.weighted:
            state = (state_name(i.name),) if step.state_bytes(i.params, self.dtype) else ()
            block = Block(i.name, i.kind, f"{i.name}: {optimizer} step over {i.params} weights")
            block.ops.append(StreamOp("compute", i.name, "update", pass_="update",
                                      flops=step.flops * i.params,
                                      dram=step.dram_bytes(i.params, self.dtype),
                                      reads=(weight_name(i.name), wgrad_name(i.name)) + state,
                                      writes=(weight_name(i.name),) + state))
            block.ops.append(self._op("sync", i.name, "update"))
            blocks.append(block)
        return blocks

    def plan(self, batch: int, decls: list[StreamTensor], prologue: list[StreamOp],
             forward: list[Block], backward: list[Block], epilogue: list[StreamOp],
             update: list[Block]) -> Plan:
        """The finished :class:`Plan`."""
        idx, tensors = self.idx, self.tensors
        return Plan(self.network.name, batch, self.dtype, self.policy, decls, prologue, forward,
                    backward, epilogue, tuple(self.offloaded), update,
                    "network-wide" if self.wide else "liveness",
                    {t: self.choice.get(t, "keep") for t in tensors} if self.per_tensor else {},
                    tuple(sorted(self.recomputed, key=lambda t: idx[tensors[t].producer])))

    def with_model_states(self, plan: Plan) -> Plan:
        """``plan`` with its micro-batches, the activation frees each one ends with (several
        micro-batches) and the buckets of the host CPU's step (optimizer states on the
        host)."""
        placement = self.placement
        if placement.default:
            return plan
        plan.micro_batches = placement.grad_accum
        if placement.grad_accum > 1 and not self.wide:
            plan.tail = self.activation_frees("backward")
        buckets: tuple[StateBucket, ...] = ()
        if self.host_step:
            assert self.step is not None
            buckets = state_buckets(self.weighted, self.dtype, self.step, placement, wgrad_name)
        plan.model_states = ModelStatePlan(placement, buckets)
        return plan


def _selected_readers(policy: str, tensor: TensorInfo, kind: Mapping[str, str]) -> list[str]:
    """The readers of ``tensor`` for which ``policy`` manages it (vDNN-all: every
    non-in-place reader; vDNN-conv: the CONV readers; ``none``: none)."""
    if policy == "all":
        return list(tensor.consumers)
    if policy == "conv":
        return [c for c in tensor.consumers if kind[c] == "conv"]
    return []


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def _comment(i: LayerInfo, pass_: str) -> str:
    flops = i.flops_fwd if pass_ == "fwd" else i.flops_bwd
    text = f"{i.name} ({i.kind}) -> {i.output} {_shape_text(i.shape)}"
    if i.in_place:
        text += " in place"
    return text + f", {flops / 1e9:.3f} GFLOP"
