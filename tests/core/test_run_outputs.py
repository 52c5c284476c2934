"""A run's outputs appear together or not at all (issue #12, item 9): they are written into a
staging folder beside ``--output-directory`` and moved in at the end, so an interrupted run
leaves the previous run's files intact; and output paths that cannot be written are one-line
errors naming the path (item 20)."""
from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
OUTPUTS = {"StatisticOutput.csv", "summary.json", "config.json", "trace.json", "gpu0.stream"}


def run(out: Path, *opts: str, **kwargs):
    """digits_cnn (fast) on the P100 topology, writing into ``out``."""
    return sst_cdma.run(PASCAL, ["--network", "digits_cnn", *opts], output_directory=out,
                        console=io.StringIO(), **kwargs)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def interrupt_mid_run(monkeypatch) -> None:
    """Ctrl-C in the middle of the simulation: the third kernel to end raises it."""
    from components.gpu import GPU  # the module the element library loads

    done = GPU._kernel_done
    calls = []

    def kernel_done(self, op, label, start):
        calls.append(label)
        if len(calls) == 3:
            raise KeyboardInterrupt
        done(self, op, label, start)

    monkeypatch.setattr(GPU, "_kernel_done", kernel_done)


def test_outputs_land_together_and_no_staging_folder_is_left(tmp_path):
    result = run(tmp_path / "out")
    assert set(snapshot(tmp_path / "out")) == OUTPUTS
    assert result.output_directory == tmp_path / "out"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_a_new_output_directory_has_the_mode_mkdir_gives_under_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        run(tmp_path / "out")
    finally:
        os.umask(previous)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~umask


def test_an_interrupted_run_leaves_the_previous_outputs_intact(tmp_path, monkeypatch):
    out = tmp_path / "out"
    run(out, "--batch", "32")
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    interrupt_mid_run(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run(out, "--batch", "64", "--policy", "all")
    assert snapshot(out) == before                       # nothing truncated, nothing added
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]   # staging removed


def test_an_interrupted_first_run_creates_no_folder(tmp_path, monkeypatch):
    interrupt_mid_run(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "new")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_run_leaves_the_previous_outputs_intact(tmp_path):
    out = tmp_path / "out"
    run(out)
    before = snapshot(out)
    with pytest.raises(RunError):
        run(out, "--network", "vgg16", "--batch", "200000")   # more than the GPU memory
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_sst_interrupted_exits_130_and_keeps_the_old_files(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert main(["--output-directory", str(out), str(PASCAL), "--", "--network",
                 "digits_cnn"]) == 0
    before = snapshot(out)
    interrupt_mid_run(monkeypatch)
    code = main(["--output-directory", str(out), str(PASCAL), "--", "--network", "digits_cnn",
                 "--batch", "16"])
    assert code == 130 and "sst: interrupted" in capsys.readouterr().err
    assert snapshot(out) == before


def test_a_new_run_replaces_the_old_outputs_whole(tmp_path):
    out = tmp_path / "out"
    run(out, "--batch", "32")
    run(out, "--batch", "16")
    fresh = tmp_path / "fresh"
    run(fresh, "--batch", "16")
    assert snapshot(out) == snapshot(fresh)


@pytest.fixture
def default_sighup():
    """SIGHUP at its default for the test, whatever the suite inherited (under nohup it is
    ignored, and stop_on_signals then leaves it so)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_while_the_outputs_move_in_waits_for_the_move(tmp_path, monkeypatch,
                                                                     signum, default_sighup):
    from sst_cdma.engine import output_folder
    from sst_cdma.engine.stop_signals import exit_status, stop_on_signals

    out = tmp_path / "out"
    run(out, "--batch", "32")
    fresh = tmp_path / "fresh"
    run(fresh, "--batch", "16")
    move = output_folder._move_folder

    def signal_then_move(src, fd):            # the signal comes as the files move in
        signal.raise_signal(signum)
        move(src, fd)

    monkeypatch.setattr(output_folder, "_move_folder", signal_then_move)
    with pytest.raises(KeyboardInterrupt) as stop, stop_on_signals():
        run(out, "--batch", "16")
    assert exit_status(stop.value) == 128 + signum
    assert snapshot(out) == snapshot(fresh)              # the move was finished first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- 20: output paths --------------------------------------------------------------------------
def test_an_output_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(RunError) as err:
        run(tmp_path / "taken")
    assert str(err.value) == f"--output-directory {tmp_path / 'taken'}: is a file, not a folder"
    with pytest.raises(RunError) as err:
        run(tmp_path / "taken" / "below")
    assert str(err.value) == (f"--output-directory {tmp_path / 'taken' / 'below'}: "
                              f"{tmp_path / 'taken'} is a file, not a folder")
    assert (tmp_path / "taken").read_text() == "x"


def test_missing_folders_of_the_output_directory_are_created(tmp_path):
    run(tmp_path / "a" / "b" / "out")
    assert set(snapshot(tmp_path / "a" / "b" / "out")) == OUTPUTS


def test_output_json_in_a_missing_folder_or_onto_a_folder_is_refused(tmp_path):
    with pytest.raises(RunError) as err:
        run(None, output_json=str(tmp_path / "nope" / "g.json"))  # type: ignore[arg-type]
    assert str(err.value) == (f"--output-json {tmp_path / 'nope' / 'g.json'}: no such folder "
                              f"{tmp_path / 'nope'}")
    with pytest.raises(RunError) as err:
        run(None, output_dot=str(tmp_path))  # type: ignore[arg-type]
    assert str(err.value) == f"--output-dot {tmp_path}: is a folder, not a file"
    out = tmp_path / "out"
    (out / "graph.json").mkdir(parents=True)
    with pytest.raises(RunError) as err:
        run(out, output_json="graph.json")
    assert str(err.value) == f"--output-json {out / 'graph.json'}: is a folder, not a file"


def test_output_json_inside_the_output_directory_moves_in_with_the_rest(tmp_path):
    out = tmp_path / "out"
    run(out, output_json="graphs/g.json")
    assert set(snapshot(out)) == OUTPUTS | {"graphs/g.json"}
    # as SST, the saved graph does not carry --output-directory: the replay names its own
    again = sst_cdma.run(out / "graphs" / "g.json", console=io.StringIO(),
                         output_directory=tmp_path / "again")
    assert again.sim_time_ps > 0 and (tmp_path / "again" / "StatisticOutput.csv").is_file()


def test_sst_names_the_bad_path_in_one_line(tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    code = main(["--output-directory", str(tmp_path / "taken"), str(PASCAL)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err == f"sst: --output-directory {tmp_path / 'taken'}: is a file, not a folder\n"
