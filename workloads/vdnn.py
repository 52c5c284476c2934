"""vDNN scheduling: which tensors are offloaded, prefetched, allocated and freed, and when.

:func:`plan_iteration` turns a network, batch, dtype and policy into a :class:`Plan` — the ops
of one training iteration grouped per layer — which the jinja2 templates render as a stream.
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
* Allocation (``allocation``): ``liveness`` is the memory rule above. ``network-wide`` is the
  vDNN paper's baseline: every buffer (feature maps, gradient maps, weights, weight gradients,
  workspace, optimizer state) is allocated once before the forward pass and freed after the
  last phase; only the tensors the policy offloads (or frees early) keep vDNN's memory
  manager's schedule (allocated when produced, released after their offload, re-allocated at
  their prefetch, released after their last backward use: their ``liveness`` schedule).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .dtypes import itemsize
from .errors import WorkloadError
from .layer_times import format_ps
from .network import LayerInfo, Network, TensorInfo
from .policies import VDNN_POLICIES as POLICIES  # the vDNN offload policies

__all__ = ["POLICIES", "ALLOCATIONS", "OPTIMIZERS", "Optimizer", "TensorDecl", "Op", "Block",
           "Plan", "plan_iteration", "grad_name", "weight_name", "wgrad_name", "state_name",
           "workspace_name"]

#: GPU memory allocation modes: ``liveness`` allocates a buffer when it is born and frees it when
#: it dies; ``network-wide`` (vDNN's baseline) holds every buffer for the whole iteration, except
#: what the policy offloads.
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


@dataclass(frozen=True)
class TensorDecl:
    """A ``tensor`` line of the stream."""

    name: str
    bytes: int
    kind: str
    layer: str | None = None
    sparse: bool = False
    shape: tuple[int, ...] | None = None


@dataclass
class Op:
    """One stream op (``alloc``, ``free``, ``offload``, ``prefetch``, ``wait``, ``compute``, ``sync``)."""

    op: str
    name: str
    layer: str | None = None
    pass_: str | None = None
    flops: int | None = None
    dram: int | None = None
    time: str | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    algorithm: str = ""
    #: ``none`` on an offload the engine copies raw, bypassing its codec ('' = the engine's)
    codec: str = ""


@dataclass
class Block:
    """The ops issued for one layer in one phase, with a comment line."""

    layer: str
    kind: str
    comment: str
    ops: list[Op] = field(default_factory=list)


@dataclass
class Plan:
    """One training iteration, ready to render."""

    network: str
    batch: int
    dtype: str
    policy: str
    tensors: list[TensorDecl]
    prologue: list[Op]
    forward: list[Block]
    backward: list[Block]
    epilogue: list[Op]
    offloaded: tuple[str, ...] = ()
    update: list[Block] = field(default_factory=list)
    allocation: str = "liveness"
    #: per-tensor policies: every activation tensor -> keep, offload, compress or recompute
    #: (empty under the vDNN policies)
    choices: dict[str, str] = field(default_factory=dict)
    #: recomputed tensors (their producer's forward kernels re-run in the backward pass)
    recomputed: tuple[str, ...] = ()


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def _times(times: Mapping[str, Mapping[str, str]] | None, layer: str, pass_: str) -> str | None:
    if not times or layer not in times:
        return None
    value = times[layer].get(pass_)
    return None if value is None else str(value)


def plan_iteration(network: Network, batch: int, dtype: str = "float32", policy: str = "conv",
                   times: Mapping[str, Mapping[str, str]] | None = None,
                   optimizer: str = "none", workspace: int = 0,
                   kernels: Mapping[str, Mapping[str, Any]] | None = None,
                   allocation: str = "liveness",
                   choices: Mapping[str, str] | None = None) -> Plan:
    """Schedule one training iteration of ``network`` under vDNN ``policy``, ending with the
    step of ``optimizer`` (one of :data:`OPTIMIZERS`), giving each convolution kernel
    ``workspace`` bytes of cuDNN workspace, allocating GPU memory as ``allocation`` says (one
    of :data:`ALLOCATIONS`).

    ``times`` optionally maps layer -> {"fwd": "1.2ms", "bwd": "2.5ms"} (measured kernel times
    for calibration); they become ``time=`` keys of the compute ops.

    ``kernels`` optionally maps layer -> {"fwd": k, "bwd": k} of kernels priced by the kernel
    model (:class:`~workloads.kernel_pricing.PricedKernel`: ``time_ps``,
    ``algorithm``, ``workspace``): their times become ``time=`` keys (unless ``times`` gives
    measured ones), their algorithms ``algo=`` keys, and each kernel gets the workspace its
    algorithm needs instead of ``workspace``.

    A per-tensor ``policy`` (:mod:`~workloads.policies`: ``recompute``,
    ``recompute-attn+offload-ffn``, ...) is resolved to ``choices`` (tensor -> keep, offload,
    compress, recompute) unless they are given (``plan`` and ``auto`` need them given).
    """
    from .policies import check_policy, is_vdnn, resolve_choices

    try:
        check_policy(policy)
    except WorkloadError as exc:
        raise WorkloadError(f"policy {policy!r}: {exc}") from None
    per_tensor = not is_vdnn(policy)
    if per_tensor and choices is None:
        choices = resolve_choices(network, batch, dtype, policy)
    if optimizer not in OPTIMIZERS:
        raise WorkloadError(f"unknown optimizer {optimizer!r} (expected one of "
                            f"{', '.join(OPTIMIZERS)})")
    step = OPTIMIZERS[optimizer]
    if allocation not in ALLOCATIONS:
        raise WorkloadError(f"unknown allocation {allocation!r} (expected one of "
                            f"{', '.join(ALLOCATIONS)})")
    wide = allocation == "network-wide"
    if workspace < 0:
        raise WorkloadError(f"workspace must not be negative, got {workspace} bytes")
    infos = network.infer(batch, dtype)
    tensors = network.tensors(batch, dtype)
    info: dict[str, LayerInfo] = {i.name: i for i in infos}
    idx = {i.name: k for k, i in enumerate(infos)}
    kind = {i.name: i.kind for i in infos}
    if times:
        unknown = sorted(set(times) - set(info))
        if unknown:
            raise WorkloadError(f"times given for unknown layer(s) {unknown}", file=network.file)

    def has_grad(t: TensorInfo) -> bool:
        return t.needs_grad and bool(t.consumers)

    # -- declarations ---------------------------------------------------------------------
    decls: list[TensorDecl] = []
    for ti in tensors.values():
        # a tensor carrying statistics besides its elements declares its bytes only
        decls.append(TensorDecl(ti.name, ti.bytes, "activation", ti.producer, ti.sparse,
                                () if ti.stats_bytes else ti.shape))
    for ti in tensors.values():
        if has_grad(ti):
            decls.append(TensorDecl(grad_name(ti.name), ti.bytes - ti.stats_bytes, "gradient",
                                    ti.producer, False, ti.shape))
    weighted = [i for i in infos if i.params]
    for i in weighted:
        decls.append(TensorDecl(weight_name(i.name), i.weight_bytes, "weight", i.name))
    for i in weighted:
        decls.append(TensorDecl(wgrad_name(i.name), i.weight_bytes, "gradient", i.name))
    stateful = [i for i in weighted if step is not None and step.state_bytes(i.params, dtype)]
    for i in stateful:
        decls.append(TensorDecl(state_name(i.name), step.state_bytes(i.params, dtype), "state",
                                i.name))
    scratch: dict[str, dict[str, tuple[str, ...]]] = {i.name: {"fwd": (), "bwd": ()}
                                                        for i in infos}
    for i in infos:
        for pass_ in ("fwd", "bwd"):
            if kernels is not None:
                size = kernels[i.name][pass_].workspace if i.name in kernels else 0
            else:
                size = workspace if i.kind == "conv" else 0
            if size:
                name = workspace_name(i.name, "fwd" if kernels is None else pass_)
                scratch[i.name][pass_] = (name,)
                if pass_ == "fwd" or kernels is not None:
                    decls.append(TensorDecl(name, size, "workspace", i.name))

    # -- backward needs ------------------------------------------------------------------------
    need: dict[str, list[int]] = {t: [] for t in tensors}
    for i in infos:
        for t in i.bwd_needs:
            need[t].append(idx[i.name])

    # -- recomputation ------------------------------------------------------------------------
    # A recomputed tensor is rebuilt just before its first backward use (the latest layer whose
    # backward reads it): its producer's forward kernel, then its in-place modifiers', re-run
    # there, so the producer's inputs must be resident then — that layer "needs" them too.
    choice = dict(choices or {})
    unknown_choice = sorted(set(choice) - set(tensors))
    if unknown_choice:
        raise WorkloadError(f"choices given for unknown tensor(s) {unknown_choice}",
                            file=network.file)
    recompute_at: dict[int, list[str]] = {}
    rebuild_inputs: dict[int, list[str]] = {}
    for ti in sorted(tensors.values(), key=lambda t: idx[t.producer], reverse=True):
        if choice.get(ti.name) != "recompute" or not need[ti.name] or not ti.consumers:
            continue
        if kind[ti.producer] == "data":
            raise WorkloadError(f"tensor {ti.name!r} is the network input: it cannot be "
                                "recomputed", file=network.file)
        anchor = max(need[ti.name])
        recompute_at.setdefault(anchor, []).insert(0, ti.name)
        for x in dict.fromkeys(info[ti.producer].inputs):
            if anchor not in need[x]:
                need[x].append(anchor)
            rebuild_inputs.setdefault(anchor, []).append(x)
    recomputed = {t for ts in recompute_at.values() for t in ts}

    # -- offload selection --------------------------------------------------------------------
    # A selected tensor no backward kernel reads is not copied out: it is freed after its last
    # forward reader (``dropped``), as vDNN's memory manager releases it.
    offload_at: dict[str, list[str]] = {i.name: [] for i in infos}
    free_after_fwd: dict[str, list[str]] = {i.name: [] for i in infos}
    offloaded: list[str] = []
    dropped: set[str] = set()
    for ti in tensors.values():
        if per_tensor:
            selected = list(ti.consumers) if choice.get(ti.name, "keep") != "keep" else []
        else:
            selected = _selected_readers(policy, ti, kind)
        if not selected:
            continue
        free_after_fwd[max(ti.consumers, key=idx.__getitem__)].append(ti.name)
        if ti.name in recomputed:
            continue
        if need[ti.name] and choice.get(ti.name) != "recompute":
            offload_at[min(selected, key=idx.__getitem__)].append(ti.name)
            offloaded.append(ti.name)
        else:
            dropped.add(ti.name)
    offloaded_set = set(offloaded)
    # on vDNN's schedule, even under network-wide allocation
    managed = offloaded_set | dropped | recomputed
    modifiers = {ti.name: ti.modifiers for ti in tensors.values()}

    # -- anchors and release points -------------------------------------------------------------
    anchored: dict[int, list[str]] = {}
    release: dict[str, int] = {}
    for ti in tensors.values():
        if need[ti.name]:
            release[ti.name] = min(need[ti.name])
            if ti.name in offloaded_set:
                anchored.setdefault(max(need[ti.name]), []).append(ti.name)
        else:
            users = [idx[u] for u in ti.consumers + ti.modifiers]
            release[ti.name] = min(users) if users else idx[ti.producer]

    release_at: dict[int, list[str]] = {}
    for t, at in release.items():
        release_at.setdefault(at, []).append(t)

    # -- forward --------------------------------------------------------------------------------
    prologue = []
    for i in weighted:
        prologue.append(Op("alloc", weight_name(i.name)))
        prologue.append(Op("alloc", wgrad_name(i.name)))
    for i in stateful:
        prologue.append(Op("alloc", state_name(i.name)))
    if wide:  # every buffer but those on vDNN's schedule, once, for the whole iteration
        prologue = [Op("alloc", d.name) for d in decls if d.name not in managed]
    forward: list[Block] = []
    resident: set[str] = set()
    for i in infos:
        block = Block(i.name, i.kind, _comment(i, "fwd"))
        if i.kind == "data":
            if not wide or i.output in managed:
                block.ops.append(Op("alloc", i.output))
            resident.add(i.output)
            forward.append(block)
            continue
        if not i.in_place:
            if not wide or i.output in managed:
                block.ops.append(Op("alloc", i.output))
            resident.add(i.output)
        for t in offload_at[i.name]:
            block.ops.append(Op("offload", t, layer=i.name,
                                codec="none" if choice.get(t) == "offload" else ""))
        reads = tuple(dict.fromkeys(i.inputs)) + ((weight_name(i.name),) if i.params else ())
        ws = scratch[i.name]["fwd"]
        block.ops.extend(Op("alloc", t) for t in ws if not wide)
        block.ops.append(Op("compute", i.name, pass_="fwd", flops=i.flops_fwd, dram=i.dram_fwd,
                            time=_kernel_time(times, kernels, i.name, "fwd"), reads=reads,
                            writes=(i.output,) + ws,
                            algorithm=_algorithm(kernels, i.name, "fwd")))
        block.ops.append(Op("sync", i.name))
        block.ops.extend(Op("free", t) for t in ws if not wide)
        for t in free_after_fwd[i.name]:
            block.ops.append(Op("free", t))
            resident.discard(t)
        forward.append(block)

    # -- backward -------------------------------------------------------------------------------
    backward: list[Block] = []
    prefetched: set[str] = set()
    grads: set[str] = set()
    for i in reversed(infos):
        if i.kind == "data":
            continue
        block = Block(i.name, i.kind, _comment(i, "bwd"))
        ops = block.ops
        if not i.in_place:
            for t in i.grad_inputs:
                g = grad_name(t)
                if g not in grads:
                    if not wide:
                        ops.append(Op("alloc", g))
                    grads.add(g)
        here = idx[i.name]
        demand = [t for t in dict.fromkeys(i.bwd_needs + tuple(rebuild_inputs.get(here, ())))
                  if t in offloaded_set and t not in prefetched]
        ahead: list[str] = []
        for k in range(idx[i.name] - 1, -1, -1):
            ahead = [t for t in anchored.get(k, []) if t not in prefetched]
            # per-tensor policies prefetch one layer ahead: what the next block needs first
            if ahead or per_tensor or infos[k].kind == "conv":
                break
        for t in demand + ahead:
            ops.append(Op("alloc", t))
            ops.append(Op("prefetch", t, layer=i.name))
            prefetched.add(t)
            resident.add(t)
        for t in demand:
            ops.append(Op("wait", t))
        rebuilt_ws: list[str] = []
        for t in recompute_at.get(here, ()):
            ops.append(Op("alloc", t))
            resident.add(t)
            for layer in (tensors[t].producer,) + modifiers[t]:
                li = info[layer]
                ws = scratch[layer]["fwd"]
                ops.extend(Op("alloc", w) for w in ws if not wide)
                rebuilt_ws.extend(ws)
                ops.append(Op("compute", layer, pass_="recompute", flops=li.flops_fwd,
                              dram=li.dram_fwd, time=_kernel_time(times, kernels, layer, "fwd"),
                              reads=tuple(dict.fromkeys(li.inputs)) + (
                                  (weight_name(layer),) if li.params else ()),
                              writes=(li.output,) + ws,
                              algorithm=_algorithm(kernels, layer, "fwd")))
        dy = grad_name(i.output)
        has_dy = dy in grads
        reads = tuple(dict.fromkeys(i.bwd_needs)) + ((dy,) if has_dy else ()) + (
            (weight_name(i.name),) if i.params else ())
        if i.in_place:
            writes: tuple[str, ...] = (dy,) if has_dy else ()
        else:
            writes = tuple(dict.fromkeys(grad_name(t) for t in i.grad_inputs))
        writes += (wgrad_name(i.name),) if i.params else ()
        ws = scratch[i.name]["bwd"] if i.has_backward else ()
        ops.extend(Op("alloc", t) for t in ws if not wide)
        if i.has_backward:
            ops.append(Op("compute", i.name, pass_="bwd", flops=i.flops_bwd, dram=i.dram_bwd,
                          time=_kernel_time(times, kernels, i.name, "bwd"), reads=reads,
                          writes=writes + ws, algorithm=_algorithm(kernels, i.name, "bwd")))
            ops.append(Op("sync", i.name))
        ops.extend(Op("free", t) for t in ws if not wide)
        ops.extend(Op("free", t) for t in rebuilt_ws if not wide)
        if not i.in_place and has_dy and not wide:
            ops.append(Op("free", dy))
            grads.discard(dy)
        for t in release_at.get(idx[i.name], []):
            if t in resident and (not wide or t in offloaded_set):
                ops.append(Op("free", t))
                resident.discard(t)
        backward.append(block)

    epilogue = [Op("free", t) for t in tensors if t in resident]
    epilogue += [Op("free", g) for g in sorted(grads)]
    for i in weighted:
        epilogue.append(Op("free", weight_name(i.name)))
        epilogue.append(Op("free", wgrad_name(i.name)))
    for i in stateful:
        epilogue.append(Op("free", state_name(i.name)))
    if wide:  # everything still allocated, in declaration order
        epilogue = [Op("free", d.name) for d in decls
                    if d.kind != "activation" or d.name in resident]

    # -- optimizer step ---------------------------------------------------------------------------
    update: list[Block] = []
    if step is not None:
        for i in weighted:
            state = (state_name(i.name),) if step.state_bytes(i.params, dtype) else ()
            block = Block(i.name, i.kind, f"{i.name}: {optimizer} step over {i.params} weights")
            dram = step.dram_bytes(i.params, dtype)
            block.ops.append(Op("compute", i.name, pass_="update", flops=step.flops * i.params,
                                dram=dram,
                                reads=(weight_name(i.name), wgrad_name(i.name)) + state,
                                writes=(weight_name(i.name),) + state))
            block.ops.append(Op("sync", i.name))
            update.append(block)
    return Plan(network.name, batch, dtype, policy, decls, prologue, forward, backward, epilogue,
                tuple(offloaded), update, allocation,
                {t: choice.get(t, "keep") for t in tensors} if per_tensor else {},
                tuple(sorted(recomputed, key=lambda t: idx[tensors[t].producer])))


def _selected_readers(policy: str, tensor: TensorInfo, kind: Mapping[str, str]) -> list[str]:
    """The readers of ``tensor`` for which ``policy`` manages it (vDNN-all: every
    non-in-place reader; vDNN-conv: the CONV readers; ``none``: none)."""
    if policy == "all":
        return list(tensor.consumers)
    if policy == "conv":
        return [c for c in tensor.consumers if kind[c] == "conv"]
    return []


def _kernel_time(times: Mapping[str, Mapping[str, str]] | None,
                 kernels: Mapping[str, Mapping[str, Any]] | None, layer: str,
                 pass_: str) -> str | None:
    measured = _times(times, layer, pass_)
    if measured is not None or kernels is None or layer not in kernels:
        return measured
    time_ps = kernels[layer][pass_].time_ps
    return None if time_ps is None else format_ps(time_ps)


def _algorithm(kernels: Mapping[str, Mapping[str, Any]] | None, layer: str, pass_: str) -> str:
    if kernels is None or layer not in kernels:
        return ""
    return kernels[layer][pass_].algorithm


def _comment(i: LayerInfo, pass_: str) -> str:
    flops = i.flops_fwd if pass_ == "fwd" else i.flops_bwd
    text = f"{i.name} ({i.kind}) -> {i.output} {_shape_text(i.shape)}"
    if i.in_place:
        text += " in place"
    return text + f", {flops / 1e9:.3f} GFLOP"
