"""``sst-cdma report`` never recommends a point that does not fit in memory: report.md lists
every such point first and says it is not a recommendation, every plot that draws it marks it
(its bar cross-hatched, its line point crossed out; read off the matplotlib artists), the
ratio tables mark its figures, the peak-memory plot draws each GPU's capacity, the
out-of-memory event's columns (its time, its bytes short) are not plotted, and the timeline
names its layers and keys its colours in a legend.

Two tables: a real sweep run here (VGG-16 at batches 128 and 256 on an 11 GB GTX 1080 Ti,
whose memory batch 256 overflows by 7%, and a 16 GB P100, where both fit), and today's GPT-2 XL sweep as ``sweeps/today.yaml``
wrote it (``tests/data/report/today_results.csv``), where policies ``none`` and
``recompute-attn`` need 125.8 and 120.6 GB of 85.9 and 103.1 GB GPUs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from sst_cdma.tools.sweep.driver import run_sweep
from sst_cdma.tools.sweep.facets import CAPACITY_GID, COLOURS, UNFIT_GID, Layout, Marks, Style, draw
from sst_cdma.tools.sweep.figure_units import Axis
from sst_cdma.tools.sweep.fit import does_not_fit, memories
from sst_cdma.tools.sweep.point_plots import MAX_ROWS, draw_timeline
from sst_cdma.tools.sweep import report as report_module
from sst_cdma.tools.sweep.report import write_report

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "report"
#: the plots of one point, not of the sweep
ONE_POINT = ("timeline.png", "memory.png", "plan.png")
SPEC = """\
name: fit
topology: {topology}
options: {{network: vgg16, policy: all, algorithm: zvc}}
grid:
  gpu: [gtx1080ti, pascal]
  batch: [128, 256]
"""


#: what the report gave the plotting function for each sweep plot: (frame, layout, marks)
GIVEN: dict[tuple[str, str], tuple[pd.DataFrame, Layout, Marks]] = {}


def _render(folder: Path, **options) -> tuple[object, dict[str, matplotlib.figure.Figure]]:
    """The report of ``folder`` and the figures it saved, by file name; what each sweep plot
    was given goes into :data:`GIVEN` under (the folder, the file name)."""
    saved: dict[str, matplotlib.figure.Figure] = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        saved[Path(path).name] = fig
        savefig(fig, path, *args, **kwargs)

    def given(frame, layout, column, axis, path, *args, **kwargs):
        GIVEN[str(folder), Path(path).name] = (frame, layout, kwargs.get("marks"))
        draw(frame, layout, column, axis, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", record)
        patch.setattr(report_module, "draw", given)
        return write_report(folder, **options), saved


@pytest.fixture(scope="module")
def vgg(tmp_path_factory, client1):
    """A real four-point sweep, two of whose points do not fit, and its report."""
    folder = tmp_path_factory.mktemp("fit")
    spec = folder / "fit.yaml"
    spec.write_text(SPEC.format(topology=REPO / "topologies" / "pascal_cdma.py"))
    run_sweep(spec, output=folder / "out", client=client1, progress=False)
    table = pd.read_csv(folder / "out" / "results.csv")
    return table, *_render(folder / "out")


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    """Today's GPT-2 XL sweep table and its report."""
    folder = tmp_path_factory.mktemp("today")
    shutil.copy(DATA / "today_results.csv", folder / "results.csv")
    return pd.read_csv(folder / "results.csv"), *_render(folder)


def _unfit_points(table: pd.DataFrame) -> list[int]:
    return [int(p) for p, fits in zip(table["point"], table["fits_in_memory"]) if not fits]


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _legend_entries(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _crossed_bars(fig) -> list[tuple[object, object]]:
    """(panel, the bar under it) of every cross-hatched bar: the bar of the same place."""
    out = []
    for ax in _panels(fig):
        bars = [p for p in ax.patches if p.get_gid() != UNFIT_GID]
        for mark in (p for p in ax.patches if p.get_gid() == UNFIT_GID):
            under = [b for b in bars if abs(b.get_x() - mark.get_x()) < 1e-9 and b.get_y() == 0]
            assert len(under) == 1, "a cross-hatch lies over one bar"
            assert mark.get_height() == pytest.approx(
                sum(b.get_height() for b in bars if abs(b.get_x() - mark.get_x()) < 1e-9))
            out.append((ax, under[0]))
    return out


def _capacity_segments(ax) -> list:
    """The segments of the capacity lines over the bars of a panel."""
    return [s for c in ax.collections if c.get_gid() == CAPACITY_GID for s in c.get_segments()]


def _hue(bar) -> int:
    colour = matplotlib.colors.to_hex(bar.get_facecolor())
    return COLOURS.index(colour)


def test_the_real_sweep_has_points_that_fit_and_points_that_do_not(vgg):
    table = vgg[0]
    assert list(table["fits_in_memory"]) == [True, False, True, True]   # the 1080 Ti at 256
    assert (table["peak_gpu_memory_bytes"] > table["gpu_memory_capacity_bytes"]).tolist() == \
        [not fits for fits in table["fits_in_memory"]]


@pytest.mark.parametrize("sweep", ["vgg", "today"])
def test_report_md_names_every_point_that_does_not_fit_as_no_recommendation(sweep, request):
    table, report, _ = request.getfixturevalue(sweep)
    text = report.markdown.read_text()
    section = text.split("## Points that do not fit in memory\n", 1)[1].split("\n## ", 1)[0]
    assert "not a recommendation" in section
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ")][1:]
    unfit = _unfit_points(table)
    assert unfit and len(unfit) < len(table)
    assert [int(r[0].strip("| ")) for r in rows] == unfit
    for row, point in zip(rows, unfit):
        line = table[table["point"] == point].iloc[0]
        needs, has = float(row[-3]), float(row[-2])
        assert needs == pytest.approx(line["peak_gpu_memory_bytes"] / 1e9, rel=1e-3)
        assert has == pytest.approx(line["gpu_memory_capacity_bytes"] / 1e9, rel=1e-3)
        assert needs > has
    assert text.index("## Points that do not fit") < text.index("## Speed-up")


def test_todays_report_names_the_issues_two_policies_on_both_gpus(today):
    section = today[1].markdown.read_text().split("## Points that do not fit", 1)[1]
    for policy, needs in (("none", "125.8"), ("recompute-attn", "120.6")):
        for gpu, has in (("hopper_pcie5_cdma", "85.9"), ("gh200_cdma", "103.1")):
            assert f"| {gpu} | {policy} | none | GPU | {needs} | {has} |" in section


def test_the_ratio_tables_mark_the_figures_of_points_that_do_not_fit(today):
    table, report, _ = today
    text = report.markdown.read_text()
    ratios = text.split("### performance relative to the oracle", 1)[1].split("![", 1)[0]
    rows = [line for line in ratios.splitlines() if line.startswith("| topology=")]
    assert len(rows) == len(table)
    for row, fits in zip(rows, table["fits_in_memory"]):
        assert row.endswith("*(does not fit)* |") == (not fits), row


@pytest.mark.parametrize("sweep", ["vgg", "today"])
def test_every_plot_crosses_out_the_bars_of_points_that_do_not_fit(sweep, request):
    """Each bar stands for the points that differ only in what the plot leaves out (they
    share its figure); it is crossed out when none of them fits."""
    table, report, figures = request.getfixturevalue(sweep)
    sweep_plots = {n: f for n, f in figures.items() if n not in ONE_POINT}
    assert {"by_network_perf_vs_oracle.png", "stall_breakdown.png",
            "peak_gpu_memory_bytes.png"} <= set(sweep_plots)
    unfit = set(_unfit_points(table))
    for name, fig in sweep_plots.items():
        frame, layout, marks = GIVEN[str(report.markdown.parents[1]), name]
        assert marks is not None and marks.unfit is not None, name
        if "point" in frame.columns:   # the points themselves: the verdict is theirs
            assert set(frame.loc[frame[marks.unfit], "point"]) == unfit & set(frame["point"])
        subset = [layout.x, *([layout.hue] if layout.hue else []), *layout.facets]
        bars = frame.groupby(subset, sort=False, dropna=False)[marks.unfit].all()
        assert len(_crossed_bars(fig)) == bars.sum(), name
        assert ("does not fit in memory" in _legend_entries(fig)) == bool(bars.any()), name
    crossed = [n for n, f in sweep_plots.items() if _crossed_bars(f)]
    assert {"by_network_perf_vs_oracle.png", "stall_breakdown.png",
            "peak_gpu_memory_bytes.png"} <= set(crossed)


def test_the_crossed_out_bars_are_exactly_those_of_the_points_that_do_not_fit(today):
    """perf_vs_oracle: x is the topology, colours the policy; the algorithm changes nothing."""
    table, _, figures = today
    fig = figures["by_network_perf_vs_oracle.png"]
    (ax,) = _panels(fig)
    topologies = [t.get_text() for t in ax.get_xticklabels()]
    policies = list(dict.fromkeys(table["opt.policy"]))
    crossed = {(topologies[round(bar.get_x() + bar.get_width() / 2)], policies[_hue(bar)])
               for _, bar in _crossed_bars(fig)}
    expected = {(Path(t).stem, p) for t, p, fits in zip(
        table["topology"], table["opt.policy"], table["fits_in_memory"]) if not fits}
    assert crossed == expected == {(gpu, policy) for gpu in ("hopper_pcie5_cdma", "gh200_cdma")
                                   for policy in ("none", "recompute-attn")}


def test_the_peak_memory_plot_draws_each_gpus_capacity_level_with_its_bars(today):
    table, _, figures = today
    fig = figures["peak_gpu_memory_bytes.png"]
    (ax,) = _panels(fig)
    topologies = [t.get_text() for t in ax.get_xticklabels()]
    capacity = {Path(t).stem: c / 1e9 for t, c in zip(table["topology"],
                                                       table["gpu_memory_capacity_bytes"])}
    segments = _capacity_segments(ax)
    assert len(segments) == 8                     # one over each bar: 2 GPUs x 4 policies
    for (x0, y0), (x1, y1) in segments:
        assert y0 == y1 == pytest.approx(capacity[topologies[round((x0 + x1) / 2)]])
    assert sorted({round(y, 1) for (_, y), _ in segments}) == [85.9, 103.1]
    assert "GPU memory capacity" in _legend_entries(fig)
    assert ax.get_ylim()[1] >= max(capacity.values())


def test_the_real_sweeps_peak_memory_plot_has_both_gpus_capacities(vgg):
    table, _, figures = vgg
    (ax,) = _panels(figures["peak_gpu_memory_bytes.png"])
    drawn = sorted({round(y0, 6) for (_, y0), _ in _capacity_segments(ax)})
    assert drawn == sorted({round(c / 1e9, 6) for c in table["gpu_memory_capacity_bytes"]})


@pytest.mark.parametrize("sweep", ["vgg", "today"])
def test_no_plot_of_the_out_of_memory_events_bookkeeping(sweep, request):
    table, report, _ = request.getfixturevalue(sweep)
    names = {p.name for p in report.plots}
    event = [c for c in table.columns if c.startswith("out_of_memory.")]
    assert "out_of_memory.time_ps" in event
    assert not [n for n in names if n.startswith("out_of_memory")], names
    varying = [c for c in event if pd.api.types.is_numeric_dtype(table[c])
               and table[c].nunique() > 1]     # one point short of memory: a constant
    assert varying or sweep == "vgg"
    text = report.markdown.read_text()
    for column in varying:
        listed = text.split("Not drawn, the out-of-memory event", 1)[1].split("\n", 1)[0]
        assert f"`{column}`" in listed


def test_a_summarys_echo_of_a_swept_parameter_and_a_nil_stall_are_not_plotted(tmp_path):
    rows = [{"point": i, "key": f"k{i}", "status": "ok", "error": "", "opt.batch": b,
             "batch": b, "iteration_time_s": 1.0 + i, "compute_time_s": 1.0 + i,
             "stall_time_s": 0.0 if i % 2 else 0.1 * i, "fits_in_memory": True}
            for i, b in enumerate([8, 16, 32, 64])]
    rows[0]["stall_time_s"] = 0.0
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    report = write_report(tmp_path)
    names = {p.name for p in report.plots}
    text = report.markdown.read_text()
    assert "batch.png" not in names and "Not drawn, the swept parameter `opt.batch` itself: " \
        "`batch`." in text
    assert "stall_time_s.png" not in names
    assert "Not drawn, equal to the stall breakdown's stall: `stall_time_s`." in text


def _table(folder: Path, batches, fits, peaks, capacities) -> Path:
    """A sweep table over ``opt.batch`` and ``opt.gpu`` (the product, in order)."""
    rows, n = [], 0
    for gpu, capacity in capacities.items():
        for b in batches:
            rows.append({"point": n, "key": f"k{n}", "status": "ok", "error": "",
                         "opt.gpu": gpu, "opt.batch": b,
                         "iteration_time_s": 1.0 + n + 0.1 * (n % 3),
                         "compute_time_s": 1.0 + n, "stall_time_s": 0.1 * (n % 3),
                         "fits_in_memory": fits[n], "peak_gpu_memory_bytes": peaks[n],
                         "gpu_memory_capacity_bytes": capacity})
            n += 1
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return folder


def test_a_numeric_x_crosses_out_the_line_points_and_draws_each_gpus_capacity(tmp_path):
    peaks = [4e9, 8e9, 12e9, 4e9, 8e9, 12e9]
    folder = _table(tmp_path, [1, 2, 3], [True, True, False, True, True, True], peaks,
                    {"small": 10e9, "large": 16e9})
    _, figures = _render(folder, x="batch")
    fig = figures["peak_gpu_memory_bytes.png"]
    (ax,) = _panels(fig)
    (crossed,) = [line for line in ax.get_lines() if line.get_gid() == UNFIT_GID]
    assert list(crossed.get_xdata()) == [3] and list(crossed.get_ydata()) == [12.0]
    capacities = sorted(tuple(line.get_ydata()) for line in ax.get_lines()
                        if line.get_gid() == CAPACITY_GID)
    assert capacities == [(10.0, 10.0, 10.0), (16.0, 16.0, 16.0)]
    assert "iteration_time_s.png" in figures
    for name, fig in figures.items():      # the iteration time too: its point at batch 3
        if name in ONE_POINT or name == "stall_breakdown.png":
            continue
        marks = [line for ax in _panels(fig) for line in ax.get_lines()
                 if line.get_gid() == UNFIT_GID]
        assert [list(m.get_xdata()) for m in marks] == [[3]], name


def test_a_peak_that_does_not_vary_is_drawn_when_the_capacity_does(tmp_path):
    """A sweep of GPUs with one network: the same peak, beside capacities on either side."""
    folder = _table(tmp_path, [1, 2], [False, False, True, True], [12e9] * 4,
                    {"small": 10e9, "large": 16e9})
    report, figures = _render(folder)
    assert "peak_gpu_memory_bytes.png" in {p.name for p in report.plots}
    (ax,) = _panels(figures["peak_gpu_memory_bytes.png"])
    assert len(_crossed_bars(figures["peak_gpu_memory_bytes.png"])) == 1   # the small GPU
    assert sorted(round(y0, 6) for (_, y0), _ in _capacity_segments(ax)) == [10.0, 16.0]


def test_a_capacity_far_above_the_peaks_is_named_not_drawn(tmp_path):
    folder = _table(tmp_path, [1, 2], [True] * 4, [1e9, 2e9, 1e9, 2e9],
                    {"small": 80e9, "large": 3e9})
    _, figures = _render(folder)
    fig = figures["peak_gpu_memory_bytes.png"]
    (ax,) = _panels(fig)
    assert {round(y0, 6) for (_, y0), _ in _capacity_segments(ax)} == {3.0}
    assert ax.get_ylim()[1] < 10
    assert "GPU memory capacity 80 GB (above the plot)" in _legend_entries(fig)
    assert "does not fit in memory" not in _legend_entries(fig)


def test_a_bar_standing_for_several_points_is_crossed_out_only_when_none_fits(tmp_path):
    """The figure does not change with ``other``: one bar stands for both its points, and a
    figure that a point reaches within its memory is no point's that does not fit."""
    frame = pd.DataFrame({"x": ["a", "a", "b", "b"], "other": [1, 2, 1, 2],
                          "figure": [1.0, 1.0, 2.0, 2.0], "unfit": [True, False, True, True]})
    saved = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        saved["fig"] = fig
        savefig(fig, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", record)
        draw(frame, Layout("x"), "figure", Axis("figure"), tmp_path / "f.png", "figure",
             Style(str, lambda _, v: str(v)), marks=Marks(unfit="unfit"))
    ax = saved["fig"].axes[0]
    crossed = [p for p in ax.patches if p.get_gid() == UNFIT_GID]
    assert [(round(p.get_x() + p.get_width() / 2), p.get_height()) for p in crossed] == \
        [(1, 2.0)]


def test_a_host_memory_tier_that_overflows_makes_the_point_not_fit():
    frame = pd.DataFrame({"fits_in_memory": [True, True, False],
                          "model_states.tiers.gpu.fits": [True, True, False],
                          "model_states.tiers.host.fits": [True, False, True],
                          "baselines.vdnn.fits_in_memory": [False, False, False]})
    found = memories(list(frame.columns))
    assert [(m.verdict, m.name) for m in found] == [
        ("fits_in_memory", "GPU"), ("model_states.tiers.host.fits", "host memory")]
    assert found[1].peak == "model_states.tiers.host.peak_bytes"
    assert does_not_fit(frame, found).tolist() == [False, True, True]
    text = frame.assign(**{"fits_in_memory": ["True", "", "False"]})   # as a CSV reads back
    assert does_not_fit(text, found[:1]).tolist() == [False, False, True]


def test_the_default_timeline_is_of_a_point_that_fits(tmp_path):
    """The point that stalls most does not fit: the timeline is of the next that stalls most."""
    folder = _table(tmp_path, [1, 2], [True, False, True, True], [1e9] * 4,
                    {"small": 10e9, "large": 16e9})
    table = pd.read_csv(folder / "results.csv")
    table["stall_time_s"] = [0.1, 0.9, 0.5, 0.2]
    table.to_csv(folder / "results.csv", index=False)
    layer = {"layer": "conv1", "phase": "forward", "start_s": 0.0, "end_s": 1.0,
             "kernel_ps": 10**12}
    for key in table["key"]:
        (folder / "points" / key).mkdir(parents=True)
        (folder / "points" / key / "summary.json").write_text(json.dumps({"layers": [layer]}))
    text = write_report(folder).markdown.read_text()
    assert "Point 2: each layer's kernel time" in text
    text = write_report(folder, timeline=1).markdown.read_text()
    assert "Point 1: each layer's kernel time and the time the GPU then waited for copies, " \
        "in iteration order. It does not fit in memory: not a recommendation." in text


def test_the_timeline_names_its_layers_and_keys_its_colours_in_a_legend(vgg):
    table, report, figures = vgg
    text = report.markdown.read_text()
    point = int(text.split("## Per-layer timeline\n\nPoint ", 1)[1].split(":", 1)[0])
    row = table[table["point"] == point].iloc[0]
    assert row["fits_in_memory"]                  # the default point: one that fits
    summary = report.markdown.parents[1] / "points" / row["key"] / "summary.json"
    layers = json.loads(summary.read_text())["layers"]
    fig = figures["timeline.png"]
    (ax,) = fig.axes
    forward = [layer["layer"] for layer in layers if layer["phase"] == "forward"]
    assert [t.get_text() for t in ax.get_yticklabels()] == forward      # the network's order
    assert forward[:3] == ["conv1_1", "relu1_1", "conv1_2"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["forward kernel", "backward kernel", "stall: waiting for copies"]
    assert "blue" not in ax.get_title() and "orange" not in ax.get_title()
    assert ax.get_ylabel() == "layer"


def test_a_timeline_of_many_layers_in_blocks_has_a_row_per_block(tmp_path):
    names = ["embed"] + [f"blk{b}/{op}" for b in range(12) for op in ("ln", "qkv", "attn",
                                                                       "proj", "fc1", "fc2")]
    assert len(names) > MAX_ROWS
    layers = [{"layer": n, "phase": phase, "start_s": t * 1e-3, "end_s": (t + 1) * 1e-3,
               "kernel_ps": 5 * 10**8}
              for t, (n, phase) in enumerate([(n, "forward") for n in names]
                                             + [(n, "backward") for n in reversed(names)])]
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"layers": layers}))
    saved = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        saved["fig"] = fig
        savefig(fig, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", record)
        assert draw_timeline(summary, tmp_path / "t.png", "blocks")
    (ax,) = saved["fig"].axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["embed"] + [f"blk{b}"
                                                                         for b in range(12)]
    assert ax.get_ylabel() == "block"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "forward kernel", "backward kernel", "stall: waiting for copies"]
