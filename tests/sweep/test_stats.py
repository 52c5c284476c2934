"""Statistic selectors: refused before anything runs when no element declares the statistic or
no statistic type has the field; picking a field only from statistics whose type has it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep.stats import SelectorError, parse_selector, select

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"


@pytest.mark.parametrize("selector, words", [
    ("nosuchstat.Sum", "no element declares a statistic 'nosuchstat'"),
    ("d2h_bytes.Average", "no statistic has a field 'Average'"),
    ('"node_*:events_recieved.Max"', "did you mean events_received?"),
])
def test_a_selector_that_can_match_nothing_stops_the_sweep_before_it_runs(tmp_path, capsys,
                                                                          selector, words):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"topology: {PHOLD}\noptions: {{size: 3, events: 2, time-limit: 100ns}}\n"
                    f"statistics:\n  - events_received.Sum\n  - {selector}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--output", str(out), "--workers", "1",
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sst-cdma: "), err
    assert "spec.yaml:5: statistics: " in err and selector.strip('"') in err and words in err
    assert not out.exists()


def test_parse_selector_checks_unless_asked_not_to():
    assert parse_selector("events_received.Bin3").field == "Bin3"     # a histogram's bin
    assert parse_selector("stat.node_0_*:arrival_ps.NumItemsBinned").component == "node_0_*"
    with pytest.raises(SelectorError, match="no element declares"):
        parse_selector("nosuch.Sum")
    assert parse_selector("nosuch.Average", check=False).statistic == "nosuch"


def _table() -> pd.DataFrame:
    head = ["ComponentName", "StatisticName", "StatisticSubId", "StatisticType", "SimTime",
            "Rank", "Sum.u64", "Count.u64", "BinWidth.u32", "Bin0:0-9.u64", "Bin1:10-19.u64"]
    rows = [["a", "acc", "", "Accumulator", 10, 0, 5, 2, 0, 0, 0],      # 0 in histogram columns
            ["b", "acc", "", "Accumulator", 10, 0, 7, 1, 0, 0, 0],
            ["a", "hist", "", "Histogram", 10, 0, 12, 0, 10, 3, 4],
            ["b", "hist", "", "Histogram", 10, 0, 30, 0, 10, 1, 2]]
    return pd.DataFrame(rows, columns=head)


def test_select_takes_a_field_only_from_statistics_whose_type_has_it():
    table = _table()
    assert select(table, parse_selector("acc.Sum", check=False)) == 12
    assert select(table, parse_selector("hist.Bin1", check=False)) == 6
    assert select(table, parse_selector("a:hist.Bin0", check=False)) == 3
    # the table holds 0 where an Accumulator has no such field: that is not a figure
    assert select(table, parse_selector("acc.BinWidth", check=False)) is None
    assert select(table, parse_selector("acc.Bin0", check=False)) is None
    assert select(table, parse_selector("hist.Count", check=False)) is None
    assert select(table, parse_selector("c*:acc.Sum", check=False)) is None


def test_a_selector_that_matched_nothing_in_any_point_is_an_error_after_the_table(tmp_path,
                                                                                capsys):
    """A declared statistic on a glob no component matches: known only once the points ran.
    The table is written (nothing is lost), the command exits 1 naming the spec line."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"topology: {PHOLD}\noptions: {{size: 3, events: 2, time-limit: 100ns}}\n"
                    "statistics:\n  - events_received.Sum\n  - \"nonode*:events_received.Sum\"\n")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--output", str(out), "--workers", "1",
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("sst-cdma: ")]
    assert len(errors) == 1 and errors[0] == err.splitlines()[-1], err
    assert "spec.yaml:5: statistics: selector " in errors[0], err
    assert "'nonode*:events_received.Sum' matched nothing in any of the 1 successful points" \
        in err
    table = pd.read_csv(out / "results.csv")
    assert table["stat.events_received.Sum"].iloc[0] > 0
