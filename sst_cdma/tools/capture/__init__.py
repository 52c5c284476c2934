"""Activation capture: measure real density profiles from any PyTorch model.

``capture_activations(model, inputs)`` hooks the outputs of the model's ReLU modules (or of the
modules its ``capture_names()`` or ``names=`` select), runs it in eval mode without gradients,
and records per tensor its shape, density (non-zero bit patterns / elements) and real
compressed sizes from :mod:`sst_cdma.codecs`, optionally also rounded to bfloat16/float16.
``build_profile`` turns captures taken at several points of training into a
:class:`~sst_cdma.profiles.DensityProfile`. ``digits_train.train_and_profile`` measures the
shipped ``digits_cnn`` profile, ``text_train.train_and_profile`` the transformer ones
(``text_relu``, ``text_gelu``).

PyTorch is an optional dependency: ``pip install 'sst-cdma[capture]'``.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# PyTorch is looked for, not imported: the measuring commands' --help (tool_parsers) needs
# none of it, and importing it takes seconds
if importlib.util.find_spec("torch") is None:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "sst_cdma.tools.capture needs PyTorch, which is not installed; "
        "install it with: pip install 'sst-cdma[capture]'",
        name="torch",
    )

#: what the package exports -> the module (importing PyTorch) that defines it
_EXPORTS = {"DEFAULT_MODULE_TYPES": "activations", "capture_activations": "activations",
            "CaptureError": "errors", "CaptureResult": "result", "LayerCapture": "result",
            "build_profile": "result"}

__all__ = [
    "DEFAULT_MODULE_TYPES",
    "CaptureError",
    "CaptureResult",
    "LayerCapture",
    "build_profile",
    "capture_activations",
]


def __getattr__(name: str) -> Any:
    """The package's exports, imported (with PyTorch) on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
