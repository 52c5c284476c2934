"""ZeRO-Offload's one-step delayed parameter update against the immediate update, over a grid
of cases: without it DeepSpeed's step is the passes, the CPU's step over the whole partition
and the weights' copy back one after the other; with it the CPU's step and the copy back run
beside the next iteration's passes, so its steady state is never longer, and shorter by
what of the update the passes hide. The closed form's recurrence (``state_traffic``) over a
grid of buckets, copy, step and pass times; then the event simulation over a grid of CPU
rates, links and buckets."""
from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

import pytest

import sst_cdma
from sst_cdma.model.zero_offload import state_traffic

TOPOLOGY = "topologies/pascal_cdma.py"


@dataclass(frozen=True)
class Bucket:
    """What ``state_traffic`` reads of a bucket."""

    grad_bytes: int
    weight_bytes: int
    state_bytes: int
    params: int


def _case(buckets: int, pass_ps: int, copy_per_byte: int, step_per_param: int):
    """Buckets of 1000 parameters each, the last written at ``pass_ps`` (the others evenly
    before it), copies of ``copy_per_byte`` ps a byte, steps of ``step_per_param`` ps a
    parameter."""
    bs = [Bucket(2000, 2000, 12000, 1000) for _ in range(buckets)]
    ready = [pass_ps * (k + 1) // buckets for k in range(buckets)]

    def copy_ps(_direction: str, nbytes: int) -> int:
        return 10 + nbytes * copy_per_byte

    def step_ps(bucket: Bucket) -> int:
        return bucket.params * step_per_param

    return bs, ready, copy_ps, step_ps


GRID = list(itertools.product((1, 3, 8), (10_000, 200_000, 5_000_000), (1, 20, 400),
                              (1, 50, 2000)))


@pytest.mark.parametrize("buckets,pass_ps,copy_per_byte,step_per_param", GRID)
def test_the_delayed_update_is_never_slower_and_hides_what_the_passes_cover(
        buckets, pass_ps, copy_per_byte, step_per_param):
    bs, ready, copy_ps, step_ps = _case(buckets, pass_ps, copy_per_byte, step_per_param)
    immediate, steps = state_traffic(ready, pass_ps, bs, copy_ps, step_ps, False)
    delayed, _ = state_traffic(ready, pass_ps, bs, copy_ps, step_ps, True)
    landed = steps[-1][0]
    update = sum(step_ps(b) for b in bs) + sum(copy_ps("prefetch", b.weight_bytes) for b in bs)
    # immediate: the step opens after the passes and the last gradient copy, then the CPU's
    # whole step, then the weights back, one after the other
    assert immediate == max(pass_ps, landed) + update
    assert all(stepped >= max(pass_ps, landed) for _, stepped, _ in steps)
    # delayed: the previous step's update beside this iteration's passes
    assert delayed == max(pass_ps, landed, update)
    assert delayed <= immediate
    if update > max(pass_ps, landed):  # the update is the bottleneck: the passes hide
        assert immediate - delayed == max(pass_ps, landed)


@pytest.mark.parametrize("states_nvme", [False, True], ids=["host", "nvme"])
def test_zero_infinity_reads_the_states_after_the_backward_pass(states_nvme):
    bs, ready, copy_ps, step_ps = _case(4, 1_000_000, 20, 50)

    def storage_ps(_direction: str, nbytes: int) -> int:
        return 5 + nbytes * 30

    kw = dict(storage_ps=storage_ps, states_nvme=states_nvme)
    immediate, steps = state_traffic(ready, 1_000_000, bs, copy_ps, step_ps, False, **kw)
    delayed, _ = state_traffic(ready, 1_000_000, bs, copy_ps, step_ps, True, **kw)
    opens = max(1_000_000, steps[-1][0])
    read = storage_ps("prefetch", bs[0].state_bytes) if states_nvme else 0
    # the first step waits for the step to open and, on the SSDs, for its states' read
    assert steps[0][1] == opens + read + step_ps(bs[0])
    assert delayed < immediate


def _run(*extra: str):
    opts = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--policy", "none",
            "--algorithm", "none", "--optimizer", "adam", "--optimizer-states", "host",
            "--no-baselines", *extra]
    return sst_cdma.run(TOPOLOGY, opts, console=io.StringIO()).results["gpu0"]


@pytest.mark.parametrize("rate,gen,bucket", list(itertools.product(
    ("3e6", "1e7", "1e8"), ("1", "3"), ("4MiB", "64MiB"))))
def test_simulated_delayed_update_is_never_slower(repo, rate, gen, bucket):
    """The event simulation (DRAM contention on): the delayed update's step against the
    immediate one's, CPU-bound (3e6 parameters/s a core), balanced and link-bound."""
    opts = ("--cpu-adam-throughput", rate, "--pcie-gen", gen, "--bucket-size", bucket)
    immediate = _run(*opts)
    delayed = _run(*opts, "--delayed-update")
    assert immediate.completed and delayed.completed
    assert delayed.iteration_time_ps <= immediate.iteration_time_ps
    passes = immediate.forward_time_ps + immediate.backward_time_ps
    # immediate: the CPU's step starts after the backward pass, the iteration ends after it
    assert immediate.model_states["cpu_step_span_ps"][0] >= passes
    assert immediate.iteration_time_ps >= passes + immediate.model_states["cpu_step_alone_ps"]
