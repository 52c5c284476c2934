"""Train a small byte-level transformer on the standard library's sources and capture every
saved tensor at points of training.

This produces the shipped measured profiles ``workloads/profiles/text_relu.json`` (ReLU FFN,
OPT style) and ``text_gelu.json`` (GELU FFN, GPT-2 style)::

    python -m sst_cdma.tools.capture.text_train --activation relu --output workloads/profiles/text_relu.json
    python -m sst_cdma.tools.capture.text_train --activation gelu --output workloads/profiles/text_gelu.json

Each checkpoint is measured with :func:`~sst_cdma.tools.capture.capture_activations` (what
``sst-cdma capture`` runs) on fixed held-out windows, in float32 and, rounded, in bfloat16.
``--save-checkpoints DIR`` also writes the weights at each checkpoint and the held-out windows,
and prints the ``sst-cdma capture --checkpoint ...`` command that measures the same profile
from them. Training is seeded, with a fixed thread count, AdamW with a fixed warm-up then a
constant learning rate, and batches drawn one step at a time, so the first *S* steps of a long
run are those of a run of *S* steps.
"""
from __future__ import annotations

import argparse
import math
import shlex
import sys
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.nn import functional as F

from sst_cdma import __version__
from sst_cdma.codecs.registry import ALGORITHM_NAMES
from sst_cdma.profiles import DensityProfile, MeasuredProvenance
from sst_cdma.tools.capture.activations import capture_activations
from sst_cdma.tools.capture.digits_train import _checkpoint_steps
from sst_cdma.tools.capture.result import CaptureResult, build_profile
from sst_cdma.tools.capture.text_config import TrainOptions
from sst_cdma.tools.capture.text_data import TextCorpus, load_corpus
from sst_cdma.tools.capture.text_model import ACTIVATIONS, TextTransformer

__all__ = ["DEFAULT_STEPS", "DEFAULT_CHECKPOINTS", "TextRun", "TrainOptions",
           "train_and_capture", "train_and_profile", "profile_name", "main"]

DEFAULT_STEPS = 640
DEFAULT_CHECKPOINTS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0)
MODEL_NAME = "sst_cdma.tools.capture.text_model:text_model"
PROG = "python -m sst_cdma.tools.capture.text_train"


@dataclass
class TextRun:
    """Captures and validation loss (bits per byte) at each checkpoint of one run."""

    activation: str
    steps: int
    seed: int
    options: TrainOptions
    corpus: str = ""
    captures: dict[float, CaptureResult] = field(default_factory=dict)
    bits_per_byte: dict[float, float] = field(default_factory=dict)


def profile_name(activation: str) -> str:
    """Network name of the measured profile of a run: ``text_relu`` or ``text_gelu``."""
    return f"text_{activation}"


def _lr(step: int, options: TrainOptions) -> float:
    return options.lr * min(1.0, (step + 1) / options.warmup) if options.warmup else options.lr


def bits_per_byte(model: TextTransformer, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean next-byte cross-entropy of ``model`` in bits per byte."""
    model.eval()
    with torch.no_grad():
        logits = model(inputs)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return float(loss) / math.log(2)


def train_and_capture(activation: str = "relu", steps: int = DEFAULT_STEPS,
                      checkpoints: Sequence[float] = DEFAULT_CHECKPOINTS, seed: int = 0, *,
                      options: TrainOptions = TrainOptions(),
                      corpus: TextCorpus | None = None,
                      algorithms: Sequence[str] = ALGORITHM_NAMES,
                      save_dir: str | Path | None = None) -> TextRun:
    """Train the ``activation`` model for ``steps`` AdamW steps, capturing at each checkpoint.

    A checkpoint at progress *p* is taken after ``round(p * steps)`` steps: every tensor of
    :meth:`TextTransformer.capture_names` on ``options.capture_windows`` fixed held-out windows,
    and the validation loss on ``options.valid_windows`` windows. ``seed`` seeds the weights
    and the batches (the global RNG state is restored after). With ``save_dir``, the weights
    at each checkpoint (``progress_P.pt``) and the capture windows (``windows.npz``) are saved.
    """
    at = _checkpoint_steps(steps, checkpoints)
    cfg = replace(options.config, activation=activation)
    corpus = corpus or load_corpus()
    run = TextRun(activation, steps, seed, replace(options, config=cfg), corpus.description)
    capture_x, _ = corpus.held_out(options.capture_windows, cfg.seq)
    valid_x, valid_y = corpus.held_out(options.valid_windows, cfg.seq)
    if save_dir is not None:
        Path(save_dir).mkdir(parents=True, exist_ok=True)
        np.savez(Path(save_dir) / "windows.npz", tokens=capture_x.numpy())
    old_threads = torch.get_num_threads()
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TextTransformer(cfg)
            generator = torch.Generator().manual_seed(seed)
            optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr)
            for step in range(steps + 1):
                if step in at:
                    progress = at[step]
                    if save_dir is not None:
                        torch.save(model.state_dict(), Path(save_dir) / f"progress_{progress:g}.pt")
                    run.captures[progress] = capture_activations(
                        model, capture_x, algorithms=algorithms,
                        also_dtypes=options.also_dtypes)
                    run.bits_per_byte[progress] = bits_per_byte(model, valid_x, valid_y)
                if step == steps:
                    break
                model.train()
                x, y = corpus.batch(generator, options.batch, cfg.seq)
                for group in optimizer.param_groups:
                    group["lr"] = _lr(step, options)
                optimizer.zero_grad(set_to_none=True)
                F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(old_threads)
    return run


def train_and_profile(activation: str = "relu", steps: int = DEFAULT_STEPS,
                      checkpoints: Sequence[float] = DEFAULT_CHECKPOINTS, seed: int = 0, *,
                      command: str | None = None, **kwargs) -> DensityProfile:
    """The measured profile (``text_relu`` / ``text_gelu``) of one seeded training run.

    ``command`` is recorded in the provenance (default: the equivalent ``text_train`` line);
    ``kwargs`` go to :func:`train_and_capture`.
    """
    run = train_and_capture(activation, steps, checkpoints, seed, **kwargs)
    if command is None:
        marks = ",".join(f"{p:g}" for p in sorted(checkpoints))
        command = (f"{PROG} --activation {activation} --steps {steps} --checkpoints {marks} "
                   f"--seed {seed}")
    loss = ", ".join(f"{p:g}: {b:.3f}" for p, b in sorted(run.bits_per_byte.items()))
    options = run.options
    provenance = MeasuredProvenance(
        model=f"{MODEL_NAME} ({options.config.describe()}; naive attention, pre-LayerNorm, "
              f"learned positions; tensors named by the transformer convention), "
              f"{options.describe()}",
        data=f"{run.corpus}; densities and ratios on {options.capture_windows} fixed held-out "
             f"windows of {options.config.seq} bytes",
        steps=steps, command=command,
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d"), seed=seed,
        notes=f"validation loss in bits per byte ({options.valid_windows} held-out windows) by "
              f"progress: {loss}. Trained and captured in float32; the "
              f"{'/'.join(options.also_dtypes) or 'no'} ratios (ratios_by_dtype) are of the "
              f"same float32 tensors rounded to nearest even, densities are float32's. "
              f"blk{{i}}/scores holds -inf above the diagonal.",
        software={"sst-cdma": __version__, "torch": torch.__version__, "numpy": np.__version__,
                  "python": sys.version.split()[0]})
    return build_profile(profile_name(activation), sorted(run.captures.items()), provenance,
                         source=f"{profile_name(activation)} (train_and_profile)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Train a small byte-level transformer (ReLU or GELU FFN) on the "
                               "Python standard library's sources and write the measured "
                               "density profile of every saved tensor.")
    parser.add_argument("--activation", choices=ACTIVATIONS, required=True,
                        help="FFN activation: relu (OPT style) or gelu (GPT-2 style)")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"AdamW steps of the whole run (default {DEFAULT_STEPS})")
    parser.add_argument("--checkpoints", default=",".join(f"{p:g}" for p in DEFAULT_CHECKPOINTS),
                        help="comma-separated progress points in [0, 1] to capture at")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and batches")
    parser.add_argument("--output", "-o", help="profile file to write (default: print only)")
    parser.add_argument("--save-checkpoints", metavar="DIR",
                        help="also save the weights at each checkpoint and the capture windows "
                             "here, and print the sst-cdma capture command that re-measures them")
    return parser


def capture_command(activation: str, save_dir: str, checkpoints: Sequence[float],
                    steps: int, seed: int) -> str:
    """The ``sst-cdma capture`` line that measures a run's profile from its saved checkpoints."""
    argv = ["sst-cdma", "capture", "--model", MODEL_NAME,
            "--model-kwargs", f'{{"activation": "{activation}"}}',
            "--inputs", f"{save_dir}/windows.npz", "--network", profile_name(activation),
            "--steps", str(steps), "--seed", str(seed), "--also-dtypes", "bfloat16"]
    for p in sorted(checkpoints):
        argv += ["--checkpoint", f"{p:g}={save_dir}/progress_{p:g}.pt"]
    return shlex.join(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train, print a per-checkpoint table, optionally write the profile."""
    from sst_cdma.tools.capture.text_report import format_profile

    args_list = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(args_list)
    try:
        checkpoints = [float(x) for x in args.checkpoints.split(",") if x.strip()]
        profile = train_and_profile(args.activation, args.steps, checkpoints, args.seed,
                                    command=shlex.join([*PROG.split(), *args_list]),
                                    save_dir=args.save_checkpoints)
    except (ValueError, OSError) as exc:
        print(f"text_train: error: {exc}", file=sys.stderr)
        return 2
    print(format_profile(profile))
    if args.output:
        profile.save(args.output)
        print(f"wrote {args.output}")
    if args.save_checkpoints:
        print("re-measure with: " + capture_command(args.activation, args.save_checkpoints,
                                                    checkpoints, args.steps, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
