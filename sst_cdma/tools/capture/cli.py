"""``sst-cdma capture``: measure a density profile from any PyTorch model.

Example::

    sst-cdma capture --model torchvision.models:resnet18 --input-shape 8,3,224,224 \\
        --network resnet18 --output resnet18.json --samples resnet18_samples/

``main(argv)`` returns the exit status: 0 on success, 2 on bad arguments or inputs (with a
one-line ``sst-cdma capture: error: ...`` on stderr). It can also run as
``python -m sst_cdma.tools.capture.cli``.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from datetime import datetime, timezone
from typing import Any, Sequence

import numpy as np
import torch

from workloads.network import NAME_RE

from sst_cdma import __version__
from sst_cdma.codecs.registry import algorithm_names, unknown_algorithm
from sst_cdma.profiles import MeasuredProvenance, ProfileError
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads
from sst_cdma.tools.capture.activations import capture_activations
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.inputs import FILLS, npz_batches, parse_shape, synthetic_batches
from sst_cdma.tools.capture.model_loader import load_model, load_weights
from sst_cdma.tools.capture.tensors import CONVERSIONS
from sst_cdma.tools.capture.result import build_profile
from sst_cdma.tools.capture.tool_main import ToolParser
from sst_cdma.tools.capture.tool_main import run_tool

__all__ = ["main", "build_parser", "ToolParser"]

PROG = "sst-cdma capture"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sst-cdma capture``."""
    p = ToolParser(prog=PROG, description="Hook the ReLU outputs of a PyTorch model (or the "
                "modules its capture_names() method names, or --names), measure their density "
                "and real compressed sizes with every registered codec, and write a density "
                "profile. The model runs in eval mode without gradients.")
    p.add_argument("--model", required=True, metavar="MODULE:CALLABLE",
                   help="import path (or file.py) and attribute returning an nn.Module, "
                        "e.g. sst_cdma.tools.capture.digits_cnn:DigitsCNN")
    p.add_argument("--model-kwargs", default="{}", metavar="JSON",
                   help="keyword arguments for the callable, as a JSON object")
    p.add_argument("--weights", metavar="FILE", help="state_dict file to load into the model")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input-shape", metavar="N,C,H,W",
                     help="synthetic input batch shape, e.g. 1,3,224,224")
    src.add_argument("--inputs", metavar="FILE.npz", help="real inputs from an .npz file")
    p.add_argument("--input-key", help="array to use when --inputs holds several")
    p.add_argument("--batch-size", type=int, help="split --inputs into batches of this size")
    p.add_argument("--fill", choices=FILLS, default="randn",
                   help="synthetic input values (default randn)")
    p.add_argument("--batches", type=int, default=1, help="synthetic batches (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model's initial weights and of synthetic "
                   "inputs (default 0)")
    p.add_argument("--network", help="network name in the profile (default: the callable's)")
    p.add_argument("--progress", type=float, default=0.0,
                   help="training progress in [0, 1] of this model state (default 0.0)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="P=STATE_DICT.pt",
                   help="capture the model with these weights at training progress P; repeat "
                        "for several points of training, all in one profile (replaces "
                        "--weights and --progress)")
    p.add_argument("--steps", type=int, help="training steps the progress axis spans, if known")
    p.add_argument("--also-dtypes", default="", metavar="TYPE,...",
                   help="also measure every float32 tensor rounded to these element types "
                        "(bfloat16, float16): the ratios go to the profile's ratios_by_dtype")
    p.add_argument("--algorithms", default=",".join(algorithm_names()),
                   help="comma-separated codecs to measure (default: every registered one, "
                        f"{','.join(algorithm_names())})")
    p.add_argument("--output", "-o", metavar="PROFILE.json", help="profile file to write")
    p.add_argument("--samples", metavar="DIR", help="save each tensor's first batch here (with "
                   "--network, the samples record it and a run of another network refuses "
                   "them)")
    p.add_argument("--names", metavar="MODULE=TENSOR,...",
                   help="capture these modules (of any type) under these tensor names, e.g. "
                        "the network definition's: relu1=conv1,pool=pool (default: the "
                        "model's capture_names() if it has one, else every ReLU under its "
                        "module name)")
    p.add_argument("--quiet", "-q", action="store_true", help="print no table")
    return p


def _check(args: argparse.Namespace) -> None:
    if not 0.0 <= args.progress <= 1.0:
        raise CaptureError(f"--progress: {args.progress} is not in [0, 1]")
    if args.batches < 1:
        raise CaptureError(f"--batches: must be at least 1, got {args.batches}")
    if args.batch_size is not None and args.batch_size < 1:
        raise CaptureError(f"--batch-size: must be at least 1, got {args.batch_size}")
    if args.steps is not None and args.steps < 0:
        raise CaptureError(f"--steps: must not be negative, got {args.steps}")
    if args.input_shape is not None and (args.input_key or args.batch_size):
        raise CaptureError("--input-key and --batch-size apply to --inputs only")
    if not _algorithms(args):
        raise CaptureError(f"--algorithms: names no codec (expected some of "
                           f"{', '.join(algorithm_names())})")
    for algorithm in _algorithms(args):
        if algorithm not in algorithm_names():
            raise CaptureError(unknown_algorithm(algorithm, "--algorithms"))
    for other in _also_dtypes(args):
        if other not in CONVERSIONS:
            raise CaptureError(f"--also-dtypes: cannot measure in {other!r} (expected one of "
                               f"{', '.join(CONVERSIONS)})")
    if args.samples and os.path.lexists(args.samples) and not os.path.isdir(args.samples):
        raise CaptureError(f"--samples: {args.samples} exists and is not a folder: the samples "
                           "go into a folder (give a new name, or an existing folder)")
    if args.checkpoint and (args.weights or args.progress != 0.0):
        raise CaptureError("--checkpoint replaces --weights and --progress; give one or the "
                           "other")


def _also_dtypes(args: argparse.Namespace) -> tuple[str, ...]:
    """The element types ``--also-dtypes`` names, in its order."""
    return tuple(t.strip() for t in args.also_dtypes.split(",") if t.strip())


def _checkpoints(items: list[str]) -> list[tuple[float, str]]:
    """``["0=a.pt", "1=b.pt"]`` -> ``[(0.0, "a.pt"), (1.0, "b.pt")]``, progress checked."""
    out: list[tuple[float, str]] = []
    for item in items:
        mark, eq, path = item.partition("=")
        try:
            progress = float(mark)
        except ValueError:
            progress = float("nan")
        if not eq or not path or not 0.0 <= progress <= 1.0:
            raise CaptureError(f"--checkpoint: {item!r} is not P=FILE with P in [0, 1]")
        if any(progress == seen for seen, _ in out):
            raise CaptureError(f"--checkpoint: progress {mark} is given twice")
        out.append((progress, path))
    return out

def _algorithms(args: argparse.Namespace) -> tuple[str, ...]:
    """The codecs ``--algorithms`` names, in its order."""
    return tuple(a.strip() for a in args.algorithms.split(",") if a.strip())


def _kwargs(text: str) -> dict[str, Any]:
    try:
        value = json_loads(text)
    except StrictParseError as exc:
        raise CaptureError(f"--model-kwargs: not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CaptureError("--model-kwargs: expected a JSON object such as {\"num_classes\": 10}")
    return value


def _names(text: str | None) -> dict[str, str] | None:
    """``relu1=conv1,pool=pool`` -> {"relu1": "conv1", "pool": "pool"}."""
    if not text:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        module, eq, tensor = item.strip().partition("=")
        if not module or (eq and not tensor):
            raise CaptureError(f"--names: {item!r} is not MODULE=TENSOR")
        name = tensor if eq else module
        if not NAME_RE.match(name):
            raise CaptureError(f"--names: {item!r}: tensor name {name!r} is not a network layer "
                               f"name (letters, digits and _./+-, starting with a letter, digit or _)")
        out[module] = name
    return out


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _check(args)
    algorithms = _algorithms(args)
    with torch.random.fork_rng(devices=[]):  # seeded weights, caller's RNG left alone
        torch.manual_seed(args.seed)
        model = load_model(args.model, _kwargs(args.model_kwargs), args.weights)
    if args.input_shape is not None:
        shape = parse_shape(args.input_shape)
        inputs: Any = synthetic_batches(shape, args.batches, args.fill, args.seed)
        data = (f"synthetic {args.fill} inputs of shape {list(shape)}, {args.batches} "
                f"batch(es), seed {args.seed}")
    else:
        inputs = list(npz_batches(args.inputs, args.input_key, args.batch_size))
        data = f"{args.inputs} ({sum(len(b) for b in inputs)} samples, {len(inputs)} batch(es))"
    checkpoints = _checkpoints(args.checkpoint) or [(args.progress, None)]  # type: ignore[list-item]
    captures = []
    for k, (progress, weights) in enumerate(checkpoints):
        last = k == len(checkpoints) - 1  # --samples keeps the last checkpoint's tensors
        if weights is not None:
            load_weights(model, weights, "--checkpoint")
        result = capture_activations(model, inputs, names=_names(args.names),
                                     algorithms=algorithms,
                                     sample_dir=args.samples if last else None,
                                     network=args.network, also_dtypes=_also_dtypes(args))
        captures.append((progress, result))
        if not args.quiet:
            if len(checkpoints) > 1:
                print(f"progress {progress:g} ({weights}):")
            print(result.summary())
    network = args.network or args.model.rpartition(":")[2].rpartition(".")[2]
    weights_note = (f" with weights {args.weights}" if args.weights else "") + "".join(
        f"; at progress {p:g} weights {w}" for p, w in checkpoints if w is not None)
    provenance = MeasuredProvenance(
        model=args.model + weights_note,
        data=data, steps=args.steps, command=shlex.join([*PROG.split(), *argv]),
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        seed=args.seed,
        software={"sst-cdma": __version__, "torch": torch.__version__, "numpy": np.__version__})
    profile = build_profile(network, captures, provenance, source=args.output or "<capture>")
    if args.output:
        profile.save(args.output)
        if not args.quiet:
            print(f"wrote {args.output}")
    if result.samples_index is not None and not args.quiet:
        print(f"samples in {result.samples_index.parent}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sst-cdma capture`` with ``argv`` (default ``sys.argv[1:]``); returns the status."""
    return run_tool(PROG, _run, argv, (CaptureError, ProfileError, OSError))


if __name__ == "__main__":
    sys.exit(main())
