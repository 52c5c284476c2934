"""SIGTERM and SIGHUP stop ``sst --output-directory`` as Ctrl-C does (issue #24): one line,
the staging folder removed, the previous folder untouched, exit status 128 + the signal's
number; and a later run removes the staging folders a killed (SIGKILL) run left, never one of
a run still alive."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from progress_lines import without_progress

import sst_cdma
from sst_cdma.engine.stale_folders import owner_tag

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"
#: the checkout importable from the runs' own working folders
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}


def start_long_run(out: Path) -> subprocess.Popen:
    """``sst`` on a PHOLD torus that would run for minutes, writing into ``out``; returns once
    its staging folder is there (the run is then under way)."""
    # SIGHUP at its default whatever the tests inherited (under nohup it is ignored, and sst
    # then keeps it so: test_under_nohup_sighup_does_not_stop_the_run)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL);"
         " from sst_cdma.tools.cli.sst_main import main; sys.exit(main(sys.argv[1:]))",
         "--output-directory", str(out), str(PHOLD), "--", "--size", "3", "--time-limit", "1s",
         "--stats", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=out.parent, env=ENV)
    deadline = time.monotonic() + 60
    while not list(out.parent.glob(f"{out.name}.partial-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.2)  # into the run loop
    return proc


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_sst_in_one_line_and_keeps_the_previous_folder(tmp_path, signum):
    out = tmp_path / "out"
    out.mkdir()
    (out / "StatisticOutput.csv").write_text("the previous run's\n")
    (out / "notes.txt").write_text("mine\n")
    before = snapshot(out)
    proc = start_long_run(out)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, err
    assert without_progress(err) == f"sst: stopped by {signal.Signals(signum).name}\n"
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]      # staging removed


def dead_pid() -> int:
    """The number of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_later_run_removes_what_a_killed_run_left(tmp_path):
    out = tmp_path / "out"
    proc = start_long_run(out)
    proc.kill()                                   # SIGKILL: nothing of the run cleans up
    proc.communicate(timeout=30)
    left = list(tmp_path.glob("out.partial-*"))
    assert len(left) == 1                          # its staging folder stays behind
    sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                 output_directory=out, console=io.StringIO())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (out / "phold.csv").is_file()


def test_staging_folders_of_live_runs_and_other_machines_are_left_alone(tmp_path):
    out = tmp_path / "out"
    host, _, pid = owner_tag().rpartition("-")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        keep = [tmp_path / f"out.partial-{host}-{alive.pid}-abc123",      # a run still going
                tmp_path / f"out.partial-{host}-{os.getpid()}-def456",     # this process's
                tmp_path / f"out.partial-elsewhere-{dead_pid()}-ghi789",   # another machine's
                tmp_path / "out.partial-12345-jkl012",                     # no machine named
                tmp_path / f"other.partial-{host}-{dead_pid()}-mno345"]    # another folder's
        gone = tmp_path / f"out.partial-{host}-{dead_pid()}-pqr678"
        for folder in (*keep, gone):
            folder.mkdir()
            (folder / "StatisticOutput.csv").write_text("half\n")
        sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns"], output_directory=out,
                     console=io.StringIO())
        assert not gone.exists()
        assert all((folder / "StatisticOutput.csv").is_file() for folder in keep)
    finally:
        alive.kill()
        alive.wait()


def test_a_folder_set_aside_by_a_run_killed_mid_swap_is_put_back(tmp_path):
    """Killed between renaming the old folder aside and renaming the new one in (where the
    file system cannot exchange them): the next run finds no folder, and puts the old one
    back before replacing it, keeping the files it did not write."""
    out = tmp_path / "out"
    host, _, _ = owner_tag().rpartition("-")
    aside = tmp_path / f"out.old-{host}-{dead_pid()}-abcd1234"
    aside.mkdir()
    (aside / "notes.txt").write_text("mine\n")
    sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                 output_directory=out, console=io.StringIO())
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "phold.csv").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_under_nohup_sighup_does_not_stop_the_run(tmp_path):
    """A run started with SIGHUP ignored (``nohup``) keeps running when the terminal closes;
    SIGTERM still stops it."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN);"
         " from sst_cdma.tools.cli.sst_main import main; sys.exit(main(sys.argv[1:]))",
         "--output-directory", str(out), str(PHOLD), "--", "--size", "3", "--time-limit", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("out.partial-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert proc.poll() is None                          # still running
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and without_progress(err) == "sst: stopped by SIGTERM\n"


def test_ctrl_c_then_sigterm_a_moment_later_ends_as_ctrl_c_asked(tmp_path):
    # the attack: a supervisor sends SIGTERM 20 ms after the user's Ctrl-C, while the run
    # cleans up; the second signal must not cut the clean-up short or change the exit
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    before = snapshot(out)
    proc = start_long_run(out)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert without_progress(err) == "sst: interrupted\n"
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


CHILD = """
import os, signal, sys, time
from sst_cdma.engine.stop_signals import stop_on_signals
with stop_on_signals():
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    time.sleep(0.5)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_process_forked_while_stops_are_caught_dies_of_sigterm_quietly():
    # the attack: SIGTERM reaches a worker forked while the parent catches stops (a Dask
    # worker starting); it must end as the signal asks, with no KeyboardInterrupt traceback
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          env=ENV, timeout=60)
    assert done.stdout == "True\n", done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
