"""The fabric's ``collective`` slot: the ring all-reduce fills it by default, and the fabric
takes every step count, byte count and HBM cost of a bucket from whatever fills it (the worked
example of docs/topologies.md, "Adding a collective algorithm")."""
from __future__ import annotations

import pytest
from test_nvswitch import NVLINK4, run_stream, stream

from components.collective import CollectiveAlgorithm
from components.nvswitch import NVSwitch
from components.ring_allreduce import RingAllReduce


def test_the_ring_sends_two_n_minus_one_chunks_of_one_nth():
    ring = RingAllReduce.__new__(RingAllReduce)   # its arithmetic needs no simulation
    assert [ring.steps(n) for n in (2, 4, 8)] == [2, 6, 14]
    assert ring.bytes_per_gpu(800, 8) == pytest.approx(1400)
    assert ring.hbm_per_byte_sent() == 2.5


def test_the_fabric_slot_takes_a_collective_and_defaults_to_the_ring():
    (slot,) = NVSwitch.SLOTS
    assert (slot.name, slot.accepts, slot.default) == ("collective", CollectiveAlgorithm,
                                                       "cdma.RingAllReduce")
    assert issubclass(RingAllReduce, CollectiveAlgorithm)


def test_the_fabric_prices_a_bucket_with_the_algorithm_in_its_slot(tmp_path, monkeypatch):
    """An algorithm of one step that sends the whole bucket once (not the ring's 2(n-1)
    chunks): the bucket takes one step latency and the bucket's bytes at NVLink's rate."""
    monkeypatch.setattr(RingAllReduce, "steps", lambda self, n: 1)
    monkeypatch.setattr(RingAllReduce, "bytes_per_gpu", lambda self, nbytes, n: float(nbytes))
    weight = 10_000_003
    result = run_stream(tmp_path, stream(weight), "--gpus", "4", "--gpu", "hopper",
                        "--allreduce-step-latency", "2us")
    [(nbytes, start, end, idle)] = result.results["nvswitch"].buckets
    expected = 2e-6 + weight / NVLINK4
    assert abs((end - start) - expected * 1e12) <= 1 and end - start == idle
    assert result.results["nvswitch"].bytes_per_gpu == pytest.approx(weight)
