"""Where a pipeline stage's optimizer states live under ``optimizer_states`` ``auto``
(docs/parallel.md, "Every stage plans its memory"): on the GPU, unless no plan of the stage's
activations fits with them there; then on the rank's host (ZeRO-Offload, its 1/dp partition
stepped by the host CPU), stage by stage.

The planner (:func:`~workloads.parallel.stage_planner.plan_stage`) plans the stage for its own
pressure with the states on the GPU first. A stage that fits keeps them there. A stage that
does not is planned again with them on the host, and the host's plan is taken when it falls
less short (a fit is 0 bytes short); otherwise the GPU's, the states staying where they cost
no host step."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from ..model_states import Placement
from .stage_planner import StageMemoryPlan

__all__ = ["place_optimizer_states"]

GIB = 2**30


def _short(plan: StageMemoryPlan) -> str:
    """How a plan ends: ``fits`` or ``X GiB short``."""
    return "fits" if plan.fits else f"{plan.short_bytes / GIB:.2f} GiB short"


def place_optimizer_states(plan_on: Callable[[Optional[Placement]], StageMemoryPlan],
                           host: Placement) -> tuple[StageMemoryPlan, Optional[Placement]]:
    """The stage's plan and where its optimizer states go: ``plan_on(None)`` plans it with
    them on the GPU, ``plan_on(host)`` with them on the host. Returns the plan taken (its
    ``states_choice`` saying where and why) and the placement it was made with (None: the
    GPU)."""
    on_gpu = plan_on(None)
    if on_gpu.fits:
        return replace(on_gpu, states_choice={
            "placement": "gpu", "reason": "the plan fits with them on the GPU"}), None
    on_host = plan_on(host)
    weighed = f"with them on the GPU no plan fits ({_short(on_gpu)}); on the host it " \
        f"{_short(on_host)}"
    if on_host.short_bytes < on_gpu.short_bytes:
        return replace(on_host, states_choice={"placement": host.optimizer_states,
                                               "reason": weighed}), host
    return replace(on_gpu, states_choice={"placement": "gpu",
                                          "reason": f"{weighed}: no less short"}), None
