"""Where a stage's optimizer states go under optimizer_states auto
(workloads/parallel/stage_states.py): the GPU while the stage's plan fits there, else the
host when its plan falls less short there."""
from __future__ import annotations

from typing import Optional

from workloads.model_states import Placement
from workloads.parallel.stage_planner import StageMemoryPlan, StagePressure
from workloads.parallel.stage_states import place_optimizer_states

GIB = 2**30
HOST = Placement("host")


def plan(peak: int, capacity: int = 16 * GIB) -> StageMemoryPlan:
    """A stage plan of ``peak`` bytes for ``capacity``."""
    return StageMemoryPlan(0, StagePressure(1, 0, {}), capacity, GIB, {}, 1.0, peak, peak,
                           peak <= capacity, 1, True, None)  # type: ignore[arg-type]  # no stream


def planner(on_gpu: int, on_host: int):
    """``plan_on`` for the peaks with the states on the GPU and on the host, recording what
    it was asked."""
    asked: list[Optional[Placement]] = []

    def plan_on(placement: Optional[Placement]) -> StageMemoryPlan:
        asked.append(placement)
        return plan(on_gpu if placement is None else on_host)
    return plan_on, asked


def test_a_stage_that_fits_keeps_its_states_on_the_gpu_unasked_about_the_host():
    plan_on, asked = planner(15 * GIB, 14 * GIB)
    made, placement = place_optimizer_states(plan_on, HOST)
    assert placement is None and asked == [None] and made.peak_bytes == 15 * GIB
    assert made.states_choice == {"placement": "gpu",
                                  "reason": "the plan fits with them on the GPU"}
    assert made.as_dict()["optimizer_states"]["placement"] == "gpu"


def test_a_stage_short_on_the_gpu_takes_the_host_where_it_fits_or_falls_less_short():
    for on_host, ends in ((15 * GIB, "on the host it fits"),
                          (17 * GIB, "on the host it 1.00 GiB short")):
        plan_on, asked = planner(18 * GIB, on_host)
        made, placement = place_optimizer_states(plan_on, HOST)
        assert placement is HOST and asked == [None, HOST] and made.peak_bytes == on_host
        assert made.states_choice is not None
        assert made.states_choice["placement"] == "host"
        assert made.states_choice["reason"] == \
            f"with them on the GPU no plan fits (2.00 GiB short); {ends}"


def test_a_stage_no_less_short_on_the_host_keeps_them_on_the_gpu():
    plan_on, _ = planner(18 * GIB, 18 * GIB)
    made, placement = place_optimizer_states(plan_on, HOST)
    assert placement is None and made.states_choice is not None
    assert made.states_choice["placement"] == "gpu"
    assert made.states_choice["reason"].endswith(": no less short")


def test_without_a_choice_the_entry_has_no_optimizer_states():
    assert "optimizer_states" not in plan(GIB).as_dict()
