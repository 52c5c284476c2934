"""Ctrl-C in the middle of a sweep (in this process, on the shared cluster): finished points
are kept, and running the spec again runs only the rest. The same through the ``sst-cdma``
command, signals and exit status included, is tests/cli's slow test."""
from __future__ import annotations

import _thread
import threading
import time

import pytest

from sst_cdma.tools.sweep import SweepInterrupted, run_sweep


def test_ctrl_c_keeps_finished_points_and_rerun_resumes(counting, tmp_path, client2):
    spec = counting.spec("""
        topology: {script}
        options: {sleep: 0.5}
        grid:
          n: [1, 2, 3, 4, 5, 6, 7, 8]
    """)
    out = tmp_path / "out"
    points = out / "points"
    finished_at_interrupt: set = set()

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = counting.finished(points)
            if len(done) >= 2:
                finished_at_interrupt.update(done)
                _thread.interrupt_main()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=press_ctrl_c)
    watcher.start()
    with pytest.raises(SweepInterrupted) as info:
        run_sweep(spec, output=out, client=client2, progress=False)
    watcher.join()
    assert "interrupted:" in str(info.value) and "run again to resume" in str(info.value)
    assert info.value.total == 8 and 2 <= info.value.done < 8
    assert not (out / "results.csv").exists()
    kept = counting.finished(points)
    assert finished_at_interrupt <= kept
    runs_before = counting.total()
    again = run_sweep(spec, output=out, client=client2, progress=False)
    assert again.failed == 0 and again.total == 8
    assert again.cached >= len(kept) and again.ran == 8 - again.cached
    assert counting.total() <= runs_before + again.ran
    for key in kept:                                # finished before Ctrl-C: never rerun
        n = int(again.table[again.table["key"] == key]["opt.n"].iloc[0])
        assert counting.count(n) == 1


def test_an_interrupt_after_the_last_point_still_writes_the_table(counting, tmp_path, client1,
                                                                  monkeypatch):
    """Ctrl-C (or SIGTERM) while the cluster shuts down, every point done: nothing is left to
    resume, so the table is written as if the sweep had ended."""
    import sst_cdma.tools.sweep.driver as driver

    real = driver.Dispatcher

    class LateInterrupt(real):
        def run(self, tasks):
            yield from super().run(tasks)
            raise KeyboardInterrupt

    monkeypatch.setattr(driver, "Dispatcher", LateInterrupt)
    spec = counting.spec("""
        topology: {script}
        grid:
          n: [1, 2, 3]
    """)
    outcome = run_sweep(spec, output=tmp_path / "out", client=client1, progress=False)
    assert outcome.total == 3 and outcome.failed == 0 and outcome.ran == 3
    assert (tmp_path / "out" / "results.csv").is_file()
