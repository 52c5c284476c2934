"""Which points of a sweep do not fit in memory, read off the results table: a point's
verdict is its summary's ``fits_in_memory`` (peak GPU memory within the GPU's capacity, over
every GPU of the system) and, in model-state runs, each memory tier's
``model_states.tiers.<tier>.fits`` (the host's pinned pool); the figures beside each verdict are
the peak and the capacity it compares (``peak_gpu_memory_bytes`` and
``gpu_memory_capacity_bytes``; a tier's ``peak_bytes`` and ``capacity_bytes``). The reference
runs' verdicts (``baselines.*``) are not the point's.

``sst-cdma report`` marks the points that do not fit on every plot and lists them in
``report.md``: their times are what the iteration would take with memory the GPU does not have,
and are never a recommendation."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

__all__ = ["Memory", "memories", "does_not_fit", "capacity_of", "unfit_section"]

#: a column holding a point's verdict on its GPU memory (``gpus.N.`` for one GPU of several)
_GPU_VERDICT = re.compile(r"^((?:gpus\.\d+\.)?)fits_in_memory$")
#: a column holding the verdict of a memory tier of a model-state run
_TIER_VERDICT = re.compile(r"^((?:gpus\.\d+\.)?model_states\.tiers\.)([^.]+)\.fits$")


@dataclass(frozen=True)
class Memory:
    """One memory a point may overflow: the column of its verdict (true: it fits), its name,
    and the columns of the peak and capacity the verdict compares and of the first allocation
    past capacity (``<out_of_memory>.tensor``, ``.layer``)."""

    verdict: str
    name: str
    peak: str
    capacity: str
    out_of_memory: str

    @property
    def capacity_label(self) -> str:
        """What a plot's legend calls the capacity: ``GPU memory capacity``."""
        return f"{self.name} memory capacity" if self.name.startswith("GPU") else \
            f"{self.name} capacity"


def memories(columns: Sequence[str]) -> list[Memory]:
    """The memories whose verdicts the table holds, in table order (a tier named ``gpu``
    repeats ``fits_in_memory`` and is left out)."""
    out = []
    for column in columns:
        if gpu := _GPU_VERDICT.match(column):
            prefix = gpu.group(1)
            name = f"GPU {prefix.split('.')[1]}" if prefix else "GPU"
            out.append(Memory(column, name, f"{prefix}peak_gpu_memory_bytes",
                              f"{prefix}gpu_memory_capacity_bytes", f"{prefix}out_of_memory"))
        elif (tier := _TIER_VERDICT.match(column)) and tier.group(2) != "gpu":
            base = tier.group(1) + tier.group(2)
            gpu_of = tier.group(1).split(".")[1] if tier.group(1).startswith("gpus.") else ""
            name = f"{tier.group(2)} memory" + (f" of GPU {gpu_of}" if gpu_of else "")
            out.append(Memory(column, name, f"{base}.peak_bytes", f"{base}.capacity_bytes",
                              f"{base}.out_of_memory"))
    return out


def _is_false(value: Any) -> bool:
    """Whether a verdict cell says "does not fit" (a CSV cell may read back as text; an empty
    cell, a point without the verdict, says nothing)."""
    if isinstance(value, str):
        return value.strip().lower() == "false"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return not bool(value)


def does_not_fit(frame: Any, found: Sequence[Memory]) -> Any:
    """A boolean Series aligned with ``frame``: true where some memory of ``found`` does not
    fit."""
    import pandas as pd

    out = pd.Series(False, index=frame.index)
    for memory in found:
        out |= frame[memory.verdict].map(_is_false).astype(bool)
    return out


def capacity_of(column: str, found: Sequence[Memory]) -> Optional[Memory]:
    """The memory whose peak ``column`` is (its capacity is drawn beside it), or None."""
    return next((m for m in found if m.peak == column), None)


def _gb(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(number) else f"{number / 1e9:.4g}"


def _short_at(row: Any, memory: Memory) -> str:
    """Where the memory first ran short: the tensor and the layer allocating it."""
    tensor, layer = (row.get(f"{memory.out_of_memory}.{k}") for k in ("tensor", "layer"))
    tensor, layer = ("" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                     for v in (tensor, layer))
    if tensor and layer and tensor != layer:
        return f"`{tensor}` (layer `{layer}`)"
    return f"`{tensor or layer}`" if tensor or layer else ""


def unfit_section(ok: Any, found: Sequence[Memory], describe: Callable[[Any], list[str]],
                  header: list[str]) -> list[str]:
    """The markdown lines naming every point of ``ok`` (the successful points) that does not
    fit: one row per point and memory, ``describe`` giving the point's parameter cells (under
    ``header``). No lines when every point fits."""
    rows = []
    for _, row in ok.iterrows():
        for memory in found:
            if _is_false(row[memory.verdict]):
                rows.append([str(row["point"]), *describe(row), memory.name,
                             _gb(row.get(memory.peak)), _gb(row.get(memory.capacity)),
                             _short_at(row, memory)])
    if not rows:
        return []
    points = len({r[0] for r in rows})
    head = ["point", *header, "memory", "needs (GB)", "has (GB)", "first short at"]
    return ["## Points that do not fit in memory", "",
            f"{points} of {len(ok)} points need more memory than they have. Their times are "
            "those of a GPU with the memory it lacks: **they are not a recommendation**. "
            "Every plot marks them (bars cross-hatched, points crossed out) and the tables "
            "write *(does not fit)* after their figures.", "",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows), ""]
