"""Bad inputs to ``sst-cdma report``, ``plans`` and ``table``: a point's summary whose
``layers`` hold text, a plan whose tensor names or choices are not text, a results table with
a short row or a status no sweep writes, a disk that fills while the report is written. Each
is one line naming the file and the fault, exit 1, and the previous report is kept."""
from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep.report import ReportError, write_report


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sst-cdma: "), err
    assert "internal error" not in err and "Traceback" not in err, err
    return err


def _table(folder: Path, summary: dict | None = None, n: int = 2) -> Path:
    """A two-point sweep table (point 0 has a summary.json when ``summary`` is given)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"point": i, "key": f"k{i}", "status": "ok", "error": "", "opt.n": i,
             "iteration_time_s": 1.0 + i, "compute_time_s": 0.5, "stall_time_s": 0.5 + i}
            for i in range(n)]
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    if summary is not None:
        point = folder / "points" / "k1"
        point.mkdir(parents=True)
        (point / "summary.json").write_text(json.dumps(summary))
    return folder


@pytest.mark.parametrize("layers,fault", [
    ("conv1 conv2", "'layers' holds str ('conv1 conv2'), not a list of layers"),
    ([1, 2], "layers[0] is int (1), not a layer (an object)"),
    ([{"start_s": "0", "end_s": 1, "kernel_ps": 1, "phase": "forward"}],
     "layers[0].start_s is '0', not a finite number"),
])
def test_a_summary_whose_layers_are_not_layers_is_one_line(tmp_path, capsys, layers, fault):
    folder = _table(tmp_path / "res", {"layers": layers})
    assert main(["report", str(folder)]) == 1
    error = _one_line_error(capsys)
    assert f"points/k1/summary.json: {fault}" in error


@pytest.mark.parametrize("plan,fault", [
    ({"tensors": {"conv1": 3}}, "plan.tensors: tensor 'conv1' -> 3: a tensor name and its "
                                "choice must both be text"),
    ({"tensors": ["conv1"]}, "'plan.tensors' holds list, not an object"),
    ("all", "'plan' holds str, not an object"),
])
def test_plans_and_report_name_a_malformed_plan(tmp_path, capsys, plan, fault):
    folder = _table(tmp_path / "res", {"plan": plan})
    assert main(["plans", str(folder)]) == 1
    assert f"points/k1/summary.json: {fault}" in _one_line_error(capsys)
    assert main(["report", str(folder)]) == 1
    assert f"points/k1/summary.json: {fault}" in _one_line_error(capsys)


def test_a_summary_that_is_not_an_object_is_named_by_plans(tmp_path, capsys):
    folder = _table(tmp_path / "res", {})
    (folder / "points" / "k1" / "summary.json").write_text("[1, 2]")
    assert main(["plans", str(folder)]) == 1
    assert "points/k1/summary.json: not a summary (a JSON object)" in _one_line_error(capsys)


def test_a_short_row_is_named_by_table_and_report(tmp_path, capsys):
    folder = _table(tmp_path / "res")
    lines = (folder / "results.csv").read_text().splitlines()
    lines[2] = ",".join(lines[2].split(",")[:4])
    (folder / "results.csv").write_text("\n".join(lines) + "\n")
    for command in (["table", str(folder), "--rows", "n", "--value", "iteration_time_s"],
                    ["report", str(folder)]):
        assert main(command) == 1
        assert "res/results.csv: line 3: 4 fields where the header has 8" in \
            _one_line_error(capsys)


def test_an_unknown_status_is_named_by_table(tmp_path, capsys):
    folder = _table(tmp_path / "res")
    text = (folder / "results.csv").read_text()
    (folder / "results.csv").write_text(text.replace("k1,ok,", "k1,done,"))
    assert main(["table", str(folder), "--rows", "n", "--value", "iteration_time_s"]) == 1
    assert "res/results.csv: line 3: unknown status 'done' (a sweep writes ok or failed)" in \
        _one_line_error(capsys)


def test_a_full_disk_keeps_the_previous_report(tmp_path, capsys, monkeypatch):
    folder = _table(tmp_path / "res")
    report = write_report(folder)
    out = report.markdown.parent
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "stall_breakdown.png" in before
    calls = []

    def full(fig, path, *args, **kwargs):
        calls.append(path)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    (folder / "results.csv").write_text((folder / "results.csv").read_text()
                                        .replace(",1.0,", ",1.5,"))
    with pytest.raises(ReportError, match=r"res/report: cannot write the report: No space left "
                                          r"on device \(the previous report, if any, is left "
                                          r"as it was\)"):
        write_report(folder)
    assert calls
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before   # nothing half-written
    assert main(["report", str(folder)]) == 1
    assert "cannot write the report: No space left on device" in _one_line_error(capsys)
    assert sorted(os.listdir(out)) == sorted(before)


def test_a_report_removes_the_staging_folder_a_killed_report_left(tmp_path):
    import subprocess
    import sys

    from sst_cdma.engine.stale_folders import owner_tag

    folder = _table(tmp_path / "res")
    out = write_report(folder).markdown.parent
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = owner_tag().rpartition("-")[0]
    left = out / f".report.partial-{host}-{gone.pid}-abc123"     # a report killed (SIGKILL)
    live = out / f".report.partial-{owner_tag()}-def456"         # one still being written
    for stage in (left, live):
        stage.mkdir()
        (stage / "report.md").write_text("half")
    write_report(folder)
    assert not left.exists() and (live / "report.md").is_file()


def test_a_new_report_removes_the_plots_the_previous_one_drew_and_no_longer_does(tmp_path):
    folder = _table(tmp_path / "res")
    out = write_report(folder).markdown.parent
    (out / "events.png").write_bytes(b"old")
    (out / "notes.png").write_bytes(b"mine")           # not the report's: kept
    text = (out / "report.md").read_text()
    (out / "report.md").write_text(text + "\n![events](events.png)\n")
    write_report(folder)
    assert not (out / "events.png").exists() and (out / "notes.png").read_bytes() == b"mine"
