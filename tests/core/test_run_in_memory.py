"""``sst_cdma.run()`` without an output directory still returns the statistics (every one the
components declare, as the CSV would hold them) and the summary."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd

import sst_cdma
from sst_cdma.tools.cli.sst_main import main

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
OPTIONS = ["--network", "digits_cnn", "--batch", "64", "--policy", "all"]
KEY = ["ComponentName", "StatisticName", "StatisticSubId"]


def test_a_run_without_output_directory_returns_what_the_files_would_hold(tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written here either
    memory = sst_cdma.run(PASCAL, OPTIONS, console=io.StringIO())
    assert os.listdir(tmp_path) == []
    out = tmp_path / "out"
    sst_cdma.run(PASCAL, OPTIONS, output_directory=out, console=io.StringIO())

    # every declared statistic is in memory; the file holds those of build()'s load level 2,
    # so the ones above it (the codec's, level 3) are the difference
    elements = {el.name: el for el in memory.simulation.elements()}
    level = [elements[c].find_statistic(n).level for c, n in
             zip(memory.statistics.ComponentName, memory.statistics.StatisticName)]
    above = memory.statistics[[lv > 2 for lv in level]]
    assert set(above.ComponentName) == {"gpu0.dma:codec[0]"}  # vDNN's engine has no codec
    stats = memory.statistics[[lv <= 2 for lv in level]].reset_index(drop=True)
    csv = pd.read_csv(out / "StatisticOutput.csv", sep=", ", engine="python",
                      dtype={"StatisticSubId": str})
    assert len(stats) == len(csv) > 10
    assert list(stats.columns) == list(csv.columns)
    mine = stats.drop(columns="SimTime").sort_values(KEY).reset_index(drop=True)
    theirs = csv.drop(columns="SimTime").sort_values(KEY).reset_index(drop=True)
    theirs["StatisticSubId"] = theirs["StatisticSubId"].fillna("")
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False, check_exact=True)
    assert {"kernel_time_ps", "transfer_time_ps", "offload_raw_bytes"} <= set(stats.StatisticName)

    summary = json.loads((out / "summary.json").read_text())
    assert memory.reports["summary"] == summary
    assert memory.reports["summary"]["iteration_time_s"] > 0


def test_record_statistics_false_leaves_them_out():
    result = sst_cdma.run(PASCAL, OPTIONS, console=io.StringIO(), record_statistics=False)
    assert result.statistics.empty
    assert result.reports["summary"]["iteration_time_s"] > 0


def test_a_script_that_enables_statistics_keeps_its_choice(run_script):
    body = """
    import sst
    sst.setStatisticLoadLevel(4)
    p = sst.Component("p", "testElement.StatProbe")
    p.addParams({"count": 10, "seed": 3})
    p.enableStatistics(["values_u32"])
    """
    result, console = run_script(body)
    assert list(result.statistics["StatisticName"]) == ["values_u32"]
    assert "values_u32" in console  # and its output, the console, printed it


def test_sst_without_output_directory_records_none(monkeypatch, capsys):
    from sst_cdma.engine.statistics.collector import StatisticsCollector

    seen = []
    init = StatisticsCollector.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append(self.record_all)

    monkeypatch.setattr(StatisticsCollector, "__init__", spy)
    assert main([str(PASCAL), "--", *OPTIONS]) == 0
    assert seen == [False]
