"""Where a validation run's figures come from: the GPU (name, memory, SMs, compute capability),
its driver, the CUDA, cuDNN and PyTorch versions, the host, the date and the command; and which
GPU preset of the simulator (``--gpu``) the measured device is.

The driver version comes from ``nvidia-smi`` where it is on the PATH (PyTorch does not report
it); otherwise it is recorded as unknown.
"""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from typing import Optional, Union

import torch

from sst_cdma import __version__
from sst_cdma.model.gpus import GPUS
from sst_cdma.tools.capture.cpu_adam_timing import machine_description
from sst_cdma.tools.validate.device import Probe

__all__ = ["PRESET_NAMES", "DeviceFacts", "preset_of", "provenance", "device_name",
           "device_facts"]

#: Substrings of the names CUDA gives devices (``torch.cuda.get_device_name``, as nvidia-smi
#: prints them, e.g. "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "Tesla V100-SXM2-16GB") ->
#: the preset modelling that product, most specific first. A name none matches has no preset
#: (the run says so; ``--gpu`` names one).
PRESET_NAMES: tuple[tuple[str, str], ...] = (
    ("GH200", "gh200"), ("H200", "h200"), ("H100 PCIe", "h100_pcie"),
    ("H100 80GB HBM3", "hopper"), ("H100 SXM", "hopper"), ("B200", "b200"),
    ("A100-SXM4-80GB", "a100_80gb"), ("A100-SXM4-40GB", "ampere"),
    ("A100 80GB PCIe", "a100_pcie"), ("V100-SXM2", "volta"), ("P100-SXM2", "pascal"),
    ("Tesla T4", "t4"), ("Tesla M40", "m40"), ("GTX 1080 Ti", "gtx1080ti"),
    ("TITAN Xp", "titanxp"), ("TITAN X (Pascal)", "titanx_pascal"),
    ("GTX TITAN X", "maxwell"),
)


def preset_of(name: str) -> Optional[str]:
    """The preset whose product the device ``name`` is, or None."""
    for pattern, preset in PRESET_NAMES:
        if pattern.lower() in name.lower():
            assert preset in GPUS, preset
            return preset
    return None


def device_name(probe: Probe) -> str:
    """The measured device's name: the GPU's as CUDA gives it, or the host CPU's."""
    if probe.is_gpu:
        return str(torch.cuda.get_device_name(probe.device))
    return f"CPU {machine_description()['cpu']}"


def _driver_version() -> str:
    """The NVIDIA driver's version from nvidia-smi, or 'unknown'."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "unknown (no nvidia-smi on the PATH)"
    try:
        done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown (nvidia-smi: {exc})"
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else "unknown"


#: what provenance.json says of the measured device
DeviceFacts = dict[str, Union[str, int, None]]


def device_facts(probe: Probe) -> DeviceFacts:
    """The measured device: name, driver, CUDA and cuDNN versions, memory, SMs and compute
    capability (None where they do not apply: the CPU)."""
    if not probe.is_gpu:
        return {"name": device_name(probe), "driver": None, "cuda": None, "cudnn": None,
                "memory_bytes": None, "sms": None, "compute_capability": None}
    props = torch.cuda.get_device_properties(probe.device)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"name": device_name(probe), "driver": _driver_version(),
            "cuda": torch.version.cuda, "cudnn": str(cudnn) if cudnn else None,
            "memory_bytes": int(props.total_memory), "sms": int(props.multi_processor_count),
            "compute_capability": f"{props.major}.{props.minor}"}


def provenance(probe: Probe, facts: DeviceFacts, command: str, preset: Optional[str],
               preset_from: str, budget_s: float) -> dict[str, object]:
    """The run's provenance record (``provenance.json``); ``preset_from`` says where the preset
    came from (the device's name, --gpu, or nowhere)."""
    return {
        "mode": "gpu" if probe.is_gpu else "cpu (reduced)",
        "device": facts,
        "preset": preset,
        "preset_from": preset_from,
        "host": machine_description(),
        "software": {"torch": torch.__version__, "python": sys.version.split()[0],
                     "sst-cdma": __version__, "os": platform.platform()},
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        "budget_s": budget_s,
    }
