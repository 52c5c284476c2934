"""vDNN's own offload policies, declared once: the workloads schedule them, the GPU elements
accept them and the console names them. It imports nothing, so any module may use it (the
report included: a table of names, not a model)."""
from __future__ import annotations

__all__ = ["VDNN_POLICIES"]

VDNN_POLICIES: tuple[str, ...] = ("none", "all", "conv")
"""Nothing offloaded, every layer's input, the convolutions' inputs (Rhu et al., MICRO 2016)."""
