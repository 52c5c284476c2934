"""Workloads: network definitions with real shapes and the per-iteration vDNN streams.

Public API::

    from workloads import load_network, render_stream, parse_stream, stream_stats
    net = load_network("vgg16")              # or a path to a YAML file
    infos = net.infer(batch=64)              # per-layer shapes, bytes, FLOPs, DRAM traffic
    text = render_stream("vgg16", 64, "float32", policy="conv")
    stream = parse_stream(text, source="vgg16.stream")
    stats = stream_stats(stream)             # peak memory, offloaded bytes, per-layer work

Modules: ``kinds`` (layer kinds and params), ``macros`` (fire/inception/bottleneck expansion),
``loader`` (YAML -> Network), ``network`` (tensors, ``infer``), ``shapes``, ``flops``, ``vdnn``
(offload/prefetch schedule), ``plan`` (the schedule's objects), ``stream_schema`` (the stream's
objects and the one declaration of their fields), ``render`` (the iteration's stream, its text
with jinja2), ``stream`` (parser), ``durations``, ``stats``,
``transformer`` (``transformer:`` definitions expanded into layers), ``torch_builder``
(optional PyTorch model from the same definition). Docs: docs/workloads.md.
"""
from __future__ import annotations

from .dtypes import DTYPES, itemsize
from .errors import StreamError, WorkloadError
from .kinds import KINDS
from .loader import CNNS, NETWORK_DIR, NETWORKS, TRANSFORMERS, load_network
from .network import Layer, LayerInfo, Network, TensorInfo
from .render import render_stream
from .stats import LayerStats, StreamStats, stream_stats
from .stream import Stream, StreamOp, StreamTensor, parse_stream
from .vdnn import POLICIES, plan_iteration

__all__ = [
    "CNNS", "DTYPES", "KINDS", "NETWORKS", "NETWORK_DIR", "POLICIES", "TRANSFORMERS",
    "Layer", "LayerInfo", "LayerStats", "Network", "Stream", "StreamError", "StreamOp",
    "StreamStats", "StreamTensor", "TensorInfo", "WorkloadError",
    "itemsize", "load_network", "parse_stream", "plan_iteration", "render_stream",
    "stream_stats",
]
