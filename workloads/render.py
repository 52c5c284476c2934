"""The per-iteration workload stream of a network: made as objects, written as text on demand.

``iteration_stream(network, batch, ...) -> Stream`` plans the iteration
(:func:`workloads.vdnn.plan_iteration`) and returns its :class:`~workloads.stream.Stream`
(memoized; kernel times are integer picoseconds throughout). ``stream_text(stream)`` writes its
text with the jinja2 template ``templates/stream.j2``, which lays out the plan's blocks and
comments and writes each statement's line with
:func:`~workloads.stream_schema.statement_line` (from the fields' one declaration);
:func:`~workloads.stream.parse_stream` of that text gives the stream back.
``render_stream(network, batch, dtype="float32", policy="conv") -> str`` is both in one call.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional

from sst_cdma.engine.progress import timed
from sst_cdma.model.price_memo import PriceMemo

from .layer_times import LayerTimes, load_layer_times
from .loader import MACRO_LIBRARY, load_network, network_path
from .network import Network
from .plan import Plan
from .stream_schema import PHASES, Stream, StreamOp, StreamTensor, statement_line
from .vdnn import Times, plan_iteration

if TYPE_CHECKING:
    import jinja2

    from sst_cdma.model.fitted import KernelModel

    from .planner import PlanResult
    from .model_states import Placement

__all__ = ["TEMPLATE_DIR", "render_stream", "render_plan", "load_templates", "stream_text", "iteration_stream",
           "plan_auto"]

#: per-tensor choices as a hashable value: ((tensor, choice), ...) sorted by tensor
Choices = Optional[tuple[tuple[str, str], ...]]

#: Folder holding ``stream.j2``.
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@functools.lru_cache(maxsize=1)
def _environment() -> "jinja2.Environment":
    """The template environment, made (and jinja2 imported) the first time a stream's text
    is asked for: a run that never writes a stream does not pay for jinja2."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def _lines(items: Iterable[Stream | StreamTensor | StreamOp]) -> str:
    """The templates' ``lines(xs)``: each statement's line, each ended by a newline (one call
    a block, not one a line: a transformer's stream has thousands)."""
    return "".join([statement_line(x) + "\n" for x in items])


def render_plan(plan: Plan, template: str = "stream.j2") -> str:
    """The text of an already computed :class:`~workloads.plan.Plan`."""
    return _environment().get_template(template).render(plan=plan, stream=plan.stream(),
                                                        line=statement_line, lines=_lines)


def stream_text(stream: Stream) -> str:
    """The text of ``stream``; :func:`~workloads.stream.parse_stream` of it gives ``stream``
    back. A rendered stream is laid out from its plan (per-layer blocks and their comments,
    as the run writes ``gpu.stream``), a parsed one plainly: one statement per line."""
    if stream.plan is not None:
        return _environment().get_template("stream.j2").render(plan=stream.plan, stream=stream,
                                                               line=statement_line,
                                                               lines=_lines)
    lines = [statement_line(stream)] + [statement_line(t) for t in stream.tensors.values()]
    last = max((PHASES.index(op.phase) for op in stream.ops), default=0)
    for phase in PHASES[:last + 1]:
        lines.append(f"phase {phase}")
        lines.extend(statement_line(op) for op in stream.ops if op.phase == phase)
    return "\n".join(lines + ["end", ""])


def render_stream(network: str | os.PathLike[str] | Network, batch: int, dtype: str = "float32",
                  policy: str = "conv",
                  times: Optional[Times] = None,
                  optimizer: str = "none", workspace: int = 0,
                  allocation: str = "liveness",
                  kernel_model: Optional["KernelModel"] = None,
                  workspace_limit: Optional[int] = None,
                  memory_capacity: Optional[int] = None,
                  choices: Optional[Mapping[str, str]] = None) -> str:
    """Render one training iteration of ``network`` (name, YAML path or :class:`Network`).

    ``policy`` is a vDNN policy (``none``, ``all``, ``conv``). ``times`` optionally gives
    measured kernel times per layer and pass in picoseconds (``{"conv1": {"fwd":
    1_200_000_000}}``) that become ``time=`` keys of the compute ops. ``optimizer`` ends the iteration with its step (one of
    :data:`~workloads.vdnn.OPTIMIZERS`; ``none`` leaves it out). ``workspace`` is the
    cuDNN workspace in bytes each convolution kernel gets. ``allocation`` is ``liveness``
    (buffers live from birth to death) or ``network-wide`` (vDNN's baseline: every buffer for
    the whole iteration where the policy moves no tensor, liveness where it does; see
    :data:`~workloads.vdnn.ALLOCATIONS`). With a ``kernel_model`` (the fitted
    model of the GPU, :mod:`sst_cdma.model.fitted`) every kernel is priced by it: its time,
    algorithm and workspace (at most ``workspace_limit`` bytes) go into the stream, and
    ``workspace`` is not used; measured ``times`` still take precedence for the times. With a
    ``memory_capacity`` (bytes of GPU memory) a kernel whose algorithm's workspace would not
    fit beside what the iteration holds when it runs takes the fastest algorithm that does, as
    a framework picks within the memory it has free. ``choices`` (tensor -> keep, offload,
    compress, recompute) give the per-tensor plan of policies ``plan`` and ``auto``.
    """
    from .kernel_pricing import price_network

    net = network if isinstance(network, Network) else load_network(network)
    kernels = None
    if kernel_model is not None:
        kernels = price_network(net, batch, dtype, kernel_model, workspace_limit)
    return _render(net, batch, dtype, policy, times, optimizer, workspace, allocation,
                   kernel_model, kernels, workspace_limit, memory_capacity,
                   tuple(sorted(choices.items())) if choices is not None else None)


def _render(net: Network, batch: int, dtype: str, policy: str,
            times: Optional[Times], optimizer: str, workspace: int,
            allocation: str, kernel_model: Optional["KernelModel"],
            kernels: Optional[Mapping], workspace_limit: Optional[int],
            memory_capacity: Optional[int], choices: Choices = None) -> str:
    return render_plan(_planned(net, batch, dtype, policy, times, optimizer, workspace,
                                allocation, kernel_model, kernels, workspace_limit,
                                memory_capacity, choices)[0])


#: the latest iterations scheduled, with the network, times and kernels their keys name by
#: identity (see :func:`_scheduled`): a policy ``auto`` run of GPT-2 XL asks for 10
#: distinct ones 32 times over its placements and its baseline run
_PLANS = PriceMemo(16)


def _scheduled(net: Network, batch: int, dtype: str, policy: str, times: Optional[Times],
               optimizer: str, workspace: int, kernels: Optional[Mapping],
               allocation: str = "liveness", choices: Optional[Mapping[str, str]] = None,
               placement: Optional["Placement"] = None) -> Plan:
    """:func:`plan_iteration` of these inputs, scheduled once and reused by every caller with
    the same inputs: a policy ``auto`` run schedules the same plan for its planner's base,
    its checks, its model states and its stream, and its baseline run all of them again.
    Keyed by the network, measured times and priced kernels themselves (held with the plan, so
    their identity stands for them: each is shared read-only already) and the other inputs by
    value, the choices as a set, the default placement as none given (the same iteration:
    the planner weighs it by name, the stream names none). The plans are shared: treat them as
    read-only."""
    if placement is not None and placement.default:
        placement = None
    key = (id(net), id(times), id(kernels), batch, dtype, policy, optimizer, workspace,
           allocation, None if choices is None else frozenset(choices.items()), placement)
    entry = _PLANS.get(key)
    if entry is None:
        entry = ((net, times, kernels), plan_iteration(
            net, batch, dtype, policy, times, optimizer, workspace, kernels, allocation,
            choices, placement))
        _PLANS.put(key, entry)
    return entry[1]


#: the workspace limits a schedule leaves its kernels in a GPU's memory, by the schedule (held,
#: so its identity stands for it) and the capacity: a run's baseline and its stream ask again of
#: every plan its placements chose
_LIMITS = PriceMemo(16)


def _limits(plan: Plan, capacity: int) -> Mapping[str, Mapping[str, int]]:
    """:func:`~workloads.kernel_pricing.limits_from_free_memory` of a shared (read-only)
    schedule, worked out once per capacity."""
    from .kernel_pricing import limits_from_free_memory

    limits: Mapping[str, Mapping[str, int]] = _LIMITS.of_object(
        plan, capacity, lambda: limits_from_free_memory(plan, capacity))
    return limits


def _planned(net: Network, batch: int, dtype: str, policy: str,
             times: Optional[Times], optimizer: str, workspace: int,
             allocation: str, kernel_model: Optional["KernelModel"],
             kernels: Optional[Mapping], workspace_limit: Optional[int],
             memory_capacity: Optional[int], choices: Choices = None,
             placement: Optional["Placement"] = None) -> tuple[Plan, Optional[Mapping]]:
    """The plan of one iteration and the kernels it was priced with (algorithms chosen to fit
    ``memory_capacity`` when given)."""
    from .kernel_pricing import price_network

    chosen = dict(choices) if choices is not None else None
    plan = _scheduled(net, batch, dtype, policy, times, optimizer, workspace, kernels,
                      allocation, chosen, placement)
    if kernel_model is not None and memory_capacity:
        limits: dict[str, dict[str, int]] = {}
        for _ in range(4):  # a smaller workspace frees memory for others: settle in a few
            tight = _limits(plan, memory_capacity)
            if not tight:
                break
            for layer, passes in tight.items():
                for p, size in passes.items():
                    mine = limits.setdefault(layer, {})
                    mine[p] = min(size, mine.get(p, size))
            kernels = price_network(net, batch, dtype, kernel_model, workspace_limit, limits)
            plan = _scheduled(net, batch, dtype, policy, times, optimizer, workspace,
                              kernels, allocation, chosen, placement)
    return plan, kernels


@functools.lru_cache(maxsize=32)
def _priced(path: str, mtime_ns: int, library_mtime_ns: int, batch: int, dtype: str,
            kernel_model: "KernelModel", workspace_limit: Optional[int], seq_len: int = 0,
            attention: str = "") -> Mapping:
    """The kernel model's prices of a network definition file, shared by the policies."""
    from .kernel_pricing import price_network

    return price_network(load_network(path, seq_len, attention), batch, dtype, kernel_model,
                         workspace_limit)


def iteration_stream(network: str | os.PathLike[str], batch: int, dtype: str = "float32",
                     policy: str = "conv",
                     layer_times: str | os.PathLike[str] = "",
                     optimizer: str = "none", workspace: int = 0,
                     allocation: str = "liveness",
                     kernel_model: Optional["KernelModel"] = None,
                     workspace_limit: Optional[int] = None,
                     memory_capacity: Optional[int] = None,
                     choices: Choices = None, seq_len: int = 0,
                     attention: str = "", placement: Optional["Placement"] = None) -> Stream:
    """The stream of one training iteration of ``network`` (its text: :func:`stream_text`).

    ``layer_times`` optionally names a measured layer-times file
    (:mod:`~workloads.layer_times`) whose times become the compute ops' ``time_ps``;
    it must be for this network, batch and dtype. ``optimizer`` adds its step (see
    :data:`~workloads.vdnn.OPTIMIZERS`); ``workspace`` gives each convolution kernel
    that many bytes of cuDNN workspace; ``allocation`` picks the memory allocation mode
    (``liveness`` or ``network-wide``). ``kernel_model`` prices every kernel with the fitted
    model (see :func:`render_stream`); measured times of another GPU preset (the file's
    ``gpu``) are then scaled to this one, layer by layer and pass by pass, by the model's
    ratio; ``memory_capacity`` makes algorithm choice fit the GPU's memory (see
    :func:`render_stream`); ``choices`` (``((tensor, choice), ...)``, sorted) are the
    per-tensor plan of policies ``plan`` and ``auto``. ``seq_len`` and ``attention`` override
    a transformer definition's (0 / '': the definition's; a CNN refuses them, see
    :func:`~workloads.loader.load_network`). ``placement`` puts the model states elsewhere
    and sets the micro-batches per step (:class:`~workloads.model_states.Placement`).

    Memoized by the definition file and its modification time (and the macro library's, and
    the layer-times file's), so a run's baselines and the points of a sweep that share a
    network, batch, dtype, policy and allocation plan it once; an edited file is read afresh.
    The stream is shared: treat it as read-only.
    """
    path = network_path(network)
    times = ""
    times_mtime = 0
    if layer_times:
        times = os.fspath(layer_times)
        try:
            times_mtime = os.stat(times).st_mtime_ns
        except OSError:
            times_mtime = -1  # load_layer_times reports it, naming the file
    return _iteration(str(path), path.stat().st_mtime_ns, MACRO_LIBRARY.stat().st_mtime_ns,
                      batch, dtype, policy, f"{os.fspath(network)}-b{batch}-{policy}",
                      times, times_mtime, optimizer, workspace, allocation, kernel_model,
                      workspace_limit, memory_capacity, choices, seq_len, attention,
                      placement)


@functools.lru_cache(maxsize=32)
@timed("render_s")
def _iteration(path: str, mtime_ns: int, library_mtime_ns: int, batch: int, dtype: str,
               policy: str, label: str, layer_times: str, times_mtime_ns: int,
               optimizer: str, workspace: int, allocation: str,
               kernel_model: Optional["KernelModel"],
               workspace_limit: Optional[int],
               memory_capacity: Optional[int], choices: Choices = None, seq_len: int = 0,
               attention: str = "", placement: Optional["Placement"] = None) -> Stream:
    net = load_network(path, seq_len, attention)
    times = _measured_times(net, batch, dtype, layer_times, kernel_model, workspace_limit)
    kernels = None if kernel_model is None else _priced(path, mtime_ns, library_mtime_ns, batch,
                                                        dtype, kernel_model, workspace_limit,
                                                        seq_len, attention)
    plan, _ = _planned(net, batch, dtype, policy, times, optimizer, workspace, allocation,
                       kernel_model, kernels, workspace_limit, memory_capacity, choices,
                       placement)
    return plan.stream(label)


def _measured_times(net: Network, batch: int, dtype: str, layer_times: str,
                    kernel_model: Optional["KernelModel"],
                    workspace_limit: Optional[int]) -> Optional[Times]:
    if not layer_times:
        return None
    measured = load_layer_times(layer_times)
    measured.check(net, batch, dtype)
    if kernel_model is not None and measured.gpu and measured.gpu != kernel_model.preset:
        measured = scale_layer_times(measured, net, kernel_model, workspace_limit)
    return measured.times_ps


def plan_auto(network: str | os.PathLike[str], batch: int, dtype: str, capacity: int,
              kernel_ps: "Callable[[object], int]", copy_costs: Optional[Mapping] = None,
              layer_times: str = "", optimizer: str = "none", workspace: int = 0,
              kernel_model: Optional["KernelModel"] = None,
              workspace_limit: Optional[int] = None, label: str = "", seq_len: int = 0,
              attention: str = "", placement: Optional["Placement"] = None,
              transfer_ps: "Optional[Callable[[object, int], int]]" = None) -> "PlanResult":
    """Policy ``auto``: the planner's choices for ``network`` on a machine with
    ``capacity`` bytes of GPU memory, kernels priced by ``kernel_ps(op)`` (as the GPU prices
    them) and copies by ``copy_costs`` (tensor -> :class:`~components.messages.CopyCost`,
    None without an engine); see :func:`workloads.planner.plan_to_fit`.
    ``seq_len`` and ``attention`` override a transformer definition's; ``placement`` puts the
    model states (:class:`~workloads.model_states.Placement`), whose buckets the result's
    ``model_states`` then holds, and ``transfer_ps(op, bytes)`` prices the weights' prefetches that
    placement makes (the weights off the GPU)."""
    from .planner import plan_to_fit

    path = network_path(network)
    net = load_network(path, seq_len, attention)
    times = _measured_times(net, batch, dtype, layer_times, kernel_model, workspace_limit)
    kernels = None if kernel_model is None else _priced(
        str(path), path.stat().st_mtime_ns, MACRO_LIBRARY.stat().st_mtime_ns, batch, dtype,
        kernel_model, workspace_limit, seq_len, attention)

    # Under the fitted model each convolution's algorithm takes the workspace free beside it
    # when the plan is rendered for this memory: the planner leaves workspace out of its
    # memory model (elastic), plans with the fastest algorithms, then prices the kernels as
    # the plan's own render picks them and plans again with those, until the plan is stable.
    elastic = kernel_model is not None
    priced = kernels
    seen: list[dict[str, str]] = []
    def placed(result: "PlanResult") -> "PlanResult":
        if placement is not None and placement.offloaded:
            result.model_states = render(result.choices).model_states
        return result

    for _ in range(3):
        base = _scheduled(net, batch, dtype, "none", times, optimizer, workspace, priced,
                          placement=placement)

        def render(choices: Mapping[str, str]) -> Plan:
            return _scheduled(net, batch, dtype, "auto", times, optimizer, workspace,
                              priced, "liveness", choices, placement)

        result = plan_to_fit(net, batch, dtype, capacity, kernel_ps, copy_costs, render, base,
                             label=label, elastic_workspace=elastic, transfer_ps=transfer_ps)
        if not elastic or result.choices in seen:
            return placed(result)
        seen.append(result.choices)
        before = priced
        _, priced = _planned(net, batch, dtype, "auto", times, optimizer, workspace,
                             "liveness", kernel_model, kernels, workspace_limit, capacity,
                             tuple(sorted(result.choices.items())), placement)
        if priced is before:  # every kernel kept its algorithm: the plan stands
            return placed(result)
    return placed(result)


def scale_layer_times(measured: "LayerTimes", network: Network, target: "KernelModel",
                      workspace_limit: Optional[int] = None) -> "LayerTimes":
    """Times measured on the file's GPU preset, predicted for ``target``: each kernel's
    measured time times the kernel model's ratio (target over source) for that layer and
    pass."""
    from dataclasses import replace

    from sst_cdma.model.fitted import kernel_model_for

    from .kernel_pricing import price_network

    source = kernel_model_for(measured.gpu)
    src = price_network(network, measured.batch, measured.dtype, source, workspace_limit)
    dst = price_network(network, measured.batch, measured.dtype, target, workspace_limit)
    # memory-bound kernels (no price here) scale with the DRAM bandwidth
    dram = source.hardware.dram_bandwidth / target.hardware.dram_bandwidth

    def ratio(layer: str, p: str) -> float:
        a, b = src[layer][p].time_ps, dst[layer][p].time_ps
        return dram if a is None or b is None else b / a

    scaled = {layer: {p: max(1, round(ps * ratio(layer, p))) for p, ps in passes.items()}
              for layer, passes in measured.times_ps.items()}
    return replace(measured, times_ps=scaled)


def load_templates() -> None:
    """Import jinja2 and compile ``stream.j2`` now, as the first stream's text would: a
    process that forks workers (a sweep's pool) does it once for them all."""
    _environment().get_template("stream.j2")


#: the texts of the last few rendered streams, by the stream's identity (a rendered stream is
#: memoized, shared and read-only: the points of a sweep that share a network share it), each
#: kept with its stream so that the identity is not reused while it is kept
_TEXTS: dict[int, tuple[Stream, str]] = {}
TEXTS_KEPT = 2


def _kept_text(text_of: Callable[[Stream], str]) -> Callable[[Stream], str]:
    """``text_of`` (:func:`stream_text`), with the text of each of the last
    :data:`TEXTS_KEPT` rendered streams it gave kept and given again rather than laid out
    again (a parsed stream's text is made each time)."""
    @functools.wraps(text_of)
    def kept(stream: Stream) -> str:
        if stream.plan is None:
            return text_of(stream)
        known = _TEXTS.get(id(stream))
        if known is not None and known[0] is stream:
            return known[1]
        text = text_of(stream)
        while len(_TEXTS) >= TEXTS_KEPT:
            del _TEXTS[next(iter(_TEXTS))]
        _TEXTS[id(stream)] = (stream, text)
        return text

    return kept


stream_text = _kept_text(stream_text)  # type: ignore[assignment]
