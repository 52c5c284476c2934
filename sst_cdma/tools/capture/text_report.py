"""Tables of the measured transformer profiles, per tensor role (``docs/profiles.md``).

``python -m sst_cdma.tools.capture.text_report`` prints, for ``text_relu`` and ``text_gelu``, the
density of each role at the start and end of training and the ratio of every registered codec
at the end of training, in the profile's element type and in each ``ratios_by_dtype`` one, as
Markdown tables. A role's numbers pool its blocks (``blk{i}/ROLE`` for every ``i``): the
density and the compressed-size fraction ``1/ratio`` are averaged over blocks (every block's
tensor has the same size, so this is the ratio of the role's total bytes).
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Sequence

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.model.dtypes import PROFILE_ITEMSIZES
from sst_cdma.profiles import DensityProfile, load_profile

__all__ = ["PROFILES", "role_of", "role_table", "format_profile", "report", "main"]

PROFILES = ("text_relu", "text_gelu")
"""The shipped measured transformer profiles the report covers."""


def role_of(tensor: str) -> str:
    """``blk3/fc1`` -> ``fc1``; a tensor outside the blocks (``embed``) is its own role."""
    return tensor.partition("/")[2] if tensor.startswith("blk") and "/" in tensor else tensor


def _roles(profile: DensityProfile) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for name in profile.tensors:
        groups[role_of(name)].append(name)
    return dict(groups)


def role_table(profile: DensityProfile, dtype: str, progress: float = 1.0) -> list[dict]:
    """One row per role: ``role``, ``blocks``, ``density0`` (progress 0), ``density``
    (at ``progress``) and ``ratios`` (codec -> ratio at ``progress`` in ``dtype``)."""
    rows = []
    for role, names in _roles(profile).items():
        ratios = {}
        for algorithm in algorithm_names():
            values = [profile.ratio(n, algorithm, progress, dtype=dtype) for n in names]
            if all(v is not None for v in values):
                ratios[algorithm] = len(values) / sum(1.0 / v for v in values)  # type: ignore[misc, operator]
        rows.append({"role": role, "blocks": len(names),
                     "density0": sum(profile.density(n, 0.0) for n in names) / len(names),
                     "density": sum(profile.density(n, progress) for n in names) / len(names),
                     "ratios": ratios})
    return rows


def _dtypes(profile: DensityProfile) -> list[str]:
    others: list[str] = []
    for tensor in profile.tensors.values():
        for point in tensor.points:
            others += [t for t in point.ratios_by_dtype if t not in others]
    return [profile.dtype, *others]


def markdown(profile: DensityProfile, dtype: str) -> str:
    """The role table of ``profile`` in ``dtype`` as Markdown."""
    names = algorithm_names()
    head = ("| role | density at 0 | density at 1 | "
            + " | ".join(f"{a}" for a in names) + " |")
    lines = [head, "|" + " --- |" * (3 + len(names))]
    for row in role_table(profile, dtype):
        role = row["role"] if row["blocks"] == 1 else f"blk*/{row['role']}"
        cells = [f"{row['ratios'][a]:.2f}" if a in row["ratios"] else "-" for a in names]
        lines.append(f"| `{role}` | {row['density0']:.3f} | {row['density']:.3f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(profiles: Sequence[str] = PROFILES) -> str:
    """Every table of the report, with a heading per profile and element type."""
    parts = []
    for name in profiles:
        profile = load_profile(name)
        notes = getattr(profile.provenance, "notes", None) or ""
        for dtype in _dtypes(profile):
            parts.append(f"**`{name}`, {dtype}** (ratio at the end of training)\n\n"
                         + markdown(profile, dtype))
        if notes:
            parts.append(f"`{name}`: {notes.split('. ')[0]}.")
    return "\n\n".join(parts)


def format_profile(profile: DensityProfile) -> str:
    """Plain-text table of every tensor and progress point: density, then the ratio of every
    codec in each measured element type (``f32:zvc``, ``bf16:zvc``, ...)."""
    names = algorithm_names()
    short = {t: ("bf" if t == "bfloat16" else "f") + str(8 * size)
             for t, size in PROFILE_ITEMSIZES.items()}
    dtypes = _dtypes(profile)
    cols = [f"{short.get(t, t)}:{a}" for t in dtypes for a in names]
    lines = [f"{'tensor':<14} {'progress':>8} {'density':>8}" + "".join(f" {c:>15}" for c in cols)]
    for name, tensor in profile.tensors.items():
        for p in tensor.points:
            cells = [p.ratios_for(t, profile.dtype).get(a, float("nan"))
                     for t in dtypes for a in names]
            lines.append(f"{name:<14} {p.progress:>8.2f} {p.density:>8.4f}"
                         + "".join(f" {c:>15.3f}" for c in cells))
    if profile.provenance.kind == "measured" and profile.provenance.notes:
        lines.append(profile.provenance.notes)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the Markdown report of the shipped (or the named) transformer profiles."""
    parser = argparse.ArgumentParser(prog="python -m sst_cdma.tools.capture.text_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*", default=list(PROFILES),
                        help="profiles (shipped names or files; default: text_relu text_gelu)")
    args = parser.parse_args(argv)
    print(report(args.profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
