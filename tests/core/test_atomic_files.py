"""Files written whole: the old file survives a failed write, and no temporary is left."""
from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sst_cdma.engine.atomic_files import replace_whole, write_text_whole

REPO = Path(__file__).resolve().parents[2]


def test_a_file_is_replaced_whole_keeping_its_permissions(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    write_text_whole(path, "new\r\n")
    assert path.read_bytes() == b"new\r\n"
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("point,status\n0,ok\n")

    def half_then_fail(tmp):
        tmp.write_text("point,sta")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        replace_whole(path, half_then_fail)
    assert path.read_text() == "point,status\n0,ok\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_a_link_keeps_pointing_at_the_rewritten_file(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    write_text_whole(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "real.json").read_text() == "new"


def test_a_character_device_is_written_to_not_replaced(tmp_path):
    """As root, renaming a file over ``/dev/null`` would leave every program on the machine
    writing into a plain file: a device named as an output is written to as the device."""
    before = os.stat("/dev/null")
    write_text_whole("/dev/null", "discarded\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    with pytest.raises(OSError) as err:            # a device that refuses the write says so
        write_text_whole("/dev/full", "x" * 100000)
    assert err.value.errno == errno.ENOSPC and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_dev_stdout_is_written_to_as_the_process_output(tmp_path):
    script = ("from sst_cdma.engine.atomic_files import write_text_whole; "
              "write_text_whole('/dev/stdout', 'to the pipe\\n')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 0 and done.stdout == "to the pipe\n", done.stderr


def test_a_fifo_is_written_to_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_text_whole(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"] and fifo.is_fifo()


def test_a_folder_is_refused_and_kept(tmp_path):
    folder = tmp_path / "out.json"
    folder.mkdir()
    (folder / "mine").write_text("kept\n")
    with pytest.raises(OSError, match="is a folder, which is not replaced by a file"):
        write_text_whole(folder, "{}\n")
    assert (folder / "mine").read_text() == "kept\n"


def test_an_owned_file_is_never_written_through_a_link(tmp_path):
    """A file a program owns in a folder it writes (a sweep's table): a link planted there by
    someone else is refused, not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own\n")
    link = tmp_path / "results.csv"
    link.symlink_to(victim)
    with pytest.raises(OSError, match=r"is a symlink \(to .*victim.txt\) the program did not "
                                      r"make"):
        replace_whole(link, lambda p: p.write_text("table\n"), owned=True)
    assert victim.read_text() == "the user's own\n" and link.is_symlink()
    plain = tmp_path / "results.parquet"
    replace_whole(plain, lambda p: p.write_text("table\n"), owned=True)
    assert plain.read_text() == "table\n"


def test_a_block_device_is_refused_and_kept(tmp_path):
    """A block device named as an output (a disk, as root) is neither written nor replaced.
    The node made here names a device number reserved for local use, so nothing real is ever
    at risk."""
    node = tmp_path / "disk"
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(240, 0))
    except PermissionError:
        pytest.skip("making a device node needs root")
    with pytest.raises(OSError, match="is a block device, which is not replaced by a file"):
        write_text_whole(node, "over the disk\n")
    assert stat.S_ISBLK(os.lstat(node).st_mode)
