"""Part (e) of a validation run: the host CPU's Adam step as ZeRO-Offload runs it, measured as
``sst-cdma time-cpu-adam`` measures it (:mod:`sst_cdma.tools.capture.cpu_adam_timing`), and
written as a CPU Adam file (``--cpu-adam-file``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.model.cpu_adam import IMPLEMENTATIONS
from sst_cdma.tools.capture.cpu_adam_timing import (AdamTiming, available_cores,
                                                    cpu_adam_document, machine_description,
                                                    time_cpu_adam)
from sst_cdma.tools.validate.plan import Plan

__all__ = ["measure_cpu_adam"]


def measure_cpu_adam(plan: Plan, path: Path, command: str,
                     say: Callable[[str], None]) -> dict[str, Any]:
    """Time every implementation at the plan's sizes and thread counts, write the CPU Adam file
    to ``path`` and return its document."""
    threads = sorted({available_cores() if t == "all" else int(t) for t in plan.adam_threads})
    machine = machine_description()

    def show(timing: AdamTiming) -> None:
        say(f"{timing.implementation} {timing.params} parameters on {timing.threads} "
            f"thread(s): {timing.params_per_s / 1e6:.1f} M parameters/s")

    timings, unavailable = time_cpu_adam(plan.adam_sizes, threads, IMPLEMENTATIONS,
                                         repeat=plan.adam_repeat, warmup=plan.adam_warmup,
                                         show=show)
    doc = cpu_adam_document(timings, unavailable, machine, command)
    write_text_whole(path, json.dumps(doc, indent=1) + "\n")
    return doc
