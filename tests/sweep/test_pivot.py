"""sst-cdma table: results pivoted into markdown."""
from __future__ import annotations

import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep.pivot import PivotError, pivot_markdown

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


def test_several_points_in_one_cell_are_refused_naming_what_tells_them_apart(results):
    """Rows by network alone: alexnet has two points (none and zvc), and a table of one
    of them would be a silent pick."""
    with pytest.raises(PivotError, match=r"2 points fall in the cell opt.network = 'alexnet'; "
                                         r"they differ in opt.algorithm: pin it with --where"):
        pivot_markdown(results, "network", "iteration_time_s")
    pinned = pivot_markdown(results, "network", "iteration_time_s", where=["algorithm=zvc"])
    assert "| alexnet | 1.500 |" in pinned
    with pytest.raises(PivotError, match="no point has opt.algorithm = 'none' among the points "
                                         "the --where conditions before it keep"):
        pivot_markdown(results, "network", "iteration_time_s",
                       where=["algorithm=zvc", "algorithm=none"])


def test_errors_name_the_column(results, capsys):
    with pytest.raises(PivotError, match="no column 'speed'"):
        pivot_markdown(results, "network", "speed")
    assert main(["table", str(results), "--rows", "network", "--value", "x"]) == 1
    assert capsys.readouterr().err.startswith("sst-cdma: ")


def test_a_mistyped_column_gets_a_did_you_mean(results):
    with pytest.raises(PivotError, match=r"no column 'iteration_time' \(did you mean "
                                         r"'iteration_time_s'\?\)"):
        pivot_markdown(results, "network", "iteration_time", where=["algorithm=zvc"])
    with pytest.raises(PivotError, match=r"no column 'netwrok' \(did you mean 'network'\?\)"):
        pivot_markdown(results, "netwrok", "iteration_time_s")


def test_the_header_names_the_figure_the_cells_hold(results):
    shares = pivot_markdown(results, "algorithm", "iteration_time_s", where=["network=alexnet"],
                            divide_by="baselines.oracle.iteration_time_s")
    assert shares.splitlines()[0] == \
        "| algorithm | iteration_time_s / baselines.oracle.iteration_time_s |"
    inverted = pivot_markdown(results, "algorithm", "iteration_time_s", invert=True,
                              scale=1e3, where=["network=alexnet"])
    assert inverted.splitlines()[0] == "| algorithm | 1 / (iteration_time_s x 1000) |"
    plain = pivot_markdown(results, "algorithm", "iteration_time_s", where=["network=alexnet"])
    assert plain.splitlines()[0] == "| algorithm | iteration_time_s |"


def _refused(capsys, argv: list[str]) -> str:
    """Run ``sst-cdma`` with argv; it must exit 1 with one line on stderr and nothing on
    stdout. That line."""
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("sst-cdma: ")
    return err


@pytest.mark.parametrize("scale", ["nan", "inf", "-inf"])
def test_a_scale_that_is_not_finite_is_refused(results, capsys, scale):
    err = _refused(capsys, ["table", str(results), "--rows", "network", "--value",
                            "iteration_time_s", f"--scale={scale}"])
    assert f"--scale {scale}: must be a finite number" in err
    with pytest.raises(PivotError, match="--scale"):
        pivot_markdown(results, "network", "iteration_time_s", scale=float(scale))


def test_negative_digits_are_refused(results, capsys):
    err = _refused(capsys, ["table", str(results), "--rows", "network", "--value",
                            "iteration_time_s", "--digits", "-5"])
    assert "--digits -5: must be a whole number from 0 to" in err
    assert "| 2.0 |" in pivot_markdown(results, "algorithm", "iteration_time_s", digits=1,
                                       where=["network=alexnet"])


@pytest.mark.parametrize("option, column", [("--divide-by", "algorithm"),
                                            ("--divide-by", "status"),
                                            ("--value", "opt.network")])
def test_a_text_column_as_figure_or_divisor_is_refused_naming_it(results, capsys, option,
                                                                 column):
    argv = ["table", str(results), "--rows", "network", "--value", "iteration_time_s",
            option, column]
    err = _refused(capsys, argv)
    assert f"{option} {column}: column " in err and "holds text, not numbers" in err
    assert "internal error" not in err


@pytest.mark.parametrize("cut", [20, 60, len(CSV.splitlines()[0]) + 1, len(CSV) - 3])
def test_a_truncated_results_csv_is_refused_naming_the_file(tmp_path, capsys, cut):
    (tmp_path / "results.csv").write_text(CSV[:cut])
    err = _refused(capsys, ["table", str(tmp_path), "--rows", "network", "--value",
                            "iteration_time_s"])
    assert "results.csv: " in err and "truncated" in err
    with pytest.raises(PivotError, match="truncated"):
        pivot_markdown(tmp_path, "network", "iteration_time_s")


def test_an_empty_or_missing_results_csv_is_refused(tmp_path, capsys):
    assert "no such results table" in _refused(capsys, ["table", str(tmp_path), "--rows", "n",
                                                        "--value", "v"])
    (tmp_path / "results.csv").write_text("")
    assert "results.csv: the results table is empty" in _refused(
        capsys, ["table", str(tmp_path), "--rows", "n", "--value", "v"])


def test_topology_scripts_show_by_name_as_rows_or_columns(tmp_path):
    (tmp_path / "results.csv").write_text(
        "point,status,topology,opt.policy,iteration_time_s\n"
        "0,ok,../topologies/hopper_pcie5_cdma.py,none,1.0\n"
        "1,ok,../topologies/gh200_cdma.py,none,0.5\n")
    cols = pivot_markdown(tmp_path, "policy", "iteration_time_s", "topology", digits=1)
    assert cols.splitlines()[0] == "| policy | hopper_pcie5_cdma | gh200_cdma |"
    rows = pivot_markdown(tmp_path, "topology", "iteration_time_s", "policy", digits=1)
    assert rows.splitlines()[2:] == ["| hopper_pcie5_cdma | 1.0 |", "| gh200_cdma | 0.5 |"]
