"""Which points of a sweep do not fit in memory, read off the results table: a point's
verdict is its summary's ``fits_in_memory`` (peak GPU memory within the GPU's capacity, over
every GPU of the system) and, in model-state runs, each memory tier's
``model_states.tiers.<tier>.fits`` (the host's pinned pool); the figures beside each verdict are
the peak and the capacity it compares (``peak_gpu_memory_bytes`` and
``gpu_memory_capacity_bytes``; a tier's ``peak_bytes`` and ``capacity_bytes``). The reference
runs' verdicts (``baselines.*``) are not the point's. A multi-GPU point's verdicts are the
GPUs' combined (``fits_in_memory``: every GPU fits); each GPU's own verdicts, and the memory
tiers of each GPU of a model-state run, are rows of the GPU table (``gpus.csv``):
:func:`gpu_unfit` reads them off it.

``sst-cdma report`` marks the points that do not fit on every plot and lists them in
``report.md``: their times are what the iteration would take with memory the GPU does not have,
and are never a recommendation."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

__all__ = ["Memory", "memories", "does_not_fit", "capacity_of", "unfit_section", "gpu_unfit",
           "GpuUnfit"]

#: a column holding a point's (or a GPU's) verdict on its GPU memory
_GPU_VERDICT = "fits_in_memory"
#: a column holding the verdict of a memory tier of a model-state run
_TIER_VERDICT = re.compile(r"^model_states\.tiers\.([^.]+)\.fits$")
#: the GPU table's column naming a row's GPU
_GPU_COLUMN = "gpu"


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
    """The memories whose verdicts the table (the results table, or the GPU table) holds, in
    table order (a tier named ``gpu`` repeats ``fits_in_memory`` and is left out)."""
    out = []
    for column in columns:
        if column == _GPU_VERDICT:
            out.append(Memory(column, "GPU", "peak_gpu_memory_bytes",
                              "gpu_memory_capacity_bytes", "out_of_memory"))
        elif (tier := _TIER_VERDICT.match(column)) and tier.group(1) != "gpu":
            base = f"model_states.tiers.{tier.group(1)}"
            out.append(Memory(column, f"{tier.group(1)} memory", f"{base}.peak_bytes",
                              f"{base}.capacity_bytes", f"{base}.out_of_memory"))
    return out


@dataclass(frozen=True)
class GpuUnfit:
    """One memory of one GPU of a point that does not fit: its name (``GPU 3``, ``cpu memory
    of GPU 3``), the GPU's row of the GPU table and the memory's columns there."""

    name: str
    row: Any
    memory: Memory


def gpu_unfit(gpus: Any) -> dict[Any, list[GpuUnfit]]:
    """By ``point``: each memory of each GPU of the GPU table ``gpus`` (None: no GPU table)
    that does not fit, in table order."""
    out: dict[Any, list[GpuUnfit]] = {}
    found = memories(list(gpus.columns)) if gpus is not None else []
    if not found:
        return out
    for _, row in gpus.iterrows():
        for memory in found:
            if _is_false(row[memory.verdict]):
                gpu = row[_GPU_COLUMN]
                name = f"GPU {gpu}" if memory.name == "GPU" else f"{memory.name} of GPU {gpu}"
                out.setdefault(row["point"], []).append(GpuUnfit(name, row, memory))
    return out


def _is_false(value: Any) -> bool:
    """Whether a verdict cell says "does not fit" (a CSV cell may read back as text; an empty
    cell, a point without the verdict, says nothing)."""
    if isinstance(value, str):
        return value.strip().lower() == "false"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return not bool(value)


def does_not_fit(frame: Any, found: Sequence[Memory],
                 per_gpu: Optional[dict[Any, list[GpuUnfit]]] = None) -> Any:
    """A boolean Series aligned with ``frame``: true where some memory of ``found`` does not
    fit, or some GPU's (``per_gpu``: :func:`gpu_unfit`)."""
    import pandas as pd

    out = pd.Series(False, index=frame.index)
    for memory in found:
        out |= frame[memory.verdict].map(_is_false).astype(bool)
    if per_gpu:
        out |= frame["point"].isin(list(per_gpu)).astype(bool)
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
                  header: list[str], per_gpu: Optional[dict[Any, list[GpuUnfit]]] = None
                  ) -> list[str]:
    """The markdown lines naming every point of ``ok`` (the successful points) that does not
    fit: one row per point and memory (its own, then each GPU's of ``per_gpu``:
    :func:`gpu_unfit`), ``describe`` giving the point's parameter cells (under ``header``).
    No lines when every point fits."""
    rows = []
    for _, row in ok.iterrows():
        unfit = [(memory.name, row, memory) for memory in found
                 if _is_false(row[memory.verdict])]
        unfit += [(g.name, g.row, g.memory) for g in (per_gpu or {}).get(row["point"], [])]
        for name, where, memory in unfit:
            rows.append([str(row["point"]), *describe(row), name, _gb(where.get(memory.peak)),
                         _gb(where.get(memory.capacity)), _short_at(where, memory)])
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
