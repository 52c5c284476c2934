"""``sst_cdma.read_statistics``: SST-core 16's own CSV, TXT and JSON files read back with typed
columns (u64 fields stay unsigned integers, names without SST's leading spaces), the run's
in-memory table of the same types, and a bad file refused in one line naming it."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import sst_cdma
from sst_cdma.engine.statistics.reader import StatisticsFileError, split_full_name

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "data" / "sst-core-16"
INTEGERS = {"u32": np.uint32, "u64": np.uint64, "i32": np.int32, "i64": np.int64}


def test_sst_core_16s_csv_reads_with_each_column_of_its_declared_type():
    table = sst_cdma.read_statistics(REFERENCE / "StatisticOutput.csv")
    assert list(table.columns[:6]) == ["ComponentName", "StatisticName", "StatisticSubId",
                                       "StatisticType", "SimTime", "Rank"]
    for column in table.columns[6:]:
        suffix = column.rpartition(".")[2]
        expected = INTEGERS.get(suffix, np.float32 if suffix == "f32" else np.float64)
        assert table[column].dtype == expected, column
    assert table["SimTime"].dtype == np.int64
    hist = table[table["StatisticName"] == "stat2_U64"].iloc[0]
    assert hist["SumSQ.u64"] == 15106649 and hist["Bin3:3000-3999.u64"] == 1
    assert list(table["ComponentName"]) == ["gpu0", "gpu0", "gpu1", "gpu1"]  # no leading space
    assert list(table["StatisticSubId"]) == ["1", "2", "1", "2"]
    assert table[table["StatisticName"] == "stat1_F32"].iloc[0]["Max.f32"] == \
        np.float32(918.610901)


def test_the_txt_output_reads_to_the_same_table_as_the_csv():
    csv = sst_cdma.read_statistics(REFERENCE / "StatisticOutput.csv")
    txt = sst_cdma.read_statistics(REFERENCE / "StatisticOutput.txt")
    assert list(txt.columns) == list(csv.columns)
    assert (txt.dtypes == csv.dtypes).all()
    assert txt.astype(str).equals(csv.astype(str))


def test_the_json_output_gives_what_it_holds_the_values_by_position():
    table = sst_cdma.read_statistics(REFERENCE / "StatisticOutput.json")
    assert list(table.columns) == ["ComponentName", "StatisticName", "SimTime", "Values"]
    first = table.iloc[0]
    assert first["ComponentName"] == "gpu0" and first["SimTime"] == 20000
    assert first["Values"] == (4018, 1056062, 19, 53, 419)
    assert all(isinstance(v, int) for v in first["Values"])


def test_a_u64_above_2_to_the_63_stays_an_exact_integer(tmp_path):
    big = (1 << 64) - 3
    path = tmp_path / "s.csv"
    path.write_text("ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime, "
                    f"Rank, SumSQ.u64\nc, s, , Accumulator, 5, 0, {big}\n")
    table = sst_cdma.read_statistics(path)
    assert table["SumSQ.u64"].dtype == np.uint64 and int(table["SumSQ.u64"].iloc[0]) == big
    assert table["StatisticSubId"].iloc[0] == ""


def test_a_custom_separator_is_read_off_the_header(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("ComponentName;StatisticName;StatisticSubId;StatisticType;SimTime;Rank;"
                    "Count.u64\nc;s;;Accumulator;5;0;7\n")
    assert int(sst_cdma.read_statistics(path)["Count.u64"].iloc[0]) == 7


def test_the_runs_table_keeps_u64_integer_and_matches_its_csv_read_back(tmp_path):
    out = tmp_path / "out"
    result = sst_cdma.run(REPO / "topologies" / "pascal_cdma.py",
                          "--network alexnet --batch 16 --no-baselines",
                          output_directory=out, console=io.StringIO())
    mine = result.statistics
    u64 = [c for c in mine.columns if c.endswith(".u64")]
    assert u64 and all(mine[c].dtype == np.uint64 for c in u64)
    back = sst_cdma.read_statistics(out / "StatisticOutput.csv")
    assert list(back.columns) == list(mine.columns) and (back.dtypes == mine.dtypes).all()
    exact = [c for c in mine.columns if mine[c].dtype != np.float64]
    assert back[exact].astype(str).equals(mine[exact].astype(str))
    floats = [c for c in mine.columns if mine[c].dtype == np.float64]
    assert np.allclose(back[floats].to_numpy(), mine[floats].to_numpy(), rtol=1e-6, atol=1e-6)


def test_a_txt_name_splits_into_component_statistic_and_numeric_subid():
    assert split_full_name("gpu0.stat1_U32.1") == ("gpu0", "stat1_U32", "1")
    assert split_full_name("node0.gpu.kernel_time_ps") == ("node0.gpu", "kernel_time_ps", "")
    assert split_full_name("gpu0.kernel_time_ps") == ("gpu0", "kernel_time_ps", "")


@pytest.mark.parametrize("name, text, words", [
    ("s.csv", "c, s, , Accumulator, 5, 0, 7\n", "no header line (a CSV written with "
                                                "outputtopheader=0"),
    ("s.csv", "ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime, Rank, "
              "Count.u64\nc, s, , Accumulator, 5, 0\n", "s.csv:2: 6 cells where the header "
                                                        "has 7 columns"),
    ("s.csv", "ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime, Rank, "
              "Count.u64\nc, s, , Accumulator, 5, 0, lots\n", "s.csv:2: Count.u64: 'lots' is "
                                                              "not a number"),
    ("s.csv", "ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime, Rank, "
              "Count.u64\nc, s, , Accumulator, 5, 0, -1\n", "Count.u64: -1 does not fit"),
    ("s.txt", "gpu0.stat : Accumulator : Sum.u64 7;\n", "s.txt:1: 'Sum.u64 7' is not"),
    ("s.txt", "hello\n", "s.txt:1: not a statistic line"),
    ("s.json", '{"components": [{"name": "c"}]}', "not SST's statistics JSON"),
    ("s.json", "{", "not valid JSON"),
    ("s.parquet", "", "not a statistics file SST writes"),
])
def test_a_bad_statistics_file_is_one_line_naming_it(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(StatisticsFileError) as info:
        sst_cdma.read_statistics(path)
    message = str(info.value)
    assert words in message and str(path.parent) in message and "\n" not in message


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(StatisticsFileError, match="nope.csv: no such file"):
        sst_cdma.read_statistics(tmp_path / "nope.csv")
