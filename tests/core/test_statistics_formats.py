"""Statistic outputs reproduce SST-core 16.0.0's files byte for byte (shared/reference)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from sst_cdma.engine.statistics import AccumulatorStatistic, HistogramStatistic, make_output

# Real SST-core 16.0.0 output (copied from shared/reference/sst-core-16).
REF = Path(__file__).resolve().parents[1] / "data" / "sst-core-16"


def reference_stats():
    """Statistics holding the values of the reference run (statistics_example.py)."""
    s1 = AccumulatorStatistic("gpu0", "stat1_U32", "1", "u32")
    s1.sum, s1.sum_sq, s1.count, s1.min, s1.max = 4018, 1056062, 19, 53, 419
    s2 = HistogramStatistic("gpu0", "stat2_U64", "2", "u64",
                            {"minvalue": "0", "binwidth": "1000", "numbins": "4",
                             "IncludeOutOfBounds": "1"})
    s2.sum, s2.sum_sq, s2.collected, s2.binned, s2.oob_min, s2.oob_max = \
        4815, 15106649, 19, 3, 0, 16
    s2.bins = [2, 0, 0, 1]
    s3 = AccumulatorStatistic("gpu1", "stat1_F32", "1", "f32")
    s3.sum, s3.sum_sq, s3.count, s3.min, s3.max = 8998.984375, 5561182.0, 19, 80.741272, \
        918.610901
    s4 = AccumulatorStatistic("gpu1", "stat2_F64", "2", "f64")
    s4.sum, s4.sum_sq, s4.count, s4.min, s4.max = 9667.700077, 6798046.592760, 19, 55.180121, \
        990.820932
    return [s1, s2, s3, s4]


@pytest.mark.parametrize("type_name,ref_name", [
    ("sst.statOutputCSV", "StatisticOutput.csv"),
    ("sst.statOutputJSON", "StatisticOutput.json"),
    ("sst.statOutputTXT", "StatisticOutput.txt"),
])
def test_file_outputs_match_reference(tmp_path, type_name, ref_name):
    stats = reference_stats()
    out = make_output(type_name, {"filepath": f"./{ref_name}"}, tmp_path)
    out.start(stats)
    out.output(stats, 20000)
    out.stop()
    assert (tmp_path / ref_name).read_bytes() == (REF / ref_name).read_bytes()


def test_console_output_matches_reference():
    stats = reference_stats()
    buf = io.StringIO()
    out = make_output("sst.statOutputConsole", {}, Path("."), buf)
    out.start(stats)
    out.output(stats, 20000)
    out.stop()
    expected = (REF / "console_output.txt").read_text().splitlines(keepends=True)[:-1]
    assert buf.getvalue() == "".join(expected)


def test_histogram_bins_and_out_of_bounds():
    h = HistogramStatistic("c", "h", "", "u64", {"minvalue": "10", "binwidth": "5",
                                                  "numbins": "3"})
    for v in (9, 10, 14, 15, 24, 25, 100):
        h.add_data(v)
    fields = {name: value for name, _, value in h.fields()}
    assert fields["BinsMaxValue"] == 24
    assert (fields["Bin0:10-14"], fields["Bin1:15-19"], fields["Bin2:20-24"]) == (2, 1, 1)
    assert fields["NumOutOfBounds-MinValue"] == 1 and fields["NumOutOfBounds-MaxValue"] == 2
    assert fields["NumItemsCollected"] == 7 and fields["NumItemsBinned"] == 4
    assert fields["Sum"] == 10 + 14 + 15 + 24 and fields["NumActiveBins"] == 3


def test_accumulator_counts_repeated_values():
    a = AccumulatorStatistic("c", "a", "", "u64")
    a.add_data(3, count=4)
    a.add_data(1)
    assert [v for _, _, v in a.fields()] == [13, 37, 5, 1, 3]


def test_integer_fields_wrap_at_their_width_like_sst():
    from sst_cdma.engine.statistics.outputs import format_value

    assert format_value(2**64 + 5, "u64") == "5"
    assert format_value(2**32 + 7, "u32") == "7"
    assert format_value(2**31, "i32") == str(-(2**31))
    assert format_value(-3, "i64") == "-3"
    assert format_value(123, "u64") == "123"
