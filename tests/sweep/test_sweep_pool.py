"""Sweeps without a cluster (issue #35): on one machine the points run in a plain pool of forked
worker processes (one worker: in this process), Dask only when a scheduler, a client or
``executor="dask"`` asks for it. The tables and every point's folder are the same whichever
runs them; a killed worker loses nothing; a point whose workers keep dying is failed, not
cached; Ctrl-C keeps what is done; a local sweep never imports ``distributed``."""
from __future__ import annotations

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.sweep import SweepInterrupted, run_sweep
from sst_cdma.tools.sweep.dispatch import Dispatcher, choose_executor
from sst_cdma.tools.sweep.execute import RESULT
from sst_cdma.tools.sweep.pool import ALLOWED_DEATHS
from counting_sweep import COUNTING_SPEC

REPO = Path(__file__).resolve().parents[2]

SPEC = COUNTING_SPEC

#: the keys of a point's result.json that time the run (they differ between any two runs)
TIMINGS = ("wall_s", "run_s")


def _folders(out: Path) -> dict[str, object]:
    """Every file of every point's folder (path -> bytes; result.json parsed, its timings
    left out)."""
    files: dict[str, object] = {}
    for path in sorted((out / "points").rglob("*")):
        if path.is_file():
            name = str(path.relative_to(out))
            if path.name == RESULT:
                record = json.loads(path.read_text())
                files[name] = {k: v for k, v in record.items() if k not in TIMINGS}
            else:
                files[name] = path.read_bytes()
    return files


def test_which_executor_runs_the_points():
    assert choose_executor(2) == "pool" and choose_executor(8, executor="pool") == "pool"
    assert choose_executor(1) == "inline" and choose_executor(4, inline=True) == "inline"
    assert choose_executor(1, executor="dask") == "dask"
    assert choose_executor(2, scheduler="tcp://h:8786") == "dask"
    with pytest.raises(ValueError, match="executor 'pool' runs the points on this machine"):
        choose_executor(2, scheduler="tcp://h:8786", executor="pool")
    with pytest.raises(ValueError, match="executor 'ray': not one of pool, dask"):
        choose_executor(2, executor="ray")


def test_pool_inline_and_dask_give_the_same_tables_and_point_folders(counting, tmp_path,
                                                                    client2):
    spec = counting.spec(SPEC)
    outs = {"pool": tmp_path / "pool", "inline": tmp_path / "inline", "dask": tmp_path / "dask"}
    for how, out in outs.items():
        kwargs = {"client": client2} if how == "dask" else {"workers": 2 if how == "pool" else 1}
        outcome = run_sweep(spec, output=out, progress=False, **kwargs)
        assert (outcome.total, outcome.ran, outcome.failed) == (6, 6, 0), how
    for name in ("results.csv", "results.parquet", "gpus.csv", "gpus.parquet"):
        assert (outs["pool"] / name).read_bytes() == (outs["inline"] / name).read_bytes() \
            == (outs["dask"] / name).read_bytes(), name
    assert (outs["pool"] / "gpus.csv").read_text().count("\n") == 1 + 6 * 2  # 2 GPUs a point
    folders = _folders(outs["pool"])
    assert len(folders) > 6 * 3 and folders == _folders(outs["inline"]) == _folders(outs["dask"])
    pids = [counting.pids(n, m) for n in (1, 2, 3) for m in "ab"]
    assert all(len(p) == 3 for p in pids)                 # each point once per executor
    assert all(p[1] == os.getpid() for p in pids)         # inline: in this process
    pool = {p[0] for p in pids}
    assert os.getpid() not in pool and len(pool) <= 2     # the pool: two other processes


def test_a_killed_pool_worker_loses_nothing(counting, tmp_path):
    """Point 6 holds its worker on its first run; once the other worker has run points 1 to 5,
    the held worker is killed mid-point: a fresh worker runs point 6 again, nothing finished
    runs twice, nothing is lost, no half-written folder is left."""
    spec = counting.spec("topology: {script}\noptions: {hold: 6}\ngrid:\n  n: [1, 2, 3, 4, 5, 6]\n")
    out = tmp_path / "out"
    result: dict = {}

    def sweep() -> None:
        try:
            result["outcome"] = run_sweep(spec, output=out, workers=2, progress=False)
        except BaseException as exc:  # pragma: no cover - reported below
            result["error"] = exc

    def finished() -> set:
        return counting.finished(out / "points")

    thread = threading.Thread(target=sweep)
    thread.start()
    try:
        pid = counting.held_pid()
        deadline = time.monotonic() + 120
        while len(finished()) < 5:
            assert thread.is_alive() and time.monotonic() < deadline, result
            time.sleep(0.05)
        before = finished()
        assert pid != os.getpid() and len(list((out / "points").glob("*.tmp-*"))) == 1
        os.kill(pid, signal.SIGKILL)
        thread.join(120)
    finally:
        counting.release()
        thread.join(150)
    assert not thread.is_alive() and "error" not in result, result.get("error")
    outcome = result["outcome"]
    assert (outcome.total, outcome.failed) == (6, 0) and (outcome.table["status"] == "ok").all()
    assert set(outcome.table[outcome.table["opt.n"] != 6]["key"]) == before
    assert [counting.count(n) for n in range(1, 7)] == [1, 1, 1, 1, 1, 2]
    assert counting.pids(6)[0] == pid and counting.pids(6)[1] != pid
    assert not list((out / "points").glob("*.tmp-*"))
    again = run_sweep(spec, output=out, workers=2, progress=False)
    assert (again.ran, again.cached) == (0, 6) and counting.total() == 7


def test_a_point_whose_workers_keep_dying_is_failed_and_not_cached(counting, tmp_path):
    spec = counting.spec("""
        topology: {script}
        grid:
          n: [1, 2]
        points:
          - {n: 3, die: true}
    """)
    out = tmp_path / "out"
    outcome = run_sweep(spec, output=out, workers=2, progress=False)
    assert (outcome.total, outcome.failed) == (3, 1)
    table = outcome.table
    assert list(table["status"]) == ["ok", "ok", "failed"]
    assert table["error"][2] == (f"the workers running this point kept dying "
                                 f"({ALLOWED_DEATHS + 1} times; the last killed by SIGKILL)")
    assert counting.count(3) == ALLOWED_DEATHS + 1 and len(set(counting.pids(3))) == 4
    assert not (out / "points" / table["key"][2]).exists()         # not cached
    assert not list((out / "points").glob("*.tmp-*"))
    again = run_sweep(spec, output=out, workers=2, progress=False)
    assert (again.ran, again.cached, again.failed) == (1, 2, 1)     # tried again


def _interrupt_after(counting, points: Path, n: int) -> threading.Thread:
    """A thread that presses Ctrl-C (in this process) once ``n`` points are finished."""
    def press() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if len(counting.finished(points)) >= n:
                _thread.interrupt_main()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=press)
    watcher.start()
    return watcher


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "inline"])
def test_ctrl_c_keeps_finished_points_and_leaves_no_half_written_folder(counting, tmp_path,
                                                                        workers):
    spec = counting.spec("topology: {script}\noptions: {sleep: 0.4}\n"
                         "grid:\n  n: [1, 2, 3, 4, 5, 6]\n")
    out = tmp_path / "out"
    watcher = _interrupt_after(counting, out / "points", 2)
    with pytest.raises(SweepInterrupted) as info:
        run_sweep(spec, output=out, workers=workers, progress=False)
    watcher.join()
    assert "interrupted:" in str(info.value) and 2 <= info.value.done < 6
    kept = counting.finished(out / "points")
    assert not list((out / "points").glob("*.tmp-*"))         # the killed point's folder gone
    again = run_sweep(spec, output=out, workers=workers, progress=False)
    assert again.failed == 0 and again.cached >= len(kept) and again.ran == 6 - again.cached
    for key in kept:                                            # never run twice
        assert counting.count(int(again.table[again.table["key"] == key]["opt.n"].iloc[0])) == 1


#: the sweep command on a pool (``--workers 2``), then in one process (``--workers 1``), in one
#: interpreter: after each, its exit status and whether distributed and dask were imported
LOCAL_SWEEPS = """
import sys
from sst_cdma.tools.cli.sst_cdma_main import main
spec, out = sys.argv[1:]
for workers in ("2", "1"):
    status = main(["sweep", spec, "-o", out + workers, "--workers", workers, "--no-progress"])
    print(status, "distributed" in sys.modules, "dask" in sys.modules)
"""


def test_a_local_sweep_imports_neither_dask_nor_distributed(counting, tmp_path):
    spec = counting.spec("topology: {script}\ngrid:\n  n: [1, 2, 3]\n")
    done = subprocess.run([sys.executable, "-c", LOCAL_SWEEPS, str(spec), str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("0 ")] == ["0 False False"] * 2, done.stdout
    assert sum("3 points: 3 run, 0 cached, 0 failed" in line for line in lines) == 2, done.stdout
    assert counting.count(1) == counting.count(2) == counting.count(3) == 2   # once each way
    assert len({pid for n in (1, 2, 3) for pid in counting.pids(n)[1:]}) == 1  # inline: 1 process


def test_the_executor_options_are_checked(counting, capsys):
    spec = counting.spec("topology: {script}\ngrid:\n  n: [1]\n")
    assert main(["sweep", str(spec), "--executor", "pool", "--scheduler", "tcp://h:1"]) == 1
    err = capsys.readouterr().err
    assert err == ("sst-cdma: sweep: error: --executor pool runs the points on this machine "
                   "and --scheduler on Dask's workers: give one of them\n")
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(spec), "--executor", "ray"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--executor: invalid choice: 'ray'" in err
    assert counting.total() == 0


@pytest.mark.slow  # starts a Dask cluster of its own: ~5 s
def test_executor_dask_runs_a_local_cluster(counting, tmp_path):
    """``executor="dask"`` without a scheduler: a local Dask cluster of the workers asked for
    (one here), started and closed by the sweep."""
    spec = counting.spec("topology: {script}\ngrid:\n  n: [1, 2]\n")
    with Dispatcher(workers=1, executor="dask") as dispatcher:
        assert dispatcher.executor == "dask"
    outcome = run_sweep(spec, output=tmp_path / "out", workers=1, executor="dask",
                        progress=False)
    assert (outcome.ran, outcome.failed) == (2, 0)
    assert all(os.getpid() not in counting.pids(n) for n in (1, 2))


def test_each_worker_takes_a_run_of_consecutive_points_then_the_back_of_the_longest():
    from sst_cdma.tools.sweep.pool import _Lanes

    lanes = _Lanes(10, 3)                         # runs 0-2, 3-5, 6-9
    assert [lanes.next(0), lanes.next(1), lanes.next(2)] == [0, 3, 6]
    assert [lanes.next(0), lanes.next(0), lanes.next(1)] == [1, 2, 4]
    assert lanes.next(0) == 8                    # lane 0 done: the back half of 7-9 (8, 9)
    assert [lanes.next(2), lanes.next(0), lanes.next(1)] == [7, 9, 5]
    lanes.put_back(1, 5)                          # its worker died: 5 is lane 1's next again
    assert lanes.next(1) == 5 and not lanes and lanes.next(2) is None


def _started(cmd: list[str], log: Path) -> subprocess.Popen:
    """A Dask process started as a user would in a terminal of its own (its output to
    ``log``)."""
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONPATH=str(REPO)),
                                start_new_session=True)


@pytest.mark.slow  # a scheduler and two workers of its own: ~10 s
def test_the_worked_example_a_scheduler_and_workers_started_by_hand(counting, tmp_path):
    """docs/sweeps.md's example of outgrowing one machine, on this one: ``dask scheduler``,
    ``dask worker ADDRESS --nworkers 2 --nthreads 1``, then ``sst-cdma sweep --scheduler
    ADDRESS``; the table is the pool's, byte for byte."""
    pytest.importorskip("distributed")
    address_file = tmp_path / "scheduler.json"
    scheduler = _started([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                          "--port", "0", "--no-dashboard", "--scheduler-file",
                          str(address_file)], tmp_path / "scheduler.log")
    workers = None
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists():
            assert scheduler.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        address = json.loads(address_file.read_text())["address"]
        workers = _started([sys.executable, "-m", "dask", "worker", address, "--nworkers", "2",
                            "--nthreads", "1", "--no-dashboard"], tmp_path / "workers.log")
        spec = counting.spec(SPEC)
        done = subprocess.run([sys.executable, "-m", "sst_cdma", "sweep", str(spec), "-o",
                               str(tmp_path / "dask"), "--scheduler", address, "--no-progress"],
                              cwd=REPO, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert "6 points: 6 run, 0 cached, 0 failed" in done.stdout
    finally:
        for process in (workers, scheduler):
            if process is not None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(60)
    run_sweep(spec, output=tmp_path / "pool", workers=2, progress=False)
    for name in ("results.csv", "results.parquet"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "pool" / name).read_bytes()
    assert _folders(tmp_path / "dask") == _folders(tmp_path / "pool")
    assert all(len(set(counting.pids(n, m))) == 2 for n in (1, 2, 3) for m in "ab")


@pytest.mark.slow  # a sweep of 0.8 s points stopped mid-way; Dask's: a cluster start too
@pytest.mark.parametrize("how", [["--workers", "1"], ["--executor", "dask"]],
                         ids=["this-process", "dask"])
def test_sigterm_to_the_group_stops_a_sweep_in_one_process_or_on_dask_as_on_the_pool(
        counting, tmp_path, how):
    """tests/cli's SIGTERM test runs the pool; here the two other local ways: one line, exit
    143, finished points kept, no half-written folder left (in one process, the point cut
    short removes its own)."""
    spec = counting.spec("topology: {script}\noptions: {sleep: 0.8}\n"
                         "grid:\n  n: [1, 2, 3, 4, 5, 6, 7, 8]\n")
    points = tmp_path / "out" / "points"
    proc = subprocess.Popen([sys.executable, "-m", "sst_cdma", "sweep", str(spec), "-o",
                             str(tmp_path / "out"), "--no-progress", *how], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if counting.finished(points):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err
    lines = err.splitlines()
    assert len(lines) == 2 and "stopped by SIGTERM:" in lines[1], err
    assert "run again to resume" in lines[1]
    assert not [p for p in points.glob("*") if ".tmp-" in p.name or ".old-" in p.name]
    assert 1 <= len(counting.finished(points)) < 8


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (ended, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow  # a command started, killed mid-sweep, and its workers waited for: ~6 s
def test_workers_of_a_killed_command_finish_their_point_and_end(counting, tmp_path):
    """SIGKILL to the command alone (nothing of it runs to clean up): each worker publishes
    the point it was running, sees its pipe close, and ends; none is left behind."""
    spec = counting.spec("topology: {script}\noptions: {sleep: 1.5}\n"
                         "grid:\n  n: [1, 2, 3, 4, 5, 6]\n")
    proc = subprocess.Popen([sys.executable, "-m", "sst_cdma", "sweep", str(spec), "-o",
                             str(tmp_path / "out"), "--no-progress"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while counting.total() < 2:                       # both workers are mid-point
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    started = {n: counting.pids(n) for n in range(1, 7) if counting.count(n)}
    workers = {pids[0] for pids in started.values()}
    assert len(workers) == 2 and proc.pid not in workers
    proc.kill()
    proc.wait(30)
    deadline = time.monotonic() + 60
    try:
        while any(_running(pid) for pid in workers):
            assert time.monotonic() < deadline, "a worker outlived its command"
            time.sleep(0.05)
    finally:                                          # none left behind, whatever happened
        for pid in workers:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    assert len(counting.finished(tmp_path / "out" / "points")) >= len(started)
    assert not list((tmp_path / "out" / "points").glob("*.tmp-*"))


def test_a_stopped_sweep_removes_the_folders_and_staging_folders_of_dead_workers(tmp_path):
    from sst_cdma.engine.stale_folders import owner_tag
    from sst_cdma.tools.sweep.driver import _remove_leftovers
    from sst_cdma.tools.sweep.execute import PointTask

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()                                       # a worker killed mid-point
    host = owner_tag().rsplit("-", 1)[0]
    dead, alive = f"k1.tmp-{host}-{gone.pid}-ab12", f"k1.tmp-{owner_tag()}-cd34"
    names = [dead, f"{dead}.partial-{host}-{gone.pid}-x9", alive, f"{alive}.partial-"
             f"{owner_tag()}-y8", f"k1.tmp-otherhost-{gone.pid}-ef56", "k2.tmp-x"]
    for name in names:
        (tmp_path / name).mkdir()
    task = PointTask(key="k1", script="s.py", topology_name="s.py", model_options=())
    _remove_leftovers(tmp_path, [(None, task)], only_stale=True)  # type: ignore[list-item]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


def _frozen_in_worker(task: object) -> dict[str, object]:
    """A pool task's record: how many objects the worker's collector holds frozen."""
    import gc

    return {"key": getattr(task, "key"), "status": "ok", "frozen": gc.get_freeze_count()}


def test_workers_inherit_a_frozen_heap_and_this_process_gets_its_own_back():
    import gc

    from sst_cdma.tools.sweep.execute import PointTask
    from sst_cdma.tools.sweep.pool import PointPool, frozen_heap

    gc.unfreeze()  # (whatever froze objects before: the count below is the pool's own)
    with PointPool(2, _frozen_in_worker, lambda task, error: {"error": error}) as pool:
        tasks = [PointTask(key=f"k{i}", script="s.py", topology_name="s.py", model_options=())
                 for i in range(3)]
        records = [record for _, record in pool.run(tasks)]
    assert sorted(r["key"] for r in records) == ["k0", "k1", "k2"]
    assert all(r["frozen"] > 1000 for r in records)  # the modules it inherited, at least
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        outer = gc.get_freeze_count()
        with frozen_heap():  # frozen already: the inner block leaves it frozen
            assert outer > 1000 and gc.get_freeze_count() > 1000
        assert gc.get_freeze_count() > outer // 2  # (a frozen object may still be freed)
    assert gc.get_freeze_count() == 0
