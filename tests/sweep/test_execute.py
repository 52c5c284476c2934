"""One point in this process: its folder is complete or absent, failures are records."""
from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from sst_cdma.tools.sweep.execute import DONE, PointTask, is_complete, load_result, run_point


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


def test_a_point_another_worker_published_first_returns_that_workers_record(counting,
                                                                             tmp_path,
                                                                             monkeypatch):
    import sst_cdma.tools.sweep.execute as execute

    first = run_point(_task(counting, tmp_path, "--n", "2", "--value", "3"))
    real_run_into = execute._run_into

    def late(task, tmp):  # ran while the cache was still empty, finished after the other
        record = real_run_into(task, tmp)
        record["summary"]["iteration_time_s"] = -1.0  # what would tell the two apart
        return record

    monkeypatch.setattr(execute, "load_result",
                        lambda points, key, real=execute.load_result: None
                        if late.checking else real(points, key))
    monkeypatch.setattr(execute, "_run_into", late)
    late.checking = True  # type: ignore[attr-defined]
    real_publish = execute._publish

    def publish(tmp, final, replace_failed=False):
        late.checking = False  # type: ignore[attr-defined]
        return real_publish(tmp, final, replace_failed)

    monkeypatch.setattr(execute, "_publish", publish)
    again = run_point(_task(counting, tmp_path, "--n", "2", "--value", "3"))
    assert again == first == load_result(tmp_path / "points", "k1")
    assert [p.name for p in (tmp_path / "points").iterdir()] == ["k1"]   # its folder dropped


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


@pytest.mark.parametrize("edit", [
    lambda r: r["summary"].update(iteration_time_s=float("nan")),
    lambda r: r["summary"].update(iteration_time_s=float("inf")),
    lambda r: r["summary"].update(iteration_time_s=-5.0),
    lambda r: r.update(sim_time_ps=-1),
    lambda r: r.update(events=-3),
    lambda r: r.update(wall_s=-0.5)],
    ids=["nan time", "infinite time", "negative time", "negative sim time",
         "negative events", "negative wall time"])
def test_an_edited_cached_result_with_an_impossible_figure_is_not_taken(counting, tmp_path,
                                                                       edit):
    """The attack: a cached point's result.json edited to hold NaN or a negative time went
    into results.csv as if the run had given it. It is not a result: the point runs again."""
    record = run_point(_task(counting, tmp_path, "--n", "4"))
    edited = json.loads(json.dumps(record))
    edit(edited)
    (tmp_path / "points" / "k1" / "result.json").write_text(json.dumps(edited))
    assert load_result(tmp_path / "points", "k1") is None
    fresh = run_point(_task(counting, tmp_path, "--n", "4"))
    assert counting.count(4) == 2
    assert fresh["summary"] == record["summary"] and fresh["sim_time_ps"] == record["sim_time_ps"]
    assert load_result(tmp_path / "points", "k1") == fresh


def test_a_cached_result_that_is_a_fifo_is_not_waited_on(counting, tmp_path):
    import os

    run_point(_task(counting, tmp_path, "--n", "4"))
    result = tmp_path / "points" / "k1" / "result.json"
    result.unlink()
    os.mkfifo(result)
    assert load_result(tmp_path / "points", "k1") is None  # at once: it is not read


def test_a_path_in_the_way_of_a_point_is_a_storage_error_naming_it(counting, tmp_path):
    import pytest

    from sst_cdma.tools.sweep.dispatch import Dispatcher
    from sst_cdma.tools.sweep.execute import PointStorageError

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


REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "workloads" / "profiles" / "alexnet.json"


def _planned(spec_path, points_dir):
    """The tasks of a spec as the sweep makes them, after the trip to a Dask worker."""
    from sst_cdma.tools.sweep.driver import point_tasks
    from sst_cdma.tools.sweep.spec import load_spec

    return [pickle.loads(pickle.dumps(task)) for _, task in point_tasks(load_spec(spec_path),
                                                                 Path(points_dir))]


def _cdma_spec(folder, body):
    (folder / "prof").mkdir(exist_ok=True)
    shutil.copy(REPO / "topologies" / "pascal_cdma.py", folder / "topo.py")
    spec = folder / "s.yaml"
    spec.write_text("topology: topo.py\noptions: {network: alexnet, batch: 16, policy: all}\n"
                    + body)
    return spec


def test_a_param_naming_a_file_runs_with_it_and_again_when_it_changes(tmp_path):
    shutil.copy(PROFILE, tmp_path / "b.json")
    spec = _cdma_spec(tmp_path, 'params: {"gpu0.dma": {profile: [prof/b.json]}}\n')
    shutil.copy(PROFILE, tmp_path / "prof" / "b.json")
    [task] = _planned(spec, tmp_path / "points")
    assert task.overrides["gpu0.dma"]["profile"] == str(tmp_path / "prof" / "b.json")
    record = run_point(task)
    assert record["status"] == "ok", record["error"]      # not read from the point's folder
    profile = json.loads(PROFILE.read_text())
    profile["provenance"] = {"edited": True}
    (tmp_path / "prof" / "b.json").write_text(json.dumps(profile))
    [edited] = _planned(spec, tmp_path / "points")
    assert edited.key != task.key                         # edited: runs again
    (tmp_path / "prof" / "b.json").write_bytes((tmp_path / "b.json").read_bytes())
    assert _planned(spec, tmp_path / "points")[0].key == task.key


def test_errors_show_files_as_written_once_wherever_the_spec_is_run(tmp_path, monkeypatch):
    (tmp_path / "prof").mkdir()
    (tmp_path / "prof" / "bad.json").write_text(PROFILE.read_text()[:200])
    spec = _cdma_spec(tmp_path, "points:\n  - {profile: prof/bad.json}\n"
                                '  - {params: {"gpu0.dma": {profile: prof/bad.json}}}\n')
    errors = []
    for cwd, spec_path in ((tmp_path, "s.yaml"), (tmp_path.parent, spec)):
        monkeypatch.chdir(cwd)
        for task in _planned(spec_path, tmp_path / f"points{len(errors)}"):
            errors.append(run_point(task)["error"])
    assert errors[:2] == errors[2:]
    for error in errors:
        assert error.startswith("prof/bad.json: gpu0.dma: not a profile: invalid JSON at line "), \
            error
        assert error.count("bad.json") == 1 and str(tmp_path) not in error


def test_a_run_error_names_its_place_once(tmp_path):
    from sst_cdma.engine.runner import RunError
    from sst_cdma.tools.sweep.execute import clean_message, script_error
    from sst_cdma.tools.sweep.spec import SpecPath

    where = str(tmp_path / "prof" / "bad.json")
    exc = RunError(f"gpu0.dma: {where}: not valid JSON", where)
    paths = {where: "prof/bad.json", str(tmp_path / "samples"): "samples/"}
    assert clean_message(script_error(exc, ""), "x.py", "x.py", None, paths) == \
        "gpu0.dma: prof/bad.json: not valid JSON"
    other = RunError(f"cannot read {tmp_path}/samples/a.npy or {tmp_path}/samples", "x.py:3")
    assert clean_message(script_error(other, ""), "x.py", "x.py", None, paths) == \
        "x.py:3: cannot read samples/a.npy or samples/"
    assert pickle.loads(pickle.dumps(SpecPath(where, "prof/bad.json"))).written == \
        "prof/bad.json"


SUMMARY_LIKE = {"iteration_time_s": 0.1 + 0.2, "gpus": [{"name": "gpu0", "bytes": 2 ** 40,
                                                      "ratio": 1 / 3, "none": None,
                                                      "ok": True, "layers": []}] * 3,
                "by_id": {1: "a", 10: "b", 2: {}}, "é note": "tab\t\"quoted\"", "z": -0.0,
                "nested": {"b": [[1, 2.5e-30], {"y": 1e22}], "a": False}}


def test_result_json_with_the_summarys_text_spliced_in_is_json_dumps_text():
    from sst_cdma.tools.sweep.execute import result_text

    text = json.dumps(SUMMARY_LIKE, indent=2, sort_keys=True) + "\n"
    record = {"key": "k1", "status": "ok", "error": "", "sim_time_ps": 5, "events": 7,
              "end_reason": "done", "summary": json.loads(text), "run_s": 0.25,
              "wall_s": 0.5}
    assert result_text(record, text) == json.dumps(record, indent=2) == result_text(record)
    empty = {**record, "summary": {}}
    assert result_text(empty, "{}\n") == json.dumps(empty, indent=2)


def test_a_cdma_points_result_json_embeds_the_summary_as_written(tmp_path, monkeypatch):
    import sst_cdma.tools.sweep.execute as execute

    spliced = []
    real = execute.result_text
    monkeypatch.setattr(execute, "result_text",
                        lambda record, text=None: spliced.append(text is not None) or
                        real(record, text))
    task = PointTask(key="k1", script=str(REPO / "topologies" / "pascal_cdma.py"),
                     topology_name="pascal_cdma.py",
                     model_options=("--network", "alexnet", "--batch", "16"),
                     points_dir=str(tmp_path / "points"))
    record = run_point(task)
    assert record["status"] == "ok" and spliced == [True]
    assert (tmp_path / "points" / "k1" / "result.json").read_text() == \
        json.dumps(record, indent=2) + "\n"
