"""The output folder is the user's (issues #24, #34): a new one appears whole, an existing one
stays the same folder and gets the run's files moved in one by one, marked ``.incomplete``
meanwhile, so a run killed at any step leaves the previous files, the new ones, or a folder
that says it is half-written (and that read_statistics refuses); an output folder given
through a dangling symlink, a symlink loop or a symlink to another file system is one line or
works."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine import output_folder
from sst_cdma.engine.runner import RunError

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


def test_a_run_killed_at_any_step_leaves_old_new_or_a_marked_folder(tmp_path, monkeypatch):
    from sst_cdma.engine.statistics.reader import StatisticsFileError

    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run(out, size=3)
    (out / "notes.txt").write_text("mine\n")
    old = snapshot(out)
    run(fresh, size=2)
    new = {**snapshot(fresh), "notes.txt": b"mine\n"}
    assert set(old) - {"notes.txt"} == set(new) - {"notes.txt"} and old != new
    real = {"rename": os.rename, "replace": os.replace, "unlink": os.unlink}
    steps, marked = 0, 0
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
        now = snapshot(out)
        if ".incomplete" in now:              # half moved in: it says so, and is refused
            marked += 1
            assert set(now) - {".incomplete"} == set(new)
            with pytest.raises(StatisticsFileError, match="its folder is marked incomplete"):
                sst_cdma.read_statistics(out / "phold.csv")
        else:
            assert now in (old, new), f"mixed after {steps} steps"
        for leftover in tmp_path.glob("out.*-*"):
            output_folder.remove_tree(leftover)
        run(out, size=3)                      # back to the old outputs for the next step
        assert snapshot(out) == old
        if done:
            break
        steps += 1
    run(out, size=2)
    assert snapshot(out) == new and marked >= 2


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
    from sst_cdma.tools.cli.sst_main import main

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


def test_a_mount_point_gets_the_files_copied_in_and_marked_until_done(tmp_path, monkeypatch,
                                                                      mounted):
    """A folder on another file system than its staging folder (a mount point) gets the files
    copied in one by one: ``.incomplete`` is there meanwhile, so one a stopped run left
    half-copied is refused by read_statistics, and the next run that finishes removes it
    and the half-copied files of killed runs."""
    from sst_cdma.engine.statistics.reader import StatisticsFileError

    out, fresh = mounted(tmp_path / "out"), tmp_path / "fresh"
    run(out, size=3)
    (out / "notes.txt").write_text("mine\n")
    run(fresh, size=2)
    replace = os.replace
    moved = []

    def replace_then_die(src, dst, **kwargs):
        moved.append(dst)
        if len(moved) == 2:
            raise Killed
        replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace_then_die)
    with pytest.raises(Killed):
        run(out, size=2)
    monkeypatch.setattr(os, "replace", replace)
    assert (out / ".incomplete").is_file()
    with pytest.raises(StatisticsFileError, match=r"phold.csv: its folder is marked incomplete"):
        sst_cdma.read_statistics(out / "phold.csv")
    for leftover in tmp_path.glob("out.*-*"):
        output_folder.remove_tree(leftover)
    from sst_cdma.engine.stale_folders import owner_tag

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


def test_an_existing_folder_stays_the_same_folder_with_its_owner_and_attributes(tmp_path):
    """The folder is the user's: after a run it is the same folder (inode), with its owner,
    group, mode and extended attributes (ACLs are extended attributes too); the working
    folder stays usable."""
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run(out, size=3)
    for n in range(3):
        (out / f"mine{n}.txt").write_text("mine\n")
    run(fresh, size=2)
    out.chmod(0o2750)
    try:
        os.setxattr(out, "user.project", b"cdma")
    except OSError:
        pass                                          # no user attributes on this file system
    attrs = {name: os.getxattr(out, name) for name in os.listxattr(out)}
    if os.geteuid() == 0:
        os.chown(out, 4242, 4343)                     # another user's folder, written by root
    before = out.stat()
    os.chdir(out)
    try:
        run(out, size=2)
    finally:
        os.chdir(REPO)
    after = out.stat()
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode) == \
        (before.st_ino, before.st_uid, before.st_gid, before.st_mode)
    assert {name: os.getxattr(out, name) for name in os.listxattr(out)} == attrs
    assert snapshot(out) == {**snapshot(fresh), **{f"mine{n}.txt": b"mine\n" for n in range(3)}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]


def test_a_bind_mount_of_the_same_file_system_gets_the_files_moved_in(tmp_path, bound):
    """A bind mount has the file system's device number but is a mount of its own, which a
    rename cannot cross (EXDEV): the run copies its files in, one step each."""
    out, fresh, real = tmp_path / "out", tmp_path / "fresh", tmp_path / "real"
    real.mkdir()
    (real / "notes.txt").write_text("mine\n")
    bound(real, out)
    assert os.stat(out).st_dev == os.stat(tmp_path).st_dev
    run(out)
    run(out)                                   # and once more, over its own files
    run(fresh)
    assert snapshot(real) == {**snapshot(fresh), "notes.txt": b"mine\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out", "real"]
