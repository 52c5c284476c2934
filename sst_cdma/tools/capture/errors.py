"""The error type of activation capture."""
from __future__ import annotations

__all__ = ["CaptureError"]


class CaptureError(ValueError):
    """Capture cannot proceed: bad inputs, unknown module names, a model without ReLUs, ..."""
