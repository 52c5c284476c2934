"""What a capture measured, per tensor, and how it becomes a density profile.

This module needs only numpy and :mod:`sst_cdma.profiles`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from sst_cdma.model.dtypes import PROFILE_DTYPES
from sst_cdma.profiles import DensityProfile, ProfilePoint, Provenance, TensorProfile
from sst_cdma.tools.capture.errors import CaptureError

__all__ = ["LayerCapture", "CaptureResult", "build_profile"]

_PROFILE_DTYPES = {name: name for name in PROFILE_DTYPES}


@dataclass
class LayerCapture:
    """Totals for one captured tensor over all batches of a capture.

    ``module`` is the qualified name of the hooked module and ``call`` which of its calls in a
    forward pass this tensor is (a module run twice per forward yields two tensors, named
    ``NAME#0`` and ``NAME#1``). Sizes are in bytes; ``compressed_bytes`` sums the real codec
    output per algorithm over batches, each batch compressed as one contiguous buffer.
    ``converted_bytes`` and ``converted_raw_bytes`` hold the same for the tensor rounded to
    other element types (``capture_activations(also_dtypes=...)``), per element type.
    """

    name: str
    module: str
    module_type: str
    call: int
    dtype: str
    sample_shape: tuple[int, ...] | None
    batches: int = 0
    elements: int = 0
    nonzeros: int = 0
    raw_bytes: int = 0
    compressed_bytes: dict[str, int] = field(default_factory=dict)
    converted_bytes: dict[str, dict[str, int]] = field(default_factory=dict)
    converted_raw_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def density(self) -> float:
        """Fraction of elements whose bit pattern is non-zero, over every batch."""
        return self.nonzeros / self.elements if self.elements else 0.0

    def ratio(self, algorithm: str) -> float:
        """Compression ratio (raw bytes / compressed bytes) under ``algorithm``."""
        try:
            return self.raw_bytes / self.compressed_bytes[algorithm]
        except KeyError:
            raise CaptureError(f"tensor {self.name!r}: algorithm {algorithm!r} was not "
                               f"measured (measured: {', '.join(self.compressed_bytes)})") from None

    @property
    def ratios(self) -> dict[str, float]:
        """Compression ratio per measured algorithm."""
        return {a: self.ratio(a) for a in self.compressed_bytes}

    def ratios_in(self, element_type: str) -> dict[str, float]:
        """Compression ratio per algorithm of the tensor rounded to ``element_type``."""
        try:
            sizes = self.converted_bytes[element_type]
        except KeyError:
            raise CaptureError(f"tensor {self.name!r}: not measured in {element_type} "
                               f"(measured in: {', '.join(self.converted_bytes) or 'none'})"
                               ) from None
        raw = self.converted_raw_bytes[element_type]
        return {a: raw / size for a, size in sizes.items()}


@dataclass
class CaptureResult:
    """Everything one :func:`capture_activations` call measured.

    ``layers`` maps tensor name to its :class:`LayerCapture` in the order the model first
    produced them; ``samples_index`` is the ``index.json`` written when ``sample_dir`` was given.
    """

    layers: dict[str, LayerCapture]
    batches: int
    algorithms: tuple[str, ...]
    samples_index: Path | None = None

    @property
    def dtype(self) -> str:
        """Element type of the captured tensors, as a profile ``dtype`` (from the first one)."""
        first = next(iter(self.layers.values()))
        try:
            return _PROFILE_DTYPES[first.dtype]
        except KeyError:
            raise CaptureError(f"tensor {first.name!r} has dtype {first.dtype}, which a density "
                               f"profile cannot describe") from None

    def points(self, progress: float, *, digits: int = 6) -> dict[str, ProfilePoint]:
        """Profile points of every tensor at ``progress`` (density and ratios rounded; ratios
        measured in other element types under ``ratios_by_dtype``)."""
        return {name: ProfilePoint(progress, round(layer.density, digits),
                                   {a: round(r, 4) for a, r in layer.ratios.items()},
                                   {t: {a: round(r, 4) for a, r in layer.ratios_in(t).items()}
                                    for t in layer.converted_bytes})
                for name, layer in self.layers.items()}

    def summary(self) -> str:
        """A fixed-width table: tensor, shape, density and ratio per algorithm."""
        head = f"{'tensor':<24} {'sample shape':<16} {'density':>8}"
        head += "".join(f" {a + ' x':>8}" for a in self.algorithms)
        lines = [head]
        for name, layer in self.layers.items():
            shape = "x".join(map(str, layer.sample_shape)) if layer.sample_shape else "varies"
            row = f"{name:<24} {shape:<16} {layer.density:>8.4f}"
            row += "".join(f" {layer.ratio(a):>8.3f}" for a in self.algorithms)
            lines.append(row)
        return "\n".join(lines)


def build_profile(network: str, captures: Iterable[tuple[float, CaptureResult]],
                  provenance: Provenance, *, source: str = "<capture>") -> DensityProfile:
    """A density profile from captures taken at points of training progress.

    ``captures`` pairs a progress in [0, 1] with the :class:`CaptureResult` taken there; every
    capture must hold the same tensors. The profile's tensors follow the first capture's order.
    """
    ordered = sorted(captures, key=lambda item: item[0])
    if not ordered:
        raise CaptureError("build_profile: no captures given")
    names = list(ordered[0][1].layers)
    points: dict[str, list[ProfilePoint]] = {name: [] for name in names}
    for progress, result in ordered:
        if list(result.layers) != names:
            raise CaptureError(f"capture at progress {progress} holds tensors "
                               f"{list(result.layers)}, expected {names}")
        for name, point in result.points(progress).items():
            points[name].append(point)
    first = ordered[0][1]
    tensors: Mapping[str, TensorProfile] = {
        name: TensorProfile(tuple(points[name]), first.layers[name].sample_shape)
        for name in names}
    return DensityProfile(network, first.dtype, provenance, tensors, source=source)
