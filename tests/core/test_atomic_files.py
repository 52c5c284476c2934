"""Files written whole: the old file survives a failed write, and no temporary is left."""
from __future__ import annotations

import os

import pytest

from sst_cdma.atomic_files import replace_whole, write_text_whole


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
