"""Train ``DigitsCNN`` on the digits and capture its ReLU density at points of training.

This produces the shipped measured profile ``workloads/profiles/digits_cnn.json``::

    python -m sst_cdma.tools.capture.digits_train --output workloads/profiles/digits_cnn.json

Training is seeded and single-threaded by default (``torch.set_num_threads(1)``), with a
constant learning rate and batches drawn one step at a time, so the first *S* steps of a long
run are the same as a run of *S* steps: a short run reproduces the start of the shipped profile.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Sequence

import numpy as np
import torch
from torch import nn

from sst_cdma import __version__
from sst_cdma.codecs.registry import ALGORITHM_NAMES, algorithm_names
from sst_cdma.profiles import DensityProfile, MeasuredProvenance
from sst_cdma.tools.capture.activations import capture_activations
from sst_cdma.tools.capture.digits_cnn import PROFILE_TENSORS, DigitsCNN
from sst_cdma.tools.capture.digits_data import DATA_DESCRIPTION, load_digits_split
from sst_cdma.tools.capture.result import CaptureResult, build_profile

__all__ = ["DEFAULT_STEPS", "DEFAULT_CHECKPOINTS", "TrainingRun", "train_and_capture",
           "train_and_profile", "main"]

DEFAULT_STEPS = 3000
DEFAULT_CHECKPOINTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
DEFAULT_BATCH = 64
DEFAULT_LR = 0.05
MODEL_NAME = "sst_cdma.tools.capture.digits_cnn:DigitsCNN"


@dataclass
class TrainingRun:
    """Captures and held-out accuracy at each checkpoint (progress -> value) of one run."""

    steps: int
    seed: int
    captures: dict[float, CaptureResult] = field(default_factory=dict)
    accuracy: dict[float, float] = field(default_factory=dict)
    loss: dict[float, float] = field(default_factory=dict)


def _checkpoint_steps(steps: int, checkpoints: Sequence[float]) -> dict[int, float]:
    """Training step -> progress, for each checkpoint; rejects duplicates, bad values and
    checkpoints out of order (a list read as given, not quietly sorted)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if not checkpoints:
        raise ValueError("at least one checkpoint is needed")
    out: dict[int, float] = {}
    for i, progress in enumerate(checkpoints):
        if not 0.0 <= progress <= 1.0:
            raise ValueError(f"checkpoint {progress} is not in [0, 1]")
        if i and progress < checkpoints[i - 1]:
            raise ValueError(f"checkpoint {progress:g} comes after {checkpoints[i - 1]:g}: give "
                             f"them in the order training reaches them "
                             f"({','.join(f'{p:g}' for p in sorted(checkpoints))})")
        step = round(progress * steps)
        if step in out:
            raise ValueError(f"checkpoints {out[step]} and {progress} both fall on step {step} "
                             f"of {steps}; use more steps or fewer checkpoints")
        out[step] = progress
    return out


def train_and_capture(steps: int = DEFAULT_STEPS,
                      checkpoints: Sequence[float] = DEFAULT_CHECKPOINTS, seed: int = 0, *,
                      batch_size: int = DEFAULT_BATCH, lr: float = DEFAULT_LR,
                      algorithms: Sequence[str] = ALGORITHM_NAMES,
                      threads: int | None = 1) -> TrainingRun:
    """Train ``DigitsCNN`` for ``steps`` SGD steps and capture it at each checkpoint.

    A checkpoint at progress *p* is taken after ``round(p * steps)`` steps, on the fixed
    held-out batch (297 images), with :func:`capture_activations`. SGD with momentum 0.9 and a
    constant ``lr``; each step draws ``batch_size`` training images uniformly with a generator
    seeded by ``seed``, which also seeds the weights (the global RNG state is restored after).
    ``threads`` fixes torch's intra-op thread count for the run (``None`` leaves it).
    """
    at = _checkpoint_steps(steps, checkpoints)
    data = load_digits_split(seed)
    run = TrainingRun(steps=steps, seed=seed)
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = DigitsCNN()
            generator = torch.Generator().manual_seed(seed)
            optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            loss_fn = nn.CrossEntropyLoss()
            for step in range(steps + 1):
                if step in at:
                    _checkpoint(run, at[step], model, data, algorithms, loss_fn)
                if step == steps:
                    break
                model.train()
                index = torch.randint(0, len(data.train_y), (batch_size,), generator=generator)
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(data.train_x[index]), data.train_y[index]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(old_threads)
    return run


def _checkpoint(run: TrainingRun, progress: float, model: nn.Module, data, algorithms,
                loss_fn: nn.Module) -> None:
    run.captures[progress] = capture_activations(model, data.held_x, names=PROFILE_TENSORS,
                                                 algorithms=algorithms)
    model.eval()
    with torch.no_grad():
        logits = model(data.held_x)
    run.accuracy[progress] = float((logits.argmax(1) == data.held_y).float().mean())
    run.loss[progress] = float(loss_fn(logits, data.held_y))


def train_and_profile(steps: int = DEFAULT_STEPS,
                      checkpoints: Sequence[float] = DEFAULT_CHECKPOINTS, seed: int = 0, *,
                      command: str | None = None, **options) -> DensityProfile:
    """The measured ``digits_cnn`` density profile of one seeded training run.

    ``command`` is recorded in the provenance (default: the equivalent
    ``python -m sst_cdma.tools.capture.digits_train`` line). ``options`` go to
    :func:`train_and_capture`. Held-out accuracy per checkpoint is noted in the provenance.
    """
    run = train_and_capture(steps, checkpoints, seed, **options)
    if command is None:
        marks = ",".join(f"{p:g}" for p in sorted(checkpoints))
        command = (f"python -m sst_cdma.tools.capture.digits_train --steps {steps} "
                   f"--checkpoints {marks} --seed {seed}")
    accuracy = ", ".join(f"{p:g}: {a:.3f}" for p, a in sorted(run.accuracy.items()))
    provenance = MeasuredProvenance(
        model=f"{MODEL_NAME} (conv16-relu1-conv32-relu2-pool-fc64-relu3-fc10; tensors named as in the digits_cnn network), SGD momentum 0.9, "
              f"lr {options.get('lr', DEFAULT_LR)}, batch {options.get('batch_size', DEFAULT_BATCH)}",
        data=f"{DATA_DESCRIPTION}; 1500 training images, densities on a fixed held-out batch "
             f"of 297",
        steps=steps, command=command,
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d"), seed=seed,
        notes=f"held-out accuracy by progress: {accuracy}",
        software={"sst-cdma": __version__, "torch": torch.__version__, "numpy": np.__version__})
    return build_profile("digits_cnn", sorted(run.captures.items()), provenance,
                         source="digits_cnn (train_and_profile)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sst_cdma.tools.capture.digits_train",
        description="Train DigitsCNN on scikit-learn's digits and write its measured "
                    "activation density profile.")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"SGD steps of the whole run (default {DEFAULT_STEPS})")
    parser.add_argument("--checkpoints", default=",".join(f"{p:g}" for p in DEFAULT_CHECKPOINTS),
                        help="comma-separated progress points in [0, 1] to capture at")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, split and batches")
    parser.add_argument("--output", "-o", help="profile file to write (default: print only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train, print a per-checkpoint table, optionally write the profile."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(args_list)
    try:
        checkpoints = [float(x) for x in args.checkpoints.split(",") if x.strip()]
        command = shlex.join(["python", "-m", "sst_cdma.tools.capture.digits_train", *args_list])
        profile = train_and_profile(args.steps, checkpoints, args.seed, command=command)
    except ValueError as exc:
        print(f"digits_train: error: {exc}", file=sys.stderr)
        return 2
    print(format_profile(profile))
    if args.output:
        profile.save(args.output)
        print(f"wrote {args.output}")
    return 0


def format_profile(profile: DensityProfile) -> str:
    """Table of density and ratios per tensor and progress point."""
    names = algorithm_names()
    lines = [f"{'tensor':<10} {'progress':>8} {'density':>8}"
             + "".join(f" {a + ' x':>7}" for a in names)]
    for name, tensor in profile.tensors.items():
        for p in tensor.points:
            lines.append(f"{name:<10} {p.progress:>8.2f} {p.density:>8.4f}"
                         + "".join(f" {p.ratios.get(a, float('nan')):>7.3f}" for a in names))
    if profile.provenance.kind == "measured" and profile.provenance.notes:
        lines.append(profile.provenance.notes)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
