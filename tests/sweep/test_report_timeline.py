"""sst-cdma report draws the stall breakdown and one point's per-layer timeline."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import sst_cdma
from sst_cdma.tools.sweep.report import ReportError, memory_tracks, write_report


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    """Two points (AlexNet b4, policy all, plain and ZVC) simulated once for the module, and
    their results.csv."""
    folder = tmp_path_factory.mktemp("timeline")
    rows = []
    for i, algorithm in enumerate(["none", "zvc"]):
        out = folder / "points" / f"k{i}"
        sst_cdma.run(REPO / "topologies/pascal_cdma.py",
                     ["--network", "alexnet", "--batch", "4", "--policy", "all", "--algorithm",
                      algorithm], output_directory=out, console=io.StringIO())
        s = json.loads((out / "summary.json").read_text())
        rows.append({"point": i, "key": f"k{i}", "status": "ok", "opt.network": "alexnet",
                     "opt.algorithm": algorithm, **{k: s[k] for k in (
                         "iteration_time_s", "compute_time_s", "stall_time_s")},
                     "baselines.vdnn.iteration_time_s": s["baselines"]["vdnn"]["iteration_time_s"]})
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return folder


@pytest.fixture
def results(simulated, tmp_path) -> Path:
    """A copy of the two simulated points and their table of the test's own (tests remove
    and edit its files)."""
    shutil.copytree(simulated, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_report_has_stall_breakdown_and_timeline(results):
    report = write_report(results)
    text = report.markdown.read_text()
    assert "## Stall breakdown" in text and "## Per-layer timeline" in text
    names = {p.name for p in report.plots}
    assert {"stall_breakdown.png", "timeline.png"} <= names
    # the default timeline is the point that stalls most: no compression
    assert "Point 0:" in text
    assert (results / "report" / "timeline.png").stat().st_size > 1000


def test_timeline_point_can_be_chosen_and_must_exist(results):
    text = write_report(results, timeline=1).markdown.read_text()
    assert "Point 1:" in text
    with pytest.raises(ReportError, match="--timeline 7: no such successful point"):
        write_report(results, timeline=7)


def test_report_plots_the_timeline_points_gpu_memory_from_its_trace(results):
    report = write_report(results, timeline=1)
    text = report.markdown.read_text()
    assert "## GPU memory over time" in text and "![GPU memory over time](memory.png)" in text
    assert "Point 1: bytes allocated on each GPU" in text
    assert results / "report" / "memory.png" in report.plots
    assert (results / "report" / "memory.png").stat().st_size > 1000
    tracks = memory_tracks(json.loads((results / "points" / "k1" / "trace.json").read_text()))
    assert list(tracks) == ["gpu0", "oracle.gpu0", "vdnn.gpu0"]
    summary = json.loads((results / "points" / "k1" / "summary.json").read_text())
    assert max(n for _, n in tracks["gpu0"]) == summary["peak_gpu_memory_bytes"]
    assert [t for t, _ in tracks["gpu0"]] == sorted(t for t, _ in tracks["gpu0"])


def test_a_point_without_trace_gets_a_note_instead_of_a_memory_plot(results):
    (results / "points" / "k0" / "trace.json").unlink()
    report = write_report(results, timeline=0)
    text = report.markdown.read_text()
    assert "Point 0: no memory plot (the point has no trace.json)." in text
    assert "memory.png" not in text
    assert all(p.name != "memory.png" for p in report.plots)
    assert "## Per-layer timeline" in text  # the timeline does not need the trace


@pytest.mark.parametrize("below", ["", "sub"])
def test_a_report_output_that_is_a_file_is_one_error_naming_it(results, tmp_path, below):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    with pytest.raises(ReportError, match="blocker is a file, not a folder"):
        write_report(results, blocker / below if below else blocker)
    assert blocker.read_text() == "not a folder"


def test_the_memory_plot_keeps_the_curves_readable_beside_a_far_larger_capacity(results,
                                                                                monkeypatch):
    """AlexNet at batch 4 peaks near 0.1 GB of the P100's 17 GB: drawn to scale, the capacity
    line would flatten every curve at the bottom, so the legend names it instead; a capacity
    within twice the peak is drawn as a line."""
    import matplotlib.figure

    drawn = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, *args, **kwargs):
        if str(path).endswith("memory.png"):
            ax = fig.axes[0]
            drawn["top"] = ax.get_ylim()[1]
            drawn["labels"] = [t.get_text() for t in ax.get_legend().get_texts()]
        savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    summary_path = results / "points" / "k1" / "summary.json"
    summary = json.loads(summary_path.read_text())
    peak, capacity = summary["peak_gpu_memory_bytes"], summary["gpu_memory_capacity_bytes"]
    assert capacity > 2 * peak
    write_report(results, timeline=1)
    assert drawn["top"] < capacity / 1e9
    assert f"capacity {capacity / 1e9:.3g} GB (above the plot)" in drawn["labels"]
    summary["gpu_memory_capacity_bytes"] = int(1.5 * peak)
    summary_path.write_text(json.dumps(summary))
    write_report(results, timeline=1)
    assert drawn["top"] >= 1.5 * peak / 1e9
    assert f"capacity {1.5 * peak / 1e9:.3g} GB" in drawn["labels"]
