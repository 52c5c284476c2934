"""Build a PyTorch ``nn.Module`` from a :class:`~sst_cdma.workloads.network.Network`.

The module is built from the same definition the simulator uses, so a real forward pass checks
the shape inference, and activation-capture tools can hook real ReLU outputs of exactly the
tensors the streams offload. PyTorch is optional: importing this module without it raises
ImportError.

Mapping: conv -> Conv2d (groups, bias), pool -> MaxPool2d/AvgPool2d with ``ceil_mode`` (Caffe
rounding; avg pools count padding, as Caffe) or adaptive 1x1 when global, lrn ->
LocalResponseNorm (same alpha/size convention as Caffe), fc -> flatten + Linear, batchnorm ->
BatchNorm2d/1d, relu -> ReLU (out of place, so hooks see the post-ReLU tensor; the result
replaces the tensor as the in-place layer would), dropout -> Dropout, concat -> cat on dim 1,
add -> sum, softmax/loss -> softmax over the flattened features (labels are not modelled).
"""
from __future__ import annotations

import os

import torch
from torch import nn

from .loader import load_network
from .network import Network

__all__ = ["TorchNetwork", "build_torch"]


class _Flatten(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(x, 1)


class _Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.flatten(x, 1), dim=1)


def _module(kind: str, params: dict, in_shapes: list[tuple[int, ...]]) -> nn.Module | None:
    if kind == "conv":
        return nn.Conv2d(in_shapes[0][0], params["num_output"], params["kernel_size"],
                         stride=params["stride"], padding=params["pad"],
                         dilation=params["dilation"], groups=params["group"], bias=params["bias"])
    if kind == "pool":
        if params["global"]:
            return nn.AdaptiveMaxPool2d(1) if params["mode"] == "max" else nn.AdaptiveAvgPool2d(1)
        k, s, p, c = params["kernel_size"], params["stride"], params["pad"], params["ceil_mode"]
        for pad, kern in zip(p, k):
            if 2 * pad > kern:
                raise ValueError(f"PyTorch pooling needs pad <= kernel/2, got pad {pad} kernel {kern}")
        if params["mode"] == "max":
            return nn.MaxPool2d(k, s, p, ceil_mode=c)
        return nn.AvgPool2d(k, s, p, ceil_mode=c, count_include_pad=True)
    if kind == "lrn":
        return nn.LocalResponseNorm(params["local_size"], params["alpha"], params["beta"], params["k"])
    if kind == "relu":
        return nn.ReLU()
    if kind == "dropout":
        return nn.Dropout(params["ratio"])
    if kind == "fc":
        features = 1
        for d in in_shapes[0]:
            features *= d
        return nn.Sequential(_Flatten(), nn.Linear(features, params["num_output"],
                                                   bias=params["bias"]))
    if kind == "batchnorm":
        cls = nn.BatchNorm2d if len(in_shapes[0]) == 3 else nn.BatchNorm1d
        return cls(in_shapes[0][0], eps=params["eps"], affine=params["affine"])
    if kind in ("softmax", "loss"):
        return _Softmax()
    return None  # data, concat, add: no module


class TorchNetwork(nn.Module):
    """A network definition executed by PyTorch.

    ``forward(x)`` returns the last layer's output; :meth:`forward_all` returns every tensor by
    its stream name (final, post-in-place state) and every layer's output by layer name.
    """

    def __init__(self, network: Network) -> None:
        super().__init__()
        self.network = network
        self.blocks = nn.ModuleDict()
        self._keys: dict[str, str] = {}
        for layer in network.layers:
            in_shapes = [network.sample_shape(network.layer(i).name) for i in layer.inputs]
            module = _module(layer.kind, dict(layer.params), in_shapes)
            if module is None:
                continue
            key = layer.name.replace(".", "_")
            if key in self.blocks:
                raise ValueError(f"layer names collide after sanitizing: {layer.name!r}")
            self.blocks[key] = module
            self._keys[layer.name] = key

    def module_of(self, layer: str) -> nn.Module:
        """The module computing ``layer`` (KeyError for data, concat and add, which have none)."""
        return self.blocks[self._keys[layer]]

    def parameters_of(self, layer: str) -> list[nn.Parameter]:
        """The weights of ``layer`` (none for layers without a module)."""
        key = self._keys.get(layer)
        return list(self.blocks[key].parameters()) if key is not None else []

    def forward_all(self, *inputs: torch.Tensor) -> tuple[dict[str, torch.Tensor],
                                                          dict[str, torch.Tensor]]:
        """Run the network; returns (tensors by stream name, layer outputs by layer name)."""
        tensors: dict[str, torch.Tensor] = {}
        outputs: dict[str, torch.Tensor] = {}
        feed = list(inputs)
        for layer in self.network.layers:
            args = [tensors[t] for t in layer.input_tensors]
            if layer.kind == "data":
                if not feed:
                    raise ValueError(f"no input tensor for data layer '{layer.name}'")
                y = feed.pop(0)
            elif layer.kind == "concat":
                y = torch.cat(args, dim=1)
            elif layer.kind == "add":
                y = args[0]
                for a in args[1:]:
                    y = y + a
            else:
                y = self.blocks[self._keys[layer.name]](args[0])
            tensors[layer.tensor] = y
            outputs[layer.name] = y
        return tensors, outputs

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Run the network and return the last layer's output."""
        _, outputs = self.forward_all(*inputs)
        return outputs[self.network.layers[-1].name]


def build_torch(network: Network | str | os.PathLike[str]) -> TorchNetwork:
    """Build a :class:`TorchNetwork` from a Network, a shipped network name or a YAML path."""
    net = network if isinstance(network, Network) else load_network(network)
    return TorchNetwork(net)
