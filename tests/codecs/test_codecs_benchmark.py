"""Smoke test of benchmarks/bench_codecs.py on a tiny input (no speed requirement)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_codecs.py"


def test_benchmark_runs_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_codecs", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    status = bench.main(["--mib", "2", "--repeats", "1", "--min-speedup", "0"])
    out = capsys.readouterr().out
    assert status == 0
    for name in ("sst_cdma zvc", "sst_cdma rle", "sst_cdma zlib", "sst_cdma lz4", "sst_cdma zstd",
                 "sst_cdma bplane_zstd", "naive numpy zvc", "x.copy()"):
        assert name in out
    # every method's speed and ratio relative to the naive ZVC of the same run; the naive
    # row is 1x against itself
    assert "vs naive:" in out
    naive = next(line for line in out.splitlines() if line.startswith("naive numpy zvc"))
    assert naive.split()[-3:] == ["1.00x", "1.00x", "1.00x"]
    assert "speed-up over naive numpy ZVC" in out
    assert bench.main(["--mib", "2", "--repeats", "1", "--min-speedup", "1e9"]) == 1
