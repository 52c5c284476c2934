"""The ``sst-cdma`` command: one-line errors, sweep end to end (with a failed point and a
Ctrl-C), report, and the capture dispatch."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pandas as pd
import pytest

from sst_cdma.tools.cli import sst_cdma_main
from sst_cdma.tools.cli.sst_cdma_main import main

# A topology that sleeps in real runs (not in the up-front check) and can fail at build time in
# them (a fault the up-front check, which builds the elements too, cannot foresee).
TOPOLOGY = '''
import argparse, json, os, sys, time
import sst
p = argparse.ArgumentParser(prog="sleepy.py")
p.add_argument("--n", type=int, required=True)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--fail", action="store_true")
a = p.parse_args(sys.argv[1:])
real = os.sep + "points" + os.sep in os.getcwd() + os.sep
if real:
    open(os.path.join({runs!r}, str(a.n)), "a").write("run\\n")
    time.sleep(a.sleep)
sst.Component("probe", "testElement.StatProbe").addParams({{"count": a.n}})
if a.fail and real:
    sst.Component("lonely", "testElement.Echo")
json.dump({{"figure": a.n * 2}}, open("summary.json", "w"))
'''


def _write(tmp_path: Path, spec: str) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    (tmp_path / "sleepy.py").write_text(TOPOLOGY.format(runs=str(runs)))
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(spec).lstrip())
    return path


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("sst-cdma: ")
    return err.strip()


def test_no_command_and_bad_options_are_one_line_errors(capsys):
    assert main([]) == 1
    assert "no command" in _one_line_error(capsys)
    assert pytest.raises(SystemExit, main, ["sweep"]).value.code == 1
    assert "SPEC.yaml" in _one_line_error(capsys)
    assert pytest.raises(SystemExit, main, ["sweep", "x.yaml", "--workers", "0"]).value.code == 1
    assert "at least 1" in _one_line_error(capsys)
    assert pytest.raises(SystemExit, main, ["frobnicate"]).value.code == 1
    assert "invalid choice" in _one_line_error(capsys)


def test_version(capsys):
    assert pytest.raises(SystemExit, main, ["--version"]).value.code == 0
    assert capsys.readouterr().out.startswith("sst-cdma ")


def test_malformed_spec_is_file_line_message(tmp_path, capsys):
    spec = _write(tmp_path, """
        topology: sleepy.py
        grid:
          n: 4
    """)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out")]) == 1
    err = _one_line_error(capsys)
    assert f"{spec}:3: grid: 'n' must be a list" in err or "spec.yaml:3: grid: 'n'" in err
    assert not (tmp_path / "out").exists()


def test_missing_spec(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml: no such file" in _one_line_error(capsys)


def test_a_sweep_output_that_is_a_file_is_one_line_naming_it(tmp_path, capsys):
    spec = _write(tmp_path, "topology: sleepy.py\ngrid:\n  n: [1, 2]\n")
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1", "--no-progress"]) == 1
    error = _one_line_error(capsys)
    assert error.endswith("out.csv: the sweep's output is a file, not a folder")
    assert "scheduler" not in error and out.read_text() == "keep me"


def test_sweep_end_to_end_with_a_failed_point(tmp_path, capsys):
    spec = _write(tmp_path, """
        name: e2e
        topology: sleepy.py
        grid:
          n: [1, 2]
        points:
          - {n: 3, fail: true}
    """)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "e2e: 3 points: 3 run, 0 cached, 1 failed" in captured.out
    assert "point 2 failed:" in captured.err and "lonely" in captured.err
    table = pd.read_csv(out / "results.csv")
    assert list(table["status"]) == ["ok", "ok", "failed"]
    assert list(table["figure"][:2]) == [2, 4]
    assert (out / "results.parquet").is_file()


def _said(err: str) -> list[str]:
    """The lines of a sweep's stderr after the one it starts with (how many points it runs)."""
    lines = err.splitlines()
    assert lines and "to run (0 cached); checking each point's options" in lines[0], err
    return lines[1:]


def _published(points: Path) -> set[str]:
    """The points published finished in ``points``: not a worker's folder still being written,
    which holds ``DONE`` a moment before it is renamed into place (a stop then removes it)."""
    if not points.exists():
        return set()
    return {p.name for p in points.glob("*")
            if ".tmp-" not in p.name and ".old-" not in p.name and (p / "DONE").is_file()}


def _slow_sweep(tmp_path: Path) -> tuple[list[str], Path]:
    """The command of an 8-point sweep of 0.8 s points on 2 workers, and its output folder."""
    spec = _write(tmp_path, """
        topology: sleepy.py
        options: {sleep: 0.8}
        grid:
          n: [1, 2, 3, 4, 5, 6, 7, 8]
    """)
    out = tmp_path / "out"
    return [sys.executable, "-m", "sst_cdma.tools.cli.sst_cdma_main", "sweep", str(spec), "-o",
            str(out), "--workers", "2", "--no-progress"], out


@pytest.mark.slow  # two sst-cdma processes, each starting a cluster: ~10 s (20 s loaded)
def test_ctrl_c_keeps_finished_points_and_a_rerun_resumes(tmp_path):
    cmd, out = _slow_sweep(tmp_path)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    points = out / "points"
    while time.monotonic() < deadline:
        if len(_published(points)) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)                 # Ctrl-C reaches the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "run again to resume" in err
    assert len(_said(err)) == 1                          # no worker tracebacks
    assert not [p for p in points.glob("*") if ".tmp-" in p.name or ".old-" in p.name]
    finished = _published(points)
    assert 2 <= len(finished) < 8
    runs = {n: len((tmp_path / "runs" / str(n)).read_text().splitlines())
            for n in range(1, 9) if (tmp_path / "runs" / str(n)).exists()}
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{8 - len(finished)} run, {len(finished)} cached" in rerun.stdout
    table = pd.read_csv(out / "results.csv")
    assert (table["status"] == "ok").all() and len(table) == 8
    for key in finished:                               # finished before Ctrl-C: not rerun
        n = int(table[table["key"] == key]["opt.n"].iloc[0])
        assert runs[n] == 1
        assert len((tmp_path / "runs" / str(n)).read_text().splitlines()) == 1


@pytest.mark.slow  # one sst-cdma process starting a cluster: ~5 s
@pytest.mark.parametrize("group", [False, True], ids=["command", "process-group"])
def test_sigterm_stops_a_sweep_as_ctrl_c_does(tmp_path, group):
    """What `timeout` (the command, then its whole process group), `kill` and batch
    schedulers send: finished points kept, one line and no worker traceback, exit status
    143, no temporary folders left."""
    cmd, out = _slow_sweep(tmp_path)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    points = out / "points"
    while time.monotonic() < deadline and proc.poll() is None:
        if _published(points):
            break
        time.sleep(0.05)
    if group:
        os.killpg(proc.pid, signal.SIGTERM)            # the workers get it too
    else:
        proc.send_signal(signal.SIGTERM)               # to the command alone
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert "stopped by SIGTERM:" in err and "run again to resume" in err and len(_said(err)) == 1
    assert not [p for p in points.glob("*") if ".tmp-" in p.name or ".old-" in p.name]
    assert 1 <= len(_published(points)) < 8


def _results(tmp_path: Path) -> Path:
    rows = []
    for i, (net, alg) in enumerate((n, a) for n in ("alexnet", "vgg16") for a in ("none", "zvc")):
        t = {"none": 2.0, "zvc": 1.0}[alg] * (1 if net == "alexnet" else 3)
        rows.append({"point": i, "key": f"k{i}", "topology": "pascal_cdma.py",
                     "opt.network": net, "opt.algorithm": alg, "opt.batch": 128,
                     "status": "ok", "error": "", "iteration_time_s": t,
                     "baselines.vdnn.iteration_time_s": 2.0 * (1 if net == "alexnet" else 3),
                     "baselines.oracle.iteration_time_s": 0.5 * (1 if net == "alexnet" else 3),
                     "compression_ratio": 1.0 if alg == "none" else 2.5 + i})
    rows.append({"point": 4, "key": "k4", "topology": "pascal_cdma.py",
                 "opt.network": "nin", "opt.algorithm": "zlib", "opt.batch": 128,
                 "status": "failed", "error": "boom"})
    folder = tmp_path / "res"
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return folder


def test_report_writes_markdown_plots_and_speedups(tmp_path, capsys):
    folder = _results(tmp_path)
    assert main(["report", str(folder)]) == 0
    report = folder / "report" / "report.md"
    text = report.read_text()
    assert "Speed-up per network and configuration" in text
    assert "| network | algorithm=none | algorithm=zvc |" in text
    assert "| alexnet | 1 | 2 |" in text and "| vgg16 | 1 | 2 |" in text     # vDNN time / time
    assert "## Failed points" in text and "boom" in text
    pngs = {p.name for p in (folder / "report").glob("*.png")}
    assert {"by_network_speedup_vs_vdnn.png", "by_network_perf_vs_oracle.png",
            "iteration_time_s.png", "compression_ratio.png"} <= pngs
    assert all((folder / "report" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    swept = text.split("## Swept parameters")[1].split("##")[0]
    assert "`network`" in swept and "`algorithm`" in swept and "batch" not in swept
    assert f"({len(pngs)} plots)" in capsys.readouterr().out


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 1
    assert "no such results table" in _one_line_error(capsys)
    folder = _results(tmp_path)
    assert main(["report", str(folder), "--x", "colour"]) == 1
    assert "--x colour: no such column" in _one_line_error(capsys)
    run = tmp_path / "one_run"  # a single run's --output-directory: reported, if well formed
    run.mkdir()
    (run / "summary.json").write_text('{\n "iteration_time_s": 1.0,\n "layers": [1, 2, 3]\n}\n')
    assert main(["report", str(run)]) == 1
    error = _one_line_error(capsys)
    assert "one_run/summary.json: layers[0] is int (1), not a layer (an object)" in error
    assert main(["report", str(run / "summary.json")]) == 1
    assert "summary.json: not a results table (a CSV file) but JSON" in _one_line_error(capsys)
    (run / "notes.txt").write_text("a,b\n1,2\n1,2,3,4\n")
    assert main(["report", str(run / "notes.txt")]) == 1
    assert "notes.txt: not a results table (a CSV file): ParserError" in _one_line_error(capsys)


@pytest.mark.parametrize("keep", ["header", "mid-header", "mid-row"])
def test_report_of_a_truncated_results_csv_names_the_file(tmp_path, capsys, keep):
    folder = _results(tmp_path)
    csv = folder / "results.csv"
    text = csv.read_text()
    header = text.index("\n") + 1
    cut = {"header": header, "mid-header": header - 20, "mid-row": header + 12}[keep]
    csv.write_text(text[:cut])
    assert main(["report", str(folder)]) == 1
    error = _one_line_error(capsys)
    assert "res/results.csv: " in error and "truncated" in error and "0 points" not in error
    assert not (folder / "report").exists()


@pytest.mark.parametrize("command,module", [("capture", "sst_cdma.tools.capture.cli"),
                                            ("time-layers", "sst_cdma.tools.capture.timing_cli"),
                                            ("time-cpu-adam", "sst_cdma.tools.capture.cpu_adam_cli"),
                                            ("capture-states", "sst_cdma.tools.capture.states_cli")])
def test_torch_tools_get_their_arguments(monkeypatch, command, module):
    seen = []
    fake = types.ModuleType(module)     # the real one imports torch (slow)
    fake.main = lambda argv: seen.append(argv) or 7
    monkeypatch.setitem(sys.modules, module, fake)
    assert main([command, "--network", "m.yaml", "--quiet"]) == 7
    assert seen == [["--network", "m.yaml", "--quiet"]]


@pytest.mark.parametrize("command,module", [("capture", "sst_cdma.tools.capture.cli"),
                                            ("time-layers", "sst_cdma.tools.capture.timing_cli"),
                                            ("time-cpu-adam", "sst_cdma.tools.capture.cpu_adam_cli"),
                                            ("capture-states", "sst_cdma.tools.capture.states_cli")])
def test_an_unavailable_torch_tool_is_one_line(monkeypatch, capsys, command, module):
    monkeypatch.setitem(sys.modules, module, None)   # import fails
    assert main([command, "--quiet"]) == 1
    assert f"{command}: not available" in _one_line_error(capsys)


def test_internal_errors_are_one_line(monkeypatch, tmp_path, capsys):
    def boom(*a, **k):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(sst_cdma_main, "_report", boom)
    assert main(["report", str(tmp_path)]) == 1
    assert "internal error: ZeroDivisionError: bug" in _one_line_error(capsys)


def test_a_missing_regress_suite_names_the_path_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["regress", "mysuite"]) == 1
    err = capsys.readouterr().err
    assert err == (f"sst-cdma: mysuite: no such suite directory (looked for "
                   f"{tmp_path.resolve() / 'mysuite' / 'suite.yaml'}; SUITE_DIR is a folder "
                   "holding suite.yaml)\n")


@pytest.mark.parametrize("command", ["time-cpu-adam", "capture-states"])
def test_a_measuring_commands_help_does_not_import_torch(command):
    # PyTorch's import takes seconds (17 s on a cold machine): --help needs none of it
    pytest.importorskip("torch")
    code = ("import sys\nfrom sst_cdma.tools.cli.sst_cdma_main import main\n"
            f"status = main([{command!r}, '--help'])\n"
            "print('STATUS', status, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[2]).stdout
    assert f"usage: sst-cdma {command}" in out and "STATUS 0 False" in out


@pytest.mark.parametrize("command,module", [("time-cpu-adam", "cpu_adam_cli"),
                                            ("capture-states", "states_cli")])
def test_the_help_is_the_commands_own_parser(capsys, command, module):
    pytest.importorskip("torch")
    import importlib
    tool = importlib.import_module(f"sst_cdma.tools.capture.{module}")
    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out == tool.build_parser().format_help()
    assert main([command, "--output", "--help"]) == 2  # an error before the help: one line
    assert "expected one argument" in capsys.readouterr().err
