"""A small decoder-only byte-level transformer whose every saved tensor is a module output.

Each tensor of the transformer naming convention (``docs/profiles.md``, "Transformer
tensors") is produced by its own module, so :func:`~sst_cdma.tools.capture.capture_activations`
can hook it: ``blocks.{i}.scores`` is a module computing the causal, scaled Q K^T and
``blocks.{i}.probs`` an ``nn.Softmax``. :meth:`TextTransformer.capture_names` maps each
module to its tensor name (``blk{i}/scores``, ``blk{i}/probs``, ...). Attention is the
naive form (scores and probabilities exist as tensors); GPT-2/OPT style otherwise: learned
positions, pre-LayerNorm blocks, a GELU (out of place) or ReLU (in place on ``fc1``) FFN.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from sst_cdma.tools.capture.text_config import ACTIVATIONS, TextConfig

__all__ = ["ACTIVATIONS", "TextConfig", "TextTransformer", "text_model"]


class Embed(nn.Module):
    """Token embedding plus learned positions: ``(N, S)`` ids -> ``(N, S, H)``."""

    def __init__(self, cfg: TextConfig) -> None:
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.positions = nn.Embedding(cfg.seq, cfg.hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Embedded tokens with their positions added."""
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))


class Scores(nn.Module):
    """Scaled causal attention scores from the fused Q,K,V: ``(N, heads, S, S)``; entries
    above the diagonal hold ``-inf`` (what the softmax consumes)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        """``Q K^T / sqrt(d)`` with the future masked."""
        q, k, _ = split_heads(qkv, self.heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        s = scores.shape[-1]
        mask = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
        return scores.masked_fill(mask, float("-inf"))


class Context(nn.Module):
    """``probs @ V`` with the heads merged back: ``(N, S, H)``."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def forward(self, probs: torch.Tensor, qkv: torch.Tensor) -> torch.Tensor:
        """Attention output before the output projection."""
        _, _, v = split_heads(qkv, self.heads)
        n, _, s, d = v.shape
        return (probs @ v).transpose(1, 2).reshape(n, s, self.heads * d)


class Add(nn.Module):
    """A residual add as a module, so its output can be hooked."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``x + y``."""
        return x + y


def split_heads(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(N, S, 3H)`` -> Q, K, V each ``(N, heads, S, H/heads)``."""
    n, s, three_h = qkv.shape
    d = three_h // 3 // heads
    q, k, v = qkv.view(n, s, 3, heads, d).permute(2, 0, 3, 1, 4)
    return q, k, v


class Block(nn.Module):
    """Pre-norm transformer block with naive attention; each step a hookable module."""

    def __init__(self, cfg: TextConfig) -> None:
        super().__init__()
        h = cfg.hidden
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.scores = Scores(cfg.heads)
        self.probs = nn.Softmax(dim=-1)
        self.context = Context(cfg.heads)
        self.proj = nn.Linear(h, h)
        self.res1 = Add()
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, cfg.ffn)
        self.act = nn.ReLU(inplace=True) if cfg.activation == "relu" else nn.GELU()
        self.fc2 = nn.Linear(cfg.ffn, h)
        self.res2 = Add()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One block: attention then FFN, each with a residual add."""
        qkv = self.qkv(self.ln1(x))
        context = self.context(self.probs(self.scores(qkv)), qkv)
        x = self.res1(x, self.proj(context))
        return self.res2(x, self.fc2(self.act(self.fc1(self.ln2(x)))))


class TextTransformer(nn.Module):
    """Decoder-only byte-level language model: ``(N, S)`` token ids -> ``(N, S, vocab)`` logits."""

    def __init__(self, cfg: TextConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.blocks))
        self.ln_f = nn.LayerNorm(cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-byte logits."""
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def capture_names(self) -> dict[str, str]:
        """Hooked module -> tensor name of the transformer convention, in forward order.

        With ReLU the activation works in place on ``fc1``, so the ReLU's output is the
        tensor ``blk{i}/fc1`` (post-ReLU) and there is no ``blk{i}/act``; with GELU,
        ``blk{i}/fc1`` is the pre-activation and ``blk{i}/act`` the GELU output.
        """
        out = {"embed": "embed"}
        roles = ["ln1", "qkv", "scores", "probs", "context", "proj", "res1", "ln2"]
        for i in range(self.cfg.blocks):
            out.update({f"blocks.{i}.{r}": f"blk{i}/{r}" for r in roles})
            if self.cfg.activation == "relu":
                out[f"blocks.{i}.act"] = f"blk{i}/fc1"
            else:
                out[f"blocks.{i}.fc1"] = f"blk{i}/fc1"
                out[f"blocks.{i}.act"] = f"blk{i}/act"
            out.update({f"blocks.{i}.{r}": f"blk{i}/{r}" for r in ("fc2", "res2")})
        out.update({"ln_f": "ln_f", "lm_head": "lm_head"})
        return out


def text_model(activation: str = "relu", **sizes: int) -> TextTransformer:
    """A :class:`TextTransformer` (the ``--model`` callable of ``sst-cdma capture``)."""
    return TextTransformer(TextConfig(activation=activation, **sizes))
