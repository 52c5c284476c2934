"""benchmarks/bench_planner.py runs and prints the planner / iteration ratio."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_planner_benchmark_prints_its_ratio_and_the_prediction_gap(capsys):
    spec = importlib.util.spec_from_file_location("bench_planner",
                                                  REPO / "benchmarks" / "bench_planner.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--network", "squeezenet", "--batch", "640", "--topology",
                       "pascal_cdma.py", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "planner / iteration:" in out and "requirement <= 5" in out
    assert "predicted iteration" in out and "fits" in out
