"""The output folder is replaced whole (issue #24): a run killed while its outputs move in
leaves the previous folder or the new one, never a mix; and an output folder given through a
dangling symlink, a symlink loop or a symlink to another file system is one line or works."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma import output_folder
from sst_cdma.runner import RunError

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"


def run(out: Path, size: int = 2) -> None:
    """A small PHOLD torus writing its statistics (phold.csv) and graph into ``out``."""
    sst_cdma.run(PHOLD, ["--size", str(size), "--time-limit", "10ns", "--stats", "csv"],
                 output_directory=out, output_json="graph.json", console=io.StringIO())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


class Killed(BaseException):
    """The process died here: nothing after it runs."""


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_run_killed_while_its_outputs_move_in_leaves_no_mix(tmp_path, monkeypatch, exchange):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run(out, size=3)
    (out / "notes.txt").write_text("mine\n")
    old = snapshot(out)
    run(fresh, size=2)
    new = {**snapshot(fresh), "notes.txt": b"mine\n"}
    assert set(old) - {"notes.txt"} == set(new) - {"notes.txt"} and old != new
    if not exchange:
        monkeypatch.setattr(output_folder, "_exchange", lambda a, b: False)
    real = {"rename": os.rename, "replace": os.replace, "link": os.link}
    steps = 0
    while True:                               # die at the 1st step that touches a file, 2nd...
        calls = []

        def step(name, *args, **kwargs):
            calls.append(name)
            if len(calls) > steps:
                raise Killed
            return real[name](*args, **kwargs)

        for name in real:
            monkeypatch.setattr(os, name, lambda *a, _n=name, **k: step(_n, *a, **k))
        try:
            run(out, size=2)
        except Killed:
            pass
        finally:
            for name, fn in real.items():
                monkeypatch.setattr(os, name, fn)
        done = len(calls) <= steps
        if out.exists():
            assert snapshot(out) in (old, new), f"mixed after {steps} steps"
        else:                                 # between the two renames: the old one is aside
            (aside,) = tmp_path.glob("out.old-*")
            assert not exchange and snapshot(aside) == old
            os.rename(aside, out)              # what the next run does (test_stop_signals)
        for leftover in tmp_path.glob("out.*-*"):
            output_folder.shutil.rmtree(leftover)
        if done:
            break
        steps += 1
    assert snapshot(out) == new and steps >= 1


def test_an_existing_folder_keeps_its_mode_and_the_files_the_run_did_not_write(tmp_path):
    out = tmp_path / "out"
    run(out)
    (out / "mine" / "deep").mkdir(parents=True)
    (out / "mine" / "deep" / "notes.txt").write_text("kept\n")
    (out / "phold.csv").write_text("overwritten by the run\n")
    out.chmod(0o750)
    run(out)
    assert (out / "mine" / "deep" / "notes.txt").read_text() == "kept\n"
    assert (out / "phold.csv").read_text() != "overwritten by the run\n"
    assert out.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_dangling_symlink_or_a_loop_is_one_line_naming_it(tmp_path):
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    with pytest.raises(RunError) as err:
        run(dangling)
    assert str(err.value) == (f"--output-directory {dangling}: is a dangling symlink (to "
                              f"{tmp_path / 'nowhere'}, which does not exist)")
    with pytest.raises(RunError) as err:
        run(loop)
    assert str(err.value) == f"--output-directory {loop}: is a symlink loop"
    with pytest.raises(RunError) as err:
        run(loop / "below")
    assert str(err.value) == f"--output-directory {loop / 'below'}: {loop} is a symlink loop"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "loop"]


def test_sst_says_a_dangling_symlink_in_one_line(tmp_path, capsys):
    from sst_cdma.cli.sst_main import main

    (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    assert main(["--output-directory", str(tmp_path / "out"), str(PHOLD)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a dangling symlink" in err


def other_file_system(tmp_path: Path) -> Path:
    """A folder on a file system other than ``tmp_path``'s (skips when there is none)."""
    for root in ("/dev/shm", "/run/user", "/tmp", os.path.expanduser("~")):
        if os.path.isdir(root) and os.access(root, os.W_OK) and \
                os.stat(root).st_dev != os.stat(tmp_path).st_dev:
            import tempfile
            return Path(tempfile.mkdtemp(dir=root))
    pytest.skip("no second writable file system here")


def test_a_symlink_to_another_file_system_is_staged_beside_its_target(tmp_path):
    elsewhere = other_file_system(tmp_path)
    try:
        (elsewhere / "real").mkdir()
        (elsewhere / "real" / "notes.txt").write_text("mine\n")
        link = tmp_path / "out"
        link.symlink_to(elsewhere / "real")
        run(link)                              # a new run...
        run(link)                              # ... and one replacing it
        assert link.is_symlink() and (link / "phold.csv").is_file()
        assert (link / "notes.txt").read_text() == "mine\n"
        assert sorted(p.name for p in elsewhere.iterdir()) == ["real"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    finally:
        output_folder.shutil.rmtree(elsewhere)


def test_a_mount_point_gets_the_files_copied_in_and_marked_until_done(tmp_path, monkeypatch):
    """A folder that cannot be renamed (a mount point) gets the files copied in one by one:
    ``.incomplete`` is there meanwhile, so one a stopped run left half-copied is refused by
    read_statistics, and the next run that finishes removes it."""
    from sst_cdma.statistics.reader import StatisticsFileError

    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run(out, size=3)
    (out / "notes.txt").write_text("mine\n")
    run(fresh, size=2)
    ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(out) or ismount(p))
    replace = os.replace
    moved = []

    def replace_then_die(src, dst):
        moved.append(dst)
        if len(moved) == 2:
            raise Killed
        replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_die)
    with pytest.raises(Killed):
        run(out, size=2)
    monkeypatch.setattr(os, "replace", replace)
    assert (out / ".incomplete").is_file()
    with pytest.raises(StatisticsFileError, match=r"phold.csv: its folder is marked incomplete"):
        sst_cdma.read_statistics(out / "phold.csv")
    for leftover in tmp_path.glob("out.*-*"):
        output_folder.shutil.rmtree(leftover)
    from sst_cdma.stale_folders import owner_tag

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = out / f".copy-{owner_tag().rpartition('-')[0]}-{ended.pid}-abcd1234"
    dead.write_text("half a file a killed run was copying in\n")
    run(out, size=2)
    assert not dead.exists()
    new = {name: data for name, data in snapshot(out).items()       # (a copy the "killed"
           if not name.startswith(".copy-")}                        # run, alive, left)
    assert new == {**snapshot(fresh), "notes.txt": b"mine\n"}
    assert len(sst_cdma.read_statistics(out / "phold.csv")) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]


@pytest.mark.parametrize("why", ["working folder", "many other files"])
def test_a_folder_that_should_not_be_swapped_gets_the_files_moved_in(tmp_path, monkeypatch, why):
    """The working folder (``--output-directory .``: a shell there would be left in a deleted
    folder) and a folder of many files the run does not write keep their identity: the
    files are moved in one by one, the marker gone once done."""
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run(out, size=3)
    for n in range(3):
        (out / f"mine{n}.txt").write_text("mine\n")
    run(fresh, size=2)
    inode = out.stat().st_ino
    if why == "working folder":
        monkeypatch.chdir(out)
    else:
        monkeypatch.setattr(output_folder, "CARRY_LIMIT", 2)
    run(out, size=2)
    assert out.stat().st_ino == inode                   # the same folder, not a new one
    assert os.path.samefile(os.getcwd(), out) == (why == "working folder")
    assert snapshot(out) == {**snapshot(fresh), **{f"mine{n}.txt": b"mine\n" for n in range(3)}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]


def test_a_small_output_folder_is_a_new_folder_after_a_run(tmp_path):
    out = tmp_path / "out"
    run(out)
    inode = out.stat().st_ino
    run(out)
    assert out.stat().st_ino != inode                   # swapped in whole
