"""How ``sst-cdma report`` labels a figure's axis: a readable name and a unit read off the
column's name (``*_s`` seconds shown in ms, ``*_bytes`` in GB or MB, ``*_Bps`` in GB/s, ratios
as ``x`` with a line at 1.0, utilizations and shares in %), SI decimal as everywhere in the
project (GB = 1e9 bytes)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable

__all__ = ["Axis", "axis_for", "readable_name"]

#: words written as their owners write them
_WORDS = {"gpu": "GPU", "gpus": "GPUs", "pcie": "PCIe", "dram": "DRAM", "hbm": "HBM",
          "vdnn": "vDNN", "cdma": "cDMA", "d2h": "device to host", "h2d": "host to device",
          "vs": "vs", "perf": "performance", "speedup": "speed-up", "nvlink": "NVLink"}
#: column-name endings that carry a unit: ending -> (base unit, scale to base)
_SUFFIXES = (("_ps", "s", 1e-12), ("_s", "s", 1.0), ("_bytes", "B", 1.0),
             ("_Bps", "B/s", 1.0))
_RATIO = re.compile(r"ratio|speedup|slowdown|_vs_|^perf_")
_SHARE = re.compile(r"utilization|_share$|_fraction$|^share_|busy")


@dataclass(frozen=True)
class Axis:
    """An axis: its label (name and unit), the factor that turns the column's values into the
    unit shown, and whether it is a ratio (drawn with a reference line at 1.0)."""

    label: str
    scale: float = 1.0
    ratio: bool = False


def readable_name(column: str) -> str:
    """``peak_gpu_memory_bytes`` -> ``peak GPU memory``; ``pcie_utilization.d2h`` ->
    ``PCIe utilization, device to host`` (a dotted name's parts joined by commas)."""
    for suffix, _, _ in _SUFFIXES:  # the unit says it; "wire_bytes" stays "wire bytes"
        if suffix != "_bytes" or re.search(r"memory|capacity|size", column):
            column = re.sub(rf"{re.escape(suffix)}(?=\.|$)", "", column)
    parts = [" ".join(_WORDS.get(w.lower(), w) for w in part.split("_") if w)
             for part in column.split(".")]
    return ", ".join(p for p in parts if p)


def _magnitude(values: Iterable[float]) -> float:
    finite = [abs(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return max(finite, default=0.0)


def _time_unit(top: float) -> tuple[str, float]:
    """Milliseconds up to 10 s (an iteration's usual scale), seconds above, microseconds for
    times under a millisecond."""
    if top >= 10.0:
        return "s", 1.0
    return ("ms", 1e3) if top >= 1e-3 or top == 0 else ("us", 1e6)


def _byte_unit(top: float, per: str = "") -> tuple[str, float]:
    for unit, factor in (("TB", 1e-12), ("GB", 1e-9), ("MB", 1e-6), ("kB", 1e-3)):
        if top * factor >= 1.0:
            return unit + per, factor
    return "B" + per, 1.0


def axis_for(column: str, values: Iterable[float] = ()) -> Axis:
    """The axis of ``column`` (its ``values`` choose between ms and s, GB and MB)."""
    name = column.rsplit(".", 1)[-1] if "." in column else column
    label = readable_name(column)
    top = _magnitude(values)
    for suffix, base, to_base in _SUFFIXES:
        if name.endswith(suffix) or re.search(rf"{re.escape(suffix)}\.", column):
            top *= to_base
            if base == "s":
                unit, factor = _time_unit(top)
            else:
                unit, factor = _byte_unit(top, "/s" if base == "B/s" else "")
            return Axis(f"{label} ({unit})", to_base * factor)
    if _RATIO.search(column):
        return Axis(f"{label} (x)", 1.0, ratio=True)
    if _SHARE.search(column) and top <= 1.0:
        return Axis(f"{label} (%)", 100.0)
    return Axis(label)
