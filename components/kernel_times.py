"""Where a GPU's kernel times come from: the subcomponents of the GPU's ``kernels`` slot.

Three elements fill it: ``cdma.FittedKernels`` (the algorithm-aware model fitted to measured
cuDNN kernels, docs/kernel_model.md), ``cdma.RooflineKernels`` (peak FLOP/s x efficiency
against DRAM bandwidth) and ``cdma.MeasuredKernels`` (a layer-times JSON file). The workload
subcomponent prices its layers through the one in the slot; the GPU prices through it at run
time the kernels its stream gives no time for (memory-bound ones: the roofline, at least one
launch interval), and asks it what a kernel after a synchronization pays (``after_sync_ps``).
The GPU's hardware (preset, peak FLOP/s, SMs) stays on the GPU: the elements read it from
their parent.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

from sst_cdma.engine.element import MIN_FRACTION, MIN_FRACTION_WHY, Param, SubComponent
from sst_cdma.engine.flows import PS_PER_S
from sst_cdma.model.dtypes import TF32_MODES
from sst_cdma.model.gpus import GPUS, GPUSpec
from sst_cdma.model.stacks import DEFAULT_STACK, STACKS, StackError, check_stack
from sst_cdma.engine.units import UnitError, parse_bytes

if TYPE_CHECKING:
    from sst_cdma.model.fitted import KernelModel

__all__ = ["roofline_ps", "gpu_spec", "KernelTimes", "FittedKernels", "RooflineKernels",
           "MeasuredKernels"]


def roofline_ps(flops: int, dram: int, peak_flops: float, efficiency: float,
                dram_bandwidth: float, overhead_ps: int = 0) -> int:
    """Kernel time: the slower of compute (FLOPs at peak x efficiency) and DRAM traffic at the
    achievable bandwidth, plus a fixed launch overhead."""
    t = max(flops / (peak_flops * efficiency), dram / dram_bandwidth if dram else 0.0)
    return math.ceil(t * PS_PER_S) + overhead_ps


def gpu_spec(params: dict[str, Any]) -> GPUSpec:
    """The GPU a kernel model prices for, from a ``cdma.GPU``'s params: its preset with the
    element's peak FLOP/s and SM count where set."""
    preset = GPUS[params["gpu_preset"]]
    return replace(preset, peak_flops=params["peak_flops"] or preset.peak_flops,
                   sms=params["sms"] or preset.sms)


_EFFICIENCY = Param("compute_efficiency", "float", 0.6, "fraction of peak FLOP/s the kernels "
                    "priced by the roofline reach", minimum=MIN_FRACTION, maximum=1,
              why_minimum=MIN_FRACTION_WHY)
_OVERHEAD = Param("kernel_overhead", "time", "0ns", "fixed time added to every kernel "
                  "(launch)", minimum=0)
_TF32 = Param("tf32", "str", "", "float32 kernels on TF32 tensor cores (Ampere and later): "
              "none, conv (convolutions only) or all (convolutions and matmuls); '': PyTorch's "
              "default (conv where the GPU has TF32, none before Ampere)",
              choices=("", *TF32_MODES))
_STACK = Param("stack", "str", DEFAULT_STACK, "the training stack whose kernels a "
               "transformer block launches: fused (the simulator's own set: each element-wise "
               "layer one kernel, biases in the GEMMs, no dropout), eager (PyTorch: norm, bias "
               "adds, activation, dropout and residual add one kernel each), compile "
               "(torch.compile: bias+activation and bias+dropout+add fused) or megatron "
               "(Megatron-LM/Transformer Engine fused kernels)", choices=STACKS)
_WORKSPACE_LIMIT = Param("workspace_limit", "str", "", "largest cuDNN workspace one "
                         "convolution kernel may take when the fitted model picks its "
                         "algorithm, e.g. 64MiB (default: no limit)")


class KernelTimes(SubComponent):
    """The interface of the GPU's ``kernels`` slot: how long each kernel takes."""

    ABSTRACT = True
    #: how kernel_times_source names the model: ``fitted`` or ``roofline``
    model_name = "roofline"

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        if self.parent is None or "gpu_preset" not in getattr(self.parent, "params", {}):
            raise ValueError(f"{name}: a {self.type_name()} prices the kernels of a cdma.GPU: "
                             "load it into a GPU's 'kernels' slot")
        #: the GPU this prices for (its preset, peak FLOP/s and SMs)
        self.spec = gpu_spec(self.parent.params)
        #: the fitted model the workload prices kernels with (None: the roofline)
        self.model: Optional["KernelModel"] = None
        #: the fitted model's launch: the host's issue interval, the least time a kernel priced
        #: here (a memory-bound one) takes, and the latency a kernel after a synchronization
        #: pays (``after_sync_ps``); 0 for the roofline
        self.launch_ps = 0
        #: a measured layer-times file whose times the workload's kernels take ('': none)
        self.layer_times = ""
        #: the workspace limit of the model's algorithm choice (None: no limit)
        self.workspace_limit: Optional[int] = None

    @property
    def peak_flops(self) -> float:
        """The GPU's peak FLOP/s."""
        return self.spec.peak_flops

    @property
    def models_times(self) -> bool:
        """True when the times this gives a rendered stream are modelled (their DRAM traffic
        then shares HBM bandwidth); measured times are timers."""
        return self.model is not None and not self.layer_times

    def overhead_ps(self, timed: bool) -> int:
        """The fixed time a kernel takes before its work: ``kernel_overhead`` (the launch is
        no fixed time: :meth:`kernel_ps` and :meth:`after_sync_ps`). ``timed`` is kept for
        callers that tell timed kernels apart."""
        return self.params["kernel_overhead"]

    def after_sync_ps(self, modelled: bool) -> int:
        """The latency of a kernel the host issues after a synchronization (the compute stream
        idle, nothing enqueued ahead): the model's launch, for a kernel whose time is
        ``modelled`` (a measured or given time already holds its launch)."""
        return self.launch_ps if modelled else 0

    def kernel_ps(self, time_ps: Optional[int], flops: int, dram: int,
                  dram_bandwidth: float) -> int:
        """A kernel's duration: the stream's ``time_ps`` plus the overhead, or, with no time
        given, the roofline at ``dram_bandwidth`` B/s but at least the model's launch (the
        host issues one kernel per launch interval), plus the overhead."""
        if time_ps is not None:
            return time_ps + self.overhead_ps(True)
        return max(roofline_ps(flops, dram, self.peak_flops, self.params["compute_efficiency"],
                               dram_bandwidth), self.launch_ps) + self.overhead_ps(False)

    def _use_fitted_model(self) -> None:
        """Price with the fitted model of the GPU's preset (its family and this GPU's SMs and
        peak FLOP/s), within the ``workspace_limit`` param."""
        from sst_cdma.model.fitted import kernel_model_for
        from sst_cdma.model.kernel_model import ModelError

        try:
            preset = self.owner.params["gpu_preset"]
            stack = check_stack(self.params["stack"], preset, self.spec.tensor_family)
            self.model = replace(kernel_model_for(preset, self.spec),
                                 tf32=self.params["tf32"], stack=stack)
            self.model.tf32_mode(self.model.tf32)
        except (ModelError, StackError) as exc:
            raise ValueError(f"{self.name}: {exc}") from None
        self.model_name = "fitted"
        self.launch_ps = math.ceil(self.model.params.launch_s * PS_PER_S)
        text = self.params["workspace_limit"]
        try:
            self.workspace_limit = parse_bytes(text) if text else None
        except UnitError as exc:
            raise ValueError(f"{self.name}: param 'workspace_limit': {exc}") from None


class FittedKernels(KernelTimes):
    """Kernel times of the model fitted to measured cuDNN kernels (docs/kernel_model.md)."""

    PARAMS = (_WORKSPACE_LIMIT, _TF32, _STACK, _EFFICIENCY, _OVERHEAD)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self._use_fitted_model()


class RooflineKernels(KernelTimes):
    """Kernel times of the roofline: peak FLOP/s x efficiency against DRAM bandwidth."""

    PARAMS = (_EFFICIENCY, _OVERHEAD)


class MeasuredKernels(KernelTimes):
    """Kernel times measured per layer and pass (a layer-times JSON file, e.g. from
    ``sst-cdma time-layers``)."""

    PARAMS = (
        Param("layer_times", "str", None, "the layer-times JSON file"),
        Param("kernel_model", "str", "fitted", "the model beside the measurement: 'fitted' "
              "picks algorithms and workspaces, scales times measured on another GPU preset "
              "by its per-layer ratio and prices the kernels the file does not time with its "
              "launch; 'roofline' takes the times as measured", choices=("fitted", "roofline")),
        _WORKSPACE_LIMIT, _TF32, _STACK, _EFFICIENCY, _OVERHEAD)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        if not self.params["layer_times"]:
            raise ValueError(f"{name}: param 'layer_times' names no file")
        if self.params["kernel_model"] == "fitted":
            self._use_fitted_model()
        self.layer_times = self.params["layer_times"]
