"""Rows, not columns (issue #35): a multi-GPU point's per-GPU entries go to a long table of
their own, ``gpus.csv`` / ``gpus.parquet`` (one row per point and GPU: the point's ``point``,
``key`` and parameters, ``gpu``, the entry's fields), joined to ``results.csv`` by the point;
``results.csv`` keeps the per-point figures. A sweep with no per-GPU entries writes no GPU
table (and removes one an earlier sweep left). Tables written before, with ``gpus.<N>.*``
columns, still read: without those columns, a one-line note, their figures as GPU rows;
``sst-cdma table`` and ``sst-cdma report`` read either."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep import run_sweep
from sst_cdma.tools.sweep.fit import does_not_fit, gpu_unfit, memories, unfit_section
from sst_cdma.tools.sweep.marks import SpecError
from sst_cdma.tools.sweep.pivot import PivotError, pivot_markdown
from sst_cdma.tools.sweep.spec import Point
from sst_cdma.tools.sweep.table import ResultsError, gpu_rows, read_results, read_tables

SPEC = """
name: counting
topology: {script}
options: {value: 0.5}
grid:
  n: [1, 2, 3]
  mode: [a, b]
"""


def _point(index: int = 0) -> Point:
    return Point(index=index, topology=Path("t.py"), topology_name="t.py",
                 options=(("n", index),), params=(), line=1)


def test_a_multi_gpu_sweep_writes_a_row_per_point_and_gpu(counting, tmp_path):
    out = tmp_path / "out"
    outcome = run_sweep(counting.spec(SPEC), output=out, workers=1, progress=False)
    results = pd.read_csv(out / "results.csv")
    assert not [c for c in results.columns if c.startswith("gpus.")]
    assert list(results["iteration_time_s"]) == [1.0, 1.0, 1.5, 1.5, 2.0, 2.0]
    gpus = pd.read_csv(out / "gpus.csv")
    assert list(gpus.columns) == ["point", "key", "topology", "opt.value", "opt.n", "opt.mode",
                                  "gpu", "t"]
    assert list(gpus["point"]) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert list(gpus["gpu"]) == [0, 1] * 6
    assert list(gpus["t"]) == [1, 2, 1, 2, 2, 3, 2, 3, 3, 4, 3, 4]     # n and n + 1
    joined = gpus.merge(results[["point", "key", "opt.n"]], on=["point", "key"])
    assert (joined["opt.n_x"] == joined["opt.n_y"]).all() and len(joined) == 12
    parquet = pd.read_parquet(out / "gpus.parquet")
    assert list(parquet.columns) == list(gpus.columns) and len(parquet) == 12
    assert outcome.gpus is not None and len(outcome.gpus) == 12
    _, frame, again = read_tables(out, note=io.StringIO())
    assert list(frame.columns) == list(results.columns)
    assert list(again["t"]) == list(gpus["t"])


def test_no_per_gpu_entries_no_gpu_table_and_an_earlier_one_is_removed(counting, tmp_path):
    """``exclude: [gpus.*]`` leaves every entry out, as a sweep of one-GPU points has none: no
    gpus.csv then, and the one a sweep into the same folder wrote before is gone (it would
    describe other points)."""
    out = tmp_path / "out"
    run_sweep(counting.spec(SPEC), output=out, workers=1, progress=False)
    assert (out / "gpus.csv").is_file() and (out / "gpus.parquet").is_file()
    outcome = run_sweep(counting.spec(SPEC + "exclude: ['gpus.*']\n"), output=out, workers=1,
                        progress=False)
    assert outcome.cached == 6 and outcome.gpus is None
    assert not (out / "gpus.csv").exists() and not (out / "gpus.parquet").exists()
    _, _, gpus = read_tables(out)
    assert gpus is None


def test_gpu_rows_take_every_gpu_and_rename_a_colliding_key():
    """More than 64 GPUs (a list the flattening of a summary leaves out) are all rows; the
    entry's own ``gpu`` (its component's name) is ``summary.gpu`` beside the index."""
    entries = [{"gpu": f"node{i // 8}.gpu{i % 8}", "t": i, "layers": [{"x": 1}]}
               for i in range(100)]
    record = {"status": "ok", "summary": {"t": 1, "gpus": entries}}
    rows = gpu_rows(_point(3), "abc", record, exclude=("*.layers",))
    assert len(rows) == 100
    assert rows[99] == {"point": 3, "key": "abc", "topology": "t.py", "opt.n": 3, "gpu": 99,
                        "summary.gpu": "node12.gpu3", "t": 99}
    assert gpu_rows(_point(), "abc", {"status": "ok", "summary": {"t": 1}}) == []
    assert gpu_rows(_point(), "abc", record, exclude=("gpus",)) == []
    assert gpu_rows(_point(), "abc", {"status": "failed", "summary": {}}) == []


OLD_CSV = """point,key,topology,opt.network,status,error,fits_in_memory,iteration_time_s,\
gpus.0.gpu,gpus.0.fits_in_memory,gpus.0.iteration_time_s,gpus.0.peak_gpu_memory_bytes,\
gpus.0.gpu_memory_capacity_bytes,gpus.1.gpu,gpus.1.fits_in_memory,gpus.1.iteration_time_s,\
gpus.1.peak_gpu_memory_bytes,gpus.1.gpu_memory_capacity_bytes
0,k0,t.py,alexnet,ok,,True,1.5,g0,True,1.5,1000000000,2000000000,g1,True,1.25,1000000000,\
2000000000
1,k1,t.py,vgg16,ok,,False,3.0,g0,True,2.5,1000000000,2000000000,g1,False,3.0,3000000000,\
2000000000
2,k2,t.py,resnet,failed,boom,,,,,,,,,,,,
"""


@pytest.fixture
def old(tmp_path) -> Path:
    """A sweep folder as sweeps wrote it before the GPU table: per-GPU columns in each row."""
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "results.csv").write_text(OLD_CSV)
    return folder


def _new_layout(old: Path, tmp_path: Path) -> Path:
    """The same figures as today's sweeps write them: results.csv and gpus.csv."""
    note = io.StringIO()
    _, frame, gpus = read_tables(old, note=note)
    folder = tmp_path / "new"
    folder.mkdir()
    frame.to_csv(folder / "results.csv", index=False)
    gpus.to_csv(folder / "gpus.csv", index=False)
    return folder


def test_an_older_table_reads_with_a_note_and_its_gpu_columns_become_rows(old):
    note = io.StringIO()
    _, frame = read_results(old, note=note)
    assert not [c for c in frame.columns if c.startswith("gpus.")]
    assert list(frame["iteration_time_s"].dropna()) == [1.5, 3.0]
    lines = note.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: ") and \
        "an older results table" in lines[0] and "10 gpus.<N>.* columns" in lines[0]
    _, _, gpus = read_tables(old, note=io.StringIO())
    assert list(gpus.columns) == ["point", "key", "topology", "opt.network", "gpu",
                                  "summary.gpu", "fits_in_memory", "iteration_time_s",
                                  "peak_gpu_memory_bytes", "gpu_memory_capacity_bytes"]
    assert list(zip(gpus["point"], gpus["gpu"], gpus["iteration_time_s"])) == \
        [(0, 0, 1.5), (0, 1, 1.25), (1, 0, 2.5), (1, 1, 3.0)]     # the failed point: no rows


@pytest.mark.parametrize("layout", ["old", "new"])
def test_sst_cdma_table_joins_a_gpus_figure_in_by_point(old, tmp_path, capsys, layout):
    folder = old if layout == "old" else _new_layout(old, tmp_path)
    text = pivot_markdown(folder, "network", "gpus.1.iteration_time_s", digits=2)
    assert text.splitlines() == ["| network | gpus.1.iteration_time_s |", "|---|---|",
                                 "| alexnet | 1.25 |", "| vgg16 | 3.00 |"]
    ratio = pivot_markdown(folder, "network", "gpus.1.iteration_time_s", digits=2,
                           divide_by="gpus.0.iteration_time_s", where=["network=vgg16"])
    assert ratio.splitlines()[2] == "| vgg16 | 1.20 |"
    with pytest.raises(PivotError, match="no column 'gpus.7.iteration_time_s'"):
        pivot_markdown(folder, "network", "gpus.7.iteration_time_s")
    capsys.readouterr()
    assert main(["table", str(folder), "--rows", "network", "--value",
                 "gpus.0.iteration_time_s"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == (1 if layout == "old" else 0)          # the note, once


def test_a_gpu_table_of_another_sweep_or_cut_short_is_refused(old, tmp_path):
    folder = _new_layout(old, tmp_path)
    text = (folder / "gpus.csv").read_text()
    (folder / "gpus.csv").write_text(text.replace("k1", "k9"))
    with pytest.raises(ResultsError, match=r"gpus.csv: rows of a point that .*results.csv does "
                                           r"not hold \(key k9\): the tables of two sweeps"):
        read_tables(folder)
    (folder / "gpus.csv").write_text(text[:-1])
    with pytest.raises(ResultsError, match="truncated: the last line of the GPU table"):
        read_tables(folder)
    (folder / "gpus.csv").write_text("point,x\n0,1\n")
    with pytest.raises(ResultsError, match=r"not a sweep's GPU table \(no point/gpu columns\)"):
        read_tables(folder)


def test_a_gpu_that_does_not_fit_is_listed_by_name(old):
    """Point 1 does not fit: its GPU 1 needs 3 GB of 2; the report lists the point (the GPUs
    combined) and the GPU."""
    _, frame, gpus = read_tables(old, note=io.StringIO())
    ok = frame[frame["status"] == "ok"].reset_index(drop=True)
    per_gpu = gpu_unfit(gpus)
    assert {point: [u.name for u in unfit] for point, unfit in per_gpu.items()} == \
        {1: ["GPU 1"]}
    found = memories(list(frame.columns))
    assert does_not_fit(ok, [], per_gpu).tolist() == [False, True]
    lines = unfit_section(ok, found, lambda row: [row["opt.network"]], ["network"], per_gpu)
    assert [line for line in lines if line.startswith("| 1 |")] == [
        "| 1 | vgg16 | GPU |  |  |  |", "| 1 | vgg16 | GPU 1 | 3 | 2 |  |"]


def test_a_link_where_the_gpu_table_goes_stops_the_sweep_first(counting, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.csv"
    victim.write_text("the user's own\n")
    (out / "gpus.csv").symlink_to(victim)
    with pytest.raises(SpecError, match="gpus.csv is a symlink"):
        run_sweep(counting.spec(SPEC), output=out, workers=1, progress=False)
    assert victim.read_text() == "the user's own\n" and counting.total() == 0


def test_the_commit_benchmark_compares_the_figures_in_either_layout(old, tmp_path,
                                                                    monkeypatch):
    """benchmarks/bench_sweep_against_commit.py compares a tree that writes gpus.csv with one
    that wrote gpus.<N>.* columns: the same figures are the same table, a changed one is not."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sweep_against_commit.py"
    monkeypatch.setattr(sys, "path", list(sys.path))     # the script adds its folder
    spec = importlib.util.spec_from_file_location("bench_sweep_against_commit", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    comparable_table, table_sizes = bench.comparable_table, bench.table_sizes

    new = _new_layout(old, tmp_path)
    assert comparable_table(new) == comparable_table(old)
    assert comparable_table(old)["1"]["gpus.1.iteration_time_s"] == repr(3.0)
    assert comparable_table(old)["1"]["gpus.1.gpu"] == "g1"
    gpus = (new / "gpus.csv").read_text()
    (new / "gpus.csv").write_text(gpus.replace("1.25", "1.5"))
    assert comparable_table(new) != comparable_table(old)
    assert table_sizes(new).startswith("results.csv ") and \
        "gpus.csv " in table_sizes(new) and "(4 rows x 10 columns)" in table_sizes(new)
