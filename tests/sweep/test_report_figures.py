"""The figures of ``sst-cdma report`` on the results tables of the paper's and today's sweeps
(``tests/data/report/``: the results.csv that ``sst-cdma sweep sweeps/paper.yaml`` and
``sweeps/today.yaml`` wrote, without their points' folders): the few plots a person looks at,
one series per value of one parameter and panels for the rest, axes with units, a line at 1.0
on ratios, the sweep's order of networks, and nothing constant or bookkeeping."""
from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from sst_cdma.tools.sweep.facets import UNFIT_GID
from sst_cdma.tools.sweep.report import ReportError, write_report

DATA = Path(__file__).resolve().parents[1] / "data" / "report"
PAPER_ORDER = ["alexnet", "overfeat", "nin", "vgg16", "squeezenet", "googlenet"]


def _render(folder: Path, **options) -> tuple[object, dict[str, matplotlib.figure.Figure]]:
    """The report of ``folder`` and the figures it saved, by file name (still drawn to their
    files)."""
    saved: dict[str, matplotlib.figure.Figure] = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        saved[Path(path).name] = fig
        savefig(fig, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", record)
        return write_report(folder, **options), saved


def _algorithm_matters(frame: pd.DataFrame) -> None:
    """Make the times depend on all three swept parameters (compression shortening stalls)."""
    factor = frame["opt.algorithm"].map({"none": 1.0, "zvc": 0.8, "bplane_zstd": 0.7})
    frame["stall_time_s"] = 0.05 * frame["iteration_time_s"] * factor
    frame["iteration_time_s"] = frame["compute_time_s"] + frame["stall_time_s"]


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """The paper sweep's report, as EVALUATION.md draws it (--x network)."""
    return _render(_sweep(tmp_path_factory.mktemp("paper"), "paper"), x="network")


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    """Today's sweep's report (x: the first swept parameter, the topology)."""
    return _render(_sweep(tmp_path_factory.mktemp("today"), "today"))


@pytest.fixture(scope="module")
def faceted(tmp_path_factory):
    """Today's sweep with times made to depend on all three swept parameters."""
    return _render(_sweep(tmp_path_factory.mktemp("faceted"), "today", _algorithm_matters))


def _sweep(tmp_path: Path, name: str, edit=None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    if edit is None:
        shutil.copy(DATA / f"{name}_results.csv", folder / "results.csv")
    else:
        frame = pd.read_csv(DATA / f"{name}_results.csv")
        edit(frame)
        frame.to_csv(folder / "results.csv", index=False)
    return folder


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _legend_entries(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _has_line_at_one(ax) -> bool:
    return any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())


def _bar_heights(fig) -> list[float]:
    return [round(p.get_height(), 9) for ax in _panels(fig) for p in ax.patches]


def test_the_paper_report_draws_a_series_per_algorithm_in_the_papers_network_order(paper):
    report, figures = paper
    names = {p.name for p in report.plots}
    assert len(names) <= 14, names           # the 41 of before: a few now
    for bookkeeping in ("events.png", "sim_time_ps.png", "plan.counts.offload.png",
                        "baselines.vdnn.iteration_time_s.png", "slowdown_vs_oracle.png"):
        assert bookkeeping not in names
    assert not [n for n in names if n.startswith("compression_ratio_by_algorithm.") and
                n.count(".") > 1]
    assert "compression_ratio_by_algorithm.png" in names     # one plot, a bar per algorithm
    speedup = figures["by_network_speedup_vs_vdnn.png"]
    (ax,) = _panels(speedup)
    assert [t.get_text() for t in ax.get_xticklabels()] == PAPER_ORDER
    assert ax.get_xlabel() == "network"         # --x network is the swept opt.network
    assert _legend_entries(speedup) == ["none", "rle", "zvc", "zlib"]    # 4 series, not 24
    assert len(ax.patches) == 24
    assert ax.get_ylabel().endswith("(x)") and _has_line_at_one(ax)
    legend = speedup.legends[0]
    speedup.canvas.draw()
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1   # beside, not over
    family = figures["compression_ratio_by_algorithm.png"]
    assert _legend_entries(family) == ["bplane_zstd", "lz4", "rle", "zlib", "zstd", "zvc"]


def test_the_paper_reports_axes_carry_units_without_offsets(paper):
    figures = paper[1]
    units = {"peak_gpu_memory_bytes.png": "(GB)", "iteration_time_s.png": "(ms)",
             "stall_breakdown.png": "(ms)", "compression_ratio.png": "(x)",
             "by_network_perf_vs_oracle.png": "(x)"}
    for name, unit in units.items():
        fig = figures[name]
        fig.canvas.draw()
        for ax in _panels(fig):
            assert ax.get_ylabel().endswith(unit) or not ax.get_ylabel(), (name, ax.get_ylabel())
            assert ax.yaxis.get_offset_text().get_text() == "", name
        assert "_" not in _panels(fig)[0].get_ylabel(), name      # no raw column names
    assert _has_line_at_one(_panels(figures["compression_ratio.png"])[0])
    assert not _has_line_at_one(_panels(figures["peak_gpu_memory_bytes.png"])[0])


@pytest.mark.parametrize("sweep", ["paper", "today", "faceted"])
def test_no_plot_of_either_sweep_is_constant(sweep, request):
    for name, fig in request.getfixturevalue(sweep)[1].items():
        if name in ("timeline.png", "memory.png", "plan.png"):
            continue
        heights = _bar_heights(fig)
        lines = [y for ax in _panels(fig) for line in ax.get_lines()
                 if list(line.get_ydata()) != [1.0, 1.0] for y in line.get_ydata()]
        assert len(set(heights + lines)) > 1, name


def test_the_today_report_leaves_out_what_does_not_vary(today):
    report, figures = today
    text = report.markdown.read_text()
    names = {p.name for p in report.plots}
    # GPT-2 XL has no vDNN speed-up to show (the baseline runs the same plan): said, not drawn
    assert "by_network_speedup_vs_vdnn.png" not in names
    assert "is 1 at every point: not drawn" in text
    assert "gpu_memory_capacity_bytes.png" not in names and "pcie_bandwidth_Bps.png" not in names
    assert "the simulated system rather than a measurement" in text
    fig = figures["stall_breakdown.png"]
    assert _panels(fig)[0].get_xlabel() == "topology"
    assert _legend_entries(fig)[:4] == ["none", "recompute", "recompute-attn", "auto"]


def test_three_swept_parameters_make_panels_not_longer_labels(faceted):
    fig = faceted[1]["stall_breakdown.png"]
    panels = _panels(fig)
    assert len(panels) == 4                             # one per policy
    assert [ax.get_title() for ax in panels] == [f"policy = {p}" for p in
                                                 ("none", "recompute", "recompute-attn", "auto")]
    for ax in panels:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["hopper_pcie5_cdma",
                                                                 "gh200_cdma"]
        bars = [p for p in ax.patches if p.get_gid() != UNFIT_GID]
        assert len(bars) == 2 * 3 * 2                   # topology x algorithm x (compute, stall)
    # policy none and recompute-attn do not fit on either GPU: each of their bars crossed out
    assert [len(ax.patches) - 12 for ax in panels] == [6, 0, 6, 0]
    assert _legend_entries(fig) == ["none", "zvc", "bplane_zstd", "compute", "stall",
                                    "does not fit in memory"]
    assert fig.get_size_inches()[0] <= 16


def test_x_names_a_swept_parameter_or_is_refused(tmp_path):
    with pytest.raises(ReportError, match=r"--x network: opt.network holds one value over the "
                                          r"sweep \(gpt2_xl\); swept: topology, policy, "
                                          r"algorithm"):
        write_report(_sweep(tmp_path, "today"), x="network")
