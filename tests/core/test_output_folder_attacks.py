"""Attacks on a shared output folder (issue #34): whoever can create a file in a results folder
must not be able to make the next run write, or delete, anything outside it or anything of the
user's inside it. Each test states the attack; the run refuses in one line naming the path,
changes nothing in the folder and keeps its outputs beside it, or is not fooled at all."""
from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.engine import file_safety, output_folder
from sst_cdma.engine.runner import RunError

from test_output_folder import PHOLD, run, snapshot


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of the user's outside the output folder that an attacker wants overwritten."""
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir()
    path.write_text("the user's own\n")
    return path


def refused(out: Path, rel: str, what: str) -> Path:
    """Run into ``out``, expecting the one-line refusal naming ``out/rel`` as ``what``; the
    folder where the outputs were kept."""
    with pytest.raises(RunError) as err:
        run(out)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"--output-directory {out}: {out / rel} is {what}")
    kept = Path(text.rpartition(" in ")[2])
    assert kept.parent == out.parent and kept.name.startswith("out.kept-")
    assert (kept / "phold.csv").is_file()                 # nothing of the run lost
    return kept


def test_a_planted_marker_symlink_does_not_redirect_the_marker_write(tmp_path, victim):
    """``.incomplete`` is written first when files are moved in: a symlink planted under that
    name would make the run overwrite (as root: any) file, then remove the evidence."""
    out = tmp_path / "out"
    run(out)
    before = snapshot(out)
    (out / ".incomplete").symlink_to(victim)
    refused(out, ".incomplete", "a symlink, not the marker a run writes")
    assert victim.read_text() == "the user's own\n"
    assert (out / ".incomplete").is_symlink()
    assert {k: v for k, v in snapshot(out).items() if k != ".incomplete"} == before


@pytest.mark.parametrize("name", ["phold.csv", "graph.json"])
def test_a_planted_output_symlink_is_not_written_through(tmp_path, victim, name):
    out = tmp_path / "out"
    run(out)
    (out / name).unlink()
    (out / name).symlink_to(victim)
    refused(out, name, "a symlink, not a file the run writes")
    assert victim.read_text() == "the user's own\n" and (out / name).is_symlink()


def test_a_planted_subfolder_symlink_is_not_written_through(tmp_path, victim):
    """A run writing ``sub/graph.json``: ``sub`` made a link to another folder."""
    out = tmp_path / "out"
    sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                 output_directory=out, output_json="sub/graph.json", console=io.StringIO())
    (out / "sub" / "graph.json").unlink()
    (out / "sub").rmdir()
    (out / "sub").symlink_to(victim.parent)
    with pytest.raises(RunError, match=r"sub is a symlink, not a folder the run writes"):
        sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                     output_directory=out, output_json="sub/graph.json",
                     console=io.StringIO())
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_a_link_planted_after_the_check_is_still_not_followed(tmp_path, victim, monkeypatch):
    """The check and the move are two steps: a link swapped in between must not be followed
    either (folders are opened with O_NOFOLLOW, files renamed over, never opened)."""
    out = tmp_path / "out"
    sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                 output_directory=out, output_json="sub/graph.json", console=io.StringIO())
    check = output_folder._check_folder

    def check_then_plant(*args):
        check(*args)
        if not (out / "sub").is_symlink():
            (out / "sub" / "graph.json").unlink()
            (out / "sub").rmdir()
            (out / "sub").symlink_to(victim.parent)
            (out / "phold.csv").unlink()
            (out / "phold.csv").symlink_to(victim)

    monkeypatch.setattr(output_folder, "_check_folder", check_then_plant)
    with pytest.raises(RunError, match="cannot move the outputs in"):
        sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                     output_directory=out, output_json="sub/graph.json",
                     console=io.StringIO())
    assert victim.read_text() == "the user's own\n"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_a_folder_where_the_run_writes_a_file_is_not_deleted(tmp_path):
    """``out/phold.csv/`` a folder of the user's (with files) where the run writes a file."""
    out = tmp_path / "out"
    run(out)
    (out / "phold.csv").unlink()
    (out / "phold.csv").mkdir()
    (out / "phold.csv" / "notes.txt").write_text("mine\n")
    refused(out, "phold.csv", "a folder, not a file the run writes")
    assert (out / "phold.csv" / "notes.txt").read_text() == "mine\n"


def test_a_fifo_where_the_run_writes_a_file_is_neither_opened_nor_replaced(tmp_path):
    out = tmp_path / "out"
    run(out)
    (out / "phold.csv").unlink()
    os.mkfifo(out / "phold.csv")
    refused(out, "phold.csv", "a FIFO, not a file the run writes")
    assert (out / "phold.csv").is_fifo()


def test_a_file_system_mounted_inside_the_output_folder_keeps_its_files(tmp_path, mounted):
    """A mount inside the output folder: nothing in it is removed, copied away or changed."""
    out = tmp_path / "out"
    run(out)
    data = mounted(out / "data")
    (data / "dataset.bin").write_bytes(b"\x01" * 1000)
    run(out)
    assert (data / "dataset.bin").read_bytes() == b"\x01" * 1000
    assert os.path.ismount(data)


def test_a_killed_runs_staging_folder_with_a_mount_inside_is_not_emptied(tmp_path, mounted):
    """A stale staging folder (its process gone) is removed by the next run, but never into a
    file system mounted inside it."""
    out = tmp_path / "out"
    ended = subprocess.Popen(["true"])
    ended.wait()
    host = output_folder.owner_tag().rpartition("-")[0]
    stale = tmp_path / f"out.partial-{host}-{ended.pid}-abcd1234"
    (stale / "half").mkdir(parents=True)
    (stale / "half" / "phold.csv").write_text("half\n")
    data = mounted(stale / "mnt")
    (data / "dataset.bin").write_bytes(b"\x02" * 100)
    run(out)
    assert (data / "dataset.bin").read_bytes() == b"\x02" * 100
    assert not (stale / "half").exists()                  # what was the run's is gone


def test_remove_tree_removes_a_link_not_its_target(tmp_path, victim):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "link").symlink_to(victim.parent)
    (tree / "file").symlink_to(victim)
    assert file_safety.remove_tree(tree) and not tree.exists()
    assert victim.read_text() == "the user's own\n"


def test_a_planted_statistics_link_in_the_working_folder_is_not_written_through(
        tmp_path, victim, monkeypatch):
    """Without an output folder statistics go to the working folder, as SST's do: a link
    planted there under the statistics file's name is refused, not followed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "phold.csv").symlink_to(victim)
    with pytest.raises(RunError, match=r"phold.csv: is a symlink \(to .*precious.txt\); "
                                       "statistics are not written through a link"):
        sst_cdma.run(PHOLD, ["--size", "2", "--time-limit", "10ns", "--stats", "csv"],
                     console=io.StringIO())
    assert victim.read_text() == "the user's own\n"
