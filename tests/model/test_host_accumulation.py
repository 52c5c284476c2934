"""The closed form of gradients accumulated on the host (sst_cdma.model.host_accumulation): the
reduction stream's recurrence for one bucket, and the walk of a small hand-made stream whose
every time follows by hand."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from sst_cdma.model.host_accumulation import accumulated_landing, accumulating_walk


def copy_ps(direction: str, nbytes: int) -> int:
    return nbytes * (3 if direction == "prefetch" else 2)


def add_ps(bucket) -> int:
    return 7


BUCKET = SimpleNamespace(grad_bytes=10, params=5, wgrads=("a:dw",))


@pytest.mark.parametrize("first, last, took", [
    (True, False, 20),              # the sum out
    (False, False, 30 + 7 + 20),    # the sum in, the add, the sum out
    (False, True, 30 + 7 + 20 + 20),  # then the step's copy
    (True, True, 20 + 20),
])
def test_one_bucket_takes_its_actions_after_it_is_written_and_the_stream_is_free(first, last,
                                                                                 took):
    assert accumulated_landing(100, 40, BUCKET, copy_ps, add_ps, first, last) == 100 + took
    assert accumulated_landing(40, 100, BUCKET, copy_ps, add_ps, first, last) == 100 + took


def op(kind: str, name: str, writes: tuple[str, ...] = ()):
    return SimpleNamespace(op=kind, name=name, writes=writes, phase="backward")


def test_a_micro_batch_starts_once_the_one_before_is_accumulated():
    # two micro-batches of one kernel writing bucket 0's one gradient, 10 ps each
    ops = [op("alloc", "a:dw"), op("compute", "a", ("a:dw",)), op("sync", "a"),
           op("alloc", "a:dw"), op("compute", "a", ("a:dw",)), op("sync", "a")]
    walked, ready, landed = accumulating_walk(ops, lambda o: 10, lambda o: 0, lambda o: 0,
                                              [BUCKET], copy_ps, add_ps, (0, 3), 2)
    # micro-batch 0: written at 10, out by 30; micro-batch 1 starts at 30, written at 40,
    # then in, add, out and the step's copy
    assert ready == [40]
    assert landed == [40 + 30 + 7 + 20 + 20]
    assert walked.iteration_ps == 40
