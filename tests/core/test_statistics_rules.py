"""Statistics enable rules, periodic dumps (rate) and resetOnOutput."""
from __future__ import annotations

import pandas as pd
import pytest

from sst_cdma.engine.runner import RunError

PROBE = """
import sst
sst.setStatisticLoadLevel(4)
sst.setStatisticOutput("sst.statOutputCSV", {{"filepath": "s.csv"}})
p = sst.Component("p", "testElement.StatProbe")
p.addParams({{"count": 10, "seed": 3}})
p.enableStatistics(["values_u32"], {params})
"""


def test_rate_dumps_periodically(run_script, tmp_path):
    result, _ = run_script(PROBE.format(params='{"rate": "4ns"}'), output_directory=tmp_path)
    rows = result.statistics
    # one value per ns for 10 ns: dumps at 4 and 8 ns while running, then the final one
    assert list(rows["SimTime"]) == [4000, 8000, result.sim_time_ps]
    assert list(rows["Count.u64"]) == [4, 8, 10]
    csv = pd.read_csv(tmp_path / "s.csv", sep=", ", engine="python")
    assert list(csv["SimTime"]) == [4000, 8000, result.sim_time_ps]


def test_reset_on_output_restarts_counts(run_script, tmp_path):
    result, _ = run_script(PROBE.format(params='{"rate": "4ns", "resetOnOutput": "1"}'),
                           output_directory=tmp_path)
    assert list(result.statistics["Count.u64"]) == [4, 4, 2]


def test_histogram_type_from_enable_params(run_script, tmp_path):
    params = '{"type": "sst.HistogramStatistic", "minvalue": "0", "binwidth": "500", "numbins": "2"}'
    result, _ = run_script(PROBE.format(params=params), output_directory=tmp_path)
    row = result.statistics.iloc[0]
    assert row["StatisticType"] == "Histogram"
    assert row["Bin0:0-499.u64"] + row["Bin1:500-999.u64"] == row["NumItemsBinned.u64"] == 10


def test_statistic_level_above_load_level_is_not_loaded(run_script, tmp_path):
    body = PROBE.format(params="{}").replace("setStatisticLoadLevel(4)",
                                             "setStatisticLoadLevel(2)")
    body += 'p.enableStatistics(["values_f64", "values_u64"])\n'
    result, _ = run_script(body, output_directory=tmp_path)
    assert sorted(result.statistics["StatisticName"]) == ["values_u32", "values_u64"]


def test_bad_statistic_parameters_are_errors(run_script, tmp_path):
    with pytest.raises(RunError, match="unknown statistic parameter 'rat'"):
        run_script(PROBE.format(params='{"rat": "4ns"}'), output_directory=tmp_path)
    with pytest.raises(RunError, match="rate '4 parsecs'"):
        run_script(PROBE.format(params='{"rate": "4 parsecs"}'), output_directory=tmp_path)
    with pytest.raises(RunError, match="unknown statistic type 'sst.MedianStatistic'"):
        run_script(PROBE.format(params='{"type": "sst.MedianStatistic"}'),
                   output_directory=tmp_path)
