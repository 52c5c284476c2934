"""The one error type of density profiles."""
from __future__ import annotations

__all__ = ["ProfileError"]


class ProfileError(ValueError):
    """A density profile is malformed, missing something the caller needs, or cannot be found.

    Messages name the file (or other source) first and then the exact field at fault, e.g.
    ``profile.json: tensors.conv3.points[2].density: 1.7 is not in [0, 1]``.
    """
