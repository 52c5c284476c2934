"""Activation density profiles: per network, per offloaded tensor, density over training.

Example::

    from sst_cdma.profiles import load_profile
    p = load_profile("digits_cnn")     # a shipped, measured profile
    p.density("relu1", 0.5)            # interpolated density at mid-training
    p.ratio("relu1", "zvc", 0.5)       # measured ZVC compression ratio there

The file format is documented in ``docs/profiles.md``; loading validates every field and raises
:class:`ProfileError` naming the file and the field at fault.
"""
from __future__ import annotations

from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.interp import interpolate
from sst_cdma.profiles.profile import DensityProfile, ProfilePoint, TensorProfile
from sst_cdma.profiles.provenance import DerivedProvenance, EstimatedProvenance, MeasuredProvenance, Provenance
from sst_cdma.profiles.samples import Sample, SampleSet, load_sample_set, load_samples, read_npz, save_samples
from sst_cdma.profiles.schema import FORMAT, KNOWN_DTYPES, VERSION
from sst_cdma.profiles.store import load_profile, shipped_profile_path, shipped_profiles


def __getattr__(name: str) -> object:
    """``KNOWN_ALGORITHMS``: the registered codecs as of the access (see :mod:`.schema`)."""
    if name == "KNOWN_ALGORITHMS":
        from sst_cdma.profiles.schema import KNOWN_ALGORITHMS

        return KNOWN_ALGORITHMS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "FORMAT",
    "VERSION",
    "KNOWN_ALGORITHMS",
    "KNOWN_DTYPES",
    "ProfileError",
    "DensityProfile",
    "ProfilePoint",
    "TensorProfile",
    "Provenance",
    "MeasuredProvenance",
    "EstimatedProvenance",
    "DerivedProvenance",
    "interpolate",
    "load_profile",
    "shipped_profiles",
    "shipped_profile_path",
    "save_samples",
    "load_samples",
    "load_sample_set",
    "read_npz",
    "Sample",
    "SampleSet",
]
