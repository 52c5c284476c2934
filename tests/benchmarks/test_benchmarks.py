"""Smoke tests of benchmarks/bench_phold.py and bench_model.py on tiny runs (no speed
requirement): each measure runs, and the two PHOLD models are the same model; and
bench_kernel_model.py's markdown tables, on a made-up evaluation (no fitting); bench_transformer.py
counts kernels and prints its ratio."""
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


def _fake_evaluation():
    """A tiny made-up evaluation of two GPUs (no fitting), for the markdown tables."""
    import numpy as np

    from sst_cdma.model.calibration import KINDS, Evaluation
    from sst_cdma.model.kernel_model import KernelParams

    gpus = ("A", "B")
    good = {k: np.array([1.1, 0.9, 1.2]) for k in KINDS}  # geomean |r-1| 12.6%, all within
    bad = {k: np.array([2.0, 0.5, 1.5]) for k in KINDS}    # 63.0% off, none within
    table = {g: dict(good) for g in gpus}
    in_sample = {g: dict(good, bwd_filter=bad["bwd_filter"]) for g in gpus}
    return Evaluation(gpus, {g: KernelParams(launch_s=30e-6) for g in gpus},
                      {g: KernelParams() for g in gpus}, in_sample, table,
                      {g: dict(bad) for g in gpus},
                      {("A", "B"): dict(good), ("B", "A"): dict(good)},
                      {("A", "B"): dict(bad), ("B", "A"): dict(bad)})


def test_the_kernel_model_benchmark_prints_its_tables_as_markdown():
    bench = load("bench_kernel_model")
    text = bench.markdown(_fake_evaluation())
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert len(titles) == 8 and titles[-1] == "### Targets (both GPUs pooled)"
    # every table row has as many cells as its header, and pipes in cells are escaped
    for block in text.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("| ")]
        if rows:
            widths = {len(r.replace("\\|", "").split(" | ")) for r in rows}
            assert len(widths) == 1, block
    assert "| `launch_s` (us) | **30** | **30** |" in text      # at its bound: bold
    assert "| A | fwd | 3 | 1.10 | 12.6% | 100% | 1.50 | 63.0% | 0% |" in text
    assert "| **both** | all | 24 | 1.10 | 12.6% | 100% |" in text
    assert "| A | - | 12.6% (63.0%) |" in text
    assert "| A | bwd_filter | 3 | 1.50 | 63.0% | 0% | 1.50 | 63.0% | 0% |" in text
    assert "| leave one GPU out, geomean \\|r-1\\| | 12.6% (63.0%) |" in text
    assert "| in sample, fwd geomean \\|r-1\\| <= 12% | 12.6% | MISS |" in text
    assert "| in sample, bwd_filter geomean \\|r-1\\| <= 12% | 63.0% | MISS |" in text
    assert "| leave one GPU out, gemm within +-25% >= 75% | 100.0% | PASS |" in text
    # no GPU of the T4's architecture here: its leave-one-architecture-out targets are left out
    assert "architecture" not in text
    assert text.rstrip().endswith("8 of 12 targets met.")


def test_the_kernel_model_benchmark_weighs_kernels_by_their_measured_time():
    import numpy as np

    from sst_cdma.model.calibration import KINDS

    bench = load("bench_kernel_model")
    # a 3 ms kernel predicted 10% slow and a 1 ms one 2x: the total is 1.325x, and 3 of the
    # 4 ms are within +-25%
    total, within = bench.time_weighted(np.array([1.1, 2.0]), np.array([3e-3, 1e-3]))
    assert total == pytest.approx(1.325) and within == pytest.approx(0.75)
    measured = {g: {k: np.array([1e-3, 1e-3, 2e-3]) for k in KINDS} for g in ("A", "B")}
    text = bench.markdown(_fake_evaluation(), measured)
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert len(titles) == 9 and titles[-2].startswith("### Kernel time")
    # in sample bwd_filter is (2.0, 0.5, 1.5) on 1, 1, 2 ms: total (2 + 0.5 + 3) / 4
    assert "| A | bwd_filter | 4.0 | 1.38 | 0% | 1.10 | 100% | 1.38 | 0% |" in text


def test_the_committed_parameters_table_is_the_files(tmp_path):
    import json

    from sst_cdma.model.fitted import PARAMS_PATH

    bench = load("bench_kernel_model")
    doc = json.loads(PARAMS_PATH.read_text(encoding="utf-8"))
    rows = bench.markdown_committed_params()
    assert rows[0] == "| parameter | " + " | ".join(doc["families"]) + " |"
    p100 = doc["families"]["P100"]["params"]
    assert f"| `tile_reuse` | {p100['tile_reuse']:.4g} |" in "\n".join(rows)
    # a value moved onto its fit bound turns bold; launch_s is shown in microseconds
    doc["families"]["P100"]["params"]["launch_s"] = 30e-6
    moved = tmp_path / "kernel_params.json"
    moved.write_text(json.dumps(doc), encoding="utf-8")
    assert "| `launch_s` (us) | **30** |" in "\n".join(bench.markdown_committed_params(
        str(moved)))


def test_the_scale_benchmark_fits_the_growth_exponent():
    bench = load("bench_scale")
    assert bench.growth_exponent([64, 256, 1024], [1.0, 4.0, 16.0]) == pytest.approx(1.0)
    assert bench.growth_exponent([64, 256, 1024], [1.0, 16.0, 256.0]) == pytest.approx(2.0)
    wall, timing = bench.one_run(8, ["--network", "alexnet", "--batch", "4", "--no-baselines"])
    assert wall > timing["run_s"] > 0
    fresh = bench.measured(8, ["--network", "alexnet", "--batch", "4", "--no-baselines"])
    assert fresh["wall_s"] > fresh["run_s"] > 0 and fresh["peak_mib"] > 0


def test_the_transformer_benchmark_counts_kernels_and_prints_the_ratio(capsys):
    bench = load("bench_transformer")
    kernels, wall = bench.cold_run("gpt2_small", 1, ["--seq-len", "64"])
    assert kernels == 2 * 148 and wall > 0  # a forward and a backward kernel per layer
    assert bench.main(["--repeat", "1", "--batch", "1"]) == 0
    out = capsys.readouterr().out
    assert "gpt2_small batch 1: 296 kernels" in out and "alexnet batch 64: 46 kernels" in out
    assert "gpt2_small / alexnet per kernel:" in out


def test_the_kernel_model_benchmark_splits_its_figures_by_layer_class():
    import numpy as np

    from sst_cdma.model.calibration import KINDS
    from sst_cdma.model.kernel_model import PASSES

    bench = load("bench_kernel_model")
    conv = {"c": np.array([3.0, 64, 64, 64, 64]), "r": np.array([3.0, 1, 3, 3, 5]),
            "s": np.array([3.0, 1, 3, 3, 5]), "stride_h": np.array([1.0, 2, 1, 2, 1]),
            "stride_w": np.array([1.0, 2, 1, 2, 1])}
    assert list(bench.layer_class(conv)) == ["1-3 input channels", "1x1", "3x3 stride 1",
                                             "other", "other"]
    # the made-up evaluation's three rows: two 1x1 layers and one other; in sample
    # bwd_filter is (2.0, 0.5, 1.5), none within, leave one out (1.1, 0.9, 1.2), all within
    classes = {g: {k: np.array(["1x1", "1x1", "other"]) for k in PASSES} for g in ("A", "B")}
    measured = {g: {k: np.array([1e-3, 1e-3, 2e-3]) for k in KINDS} for g in ("A", "B")}
    text = bench.markdown(_fake_evaluation(), measured, classes)
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert len(titles) == 10 and titles[-2].startswith("### By layer class")
    assert "| A | 1x1 | 2: 100% / 100% (1.00) | 2: 100% / 100% (1.00) | 2: 0% / 100% (1.00) |" \
        in text
    assert "| A | 3x3 stride 1 | - | - | - |" in text
    assert "| **both** | other | 2: 100% / 100% (1.20) |" in text


def test_the_kernel_model_benchmark_refuses_bad_data_in_one_line(tmp_path, capsys):
    bench = load("bench_kernel_model")
    assert bench.main(["--data", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"bench_kernel_model.py: {tmp_path / 'missing'}: not a folder of calibration data"


def test_the_kernel_model_benchmark_prices_the_layer_steps_the_simulator_runs():
    import numpy as np

    from sst_cdma.model.calibration import Evaluation
    from sst_cdma.model.kernel_model import KernelParams

    bench = load("bench_kernel_model")
    # three layers; the first (a network's first layer) has no backward-data: its backward
    # step is backward-filter alone
    seconds = {"fwd": np.array([1e-3, 1e-3, 2e-3]), "bwd_data": np.array([np.nan, 1e-3, 1e-3]),
               "bwd_filter": np.array([1e-3, 1e-3, 2e-3])}
    good = {"fwd": np.array([1.1, 0.9, 1.2]), "bwd_data": np.array([0.9, 1.2]),
            "bwd_filter": np.array([1.1, 0.9, 1.2]), "gemm": np.array([1.0])}
    bad = dict(good, bwd_filter=np.array([2.0, 0.5, 1.5]))
    backward = bench.step_ratio(bad, seconds, ("bwd_data", "bwd_filter"))
    # 2.0 alone; (0.9 x 1 + 0.5 x 1) / 2; (1.2 x 1 + 1.5 x 2) / 3
    assert backward == pytest.approx([2.0, 0.7, 1.4])
    gpus = ("A", "B")
    ev = Evaluation(gpus, {g: KernelParams() for g in gpus}, {g: KernelParams() for g in gpus},
                    {g: dict(bad) for g in gpus}, {g: dict(good) for g in gpus},
                    {g: dict(good) for g in gpus}, {}, {})
    text = "\n".join(bench.markdown_steps(ev, {g: seconds for g in gpus}))
    # leave one out, backward: 1.1, (0.9 + 0.9) / 2, (1.2 + 2.4) / 3: all within, geomean
    # (0.1 x 0.1 x 0.2)^(1/3)
    assert "| A | backward | 3 | 0% | 100% | 1.10 | 12.6% |" in text
    assert "| A | forward | 3 | 100% | 100% | 1.10 | 12.6% |" in text
    # in sample, the whole layer: (1.1 + 2.0) / 2, (0.9 + 0.9 + 0.5) / 3 = 0.77 (within),
    # (2.4 + 1.2 + 3.0) / 5 = 1.32
    assert "| **both** | whole layer | 6 | 33% | 100% | 1.10 | 12.6% |" in text


def test_the_zero_offload_benchmark_runs_both_steps_and_prints_the_ratio(capsys):
    bench = load("bench_zero_offload")
    wall, simulated = bench.cold_run("gpt2_small", 64, bench.ZERO_OFFLOAD)
    assert wall > 0 and simulated > 0
    assert bench.main(["--network", "gpt2_small", "--seq-len", "64", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "gpt2_small zero-offload" in out and "zero-offload / plain wall time:" in out


@pytest.mark.slow  # every codec on 1 MiB of every element type: ~9 s on a loaded 2-core machine
def test_the_state_codec_benchmark_prints_every_codec_on_every_element_type(capsys):
    from sst_cdma import codecs
    from sst_cdma.model.dtypes import DTYPES

    assert load("bench_state_codecs").main(["--mib", "1", "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and "MB/s" not in line]
    assert len(rows) == len(codecs.ALGORITHMS) * len(DTYPES)


def test_phold_without_simpy_says_which_extra_to_install(monkeypatch, capsys):
    """Issue #34: without the [test] extra the benchmark died on ``import simpy``."""
    import sys

    monkeypatch.setitem(sys.modules, "simpy", None)  # `import simpy` fails, as uninstalled
    bench = load("bench_phold")
    monkeypatch.setattr(sys, "argv", ["bench_phold.py", "--repeats", "1"])
    assert bench.main() == 2
    assert capsys.readouterr().err == ("benchmarks/bench_phold.py needs simpy, which is not "
                                       "installed: pip install 'sst-cdma[test]'\n")


def _two_architectures():
    """The made-up evaluation with A and B of two architectures, each predicted by a fit that
    left its architecture out (A well, B badly)."""
    from dataclasses import replace

    import numpy as np

    from sst_cdma.model.calibration import KINDS
    from sst_cdma.model.kernel_model import KernelParams

    ev = _fake_evaluation()
    good = {k: np.array([1.1, 0.9, 1.2]) for k in KINDS}
    bad = {k: np.array([2.0, 0.5, 1.5]) for k in KINDS}
    return replace(ev, loao={"Turing": KernelParams(), "Pascal": KernelParams()},
                   leave_one_architecture_out={"A": good, "B": bad},
                   architecture={"A": "Turing", "B": "Pascal"})


def test_the_kernel_model_benchmark_prints_the_tables_asked_for_in_that_order():
    bench = load("bench_kernel_model")
    text = bench.markdown(_two_architectures(), tables=["targets", "architectures", "summary"])
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert titles == ["### Targets (both GPUs pooled)",
                      "### Per architecture: geomean |r-1| / within +-25% (median), pooled "
                      "over the GPUs named", "### Summary: fitted model (roofline)"]
    # each architecture held out, with its targets (the T4's: Turing's) or "reported"
    assert ("| leave one architecture out: Turing (A; fit on Pascal) | 12.6% / 100% (1.10) | "
            "12.6% / 100% (1.10) | 12.6% / 100% (1.10) | 12.6% / 100% (1.10) | "
            "<= 25%, >= 60% |") in text
    assert "| leave one architecture out: Pascal (B; fit on Turing) | 63.0% / 0% (1.50) |" in text
    assert text.count("| reported |") == 1
    assert "| in sample, both | 12.6% / 100% (1.10) | 12.6% / 100% (1.10) | 63.0% / 0% (1.50)" \
        in text
    # the whole page: every table, the per-architecture one after the leave-out parameters
    everything = bench.markdown(_two_architectures())
    names = [line[4:] for line in everything.splitlines() if line.startswith("### ")]
    assert len(names) == 11 and names[3].startswith("Per architecture")


def test_the_kernel_model_benchmark_takes_tables_only_with_markdown(capsys):
    bench = load("bench_kernel_model")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--tables", "targets"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.endswith("error: --tables: only with --markdown\n")
    with pytest.raises(SystemExit):
        bench.main(["--markdown", "--tables", "nonsense"])
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err


def test_the_calibrate_benchmark_counts_the_cpu_of_the_whole_process_tree(capsys):
    bench = load("bench_calibrate_check")
    before = bench.children_cpu_s()
    cpu, status, report = bench.run_once(BENCHMARKS.parent, ("calibrate", "--help"))
    assert status == 0 and "--check" in report
    assert 0 < cpu <= bench.children_cpu_s() - before
    # the tree's own path is taken out of the report, so two trees' reports compare
    _, status, report = bench.run_once(BENCHMARKS.parent, ("calibrate", "--data", "missing"))
    assert status == 1 and str(BENCHMARKS.parent) not in report
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
    assert "--repeats: must be at least 1, got 0" in capsys.readouterr().err


def test_the_dgx1_nodes_benchmark_compares_consoles_and_each_gpus_figures():
    bench = load("bench_dgx1_nodes")
    ok, line = bench.compare_consoles("a\nhint: x\nb\n", "a\nb\n")
    assert ok and "adds 1 line(s)" in line
    ok, line = bench.compare_consoles("a\nc\n", "a\nb\n")
    assert not ok and "'b' is not in this one's" in line
    one = [{"gpu": "gpu0", "t": 1.0}, {"gpu": "gpu1", "t": 2.0, "new": 0}]
    assert bench.compare_entries(one, [{"gpu": "gpu0", "t": 1.0}, {"gpu": "gpu1", "t": 2.0}]) \
        == "per-GPU summaries: identical, 2 GPUs, 4 figures; keys only this checkout writes: new"
    assert "first at gpu1 t: 2.0 here, 3.0 there" in bench.compare_entries(
        one, [{"gpu": "gpu0", "t": 1.0}, {"gpu": "gpu1", "t": 3.0}])


def test_the_parallel_scaling_benchmark_takes_sizes_that_fill_replicas():
    bench = load("bench_parallel_scaling")
    assert bench.sizes_of("64,128") == [64, 128]
    with pytest.raises(ValueError, match="100 is not"):
        bench.sizes_of("64,100")
    with pytest.raises(ValueError, match="16 is not"):
        bench.sizes_of("16,32")  # one replica
    with pytest.raises(ValueError, match="two or more"):
        bench.sizes_of("64")


@pytest.mark.slow
def test_the_parallel_scaling_benchmark_simulates_every_rank_and_fits(capsys):
    assert load("bench_parallel_scaling").main(["--sizes", "32,48"]) == 0
    out = capsys.readouterr().out
    assert "\n    48         48 " in out and "growth exponent of CPU time over 32-48 ranks" in out


def test_the_sweep_benchmark_compiles_both_trees_and_takes_back_only_its_own_bytecode(tmp_path):
    bench = load("bench_sweep_against_commit")
    package = tmp_path / "workloads"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "sub/b.py"):
        (package / name).write_text("X = 1\n")
    cache = Path(importlib.util.cache_from_source(str(package / "a.py")))
    cache.parent.mkdir()
    cache.write_bytes(b"there before")                # bytecode the tree held already
    with bench.compiled([tmp_path]):
        written = sorted(p.name for p in package.rglob("*.pyc"))
        assert len(written) == 3 and cache.read_bytes() != b"there before"
    assert [p.name for p in package.rglob("*.pyc")] == [cache.name]
    assert not (package / "sub" / "__pycache__").exists()


def test_the_sweep_benchmark_names_the_columns_that_differ():
    bench = load("bench_sweep_against_commit")
    this = {"p0": {"events": "1.0", "step_s": "2.0", "gpus.0.peak": "3.0", "gpus.1.peak": "3.0"},
            "p1": {"events": "5.0"}}
    other = {"p0": {"events": "9.0", "step_s": "2.0", "gpus.0.peak": "3.0", "gpus.1.peak": "4.0"},
             "p1": {"events": "5.0", "only_there": "1"}}
    assert bench.differing_columns(this, other) == "events, gpus.*.peak, only_there"
    assert bench.differing_columns(this, other, most=1) == "events and 2 more"
