"""Tables of the shipped ``digits_cnn`` density profile and the shipped model-state profile
(``docs/profiles.md``), as Markdown, read off the files.

``python -m sst_cdma.tools.capture.shipped_report digits`` prints the density of each captured
tensor and the held-out accuracy (from the provenance notes) by training progress, then each
tensor's measured ratios at its sparsest point and at the end of training;
``python -m sst_cdma.tools.capture.shipped_report states`` prints the model-state profile's
density and ratios per role and element type at the end of training.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.profiles import DensityProfile, ProfileError, load_profile
from sst_cdma.profiles.model_states import ModelStateProfile, load_model_states
from sst_cdma.tools.capture.digits_cnn import PROFILE_TENSORS

__all__ = ["accuracy_by_progress", "digits_tables", "states_table", "main"]

_ACCURACY = re.compile(r"held-out accuracy by progress: (.*)")
_PAIR = re.compile(r"([\d.]+): ([\d.]+)")


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def accuracy_by_progress(profile: DensityProfile) -> dict[float, float]:
    """The held-out accuracy per progress point that ``digits_train`` notes in the provenance
    (``held-out accuracy by progress: 0: 0.101, ...``); a profile without it is refused."""
    match = _ACCURACY.search(getattr(profile.provenance, "notes", None) or "")
    if not match:
        raise ProfileError(f"{profile.network}: its provenance notes hold no held-out accuracy")
    return {float(p): float(a) for p, a in _PAIR.findall(match.group(1))}


def _label(tensor: str, shape: tuple[int, ...] | None) -> str:
    """``conv1`` = ``relu1`` out (16x8x8): the tensor, the module it was captured at when that
    one is another (a ReLU in place), and its sample shape."""
    module = next((m for m, t in PROFILE_TENSORS.items() if t == tensor), tensor)
    label = f"`{tensor}`" + (f" = `{module}` out" if module != tensor else "")
    return label + (f" ({'x'.join(map(str, shape))})" if shape else "")


def _density_table(profile: DensityProfile) -> str:
    tensors = profile.tensors
    progress = [p.progress for p in next(iter(tensors.values())).points]
    rows = [(_label(name, t.sample_shape), *(f"{p.density:.3f}" for p in t.points))
            for name, t in tensors.items()]
    accuracy = accuracy_by_progress(profile)
    rows.append(("accuracy", *(f"{accuracy[p]:.3f}" for p in progress)))
    return _markdown(("progress", *(f"{p:g}" for p in progress)), rows)


def _ratio_table(profile: DensityProfile) -> str:
    codecs = [a for a in algorithm_names()
              if all(a in p.ratios for t in profile.tensors.values() for p in t.points)]
    rows = []
    for name, tensor in profile.tensors.items():
        sparsest = min(tensor.points, key=lambda p: p.density)
        for point, note in ((sparsest, " (sparsest)"), (tensor.points[-1], "")):
            if note and point is tensor.points[-1]:
                continue
            rows.append((f"`{name}`", f"{point.progress:g}{note}",
                         *(f"{point.ratios[a]:.2f}" for a in codecs)))
    return _markdown(("tensor", "progress", *codecs), rows)


def digits_tables(name: str = "digits_cnn") -> str:
    """The two tables of the measured CNN profile ``name``: density (and accuracy) by
    progress, then the ratios at each tensor's sparsest point and at the end."""
    profile = load_profile(name)
    return _density_table(profile) + "\n\n" + _ratio_table(profile)


def states_table(profile: ModelStateProfile) -> str:
    """Per role and element type, at the profile's last point: density and every codec's
    ratio (a codec not measured there: ``-``)."""
    codecs = algorithm_names()
    rows = []
    for role, by_dtype in profile.points.items():
        for dtype, points in by_dtype.items():
            last = points[-1]
            rows.append((f"`{role}`", dtype, f"{last.density:.3f}",
                         *(f"{last.ratios[c]:.2f}" if c in last.ratios else "-"
                           for c in codecs)))
    return _markdown(("role", "dtype", "density", *codecs), rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tables of the shipped digits profile or of a model-state profile."""
    parser = argparse.ArgumentParser(prog="python -m sst_cdma.tools.capture.shipped_report",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    digits = sub.add_parser("digits", help="the digits_cnn density profile's two tables")
    digits.add_argument("profile", nargs="?", default="digits_cnn")
    states = sub.add_parser("states", help="a model-state profile's table (end of training)")
    states.add_argument("profile", nargs="?", default=None,
                        help="shipped name or file (default: the shipped default)")
    args = parser.parse_args(argv)
    try:
        if args.what == "digits":
            print(digits_tables(args.profile))
        else:
            profile = (load_model_states(args.profile) if args.profile
                       else load_model_states())
            print(states_table(profile))
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
