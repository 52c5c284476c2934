"""Render the per-iteration workload stream with the jinja2 templates in ``templates/``.

``render_stream(network, batch, dtype="float32", policy="conv") -> str``. The schedule comes
from :func:`sst_cdma.workloads.vdnn.plan_iteration`; the templates only lay it out, one op per
line (``stream.j2`` for the document, ``ops.j2`` for the op and tensor line macros).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

import jinja2

from .layer_times import LayerTimes, load_layer_times
from .loader import MACRO_LIBRARY, load_network, network_path
from .network import Network
from .stream import Stream, parse_stream
from .vdnn import Plan, plan_iteration

if TYPE_CHECKING:
    from sst_cdma.model.fitted import KernelModel

__all__ = ["TEMPLATE_DIR", "render_stream", "render_plan", "iteration_stream"]

#: Folder holding ``stream.j2`` and ``ops.j2``.
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def render_plan(plan: Plan, template: str = "stream.j2") -> str:
    """Render an already computed :class:`~sst_cdma.workloads.vdnn.Plan`."""
    return _environment().get_template(template).render(plan=plan)


def render_stream(network: str | os.PathLike[str] | Network, batch: int, dtype: str = "float32",
                  policy: str = "conv",
                  times: Mapping[str, Mapping[str, str]] | None = None,
                  optimizer: str = "none", workspace: int = 0,
                  allocation: str = "liveness",
                  kernel_model: Optional["KernelModel"] = None,
                  workspace_limit: Optional[int] = None,
                  memory_capacity: Optional[int] = None) -> str:
    """Render one training iteration of ``network`` (name, YAML path or :class:`Network`).

    ``policy`` is a vDNN policy (``none``, ``all``, ``conv``). ``times`` optionally gives
    measured kernel times per layer and pass (``{"conv1": {"fwd": "1.2ms"}}``) that become
    ``time=`` keys of the compute ops. ``optimizer`` ends the iteration with its step (one of
    :data:`~sst_cdma.workloads.vdnn.OPTIMIZERS`; ``none`` leaves it out). ``workspace`` is the
    cuDNN workspace in bytes each convolution kernel gets. ``allocation`` is ``liveness``
    (buffers live from birth to death) or ``network-wide`` (vDNN's baseline: every buffer but
    the offloaded ones for the whole iteration; see
    :data:`~sst_cdma.workloads.vdnn.ALLOCATIONS`). With a ``kernel_model`` (the fitted
    model of the GPU, :mod:`sst_cdma.model.fitted`) every kernel is priced by it: its time,
    algorithm and workspace (at most ``workspace_limit`` bytes) go into the stream, and
    ``workspace`` is not used; measured ``times`` still take precedence for the times. With a
    ``memory_capacity`` (bytes of GPU memory) a kernel whose algorithm's workspace would not
    fit beside what the iteration holds when it runs takes the fastest algorithm that does, as
    a framework picks within the memory it has free.
    """
    from .kernel_pricing import price_network

    net = network if isinstance(network, Network) else load_network(network)
    kernels = None
    if kernel_model is not None:
        kernels = price_network(net, batch, dtype, kernel_model, workspace_limit)
    return _render(net, batch, dtype, policy, times, optimizer, workspace, allocation,
                   kernel_model, kernels, workspace_limit, memory_capacity)


def _render(net: Network, batch: int, dtype: str, policy: str,
            times: Mapping[str, Mapping[str, str]] | None, optimizer: str, workspace: int,
            allocation: str, kernel_model: Optional["KernelModel"],
            kernels: Optional[Mapping], workspace_limit: Optional[int],
            memory_capacity: Optional[int]) -> str:
    from .kernel_pricing import limits_from_free_memory, price_network

    plan = plan_iteration(net, batch, dtype, policy, times, optimizer, workspace, kernels,
                          allocation)
    if kernel_model is not None and memory_capacity:
        limits: dict[str, dict[str, int]] = {}
        for _ in range(4):  # a smaller workspace frees memory for others: settle in a few
            tight = limits_from_free_memory(plan, memory_capacity)
            if not tight:
                break
            for layer, passes in tight.items():
                for p, size in passes.items():
                    mine = limits.setdefault(layer, {})
                    mine[p] = min(size, mine.get(p, size))
            kernels = price_network(net, batch, dtype, kernel_model, workspace_limit, limits)
            plan = plan_iteration(net, batch, dtype, policy, times, optimizer, workspace,
                                  kernels, allocation)
    return render_plan(plan)


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
                     memory_capacity: Optional[int] = None, seq_len: int = 0,
                     attention: str = "") -> tuple[str, Stream]:
    """The rendered text of one training iteration of ``network`` and its parsed stream.

    ``layer_times`` optionally names a measured layer-times file
    (:mod:`~sst_cdma.workloads.layer_times`) whose times become the compute ops' ``time=``;
    it must be for this network, batch and dtype. ``optimizer`` adds its step (see
    :data:`~sst_cdma.workloads.vdnn.OPTIMIZERS`); ``workspace`` gives each convolution kernel
    that many bytes of cuDNN workspace; ``allocation`` picks the memory allocation mode
    (``liveness`` or ``network-wide``). ``kernel_model`` prices every kernel with the fitted
    model (see :func:`render_stream`); measured times of another GPU preset (the file's
    ``gpu``) are then scaled to this one, layer by layer and pass by pass, by the model's
    ratio; ``memory_capacity`` makes algorithm choice fit the GPU's memory (see
    :func:`render_stream`). ``seq_len`` and ``attention`` override a transformer definition's
    (0 / '': the definition's; a CNN refuses them, see
    :func:`~sst_cdma.workloads.loader.load_network`).

    Memoized by the definition file and its modification time (and the macro library's, and
    the layer-times file's), so a run's baselines and the points of a sweep that share a
    network, batch, dtype, policy and allocation render and parse it once; an edited file is
    read afresh. The stream is shared: treat it as read-only.
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
                      workspace_limit, memory_capacity, seq_len, attention)


@functools.lru_cache(maxsize=32)
def _iteration(path: str, mtime_ns: int, library_mtime_ns: int, batch: int, dtype: str,
               policy: str, label: str, layer_times: str, times_mtime_ns: int,
               optimizer: str, workspace: int, allocation: str,
               kernel_model: Optional["KernelModel"],
               workspace_limit: Optional[int],
               memory_capacity: Optional[int], seq_len: int = 0,
               attention: str = "") -> tuple[str, Stream]:
    net = load_network(path, seq_len, attention)
    times = None
    if layer_times:
        measured = load_layer_times(layer_times)
        measured.check(net, batch, dtype)
        if kernel_model is not None and measured.gpu and measured.gpu != kernel_model.preset:
            measured = scale_layer_times(measured, net, kernel_model, workspace_limit)
        times = measured.as_stream_times()
    kernels = None if kernel_model is None else _priced(path, mtime_ns, library_mtime_ns, batch,
                                                        dtype, kernel_model, workspace_limit,
                                                        seq_len, attention)
    text = _render(net, batch, dtype, policy, times, optimizer, workspace, allocation,
                   kernel_model, kernels, workspace_limit, memory_capacity)
    return text, parse_stream(text, label)


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
