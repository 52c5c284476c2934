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

try:
    import torch as _torch  # noqa: F401
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "sst_cdma.capture needs PyTorch, which is not installed; "
        "install it with: pip install 'sst-cdma[capture]'",
        name="torch",
    ) from _exc

from .activations import DEFAULT_MODULE_TYPES, capture_activations
from .errors import CaptureError
from .result import CaptureResult, LayerCapture, build_profile

__all__ = [
    "DEFAULT_MODULE_TYPES",
    "CaptureError",
    "CaptureResult",
    "LayerCapture",
    "build_profile",
    "capture_activations",
]
