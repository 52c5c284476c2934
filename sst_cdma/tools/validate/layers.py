"""Part (a) of a validation run: each layer's forward and backward time of a transformer block
and of a CNN, in a 16-bit type and in float32, as ``sst-cdma time-layers`` measures them
(:func:`~sst_cdma.tools.capture.layer_timing.time_layers`), written as layer-times files
(``--layer-times``).

The transformer is a shipped definition with fields replaced (fewer blocks; in the reduced
run a narrow one), written to the run's ``networks/`` folder so that the simulator runs the
very definition that was timed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import torch
import yaml
from workloads.layer_times import LayerTimes
from workloads.loader import load_network, network_path
from workloads.network import Network

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.tools.capture.layer_timing import time_layers
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.validate.device import Probe, out_of_memory
from sst_cdma.tools.validate.plan import NetworkChoice, Plan

__all__ = ["LayerRun", "half_dtype", "network_file", "time_all_layers"]


@dataclass(frozen=True)
class LayerRun:
    """One network timed in one dtype: where its definition is, and the times."""

    role: str          # "transformer" or "cnn"
    network: str       # the definition the simulator is given: a shipped name or a file
    batch: int
    dtype: str
    times: LayerTimes
    file: Path         # the layer-times file written


def half_dtype(probe: Probe) -> str:
    """The 16-bit type measured: bfloat16 where the GPU computes it natively (Ampere and later;
    and the CPU), float16 before (a V100 runs bfloat16 only emulated, which no one trains in)."""
    if probe.is_gpu and not torch.cuda.is_bf16_supported(including_emulation=False):
        return "float16"
    return "bfloat16"


def network_file(choice: NetworkChoice, folder: Path) -> str:
    """The definition of ``choice``: the shipped name as it is, or (with overrides) a file
    in ``folder`` holding the shipped definition with its transformer fields replaced."""
    if not choice.overrides:
        return choice.base
    doc = yaml.safe_load(network_path(choice.base).read_text(encoding="utf-8"))
    doc["transformer"].update(choice.overrides)
    doc["name"] = choice.name
    changed = ", ".join(f"{key} {value}" for key, value in choice.overrides.items())
    doc["description"] = (f"{choice.base} with {changed}: the network sst-cdma validate times "
                          "and simulates")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{choice.name}.yaml"
    write_text_whole(path, yaml.safe_dump(doc, sort_keys=False))
    load_network(path)  # the simulator reads it: refuse it here if it does not load
    return str(path)


def time_all_layers(probe: Probe, plan: Plan, networks: dict[str, str], folder: Path,
                    preset: Optional[str], measured_by: str, say: Callable[[str], None],
                    notes: list[str]) -> list[LayerRun]:
    """Time every layer of each network (``role -> definition``) in the 16-bit type and
    float32, write each as ``folder/<network>_<dtype>.json`` and return them; a network and
    dtype that runs out of device memory is left out, and ``notes`` says so."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = {"transformer": plan.transformer.batch, "cnn": plan.cnn.batch}
    runs = []
    for role, network in networks.items():
        net: Network = load_network(network)
        for dtype in (half_dtype(probe), "float32"):
            say(f"{net.name} batch {batches[role]} {dtype}: {len(net.layers) - 1} layers")
            try:
                times = time_layers(net, batches[role], dtype, str(probe.device), plan.repeat,
                                    plan.warmup, cudnn_benchmark=probe.is_gpu)
            except CaptureError as exc:
                if not out_of_memory(exc):
                    raise
                notes.append(f"{net.name} {dtype} layers: left out: {exc}")
                say(notes[-1])
                continue
            times = replace(times, gpu=preset or "",
                            measured_by=f"{times.measured_by}; {measured_by}")
            path = folder / f"{net.name}_{dtype}.json"
            times.write(path)
            runs.append(LayerRun(role, network, batches[role], dtype, times, path))
    return runs
