"""Loading a model from ``MODULE:CALLABLE`` (an import path or a ``.py`` file)."""
from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any, Mapping

import torch
from torch import nn

from sst_cdma.engine.file_reads import GIB, FileKind, FileReadError, open_regular
from sst_cdma.tools.capture.errors import CaptureError

#: a ``torch.save`` checkpoint: weights, and Adam's two moments (GPT-2 XL's are about 19 GiB)
CHECKPOINT_FILE = FileKind("a checkpoint", 256 * GIB)

__all__ = ["load_model", "load_weights"]


def _import(module_ref: str) -> Any:
    if module_ref.endswith(".py"):
        if not os.path.isfile(module_ref):
            raise CaptureError(f"--model: no such file {module_ref!r}")
        name = "_sst_cdma_user_model_" + os.path.splitext(os.path.basename(module_ref))[0]
        spec = importlib.util.spec_from_file_location(name, module_ref)
        if spec is None or spec.loader is None:
            raise CaptureError(f"--model: cannot load {module_ref!r} as a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_ref)
    except ImportError as exc:
        raise CaptureError(f"--model: cannot import module {module_ref!r}: {exc}") from None


def load_model(ref: str, kwargs: Mapping[str, Any] | None = None,
               weights: str | None = None) -> nn.Module:
    """The ``nn.Module`` that ``MODULE:CALLABLE`` names.

    ``MODULE`` is a dotted module name or a path to a ``.py`` file; ``CALLABLE`` a (dotted)
    attribute of it: a module instance is used as is, anything else is called with
    ``kwargs``. ``weights`` is a ``state_dict`` file (``torch.save``) loaded into the model.
    """
    module_ref, sep, attr_path = ref.rpartition(":")
    if not sep or not module_ref or not attr_path:
        raise CaptureError(f"--model: expected MODULE:CALLABLE (e.g. "
                           f"sst_cdma.tools.capture.digits_cnn:DigitsCNN), got {ref!r}")
    target: Any = _import(module_ref)
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CaptureError(f"--model: {module_ref!r} has no attribute {attr_path!r}") from None
    if isinstance(target, nn.Module):
        model = target
    elif callable(target):
        try:
            model = target(**dict(kwargs or {}))
        except Exception as exc:  # the user's code: report whatever it raised, on one line
            raise CaptureError(f"--model: calling {ref} failed: "
                               f"{type(exc).__name__}: {exc}") from None
    else:
        raise CaptureError(f"--model: {ref} is neither an nn.Module nor callable")
    if not isinstance(model, nn.Module):
        raise CaptureError(f"--model: {ref} returned {type(model).__name__}, not a "
                           f"torch.nn.Module")
    if weights is not None:
        load_weights(model, weights)
    return model


def load_weights(model: nn.Module, weights: str, option: str = "--weights") -> None:
    """Load the ``state_dict`` file ``weights`` into ``model``; a failure is one line naming
    ``option`` and the file."""
    try:
        fh = open_regular(weights, CHECKPOINT_FILE)
    except FileReadError as exc:
        raise CaptureError(f"{option}: cannot load {weights!r}: {exc}") from None
    try:
        with fh:
            state = torch.load(fh, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as exc:
        raise CaptureError(f"{option}: cannot load {weights!r}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
