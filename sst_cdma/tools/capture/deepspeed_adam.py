"""DeepSpeed's CPU Adam (``deepspeed.ops.adam.DeepSpeedCPUAdam``), the optimizer ZeRO-Offload
runs on the host, for ``sst-cdma time-cpu-adam`` where DeepSpeed can be imported.

DeepSpeed is optional and never a dependency: ``pip install deepspeed`` installs it, and its
``cpu_adam`` op is compiled on first use (``CPUAdamBuilder``: ``-march=native -fopenmp`` and
``-D__AVX512__`` or ``-D__AVX256__`` by the CPU's flags; ``docs/host_cpu.md``). Where it is not
installed, or its op does not build, the implementation is :class:`Unavailable` with one line
saying why, and PyTorch's are timed alone.
"""
from __future__ import annotations

import importlib
from typing import Any

from sst_cdma.tools.capture.errors import Unavailable

__all__ = ["DEEPSPEED", "deepspeed_adam", "deepspeed_version"]

#: the implementation's name in a CPU Adam file
DEEPSPEED = "deepspeed"
NOT_INSTALLED = ("deepspeed is not installed (pip install deepspeed builds its CPU Adam op); "
                 "PyTorch's implementations are timed alone")


def _module(name: str) -> Any:
    """Import ``name``; DeepSpeed missing, or failing to import, is :class:`Unavailable`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "deepspeed":
            raise Unavailable(f"{DEEPSPEED}: {NOT_INSTALLED}") from None
        raise Unavailable(f"{DEEPSPEED}: importing {name} failed ({type(exc).__name__}: "
                          f"{_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - a third-party import may raise anything
        raise Unavailable(f"{DEEPSPEED}: importing {name} failed ({type(exc).__name__}: "
                          f"{_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or of its cause's where it has none of its own
    that says more (DeepSpeed wraps a failed build in a RuntimeError)."""
    cause = exc.__cause__
    text = str(exc).strip() or type(exc).__name__
    if cause is not None and str(cause).strip():
        text = f"{text} {str(cause).strip()}"
    return text.splitlines()[0]


def deepspeed_adam(params: list[Any], *, lr: float, weight_decay: float) -> Any:
    """``DeepSpeedCPUAdam(params, lr, weight_decay, adamw_mode=True)``, DeepSpeed's defaults
    otherwise (betas 0.9/0.999, eps 1e-8, bias correction, fp32 optimizer states); DeepSpeed
    missing or its op failing to build or load is :class:`Unavailable`."""
    module = _module("deepspeed.ops.adam")
    try:
        return module.DeepSpeedCPUAdam(params, lr=lr, weight_decay=weight_decay,
                                       adamw_mode=True)
    except Exception as exc:  # noqa: BLE001 - a failed C++ build surfaces as anything
        raise Unavailable(f"{DEEPSPEED}: DeepSpeedCPUAdam: {type(exc).__name__}: "
                          f"{_first_line(exc)}") from None


def deepspeed_version() -> str:
    """The installed DeepSpeed's version, with the SIMD its CPU Adam op is built for
    (``-D__AVX512__`` ...) where its builder says."""
    version = str(getattr(_module("deepspeed"), "__version__", "unknown"))
    try:
        builder = _module("deepspeed.ops.op_builder").CPUAdamBuilder()
        simd = str(builder.simd_width()).lstrip("-D").strip("_")
    except (Unavailable, AttributeError, RuntimeError, OSError):
        return version
    return f"{version} (cpu_adam op: {simd})" if simd else version
