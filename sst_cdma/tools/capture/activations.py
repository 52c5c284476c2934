"""``capture_activations``: hook a model's ReLU outputs (or the modules it or the caller names)
and measure them with the real codecs."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn

from sst_cdma.codecs.registry import ALGORITHM_NAMES, unknown_algorithm
from sst_cdma.profiles.samples import save_samples
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.result import CaptureResult, LayerCapture
from sst_cdma.tools.capture.tensors import CONVERSIONS, convert, dtype_name, nonzero_bits, to_numpy

__all__ = ["DEFAULT_MODULE_TYPES", "capture_activations", "relu_modules"]

DEFAULT_MODULE_TYPES: tuple[type[nn.Module], ...] = (nn.ReLU, nn.ReLU6)
"""Module types hooked when ``names`` is not given."""


def relu_modules(model: nn.Module,
                 module_types: Sequence[type[nn.Module]] = DEFAULT_MODULE_TYPES) -> list[str]:
    """Qualified names of the modules of ``model`` that are instances of ``module_types``."""
    return [name for name, module in model.named_modules()
            if name and isinstance(module, tuple(module_types))]


def _select(model: nn.Module, names: Mapping[str, str] | Sequence[str] | None,
            module_types: Sequence[type[nn.Module]]) -> dict[str, str]:
    """Module qualified name -> tensor name, for the modules to hook."""
    if names is None:
        found = relu_modules(model, module_types)
        if not found:
            kinds = ", ".join(t.__name__ for t in module_types)
            raise CaptureError(f"model {type(model).__name__} has no {kinds} modules to hook "
                               f"(functional calls such as F.relu cannot be hooked; use nn.ReLU "
                               f"modules or name the modules to hook with names=)")
        return {name: name for name in found}
    if isinstance(names, str):
        raise CaptureError("names must be a sequence or mapping of module names, not a string")
    mapping = dict(names) if isinstance(names, Mapping) else {n: n for n in names}
    if not mapping:
        raise CaptureError("names is empty: nothing to capture")
    seen: dict[str, str] = {}
    for module_name, tensor_name in mapping.items():
        if tensor_name in seen:
            raise CaptureError(f"names: modules {seen[tensor_name]!r} and {module_name!r} are "
                               f"both named {tensor_name!r}")
        seen[tensor_name] = module_name
    modules = dict(model.named_modules())
    for name in mapping:
        if name not in modules or not name:
            hint = ", ".join(relu_modules(model, module_types)) or "none"
            raise CaptureError(f"model {type(model).__name__} has no module {name!r} "
                               f"(its ReLU modules: {hint})")
    return mapping


def _model_dtype_device(model: nn.Module) -> tuple[torch.dtype, torch.device]:
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype, tensor.device
    return torch.get_default_dtype(), torch.device("cpu")


def _as_tensor(value: Any, dtype: torch.dtype, device: torch.device, where: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        raise CaptureError(f"{where}: expected a tensor or numpy array, got "
                           f"{type(value).__name__}")
    if value.is_floating_point():  # a float16/bfloat16 model takes its own element type
        value = value.to(dtype)
    return value.to(device)


def _batches(inputs: Any, dtype: torch.dtype, device: torch.device) -> Iterator[tuple]:
    """Positional-argument tuples, one per forward pass."""
    if isinstance(inputs, (torch.Tensor, np.ndarray)):
        yield (_as_tensor(inputs, dtype, device, "inputs"),)
        return
    if not isinstance(inputs, Iterable) or isinstance(inputs, (str, bytes, Mapping)):
        raise CaptureError(f"inputs: expected a tensor, an array or an iterable of batches, "
                           f"got {type(inputs).__name__}")
    for i, batch in enumerate(inputs):
        where = f"inputs[{i}]"
        if isinstance(batch, (tuple, list)):
            yield tuple(_as_tensor(x, dtype, device, f"{where}[{j}]") for j, x in enumerate(batch))
        else:
            yield (_as_tensor(batch, dtype, device, where),)


def _forward(model: nn.Module, args: tuple, index: int) -> None:
    """Run one batch; a forward pass that fails on these inputs (a shape the model cannot
    take, a wrong dtype) is a one-line :class:`CaptureError` naming the batch and its shapes."""
    try:
        model(*args)
    except CaptureError:
        raise
    except Exception as exc:
        shapes = ", ".join("x".join(map(str, a.shape)) if isinstance(a, torch.Tensor)
                           else type(a).__name__ for a in args)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise CaptureError(f"inputs[{index}]: the model cannot take input of shape {shapes}: "
                           f"{reason}") from exc


class _Recorder:
    """Forward-hook target: measures each hooked output the moment it is produced."""

    def __init__(self, selected: Mapping[str, str], algorithms: Sequence[str],
                 keep_samples: bool, also_dtypes: Sequence[str] = ()) -> None:
        from sst_cdma.codecs import compressed_size  # the real codecs; imported here, used per tensor

        self._compressed_size = compressed_size
        self.selected = selected
        self.algorithms = tuple(algorithms)
        self.also_dtypes = tuple(also_dtypes)
        self.keep_samples = keep_samples
        self.calls: dict[str, int] = {}
        self.layers: dict[tuple[str, int], LayerCapture] = {}
        self.samples: dict[tuple[str, int], np.ndarray] = {}
        self.max_calls: dict[str, int] = {}

    def start_batch(self) -> None:
        """Reset the per-forward call counters before a batch runs."""
        self.calls = {}

    def hook(self, qualname: str) -> Callable[[nn.Module, Any, Any], None]:
        """The forward hook for the module named ``qualname``."""
        def record(module: nn.Module, args: Any, output: Any) -> None:
            self._record(qualname, module, output)
        return record

    def _record(self, qualname: str, module: nn.Module, output: Any) -> None:
        if not isinstance(output, torch.Tensor):
            raise CaptureError(f"module {qualname!r} returned {type(output).__name__}, "
                               f"not a tensor; only tensor outputs can be captured")
        call = self.calls.get(qualname, 0)
        self.calls[qualname] = call + 1
        self.max_calls[qualname] = max(self.max_calls.get(qualname, 0), call + 1)
        array = to_numpy(output)  # an immediate copy: safe for in-place ReLU
        key = (qualname, call)
        sample_shape = tuple(array.shape[1:]) if array.ndim else ()
        layer = self.layers.get(key)
        if layer is None:
            layer = LayerCapture(name="", module=qualname, module_type=type(module).__name__,
                                 call=call, dtype=dtype_name(output), sample_shape=sample_shape,
                                 compressed_bytes={a: 0 for a in self.algorithms})
            self.layers[key] = layer
            if self.keep_samples:
                self.samples[key] = array
        elif layer.sample_shape != sample_shape:
            layer.sample_shape = None
        layer.batches += 1
        layer.elements += array.size
        layer.nonzeros += nonzero_bits(array)
        layer.raw_bytes += array.nbytes
        element_type = "bfloat16" if layer.dtype == "bfloat16" else None  # raw uint16 words
        for algorithm in self.algorithms:
            layer.compressed_bytes[algorithm] += int(
                self._compressed_size(array, algorithm, element_type=element_type))
        for other in self.also_dtypes:
            self._record_converted(layer, array, other)

    def _record_converted(self, layer: LayerCapture, array: np.ndarray, other: str) -> None:
        """Compressed sizes of ``array`` rounded to element type ``other``."""
        if layer.dtype != "float32":
            raise CaptureError(f"module {layer.module!r} produced {layer.dtype}; only float32 "
                               f"tensors can also be measured in {other}")
        words, element_type = convert(array, other)
        layer.converted_raw_bytes[other] = layer.converted_raw_bytes.get(other, 0) + words.nbytes
        sizes = layer.converted_bytes.setdefault(other, {a: 0 for a in self.algorithms})
        for algorithm in self.algorithms:
            sizes[algorithm] += int(self._compressed_size(words, algorithm,
                                                          element_type=element_type))

    def result(self) -> tuple[dict[str, LayerCapture], dict[str, np.ndarray]]:
        """Name every tensor (``NAME`` or ``NAME#k`` for repeated calls) in production order."""
        layers: dict[str, LayerCapture] = {}
        samples: dict[str, np.ndarray] = {}
        for key, layer in self.layers.items():
            qualname, call = key
            base = self.selected[qualname]
            layer.name = base if self.max_calls[qualname] == 1 else f"{base}#{call}"
            layers[layer.name] = layer
            if key in self.samples:
                samples[layer.name] = self.samples[key]
        return layers, samples


def _checked_arguments(model: nn.Module, algorithms: Sequence[str], also_dtypes: Sequence[str]
                       ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """:func:`capture_activations`' ``algorithms`` and ``also_dtypes`` as tuples, once the
    model is a module, the codecs import and every algorithm and element type is known;
    CaptureError otherwise."""
    if not isinstance(model, nn.Module):
        raise CaptureError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    algorithms = tuple(algorithms)
    try:
        from sst_cdma.codecs import api  # noqa: F401  (the kernels the recorder compresses with)
    except ImportError as exc:
        raise CaptureError(f"the codecs (sst_cdma.codecs) cannot be imported: {exc}") from exc
    for algorithm in algorithms:
        if algorithm not in ALGORITHM_NAMES:
            raise CaptureError(unknown_algorithm(algorithm, "algorithms"))
    also_dtypes = tuple(also_dtypes)
    for other in also_dtypes:
        if other not in CONVERSIONS:
            raise CaptureError(f"also_dtypes: cannot measure in {other!r} (expected one of "
                               f"{', '.join(CONVERSIONS)})")
    return algorithms, also_dtypes


def _run_hooked(model: nn.Module, inputs: Any, selected: dict[str, str],
                recorder: "_Recorder") -> int:
    """Run ``model`` in eval mode under ``torch.no_grad()`` on every batch of ``inputs``, the
    ``selected`` modules hooked to ``recorder``; the hooks are removed and every module's
    train/eval flag restored afterwards, also on failure. Returns the number of batches."""
    modules = dict(model.named_modules())
    dtype, device = _model_dtype_device(model)
    training = {module: module.training for module in model.modules()}
    handles = [modules[name].register_forward_hook(recorder.hook(name)) for name in selected]
    batches = 0
    try:
        model.eval()
        with torch.no_grad():
            for args in _batches(inputs, dtype, device):
                recorder.start_batch()
                _forward(model, args, batches)
                batches += 1
    finally:
        for handle in handles:
            handle.remove()
        for module, flag in training.items():
            module.training = flag
    return batches


def capture_activations(model: nn.Module, inputs: Any, *,
                        names: Mapping[str, str] | Sequence[str] | None = None,
                        algorithms: Sequence[str] = ALGORITHM_NAMES,
                        sample_dir: str | os.PathLike[str] | None = None,
                        module_types: Sequence[type[nn.Module]] = DEFAULT_MODULE_TYPES,
                        network: str | None = None,
                        also_dtypes: Sequence[str] = (),
                        ) -> CaptureResult:
    """Run ``model`` on ``inputs`` and measure the output of each hooked module.

    Hooked modules: by default the model's own choice when it has a ``capture_names()``
    method (returning module -> tensor name, as
    :class:`~sst_cdma.tools.capture.text_model.TextTransformer` does for every saved tensor of a
    transformer), else every ``nn.ReLU``/``nn.ReLU6`` (in-place or not), each tensor
    named by the module's qualified name; ``names`` instead selects modules (of any type) by
    qualified name — a sequence keeps their names, a mapping renames them (module -> tensor
    name). A module called *k* > 1 times per forward pass yields tensors ``NAME#0`` ...
    ``NAME#k-1``. Functional ``F.relu`` calls are invisible to hooks.

    ``inputs`` is one batch (a tensor or numpy array) or an iterable of batches, each a
    tensor/array or a tuple of them (the forward's positional arguments). Floating inputs
    (numpy or torch) are cast to the model's parameter dtype; everything is moved to its
    device.

    The model runs in eval mode (dropout off, batch norm on running statistics) under
    ``torch.no_grad()``; each module's train/eval flag is restored afterwards. Each output is
    copied to numpy at once (so in-place ReLUs are safe), its non-zero bit patterns counted and
    compressed as one contiguous buffer (logical element order) with each of ``algorithms``
    by :func:`sst_cdma.codecs.compressed_size`; totals add up over batches. A forward pass
    that fails on a batch (a shape the model cannot take) raises :class:`CaptureError`. With
    ``sample_dir``, the first batch of every tensor is saved there (see
    :mod:`sst_cdma.profiles.samples`), with each tensor's element type and, when given,
    ``network``: the network definition the tensor names belong to, which the simulator
    checks the samples against. ``also_dtypes`` (``bfloat16``, ``float16``) measures every
    float32 tensor once more after rounding it to each of those element types (nearest, ties
    to even), as a bf16 training run would store it; densities stay those of the float32
    tensor.
    """
    algorithms, also_dtypes = _checked_arguments(model, algorithms, also_dtypes)
    if names is None and callable(getattr(model, "capture_names", None)):
        names = model.capture_names()  # type: ignore[operator]
    selected = _select(model, names, module_types)
    recorder = _Recorder(selected, algorithms, keep_samples=sample_dir is not None,
                         also_dtypes=also_dtypes)
    batches = _run_hooked(model, inputs, selected, recorder)
    if batches == 0:
        raise CaptureError("inputs: no batches to run")
    layers, samples = recorder.result()
    if not layers:
        raise CaptureError(f"none of the hooked modules ({', '.join(selected)}) ran in the "
                           f"forward pass")
    index = None
    if sample_dir is not None:
        index = save_samples(sample_dir, samples, network=network,
                             element_types={name: layers[name].dtype for name in samples})
    return CaptureResult(layers=layers, batches=batches, algorithms=algorithms,
                         samples_index=index)
