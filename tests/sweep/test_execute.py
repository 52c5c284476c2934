"""One point in this process: its folder is complete or absent, failures are records."""
from __future__ import annotations

import json

from sst_cdma.sweep.execute import DONE, PointTask, is_complete, load_result, run_point


def _task(counting, tmp_path, *opts, key="k1"):
    return PointTask(key=key, script=str(counting.script), topology_name="counting.py",
                     model_options=tuple(opts), points_dir=str(tmp_path / "points"))


def test_point_publishes_a_complete_folder(counting, tmp_path):
    record = run_point(_task(counting, tmp_path, "--n", "2", "--value", "3"))
    folder = tmp_path / "points" / "k1"
    assert record["status"] == "ok" and record["error"] == ""
    assert record["summary"]["iteration_time_s"] == 9.0
    assert record["sim_time_ps"] > 0 and record["events"] >= 0
    assert is_complete(folder)
    assert (folder / "summary.json").is_file() and (folder / "run_statistics.csv").is_file()
    assert json.loads((folder / "result.json").read_text()) == record
    assert [p.name for p in (tmp_path / "points").iterdir()] == ["k1"]   # no tmp folder left
    assert counting.count(2) == 1
    assert run_point(_task(counting, tmp_path, "--n", "2", "--value", "3")) == record
    assert counting.count(2) == 1                                      # finished: not rerun


def test_failure_is_a_record_with_a_clean_one_line_error(counting, tmp_path):
    record = run_point(_task(counting, tmp_path, "--n", "1", "--fail"))
    assert record["status"] == "failed"
    assert "lonely" in record["error"] and "\n" not in record["error"]
    assert str(tmp_path) not in record["error"]                       # no absolute paths
    assert load_result(tmp_path / "points", "k1")["status"] == "failed"


def test_half_written_folder_is_not_a_result_and_is_replaced(counting, tmp_path):
    run_point(_task(counting, tmp_path, "--n", "3"))
    folder = tmp_path / "points" / "k1"
    (folder / DONE).unlink()
    (folder / "junk.txt").write_text("half")
    assert load_result(tmp_path / "points", "k1") is None
    record = run_point(_task(counting, tmp_path, "--n", "3"))
    assert record["status"] == "ok" and is_complete(folder)
    assert not (folder / "junk.txt").exists()
    assert counting.count(3) == 2


def test_a_corrupt_cached_result_is_recomputed_once_and_the_fresh_one_kept(counting, tmp_path):
    run_point(_task(counting, tmp_path, "--n", "4"))
    folder = tmp_path / "points" / "k1"
    for corrupt in ('{"key": "k1", "sta', "[]", '{"key": "k1"}', "\xff"):
        (folder / "result.json").write_text(corrupt, encoding="latin-1")
        assert load_result(tmp_path / "points", "k1") is None
        record = run_point(_task(counting, tmp_path, "--n", "4"))
        assert record["status"] == "ok" and record["summary"]["iteration_time_s"] == 5.0
        assert load_result(tmp_path / "points", "k1") == record          # the fresh one, kept
        assert run_point(_task(counting, tmp_path, "--n", "4")) == record  # and reused
    assert counting.count(4) == 5
    assert [p.name for p in (tmp_path / "points").iterdir()] == ["k1"]   # nothing left aside


def test_a_path_in_the_way_of_a_point_is_a_storage_error_naming_it(counting, tmp_path):
    import pytest

    from sst_cdma.sweep.dispatch import Dispatcher
    from sst_cdma.sweep.execute import PointStorageError

    points = tmp_path / "points"
    points.mkdir()
    (points / "k1").symlink_to(tmp_path / "gone")                      # a stale symlink
    with pytest.raises(PointStorageError) as info:
        run_point(_task(counting, tmp_path, "--n", "5"))
    assert not isinstance(info.value, OSError)             # not taken for a lost scheduler
    assert str(info.value) == "cannot write the point's folder points/k1: Not a directory"
    with Dispatcher(inline=True) as dispatcher:            # a failed point, not cached
        [(_, record)] = list(dispatcher.run([_task(counting, tmp_path, "--n", "5")]))
    assert record["status"] == "failed" and record["transient"] is True
    assert record["error"] == str(info.value)
    (tmp_path / "points").rename(tmp_path / "moved")
    (tmp_path / "points").write_text("a file")                         # points/ is a file
    with pytest.raises(PointStorageError, match="folder points: File exists"):
        run_point(_task(counting, tmp_path, "--n", "5"))
