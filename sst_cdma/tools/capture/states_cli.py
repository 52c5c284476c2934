"""``sst-cdma capture-states``: measure what each codec does to a model's weights, gradients,
fp32 master weights and Adam moments, and write a model-state profile.

Examples::

    sst-cdma capture-states --output states.json          # train the small text model here
    sst-cdma capture-states --checkpoint 0=ckpt0.pt --checkpoint 1=ckpt9.pt \\
        --model-name mymodel --output mymodel_states.json  # your own checkpoints

``main(argv)`` returns the exit status: 0 on success, 2 on bad arguments or inputs (with a
one-line ``sst-cdma capture-states: error: ...`` on stderr). The format is
:mod:`sst_cdma.profiles.model_states`' (``docs/profiles.md``, "Model-state profiles").
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from sst_cdma import __version__
from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.engine.machine import memory_fault
from sst_cdma.codecs.registry import algorithm_names, unknown_algorithm
from sst_cdma.profiles import ProfileError
from sst_cdma.profiles.model_states import MODEL_STATE_ROLES
from sst_cdma.tools.capture.cli import _checkpoints
from sst_cdma.tools.capture.tool_main import run_tool
from sst_cdma.tools.capture.tool_parsers import DEFAULT_CHECKPOINTS, DEFAULT_STEPS, SMALL_OPTIONS
from sst_cdma.tools.capture.tool_parsers import STATES_PROG as PROG
from sst_cdma.tools.capture.tool_parsers import states_parser as build_parser
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.model_states import (StateCapture, measure_states, model_state_document,
                           states_from_checkpoint, train_and_measure_states)
from sst_cdma.tools.capture.text_data import load_corpus
from sst_cdma.tools.capture.text_model import TextConfig
from sst_cdma.tools.capture.text_train import MODEL_NAME

__all__ = ["main", "build_parser", "DEFAULT_CHECKPOINTS", "DEFAULT_STEPS"]

#: the most AdamW steps it trains: each trains the model on this CPU (the small model's took
#: about half a second of CPU time each on a 2-core machine), so 100,000 already take hours
MAX_TRAINED_STEPS = 100_000
#: bytes a parameter holds while training: fp32 weight, gradient and two Adam moments
TRAINING_BYTES_PER_PARAM = 16


def model_bytes(args: argparse.Namespace) -> int:
    """A lower bound of the memory training the asked model takes: its embeddings' and
    blocks' weights (biases and norms left out) at :data:`TRAINING_BYTES_PER_PARAM`, and each
    block's float32 attention scores of a batch."""
    h, vocab = args.hidden, SMALL_OPTIONS.config.vocab
    params = (vocab + args.seq) * h + args.blocks * (4 * h * h + 2 * h * args.ffn)
    scores = args.blocks * args.batch * args.heads * args.seq * args.seq * 4
    return params * TRAINING_BYTES_PER_PARAM + scores


def _algorithms(args: argparse.Namespace) -> tuple[str, ...]:
    names = tuple(a.strip() for a in args.algorithms.split(",") if a.strip())
    if not names:
        raise CaptureError("--algorithms: empty list")
    for name in names:
        if name not in algorithm_names():
            raise CaptureError(unknown_algorithm(name, "--algorithms"))
    return names


def _check(args: argparse.Namespace) -> None:
    if args.output and not Path(args.output).parent.is_dir():
        raise CaptureError(f"--output: folder {str(Path(args.output).parent)!r} does not exist")
    for name in ("steps", "blocks", "hidden", "heads", "ffn", "seq", "batch"):
        if getattr(args, name) < 1:
            raise CaptureError(f"--{name}: must be at least 1, got {getattr(args, name)}")
    if args.hidden % args.heads:
        raise CaptureError(f"--heads: {args.heads} does not divide --hidden {args.hidden}")
    if not args.checkpoint:
        if args.steps > MAX_TRAINED_STEPS:
            raise CaptureError(f"--steps: {args.steps} is more than {MAX_TRAINED_STEPS} (each "
                               "step trains the model here, about half a second of CPU time "
                               "for the small model)")
        fault = memory_fault(model_bytes(args), f"weights, gradients and Adam moments at "
                             f"{TRAINING_BYTES_PER_PARAM} bytes a parameter, and the attention "
                             "scores of a batch")
        if fault:
            raise CaptureError(f"the model of --blocks {args.blocks} --hidden {args.hidden} "
                               f"--ffn {args.ffn} --seq {args.seq} --batch {args.batch} {fault}")


def _show(capture: StateCapture) -> None:
    for role in MODEL_STATE_ROLES:
        for dtype, measure in capture.roles.get(role, {}).items():
            ratios = " ".join(f"{c} {measure.ratio(c):.3f}" for c in measure.compressed_bytes)
            print(f"progress {capture.progress:<5g} {role:<15}{dtype:<9} density "
                  f"{measure.nonzeros / measure.elements:.4f}  {ratios}", flush=True)


def _trained(args: argparse.Namespace, algorithms: tuple[str, ...]
             ) -> tuple[str, list[StateCapture], dict[str, Any]]:
    try:
        checkpoints = [float(x) for x in args.checkpoints.split(",") if x.strip()]
    except ValueError:
        raise CaptureError(f"--checkpoints: {args.checkpoints!r} is not a list of numbers "
                           f"in [0, 1]") from None
    config = TextConfig(args.activation, args.blocks, args.hidden, args.heads, args.ffn,
                        args.seq)
    options = replace(SMALL_OPTIONS, config=config, batch=args.batch)
    corpus = load_corpus()
    try:
        captures = train_and_measure_states(args.activation, args.steps, checkpoints,
                                            args.seed, options=options, corpus=corpus,
                                            algorithms=algorithms,
                                            show=None if args.quiet else _show)
    except ValueError as exc:  # the checkpoints
        raise CaptureError(f"--checkpoints: {exc}") from None
    provenance = {
        "model": f"{MODEL_NAME} ({config.describe()}), {options.describe()}",
        "data": f"{corpus.description}; gradients of the training batch at each checkpoint",
        "steps": args.steps, "seed": args.seed,
        "notes": "Trained in float32; bfloat16/float16 weights and gradients are the float32 "
                 "tensors rounded to nearest even, as a mixed-precision copy holds them. "
                 "master_weights are the float32 weights. At step 0 the optimizer has not "
                 "stepped: no moments."}
    return args.model_name or f"text_{args.activation}_small", captures, provenance


def _from_checkpoints(args: argparse.Namespace, algorithms: tuple[str, ...]
                      ) -> tuple[str, list[StateCapture], dict[str, Any]]:
    captures = []
    for progress, path in _checkpoints(args.checkpoint):
        if not Path(path).exists():  # a FIFO or a device: refused when read
            raise CaptureError(f"--checkpoint: {path}: no such file")
        states = states_from_checkpoint(path)
        captures.append(StateCapture(progress, round(progress * args.steps),
                                     measure_states(states, algorithms)))
        if not args.quiet:
            _show(captures[-1])
    provenance = {"model": args.model_name or Path(args.checkpoint[0].partition("=")[2]).stem,
                  "data": "the states saved in " + ", ".join(args.checkpoint),
                  "steps": args.steps, "notes": "step = round(progress * steps)"}
    return provenance["model"], captures, provenance


def capture_software() -> dict[str, str]:
    """What the measured numbers depend on besides the model, data and seed: the versions
    of sst-cdma, PyTorch, NumPy and Python, the kernel set PyTorch's CPU operators dispatch
    to (``torch.backends.cpu.get_cpu_capability()``: AVX2 and AVX-512 kernels round and
    sum float32 differently) and Zstandard's (its compressed sizes are the zstd codecs'
    ratios). A profile is reproduced bit for bit only where all of these are the same."""
    import zstandard

    return {"sst-cdma": __version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0],
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "zstandard": f"{zstandard.__version__} (libzstd "
                         f"{'.'.join(map(str, zstandard.ZSTD_VERSION))})"}


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _check(args)
    algorithms = _algorithms(args)
    measure = _from_checkpoints if args.checkpoint else _trained
    model, captures, provenance = measure(args, algorithms)
    parameters = captures[0].roles["weights"]["float32"].elements
    provenance = {"kind": "measured", **provenance,
                  "command": shlex.join(["sst-cdma", "capture-states", *argv]),
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                  "software": capture_software()}
    doc = model_state_document(model, parameters, captures, provenance)
    if args.output:
        try:
            write_text_whole(args.output, json.dumps(doc, indent=1) + "\n")
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write it: {exc.strerror or exc}",
                          f"--output {args.output}") from None
        print(f"wrote {args.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sst-cdma capture-states`` with ``argv`` (default ``sys.argv[1:]``); returns the
    status."""
    return run_tool(PROG, _run, argv, (CaptureError, ProfileError, OSError))


if __name__ == "__main__":
    sys.exit(main())
