"""Build a PyTorch ``nn.Module`` from a :class:`~workloads.network.Network`.

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
Transformer kinds: embedding -> Embedding (+ a learned position table), linear -> Linear on
the last dim (a tied one reads the embedding's table), layernorm/rmsnorm -> LayerNorm/RMSNorm,
gelu -> GELU, swiglu -> silu(gate) * up, rope -> rotary embedding of Q and K, attn_scores /
attn_softmax / attn_context -> causal Q K^T / sqrt(d), softmax, P V (grouped heads repeated),
flash_attention -> scaled_dot_product_attention (causal), cross_entropy -> log_softmax. Build
big ones on ``torch.device("meta")`` (:func:`build_torch`'s ``device``) to check shapes
without weights.
"""
from __future__ import annotations

import math
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


class _Embedding(nn.Module):
    def __init__(self, vocab: int, hidden: int, positions: int, position_dim: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(positions, position_dim or hidden) if positions else None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        if self.positions is not None and self.positions.embedding_dim == x.shape[-1]:
            x = x + self.positions(torch.arange(ids.shape[1], device=ids.device))
        return x


class _RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _SwiGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * up


def _split_qkv(x: torch.Tensor, heads: int, kv_heads: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(N, S, (heads + 2 kv_heads) d) -> Q (N, heads, S, d), K and V repeated to heads."""
    n, s, w = x.shape
    d = w // (heads + 2 * kv_heads)
    q, k, v = x.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
    q = q.view(n, s, heads, d).transpose(1, 2)
    k, v = (t.view(n, s, kv_heads, d).transpose(1, 2).repeat_interleave(heads // kv_heads, 1)
            for t in (k, v))
    return q, k, v


class _Rope(nn.Module):
    def __init__(self, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, s, w = x.shape
        d = w // (self.heads + 2 * self.kv_heads)
        qk, v = x.split([w - self.kv_heads * d, self.kv_heads * d], dim=-1)
        qk = qk.view(n, s, -1, d)
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d))
        angles = torch.outer(torch.arange(s, device=x.device, dtype=x.dtype), inv)
        cos, sin = (torch.cat([f(angles)] * 2, dim=-1)[None, :, None, :]
                    for f in (torch.cos, torch.sin))
        a, b = qk.chunk(2, dim=-1)
        qk = qk * cos + torch.cat([-b, a], dim=-1) * sin
        return torch.cat([qk.reshape(n, s, -1), v], dim=-1)


class _Scores(nn.Module):
    def __init__(self, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, _ = _split_qkv(x, self.heads, self.kv_heads)
        s = q.shape[2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        return scores.masked_fill(mask, float("-inf"))


class _LastDimSoftmax(nn.Module):
    def __init__(self, log: bool = False) -> None:
        super().__init__()
        self.log = log

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1) if self.log else torch.softmax(x, dim=-1)


class _Context(nn.Module):
    def __init__(self, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads

    def forward(self, probs: torch.Tensor, qkv: torch.Tensor) -> torch.Tensor:
        _, _, v = _split_qkv(qkv, self.heads, self.kv_heads)
        out = probs @ v
        return out.transpose(1, 2).reshape(qkv.shape[0], qkv.shape[1], -1)


class _FlashAttention(_Context):
    def forward(self, qkv: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        q, k, v = _split_qkv(qkv, self.heads, self.kv_heads)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(qkv.shape[0], qkv.shape[1], -1)


class _TiedLinear(nn.Module):
    """An LM head reading the embedding's token table (no parameters of its own)."""

    def __init__(self, table: nn.Embedding) -> None:
        super().__init__()
        self.table = [table]  # a list: not registered, so its weight is counted once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.table[0].weight.t()


def _transformer_module(kind: str, params: dict, in_shapes: list[tuple[int, ...]]
                        ) -> nn.Module | None:
    heads = {k: params[k] for k in ("heads", "kv_heads") if k in params}
    if kind == "embedding":
        return _Embedding(params["vocab"], params["hidden"], params["positions"],
                          params["position_dim"])
    if kind == "linear":
        return nn.Linear(in_shapes[0][-1], params["num_output"], bias=params["bias"])
    if kind == "layernorm":
        return nn.LayerNorm(in_shapes[0][-1], eps=params["eps"], bias=params["bias"])
    if kind == "rmsnorm":
        return _RMSNorm(in_shapes[0][-1], params["eps"])
    if kind == "gelu":
        return nn.GELU(approximate="tanh")
    if kind == "swiglu":
        return _SwiGLU()
    if kind == "rope":
        return _Rope(**heads)
    if kind == "attn_scores":
        return _Scores(**heads)
    if kind == "attn_softmax":
        return _LastDimSoftmax()
    if kind == "attn_context":
        return _Context(**heads)
    if kind == "flash_attention":
        return _FlashAttention(**heads)
    if kind == "cross_entropy":
        return _LastDimSoftmax(log=True)
    return None


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
    return _transformer_module(kind, params, in_shapes)  # None: data, concat, add


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
        table: nn.Embedding | None = None
        for layer in network.layers:
            in_shapes = [network.sample_shape(network.layer(i).name) for i in layer.inputs]
            if layer.kind == "linear" and layer.params["tied"]:
                if table is None:
                    raise ValueError(f"tied layer {layer.name!r} has no embedding before it")
                module: nn.Module | None = _TiedLinear(table)
            else:
                module = _module(layer.kind, dict(layer.params), in_shapes)
            if isinstance(module, _Embedding):
                table = module.tokens
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

    def shared_weights(self, layer: str) -> list[torch.Tensor]:
        """The weights ``layer`` reads but does not own: a tied LM head's token table (none
        for every other layer)."""
        key = self._keys.get(layer)
        module = self.blocks[key] if key is not None else None
        return [t.weight for t in module.table] if isinstance(module, _TiedLinear) else []

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
                y = self.blocks[self._keys[layer.name]](*args)
            tensors[layer.tensor] = y
            outputs[layer.name] = y
        return tensors, outputs

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Run the network and return the last layer's output."""
        _, outputs = self.forward_all(*inputs)
        return outputs[self.network.layers[-1].name]


def build_torch(network: Network | str | os.PathLike[str],
                device: torch.device | str | None = None) -> TorchNetwork:
    """Build a :class:`TorchNetwork` from a Network, a shipped network name or a YAML path
    (its parameters on ``device``: ``"meta"`` allocates none)."""
    net = network if isinstance(network, Network) else load_network(network)
    with torch.device(device or "cpu"):
        return TorchNetwork(net)
