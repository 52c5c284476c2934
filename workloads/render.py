"""Render the per-iteration workload stream with the jinja2 templates in ``templates/``.

``render_stream(network, batch, dtype="float32", policy="conv") -> str``. The schedule comes
from :func:`sst_cdma.workloads.vdnn.plan_iteration`; the templates only lay it out, one op per
line (``stream.j2`` for the document, ``ops.j2`` for the op and tensor line macros).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Mapping

import jinja2

from .layer_times import load_layer_times
from .loader import MACRO_LIBRARY, load_network, network_path
from .network import Network
from .stream import Stream, parse_stream
from .vdnn import Plan, plan_iteration

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
                  allocation: str = "liveness") -> str:
    """Render one training iteration of ``network`` (name, YAML path or :class:`Network`).

    ``policy`` is a vDNN policy (``none``, ``all``, ``conv``). ``times`` optionally gives
    measured kernel times per layer and pass (``{"conv1": {"fwd": "1.2ms"}}``) that become
    ``time=`` keys of the compute ops. ``optimizer`` ends the iteration with its step (one of
    :data:`~sst_cdma.workloads.vdnn.OPTIMIZERS`; ``none`` leaves it out). ``workspace`` is the
    cuDNN workspace in bytes each convolution kernel gets. ``allocation`` is ``liveness``
    (buffers live from birth to death) or ``network-wide`` (vDNN's baseline: every buffer but
    the offloaded ones for the whole iteration; see
    :data:`~sst_cdma.workloads.vdnn.ALLOCATIONS`).
    """
    net = network if isinstance(network, Network) else load_network(network)
    return render_plan(plan_iteration(net, batch, dtype, policy, times, optimizer, workspace,
                                      allocation))


def iteration_stream(network: str | os.PathLike[str], batch: int, dtype: str = "float32",
                     policy: str = "conv",
                     layer_times: str | os.PathLike[str] = "",
                     optimizer: str = "none", workspace: int = 0,
                     allocation: str = "liveness") -> tuple[str, Stream]:
    """The rendered text of one training iteration of ``network`` and its parsed stream.

    ``layer_times`` optionally names a measured layer-times file
    (:mod:`~sst_cdma.workloads.layer_times`) whose times become the compute ops' ``time=``;
    it must be for this network, batch and dtype. ``optimizer`` adds its step (see
    :data:`~sst_cdma.workloads.vdnn.OPTIMIZERS`); ``workspace`` gives each convolution kernel
    that many bytes of cuDNN workspace; ``allocation`` picks the memory allocation mode
    (``liveness`` or ``network-wide``).

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
                      times, times_mtime, optimizer, workspace, allocation)


@functools.lru_cache(maxsize=32)
def _iteration(path: str, mtime_ns: int, library_mtime_ns: int, batch: int, dtype: str,
               policy: str, label: str, layer_times: str, times_mtime_ns: int,
               optimizer: str, workspace: int, allocation: str) -> tuple[str, Stream]:
    net = load_network(path)
    times = None
    if layer_times:
        measured = load_layer_times(layer_times)
        measured.check(net, batch, dtype)
        times = measured.as_stream_times()
    text = render_stream(net, batch, dtype, policy, times, optimizer, workspace, allocation)
    return text, parse_stream(text, label)
