"""``DensityProfile``: activation density (and measured compression) over training progress."""
from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, read_text
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.engine.strict_parsing import StrictParseError, json_loads
from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.interp import interpolate
from sst_cdma.profiles.provenance import Provenance, provenance_from_dict
from sst_cdma.codecs.registry import algorithm_names, unknown_algorithm
from sst_cdma.profiles.schema import FORMAT, VERSION, parse_profile, tensor_path

__all__ = ["ProfilePoint", "TensorProfile", "DensityProfile"]

#: a density profile: points per tensor of a network (the shipped are tens of KiB)
PROFILE_FILE = FileKind("a density profile", 64 * MIB)


@frozen_record
class ProfilePoint(FrozenRecord):
    """Density of one tensor at one point of training progress.

    ``ratios`` maps a registered algorithm (``"zvc"``, ``"rle"``, ``"zlib"``, ...) to the
    measured compression ratio (uncompressed bytes / compressed bytes) of the real tensor at
    that point. ``ratios_by_dtype`` maps another element type (``"bfloat16"``, ...) to the
    ratios measured on the same tensor rounded to that type.
    """

    progress: float
    density: float
    ratios: Mapping[str, float] = field(default_factory=dict)
    ratios_by_dtype: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the point."""
        out: dict[str, Any] = {"progress": self.progress, "density": self.density}
        if self.ratios:
            out["ratios"] = _ordered(self.ratios)
        if self.ratios_by_dtype:
            out["ratios_by_dtype"] = {t: _ordered(r) for t, r in self.ratios_by_dtype.items()}
        return out

    def ratios_for(self, dtype: str | None, profile_dtype: str) -> Mapping[str, float]:
        """The ratios measured in element type ``dtype`` (``None``: the profile's)."""
        if dtype is None or dtype == profile_dtype:
            return self.ratios
        return self.ratios_by_dtype.get(dtype, {})


def _ordered(ratios: Mapping[str, float]) -> dict[str, float]:
    """``ratios`` in registry order."""
    return {a: ratios[a] for a in algorithm_names() if a in ratios}


@frozen_record
class TensorProfile(FrozenRecord):
    """The points of one offloaded tensor, in strictly increasing progress order."""

    points: tuple[ProfilePoint, ...]
    sample_shape: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the tensor entry."""
        out: dict[str, Any] = {}
        if self.sample_shape is not None:
            out["sample_shape"] = list(self.sample_shape)
        out["points"] = [p.to_dict() for p in self.points]
        return out


class DensityProfile:
    """Per-tensor activation density of one network over training progress.

    A profile names its ``network``, the element ``dtype`` and its ``provenance``, and holds for
    each offloaded tensor (named as in the network definition) the density — the fraction of
    elements whose bit pattern is non-zero — at points of training progress in [0, 1], with
    optional measured compression ratios per algorithm. Every way of building one validates it;
    problems raise :class:`ProfileError`.
    """

    def __init__(self, network: str, dtype: str, provenance: Provenance,
                 tensors: Mapping[str, TensorProfile], *, source: str = "<profile>") -> None:
        self.source = source
        data = {"format": FORMAT, "version": VERSION, "network": network, "dtype": dtype,
                "provenance": provenance.to_dict(),
                "tensors": {name: t.to_dict() for name, t in tensors.items()}}
        self._init_from_valid(parse_profile(data, source))

    def _init_from_valid(self, data: dict[str, Any]) -> None:
        self.network: str = data["network"]
        self.dtype: str = data["dtype"]
        self._provenance = provenance_from_dict(data["provenance"])
        self._tensors: dict[str, TensorProfile] = {}
        for name, entry in data["tensors"].items():
            points = tuple(ProfilePoint(p["progress"], p["density"], dict(p.get("ratios", {})),
                                        {t: dict(r) for t, r in
                                         p.get("ratios_by_dtype", {}).items()})
                           for p in entry["points"])
            shape = entry.get("sample_shape")
            self._tensors[name] = TensorProfile(points, None if shape is None else tuple(shape))

    # -- construction and serialisation -------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<dict>") -> "DensityProfile":
        """Validate a decoded JSON document and build the profile from it."""
        profile = cls.__new__(cls)
        profile.source = source
        profile._init_from_valid(parse_profile(data, source))
        return profile

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this profile (what :meth:`save` writes)."""
        return {"format": FORMAT, "version": VERSION, "network": self.network,
                "dtype": self.dtype, "provenance": self._provenance.to_dict(),
                "tensors": {name: t.to_dict() for name, t in self._tensors.items()}}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "DensityProfile":
        """Read and validate a profile file; errors name the file and the field at fault."""
        source = str(path)
        try:
            text = read_text(path, PROFILE_FILE)
        except FileReadError as exc:
            raise ProfileError(f"{source}: cannot read: {exc}") from None
        try:
            data = json_loads(text, finite=False)  # the schema names a NaN's field
        except StrictParseError as exc:
            raise ProfileError(f"{source}: not a profile: {exc}") from None
        return cls.from_dict(data, source=source)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the profile as indented JSON (UTF-8, trailing newline)."""
        Path(path).write_text(self.to_json(), encoding="utf-8")

    def to_json(self) -> str:
        """The profile as the JSON text :meth:`save` writes: indented, one point per line."""
        return _layout(self.to_dict()) + "\n"

    # -- queries ------------------------------------------------------------------------------

    @property
    def provenance(self) -> Provenance:
        """Where the numbers come from (:class:`MeasuredProvenance` or ``EstimatedProvenance``)."""
        return self._provenance

    @property
    def tensors(self) -> dict[str, TensorProfile]:
        """Tensor name -> its points, in file order (a copy; the profile is immutable)."""
        return dict(self._tensors)

    def tensor(self, name: str) -> TensorProfile:
        """The entry of tensor ``name``; a clear :class:`ProfileError` if there is none."""
        try:
            return self._tensors[name]
        except KeyError:
            known = ", ".join(self._tensors)
            raise ProfileError(f"{self.source}: {tensor_path(name)}: no such tensor in the "
                               f"profile of network {self.network!r} (it has: {known})") from None

    def density(self, tensor: str, progress: float) -> float:
        """Density of ``tensor`` at ``progress``: linear between points, clamped outside them."""
        points = self.tensor(tensor).points
        x = self._check_progress(progress)
        return interpolate([p.progress for p in points], [p.density for p in points], x)

    def ratio(self, tensor: str, algorithm: str, progress: float, *,
              dtype: str | None = None) -> float | None:
        """Measured compression ratio of ``tensor`` under ``algorithm`` at ``progress``.

        Interpolates between the points that carry a ratio for ``algorithm``, linearly in the
        compressed-size fraction ``1/ratio`` (which is linear in density for ZVC), and clamps
        outside them. ``dtype`` (default: the profile's) selects the element type: another
        type than the profile's uses the points' ``ratios_by_dtype`` for it. Returns ``None``
        when no point of the tensor has a ratio for ``algorithm`` measured in that type: a
        ratio measured on float32 says nothing exact about float16 or bfloat16 (each non-zero
        takes half the bytes, the masks and run tokens do not shrink), so the caller must
        derive the ratio from the density for its own element type instead.
        """
        if algorithm not in algorithm_names():
            raise ProfileError(unknown_algorithm(algorithm, self.source))
        tensor_points = self.tensor(tensor).points
        measured = [(p.progress, p.ratios_for(dtype, self.dtype)) for p in tensor_points]
        points = [(x, r[algorithm]) for x, r in measured if algorithm in r]
        if not points:
            return None
        x = self._check_progress(progress)
        fraction = interpolate([at for at, _ in points], [1.0 / r for _, r in points], x)
        return 1.0 / fraction

    def require_network(self, network: str) -> None:
        """Raise :class:`ProfileError` (naming the file and its ``network`` field) unless the
        profile describes ``network``: another network's densities would be keyed on tensor
        names that merely look alike."""
        if self.network != network:
            raise ProfileError(f"{self.source}: network: the profile describes "
                               f"{self.network!r}, not {network!r}")

    def require_tensors(self, names: Iterable[str]) -> None:
        """Raise :class:`ProfileError` naming every tensor in ``names`` the profile lacks.

        The simulator calls this with the offloaded tensors of a network so that a profile
        missing a layer fails up front with a message saying which.
        """
        wanted: Sequence[str] = list(names)
        missing = [n for n in wanted if n not in self._tensors]
        if missing:
            which = ", ".join(repr(n) for n in missing)
            noun = "tensor" if len(missing) == 1 else "tensors"
            raise ProfileError(f"{self.source}: density profile of network {self.network!r} "
                               f"has no {noun} {which} (it has: {', '.join(self._tensors)})")

    def _check_progress(self, progress: float) -> float:
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) \
                or math.isnan(progress):
            raise ProfileError(f"{self.source}: progress must be a number, got {progress!r}")
        return float(progress)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DensityProfile):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (f"DensityProfile(network={self.network!r}, dtype={self.dtype!r}, "
                f"tensors={len(self._tensors)}, provenance={self._provenance.kind!r})")


def _layout(doc: dict[str, Any]) -> str:
    """Indented JSON with each point and each ``sample_shape`` on one line (diff-friendly)."""
    token = uuid.uuid4().hex
    inline: dict[str, str] = {}

    def mark(value: Any) -> str:
        key = f"{token}:{len(inline)}"
        inline[key] = json.dumps(value)
        return key

    tensors = {}
    for name, entry in doc["tensors"].items():
        out = {k: (mark(v) if k == "sample_shape" else v) for k, v in entry.items()}
        out["points"] = [mark(p) for p in entry["points"]]
        tensors[name] = out
    text = json.dumps({**doc, "tensors": tensors}, indent=2)
    for key, value in inline.items():
        text = text.replace(f'"{key}"', value, 1)
    return text
