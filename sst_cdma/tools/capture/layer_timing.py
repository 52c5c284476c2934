"""Measure each layer's forward and backward kernel time in PyTorch, on any device, for the GPU
model's calibration (``sst topologies/pascal_cdma.py -- --layer-times FILE``).

Each layer of a network definition is built as the PyTorch module the shape test uses
(:mod:`workloads.torch_builder`) and timed on its own, with random inputs of the
layer's real shapes at the given batch size: forward as in training (autograd recording), and
backward as the gradients of the layer's inputs that need one and of its weights. Timing
layers one at a time is what per-layer benchmarks (convnet-benchmarks, DeepBench) do: the
times map one-to-one onto the stream's kernels, and only one layer's tensors need to fit on the
device: the model is built on the meta device and each layer gets its weights (freshly
initialized) only while it is timed. Transformer inputs of an embedding are token ids; a tied
LM head's backward includes the gradient of the table it shares. Each figure is the median of ``repeat`` runs after ``warmup`` runs, each bracketed by a
device synchronization.
"""
from __future__ import annotations

import contextlib
import os
import platform
import statistics
import time
from typing import Callable, Iterator

import torch
from workloads.layer_times import LayerTimes, sequence_length
from workloads.loader import load_network
from workloads.network import LayerInfo, Network
from workloads.torch_builder import TorchNetwork, build_torch

from sst_cdma import __version__
from sst_cdma.model.dtypes import DTYPES
from sst_cdma.tools.capture.errors import CaptureError

__all__ = ["time_layers", "device_description"]

_TORCH_DTYPES = {name: getattr(torch, name) for name in DTYPES}


def _synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    return lambda: None


def device_description(device: torch.device) -> str:
    """What the times were measured on, for the file and the run's summary."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} ({device})"
    if device.type == "cpu":
        cpu = platform.processor() or platform.machine() or "cpu"
        return f"CPU {cpu}, {torch.get_num_threads()} threads"
    return str(device)


def _median_ps(run: Callable[[], object], sync: Callable[[], None], repeat: int,
               warmup: int) -> int:
    for _ in range(warmup):
        run()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        run()
        sync()
        samples.append(time.perf_counter_ns() - start)
    return int(statistics.median(samples)) * 1000


def time_layers(network: Network | str | os.PathLike[str], batch: int, dtype: str = "float32",
                device: str = "cpu", repeat: int = 5, warmup: int = 1, seed: int = 0,
                cudnn_benchmark: bool = False,
                progress: Callable[[str, int, int], None] | None = None,
                seq_len: int = 0, attention: str = "") -> LayerTimes:
    """Time every layer of ``network`` at ``batch`` on ``device``; ``seq_len`` and
    ``attention`` override a transformer definition's (see
    :func:`~workloads.loader.load_network`).

    ``cudnn_benchmark`` lets cuDNN try its algorithms and keep the fastest (during the warm-up
    runs), as frameworks do with ``torch.backends.cudnn.benchmark``.

    ``progress(layer, fwd_ps, bwd_ps)`` is called after each layer. Raises
    :class:`CaptureError` for a bad request (device, dtype, counts) and
    :class:`~workloads.WorkloadError` for a bad network.
    """
    if batch < 1 or repeat < 1 or warmup < 0:
        raise CaptureError(f"batch and repeat must be at least 1 and warmup at least 0, got "
                           f"batch {batch}, repeat {repeat}, warmup {warmup}")
    if dtype not in DTYPES or dtype not in _TORCH_DTYPES:
        raise CaptureError(f"dtype {dtype!r} is not one of {', '.join(_TORCH_DTYPES)}")
    try:
        dev = torch.device(device)
        torch.empty(1, device=dev)
    except (RuntimeError, AssertionError) as exc:
        raise CaptureError(f"device {device!r} is not usable here: "
                           f"{str(exc).splitlines()[0]}") from None
    net = network if isinstance(network, Network) else load_network(network, seq_len,
                                                                     attention)
    infos = {i.name: i for i in net.infer(batch, dtype)}
    wanted = [layer.name for layer in net.layers if layer.kind != "data"]
    sync = _synchronizer(dev)
    kind = _TORCH_DTYPES[dtype]
    generator = torch.Generator().manual_seed(seed)
    model = build_torch(net, device="meta").train()  # weights come one layer at a time
    times: dict[str, dict[str, int]] = {}
    with torch.backends.cudnn.flags(enabled=True, benchmark=cudnn_benchmark), \
            torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for name in wanted:
            try:
                with _weights_on(model, name, dev, kind):
                    times[name] = _time_layer(model, net, infos[name], dev, kind, generator,
                                              sync, repeat, warmup)
            except RuntimeError as exc:  # an op PyTorch lacks for this device and dtype, OOM
                raise CaptureError(f"layer {name!r} ({infos[name].kind}) on {device} in {dtype}: "
                                   f"PyTorch: {str(exc).splitlines()[0]}") from None
            if progress is not None:
                progress(name, times[name]["fwd"], times[name]["bwd"])
    how = f"median of {repeat} after {warmup} warm-up" + (
        ", cudnn.benchmark" if cudnn_benchmark else "")
    return LayerTimes(net.name, batch, dtype, device_description(dev), times,
                      f"sst-cdma time-layers {__version__}, torch {torch.__version__}, {how}",
                      seq_len=sequence_length(net))


@contextlib.contextmanager
def _weights_on(model: TorchNetwork, name: str, dev: torch.device,
                kind: torch.dtype) -> Iterator[None]:
    """Give layer ``name``'s module freshly initialized weights on ``dev`` in ``kind`` while it
    is timed, and drop them after, so only one layer's weights are ever allocated (a 7B
    model's whole set would not fit beside them)."""
    try:
        module = model.module_of(name)
    except KeyError:  # data, concat, add: no weights
        yield
        return
    # a tied LM head multiplies by the embedding's table, which it does not own
    modules = [module, *getattr(module, "table", [])]
    for m in modules:
        m.to_empty(device="cpu")
        with torch.no_grad():
            for sub in m.modules():
                if hasattr(sub, "reset_parameters"):
                    sub.reset_parameters()
                else:
                    for p in sub.parameters(recurse=False):
                        p.normal_(0.0, 0.02)
        m.to(device=dev, dtype=kind)
    try:
        yield
    finally:
        for m in modules:
            m.to(device="meta")


def _time_layer(model: TorchNetwork, net: Network, info: LayerInfo, dev: torch.device,
                kind: torch.dtype, generator: torch.Generator, sync: Callable[[], None],
                repeat: int, warmup: int) -> dict[str, int]:
    """Forward and backward picoseconds of one layer on its own."""
    layer = net.layer(info.name)
    if layer.kind == "embedding":  # token ids
        xs = [torch.randint(layer.params["vocab"], info.input_shapes[0], generator=generator)
              .to(device=dev)]
    else:
        xs = [torch.randn(shape, generator=generator).to(device=dev, dtype=kind)
              .requires_grad_(tensor in info.grad_inputs)
              for tensor, shape in zip(layer.input_tensors, info.input_shapes)]
    forward = _forward(model, layer.kind, info.name)
    fwd = _median_ps(lambda: forward(xs), sync, repeat, warmup)
    y = forward(xs)
    dy = torch.randn(y.shape, generator=generator).to(device=dev, dtype=kind)
    weights: list[torch.Tensor] = list(model.parameters_of(info.name))
    if layer.kind == "linear" and layer.params["tied"]:  # the shared table's gradient
        weights = model.shared_weights(info.name)
    wrt = [x for x in xs if x.requires_grad] + [p for p in weights if p.requires_grad]
    if not (wrt and y.requires_grad):
        return {"fwd": fwd, "bwd": 0}  # nothing upstream needs a gradient, and no weights
    bwd = _median_ps(lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True), sync, repeat,
                     warmup)
    return {"fwd": fwd, "bwd": bwd}


def _forward(model: TorchNetwork, kind: str, name: str) -> Callable[[list[torch.Tensor]],
                                                                         torch.Tensor]:
    if kind == "concat":
        return lambda xs: torch.cat(xs, dim=1)
    if kind == "add":
        def add(xs: list[torch.Tensor]) -> torch.Tensor:
            y = xs[0]
            for x in xs[1:]:
                y = y + x
            return y
        return add
    module = model.module_of(name)
    return lambda xs: module(*xs)
