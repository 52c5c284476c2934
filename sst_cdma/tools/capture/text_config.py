"""The sizes and training options of the small byte-level text transformer, without PyTorch:
what the model (:mod:`.text_model`), its training (:mod:`.text_train`) and the measuring
commands' option parsers (:mod:`.tool_parsers`, read by ``--help``) share."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ACTIVATIONS", "TextConfig", "TrainOptions"]

ACTIVATIONS = ("relu", "gelu")
"""FFN activations: ``relu`` (OPT style, in place) and ``gelu`` (GPT-2 style)."""


@dataclass(frozen=True)
class TextConfig:
    """Sizes of a :class:`TextTransformer`; ``vocab`` 256 is one token per byte."""

    activation: str = "relu"
    blocks: int = 4
    hidden: int = 256
    heads: int = 4
    ffn: int = 1024
    seq: int = 256
    vocab: int = 256

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation: expected one of {', '.join(ACTIVATIONS)}, "
                             f"got {self.activation!r}")
        for name in ("blocks", "hidden", "heads", "ffn", "seq", "vocab"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide hidden {self.hidden}")

    def describe(self) -> str:
        """One line for a provenance record."""
        return ", ".join(f"{k} {v}" for k, v in asdict(self).items())


@dataclass(frozen=True)
class TrainOptions:
    """Everything but the activation, steps, checkpoints and seed that a run depends on."""

    config: TextConfig = TextConfig()
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 20
    capture_windows: int = 4
    valid_windows: int = 32
    threads: int | None = 2
    also_dtypes: tuple[str, ...] = ("bfloat16",)

    def describe(self) -> str:
        """The optimiser and batch, for a provenance record."""
        return (f"AdamW lr {self.lr:g} (linear warm-up over {self.warmup} steps, then "
                f"constant), batch {self.batch} windows of {self.config.seq} bytes, "
                f"{self.threads or 'default'} CPU thread(s)")
