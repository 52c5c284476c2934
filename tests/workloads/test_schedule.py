"""The workload emits the schedule of a step (issue #31): with gradient accumulation, the
prologue once, each micro-batch's forward then backward pass, the update and the epilogue
once; the GPU runs the stream's spans in that order (no replay of its own)."""
from __future__ import annotations

from types import SimpleNamespace

from components.gpu import GPU
from workloads.model_states import Placement
from workloads.render import iteration_stream
from workloads.schedule import Step, micro_batch_steps, single_pass


def test_micro_batches_run_forward_then_backward_each_in_turn():
    steps = micro_batch_steps(20, 2, 8, 15, 3)
    assert steps == [Step(0, 2, "prologue"),
                     Step(2, 8, "forward", 0), Step(8, 15, "backward", 0),
                     Step(2, 8, "forward", 1), Step(8, 15, "backward", 1),
                     Step(2, 8, "forward", 2), Step(8, 15, "backward", 2),
                     Step(15, 20, "update")]
    assert single_pass(7) == [Step(0, 7, "iteration")]


def test_a_plans_schedule_covers_its_ops_and_splits_the_passes():
    one = iteration_stream("alexnet", 4, optimizer="adam").plan
    assert one.schedule() == single_pass(len(one.ops()))
    plan = iteration_stream("alexnet", 4, optimizer="adam",
                            placement=Placement(grad_accum=3)).plan
    steps = plan.schedule()
    start, end = plan.micro_batch_span()
    assert [s.micro_batch for s in steps] == [None, 0, 0, 1, 1, 2, 2, None]
    assert (steps[0].start, steps[-1].end) == (0, len(plan.ops()))
    forward = [s for s in steps if s.phase == "forward"]
    assert all((s.start, s.end) == (start, forward[0].end) for s in forward)
    ops = plan.ops()
    assert all(op.phase == "forward" for op in ops[forward[0].start:forward[0].end])
    assert ops[forward[0].end].phase != "forward"


def test_the_gpu_runs_the_steps_in_order_and_notes_each_micro_batch():
    gpu = SimpleNamespace(micro_starts={})
    ops = list(range(20))
    steps = micro_batch_steps(20, 2, 8, 15, 3)
    out = GPU._scheduled(gpu, ops, steps)
    assert out == ops[:2] + ops[2:15] * 3 + ops[15:]
    assert gpu.micro_starts == {2: 0, 15: 1, 28: 2}
    single = SimpleNamespace(micro_starts={})
    assert GPU._scheduled(single, ops, single_pass(20)) == ops and single.micro_starts == {}
