"""sst-cdma table: results pivoted into markdown."""
from __future__ import annotations

import pytest

from sst_cdma.cli.sst_cdma_main import main
from sst_cdma.sweep.pivot import PivotError, pivot_markdown

CSV = """point,status,opt.network,opt.algorithm,iteration_time_s,baselines.oracle.iteration_time_s
0,ok,alexnet,none,2.0,1.0
1,ok,alexnet,zvc,1.5,1.0
2,ok,vgg16,none,9.0,6.0
3,failed,vgg16,zvc,,6.0
"""


@pytest.fixture
def results(tmp_path):
    (tmp_path / "results.csv").write_text(CSV)
    return tmp_path


def test_pivot_divides_and_keeps_sweep_order(results):
    text = pivot_markdown(results, "network", "iteration_time_s", "algorithm",
                          divide_by="baselines.oracle.iteration_time_s", digits=2)
    assert text.splitlines() == ["| network | none | zvc |", "|---|---|---|",
                                 "| alexnet | 2.00 | 1.50 |", "| vgg16 | 1.50 |  |"]


def test_where_filters_and_invert(results):
    text = pivot_markdown(results, "algorithm", "iteration_time_s", where=["network=alexnet"],
                          invert=True, digits=3)
    assert "| none | 0.500 |" in text and "| zvc | 0.667 |" in text


def test_errors_name_the_column(results, capsys):
    with pytest.raises(PivotError, match="no column 'speed'"):
        pivot_markdown(results, "network", "speed")
    assert main(["table", str(results), "--rows", "network", "--value", "x"]) == 1
    assert capsys.readouterr().err.startswith("sst-cdma: ")
