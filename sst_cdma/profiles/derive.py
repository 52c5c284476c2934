"""Profiles of full-size transformer networks, derived from a small measured model's roles.

The shipped transformer networks (``gpt2_*``, ``gpt3_*``, ``opt_*``, ``llama_*``, ``llama3_*``)
cannot be trained here.
Their profiles are carried over from the small models measured on the CPU
(``text_relu``/``text_gelu``, :mod:`sst_cdma.tools.capture.text_train`), tensor by tensor:

- ``blk{j}/ROLE`` of a network with *L* blocks takes the numbers of ``blk{i}/ROLE`` of the
  small model with *l* blocks, ``i = floor((j + 1/2) * l / L)``: the block at the same relative
  depth (block centres compared);
- a tensor outside the blocks (``embed``, ``ln_f``, ``lm_head``) takes the small model's
  tensor of the same name;
- roles the small model does not have: the fused-attention output ``attn`` takes ``context``
  (the same values, probs @ V), Llama's ``rope`` takes ``qkv`` (a rotation of its Q and K);
  OPT-350M's embedding projections ``proj_in``/``proj_out`` take ``embed``/``ln_f``.

GPT-2 and GPT-3 (GELU) networks and Llama and Llama 3 (SwiGLU) take ``text_gelu``, OPT (ReLU)
networks ``text_relu``. SwiGLU is *approximated* by GELU: Llama's ``blk{i}/act`` (silu(gate) * up)
takes GELU's output and its fused gate/up ``blk{i}/fc1`` GELU's pre-activation. The densities
and the measured ratios (every dtype) are copied as they are, with the small run's progress
axis; sample shapes are left out (the networks' tensors are larger).

Regenerate the shipped ones with ``python -m sst_cdma.profiles.derive --write``.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping, Sequence

from workloads.loader import TRANSFORMERS

from sst_cdma.model.attention import TENSOR_LAYOUTS
from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.profile import DensityProfile, TensorProfile
from sst_cdma.profiles.provenance import DerivedProvenance

__all__ = ["FAMILY_SOURCES", "ROLE_ALIASES", "NAME_ALIASES", "NOT_DERIVED", "APPROXIMATIONS", "split_tensor",
           "source_tensor", "source_profile_name", "derive_profile", "mapping"]

FAMILY_SOURCES: dict[str, str] = {"gpt2": "text_gelu", "gpt3": "text_gelu", "opt": "text_relu",
                                   "llama": "text_gelu", "llama3": "text_gelu"}
"""Network name prefix (``gpt2_small`` -> ``gpt2``) -> the measured profile it derives from."""

ROLE_ALIASES: dict[str, str] = {"attn": "context", "rope": "qkv"}
"""A role the small models lack -> the role whose numbers it takes."""

NAME_ALIASES: dict[str, str] = {"proj_in": "embed", "proj_out": "ln_f"}
"""A tensor outside the blocks the small models lack -> the tensor whose numbers it takes
(OPT-350M projects its 512-wide embedding in and out of the 1024-wide blocks)."""

NOT_DERIVED = ("tokens", "loss")
"""Tensors that are not activations a profile describes (token ids, the scalar loss)."""

_SWIGLU = ("SwiGLU is approximated by GELU: blk{i}/act (silu(gate)*up) takes the GELU output "
           "and the fused gate/up blk{i}/fc1 the GELU model's pre-activation fc1")
APPROXIMATIONS: dict[str, str] = {"llama": _SWIGLU, "llama3": _SWIGLU}
"""Per family, what the derivation approximates beyond the depth mapping."""

_BLOCK = re.compile(r"blk(\d+)/(.+)\Z")


def split_tensor(name: str) -> tuple[int | None, str]:
    """``blk3/fc1`` -> ``(3, "fc1")``; ``embed`` -> ``(None, "embed")``."""
    match = _BLOCK.match(name)
    return (int(match.group(1)), match.group(2)) if match else (None, name)


def _blocks(names: Iterable[str]) -> int:
    """Number of blocks: one more than the largest block index among ``names``."""
    indices = [b for b, _ in map(split_tensor, names) if b is not None]
    return max(indices) + 1 if indices else 0


def source_tensor(name: str, blocks: int, source: DensityProfile) -> str:
    """The tensor of ``source`` whose numbers network tensor ``name`` takes, the network having
    ``blocks`` blocks; :class:`ProfileError` naming the tensor when there is none."""
    block, role = split_tensor(name)
    candidate = name if name in source.tensors else NAME_ALIASES.get(name, name)
    if block is not None:
        if block >= blocks:
            raise ProfileError(f"{name}: block {block} is not below the network's {blocks}")
        small_blocks = max(_blocks(source.tensors), 1)
        i = min(small_blocks - 1, (2 * block + 1) * small_blocks // (2 * blocks))
        candidate = f"blk{i}/{role}"
        if candidate not in source.tensors:
            candidate = f"blk{i}/{ROLE_ALIASES.get(role, role)}"
    if candidate not in source.tensors:
        raise ProfileError(f"{name}: the measured profile {source.network!r} has no tensor "
                           f"{candidate!r} to derive it from")
    return candidate


def source_profile_name(network: str) -> str:
    """The measured profile a network's is derived from, by its family prefix."""
    family = network.partition("_")[0]
    try:
        return FAMILY_SOURCES[family]
    except KeyError:
        known = ", ".join(f"{f}_*" for f in FAMILY_SOURCES)
        raise ProfileError(f"{network}: no measured profile to derive from (derivable "
                           f"networks: {known})") from None


def derive_profile(network: str, tensors: Sequence[str], source: DensityProfile, *,
                   command: str, date: str | None = None,
                   describe: Callable[[DensityProfile], str] | None = None) -> DensityProfile:
    """The profile of ``network`` (tensor names ``tensors``) carried over from ``source``.

    Every name must map onto a tensor of ``source`` (module docstring); :data:`NOT_DERIVED`
    names are skipped. ``command`` regenerates the profile; ``date`` defaults to today (UTC).
    """
    names = [t for t in tensors if t not in NOT_DERIVED]
    if not names:
        raise ProfileError(f"{network}: no tensors to derive a profile for")
    blocks = _blocks(names)
    out: dict[str, TensorProfile] = {}
    for name in names:
        origin = source.tensors[source_tensor(name, blocks, source)]
        out[name] = TensorProfile(origin.points)
    family = network.partition("_")[0]
    prov = source.provenance
    what = describe(source) if describe else getattr(prov, "model", "") or prov.kind
    method = (f"blk{{j}}/ROLE of {blocks} blocks takes blk{{i}}/ROLE of the "
              f"{_blocks(source.tensors)}-block model, i = floor((j + 1/2) * "
              f"{_blocks(source.tensors)} / {blocks}) (same relative depth); other tensors take "
              f"the same name; " + ", ".join(f"{a} takes {b}" for a, b in
                                              {**ROLE_ALIASES, **NAME_ALIASES}.items())
              + "; densities and measured ratios (every dtype) copied, progress axis of the "
                "small run")
    notes = APPROXIMATIONS.get(family)
    provenance = DerivedProvenance(
        source=f"measured profile {source.network!r} ({what})", method=method, command=command,
        date=date or datetime.now(timezone.utc).strftime("%Y-%m-%d"), notes=notes)
    return DensityProfile(network, source.dtype, provenance, out, source=f"{network} (derived)")


def mapping(network: str, tensors: Sequence[str], source: DensityProfile) -> Mapping[str, str]:
    """Network tensor -> the source tensor it is derived from (for reports and tests)."""
    names = [t for t in tensors if t not in NOT_DERIVED]
    blocks = _blocks(names)
    return {name: source_tensor(name, blocks, source) for name in names}


SHIPPED_NETWORKS = TRANSFORMERS
"""The shipped transformer networks whose profiles :func:`main` writes."""


ATTENTION_FORMS = TENSOR_LAYOUTS
"""Both attention forms' tensors go into a derived profile, so it serves ``--attention`` either
way."""


def network_tensors(network: str) -> list[str]:
    """The tensor names of a shipped network definition (``workloads``) under every
    attention form: the naive form's, each block's fused ``attn`` after its ``context``."""
    from workloads import load_network

    forms = [list(load_network(network, attention=form).tensors(1)) for form in ATTENTION_FORMS]
    names: list[str] = []
    for name in forms[0]:
        names.append(name)
        block, role = split_tensor(name)
        if role == "context" and f"blk{block}/attn" in forms[1]:
            names.append(f"blk{block}/attn")
    return names + [n for form in forms[1:] for n in form if n not in names]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: derive (and with ``--write`` ship) the transformer networks' profiles."""
    import argparse
    import shlex
    import sys
    from pathlib import Path

    from sst_cdma.profiles.store import _shipped_dir, load_profile

    parser = argparse.ArgumentParser(
        prog="python -m sst_cdma.profiles.derive",
        description="Derive the density profiles of transformer networks from the measured "
                    "small models (text_relu, text_gelu) by role and relative depth.")
    parser.add_argument("networks", nargs="*", default=list(SHIPPED_NETWORKS),
                        help=f"networks (default: {' '.join(SHIPPED_NETWORKS)})")
    parser.add_argument("--write", action="store_true",
                        help="write workloads/profiles/NETWORK.json (default: print a summary)")
    args = parser.parse_args(argv)
    from workloads.errors import WorkloadError

    try:
        for network in args.networks:
            source = load_profile(source_profile_name(network))
            command = shlex.join(["python", "-m", "sst_cdma.profiles.derive", network, "--write"])
            profile = derive_profile(network, network_tensors(network), source, command=command)
            where = Path(_shipped_dir()) / f"{network}.json"
            if args.write:
                profile.save(where)
            print(f"{network}: {len(profile.tensors)} tensors from {source.network}"
                  + (f" -> {where}" if args.write else ""))
    except (ProfileError, WorkloadError) as exc:
        print(f"derive: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
