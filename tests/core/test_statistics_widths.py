"""Every statistic field fits the type its column declares: the cDMA elements' time and byte
statistics are f64 (their SumSQ passes 2^64), and an integer field that overflows wraps in the
outputs and the in-memory table alike, with a warning."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from sst_cdma.engine.kernel import Simulator
from sst_cdma.engine.runner import run
from sst_cdma.engine.statistics.collector import StatisticsCollector
from sst_cdma.engine.statistics.outputs import fit_value, format_value
from sst_cdma.engine.statistics.types import AccumulatorStatistic

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "pascal_cdma.py"
U64_MAX = (1 << 64) - 1
LIMITS = {"u32": (0, (1 << 32) - 1), "u64": (0, U64_MAX),
          "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1)}


def test_fit_value_wraps_integers_at_their_width_and_keeps_floats():
    assert fit_value(1 << 64, "u64") == 0
    assert fit_value(U64_MAX + 5, "u64") == 4
    assert fit_value(1 << 32, "u32") == 0
    assert fit_value((1 << 63), "i64") == -(1 << 63)
    assert fit_value(10 ** 24, "f64") == 1e24
    assert format_value(10 ** 24, "f64") == "%f" % 1e24


def test_an_overflowing_u64_sumsq_wraps_in_table_and_csv_alike_and_warns(tmp_path, capsys):
    sim = Simulator()
    engine = StatisticsCollector(sim, 1, "sst.statOutputCSV", {"filepath": "s.csv"}, tmp_path)
    stat = AccumulatorStatistic("gpu0", "kernel_time_ps", dtype="u64")
    engine.stats.append(stat)
    engine.start()
    for _ in range(3):
        stat.add_data(5_000_000_000)  # 5 ms in ps: 3 x 2.5e19 passes 2^64
    engine.finish()
    wrapped = (3 * 5_000_000_000 ** 2) % (1 << 64)
    assert engine.table().iloc[0]["SumSQ.u64"] == wrapped
    csv = pd.read_csv(tmp_path / "s.csv", sep=", ", engine="python", dtype=str)
    assert int(csv.iloc[0]["SumSQ.u64"]) == wrapped
    err = capsys.readouterr().err
    assert err.count("warning: statistic gpu0.kernel_time_ps: SumSQ does not fit its type u64") == 1


@pytest.fixture(scope="module")
def vgg16_run(tmp_path_factory):
    """A long VGG-16 iteration (batch 128, every layer's input offloaded), recording every value
    each statistic receives."""
    recorded: dict[tuple[str, str], tuple[str, list[int]]] = {}
    add_data = AccumulatorStatistic.add_data

    def spy(self, value, count=1):
        recorded.setdefault((self.component, self.name), (self.dtype, []))[1].extend(
            [value] * count)
        add_data(self, value, count)

    out = tmp_path_factory.mktemp("vgg16") / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(AccumulatorStatistic, "add_data", spy)
        result = run(TOPOLOGY,
                     "--network vgg16 --batch 128 --policy all --no-baselines",
                     output_directory=out, console=io.StringIO())
    return result, out, recorded


def test_a_long_vgg16_run_has_no_integer_field_outside_its_type(vgg16_run):
    _, out, _ = vgg16_run
    csv = pd.read_csv(out / "StatisticOutput.csv", sep=", ", engine="python", dtype=str)
    assert len(csv) > 10
    for column in csv.columns:
        ftype = column.rpartition(".")[2]
        if ftype in LIMITS:
            low, high = LIMITS[ftype]
            assert all(low <= int(v) <= high for v in csv[column]), column
    # what a SumSQ of times would be in integers: far past 2^64
    kernel = csv[csv["StatisticName"] == "kernel_time_ps"].iloc[0]
    assert float(kernel["SumSQ.f64"]) > U64_MAX


def test_sumsq_is_the_sum_of_squares_of_the_recorded_values(vgg16_run):
    result, out, recorded = vgg16_run
    csv = pd.read_csv(out / "StatisticOutput.csv", sep=", ", engine="python", dtype=str)
    table = result.statistics
    checked = set()
    for _, row in csv.iterrows():
        key = (row["ComponentName"], row["StatisticName"])
        if key not in recorded:
            continue
        dtype, values = recorded[key]
        exact_sq = sum(int(v) ** 2 for v in values)
        exact_sum = sum(int(v) for v in values)
        sumsq = f"SumSQ.{dtype}"
        if dtype == "f64":
            assert float(row[sumsq]) == pytest.approx(exact_sq, rel=1e-12), key
            assert float(row[f"Sum.{dtype}"]) == exact_sum, key  # below 2^53: exact
        else:
            assert int(row[sumsq]) == exact_sq, key
        assert int(row["Count.u64"]) == len(values)
        mine = table[(table["ComponentName"] == key[0]) & (table["StatisticName"] == key[1])]
        assert mine.iloc[-1][sumsq] == pytest.approx(exact_sq, rel=1e-12)
        checked.add(key)
    assert checked == set(recorded)
    names = {name for _, name in recorded}
    assert {"kernel_time_ps", "transfer_time_ps", "offload_raw_bytes", "allocations",
            "iteration_time_ps", "peak_bytes"} <= names
