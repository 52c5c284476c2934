"""The element types of simulated tensors, declared once: the kernel model, the codecs'
sampling, the density profiles, the workloads, the GPU element and the command lines derive
their lists from this table. It imports nothing, so any module may use it."""
from __future__ import annotations

__all__ = ["DTYPES", "HALF_DTYPES", "PROFILE_DTYPES", "PROFILE_ITEMSIZES", "NO_TF32",
           "TF32_SCOPES", "TF32_MODES"]

DTYPES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
"""Element types a simulated tensor may have, and their size in bytes."""

HALF_DTYPES: tuple[str, ...] = tuple(name for name, size in DTYPES.items() if size == 2)
"""The 16-bit types: mixed precision's, the ones tensor cores multiply."""

PROFILE_ITEMSIZES: dict[str, int] = {**DTYPES, "float64": 8}
"""Element types a density profile may describe, and their size in bytes: the simulated ones
and float64 (tensors captured in double precision)."""

PROFILE_DTYPES: tuple[str, ...] = tuple(PROFILE_ITEMSIZES)
"""The names of :data:`PROFILE_ITEMSIZES`."""

NO_TF32 = "none"
"""The fitted kernels' ``tf32``: float32 kernels in float32."""

TF32_SCOPES: tuple[str, ...] = ("conv", "all")
"""The fitted kernels' ``tf32``: which float32 kernels run as TF32: convolutions only
(PyTorch's default on Ampere and later), or convolutions and matmuls."""

TF32_MODES: tuple[str, ...] = (NO_TF32, *TF32_SCOPES)
"""Every ``tf32`` mode of the fitted kernels."""
