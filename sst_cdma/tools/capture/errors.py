"""The error type of activation capture."""
from __future__ import annotations

__all__ = ["CaptureError", "Unavailable"]


class CaptureError(ValueError):
    """Capture cannot proceed: bad inputs, unknown module names, a model without ReLUs, ..."""


class Unavailable(CaptureError):
    """A CPU Adam implementation this machine cannot run (a PyTorch build without it,
    DeepSpeed not installed or its CPU op not built); the message is one line."""
