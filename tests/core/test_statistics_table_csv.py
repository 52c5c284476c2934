"""``table_csv``: a run's statistics table as CSV text without pandas, byte for byte what the
typed DataFrame's ``to_csv(index=False, lineterminator="\\n")`` writes (a sweep point's
``run_statistics.csv``), on the values where number formatting and quoting differ most."""
from __future__ import annotations

import random
import warnings

import pytest

from sst_cdma.engine.statistics.reader import typed_table
from sst_cdma.engine.statistics.table_csv import table_csv

COLUMNS = ["ComponentName", "StatisticName", "StatisticSubId", "StatisticType", "SimTime",
           "Rank", "Sum.f64", "Min.f32", "Count.u64", "Max.i32", "Low.i64", "High.u32"]
#: floats whose text differs between formatters: signed zero, where repr turns scientific,
#: the extremes, non-finite values, and ones float32 rounds
FLOATS = [0.0, -0.0, 1e16, 1234567890123456.0, 0.1, 1 / 3, 1e-5, 2.813915786507057e18,
          float("inf"), float("-inf"), float("nan"), 5e-324, 1.7976931348623157e308, 3,
          123456789.125, 1e22, 100.0, 918.610901]
#: names that need quoting (a comma, a quote, a line break) or none
NAMES = ["gpu0", "a,b", 'q"x', "line\nbreak", "", " spaced "]


def _rows(count: int, seed: int) -> list[dict[str, object]]:
    """``count`` statistic rows of random values; some lack a field (0 in the table) or
    have no sub-id (None)."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        row: dict[str, object] = {
            "ComponentName": rng.choice(NAMES), "StatisticName": f"stat{i}",
            "StatisticType": "Accumulator", "SimTime": rng.randrange(2 ** 62), "Rank": 0,
            "Sum.f64": rng.choice(FLOATS) * rng.choice((1, 10 ** rng.randrange(-30, 30))),
            "Min.f32": rng.choice(FLOATS + [rng.random() for _ in range(5)]),
            "Count.u64": rng.randrange(2 ** 64), "Max.i32": rng.randrange(-2 ** 31, 2 ** 31)}
        if i % 7:
            row["Low.i64"] = -rng.randrange(2 ** 63)
        if i % 5:
            row["High.u32"] = rng.randrange(2 ** 32)
        if i % 11 == 0:
            row["StatisticSubId"] = None
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_text_is_what_pandas_writes_for_the_typed_table(seed):
    rows = _rows(300, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32 overflow of the largest floats: inf either way
        expected = typed_table(rows, COLUMNS).to_csv(index=False, lineterminator="\n")
        got = table_csv(rows, COLUMNS)
    assert got == expected
    assert '"a,b"' in got and '"q""x"' in got and ",-0.0," in got  # quoting and -0.0 kept


def test_a_row_of_ints_in_a_float_column_is_written_as_floats_and_a_missing_field_as_zero():
    rows = [{"ComponentName": "gpu0", "StatisticName": "bytes", "SimTime": 5, "Sum.f64": 3}]
    text = table_csv(rows, ["ComponentName", "StatisticName", "SimTime", "Sum.f64", "Count.u64"])
    assert text == "ComponentName,StatisticName,SimTime,Sum.f64,Count.u64\ngpu0,bytes,5,3.0,0\n"


def test_a_runs_statistics_csv_is_its_tables_to_csv(tmp_path):
    import io
    from pathlib import Path

    import sst_cdma

    repo = Path(__file__).resolve().parents[2]
    result = sst_cdma.run(repo / "topologies" / "pascal_cdma.py",
                          "--network alexnet --batch 16 --no-baselines",
                          output_directory=tmp_path / "out", console=io.StringIO())
    text = result.statistics_csv()
    assert text.count("\n") > 10
    assert text == result.statistics.to_csv(index=False, lineterminator="\n")
