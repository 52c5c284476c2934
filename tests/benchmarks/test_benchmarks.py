"""Smoke tests of benchmarks/bench_phold.py and bench_model.py on tiny runs (no speed
requirement): each measure runs, and the two PHOLD models are the same model."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_phold_on_simpy_is_the_same_model_as_ours():
    bench = load("bench_phold")
    ours, _ = bench.run_ours("300ns")
    theirs, _ = bench.run_simpy(300)
    assert ours == theirs > 1000  # same torus, same seeds, same delays: the same event count


@pytest.mark.parametrize("measure", ["empty_component_rate", "bare_flow_rate",
                                     "compiled_handler_rate"])
def test_each_ceiling_of_the_model_benchmark_runs(measure):
    assert getattr(load("bench_model"), measure)(2000) > 0


def test_the_model_benchmark_times_one_iteration():
    events, run_s, wall_s = load("bench_model").model_run("alexnet", "chunk", 8, "zvc")
    assert events > 100 and 0 < run_s < wall_s
