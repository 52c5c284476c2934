"""What a validation run measures, at which sizes and how often, from its time budget.

A GPU run is planned to fit :data:`DEFAULT_BUDGET_S` (seven minutes, under the eight the check
is promised in) with :data:`GPU_SHARES` of it per part; a smaller ``--budget-s`` scales the
repetitions down (at least one of each) and, below half the default, drops the largest size of
each bandwidth sweep. The reduced plan (``--cpu``) is a fixed small one: tiny networks, a few
repetitions, sizes of KiB to MiB, so the whole check takes seconds on a CPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, TextIO

__all__ = ["DEFAULT_BUDGET_S", "MIN_BUDGET_S", "GPU_SHARES", "NetworkChoice", "Plan",
           "plan_for", "Progress"]

#: the default budget of a GPU run, in seconds (the check must end within eight minutes)
DEFAULT_BUDGET_S = 420.0
#: the least budget accepted: below it not even one repetition of each part fits
MIN_BUDGET_S = 30.0
#: share of a GPU run's budget each part is planned for (the simulation runs on the host)
GPU_SHARES = {"layers": 0.30, "kernels": 0.10, "bandwidth": 0.04, "copies": 0.06,
              "training": 0.15, "cpu-adam": 0.15, "simulation": 0.20}

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class NetworkChoice:
    """A network the run times: a shipped name or definition (``base``), with transformer
    fields replaced by ``overrides`` (written to the run's folder as a definition file)."""

    base: str
    batch: int
    name: str = ""
    overrides: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """Sizes and repetitions of every part of a run."""

    transformer: NetworkChoice
    cnn: NetworkChoice
    repeat: int
    warmup: int
    copy_sizes: tuple[int, ...]
    hbm_sizes: tuple[int, ...]
    bandwidth_repeat: int
    train_steps: int
    train_warmup: int
    adam_sizes: tuple[int, ...]
    adam_threads: tuple[str, ...]
    adam_repeat: int
    adam_warmup: int
    budget_s: float


#: the GPU plan at the default budget: two GPT-2-medium blocks (hidden 1024, 16 heads,
#: sequence 1024) at micro-batch 8, AlexNet at batch 128 (the cDMA paper's network)
_GPU = Plan(
    transformer=NetworkChoice("gpt2_medium", 8, "gpt2_medium_2blocks", {"layers": 2}),
    cnn=NetworkChoice("alexnet", 128),
    repeat=10, warmup=3,
    copy_sizes=(1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB),
    hbm_sizes=(16 * MiB, 256 * MiB, 1 * GiB, 4 * GiB),
    bandwidth_repeat=20, train_steps=5, train_warmup=2,
    adam_sizes=(4 * MiB, 16 * MiB), adam_threads=("1", "all"), adam_repeat=5, adam_warmup=2,
    budget_s=DEFAULT_BUDGET_S)

#: the reduced (CPU) plan: a one-block transformer of width 64 and the digits CNN
_REDUCED = Plan(
    transformer=NetworkChoice("gpt2_small", 2, "tiny_gpt_block",
                              {"layers": 1, "hidden": 64, "heads": 4, "kv_heads": 4,
                               "ffn": 256, "vocab": 512, "positions": 32, "seq_len": 32}),
    cnn=NetworkChoice("digits_cnn", 4),
    repeat=2, warmup=1,
    copy_sizes=(256 * KiB, 2 * MiB), hbm_sizes=(256 * KiB, 2 * MiB),
    bandwidth_repeat=3, train_steps=2, train_warmup=1,
    adam_sizes=(64 * KiB,), adam_threads=("1",), adam_repeat=2, adam_warmup=1,
    budget_s=60.0)


def plan_for(reduced: bool, budget_s: Optional[float]) -> Plan:
    """The plan of a run: the reduced one, or the GPU one scaled to ``budget_s`` (None: the
    default budget)."""
    if reduced:
        return _REDUCED if budget_s is None else replace(_REDUCED, budget_s=budget_s)
    budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
    scale = min(1.0, budget / DEFAULT_BUDGET_S)

    def times(n: int) -> int:
        return max(1, round(n * scale))

    trim = 1 if scale < 0.5 else 0
    return replace(_GPU, repeat=times(_GPU.repeat), warmup=times(_GPU.warmup),
                   bandwidth_repeat=times(_GPU.bandwidth_repeat),
                   train_steps=times(_GPU.train_steps), adam_repeat=times(_GPU.adam_repeat),
                   copy_sizes=_GPU.copy_sizes[:len(_GPU.copy_sizes) - trim],
                   hbm_sizes=_GPU.hbm_sizes[:len(_GPU.hbm_sizes) - trim], budget_s=budget)


class Progress:
    """Progress lines, ``[  12s of 420s] part (126 s planned): what``, and the time each part
    took against its share of the budget (:data:`GPU_SHARES`)."""

    def __init__(self, budget_s: float, out: Optional[TextIO],
                 clock: Callable[[], float] = time.monotonic,
                 shares: Optional[dict[str, float]] = None) -> None:
        self.budget_s = budget_s
        self.shares = GPU_SHARES if shares is None else shares
        self.out = out
        self.clock = clock
        self.start = clock()
        self.parts: dict[str, float] = {}
        self._part: Optional[tuple[str, float]] = None

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run began."""
        return self.clock() - self.start

    def say(self, what: str) -> None:
        """One progress line (nothing when quiet)."""
        if self.out is not None:
            print(f"[{self.elapsed_s:5.0f}s of {self.budget_s:.0f}s] {what}", file=self.out,
                  flush=True)

    def begin(self, part: str, what: str) -> None:
        """Start a part of the run."""
        self.end()
        self._part = (part, self.clock())
        planned = f" ({self.shares[part] * self.budget_s:.0f} s planned)" \
            if part in self.shares else ""
        self.say(f"{part}{planned}: {what}")

    def end(self) -> None:
        """End the current part, recording its seconds."""
        if self._part is not None:
            name, began = self._part
            self.parts[name] = self.parts.get(name, 0.0) + self.clock() - began
            self._part = None

    def over_budget(self) -> Optional[str]:
        """A line saying the run took longer than its budget, and which parts overran their
        share, or None."""
        if self.elapsed_s <= self.budget_s:
            return None
        over = [f"{part} {seconds:.0f} s of {self.shares[part] * self.budget_s:.0f} s"
                for part, seconds in self.parts.items()
                if part in self.shares and seconds > self.shares[part] * self.budget_s]
        return (f"the run took {self.elapsed_s:.0f} s, more than its budget of "
                f"{self.budget_s:.0f} s" + (f" (over their share: {', '.join(over)})"
                                            if over else ""))
