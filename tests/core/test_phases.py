"""The wall time of a run's phases (``RunResult.timing``, ``--timing-info``): every phase of the
run counted once — the script, building, init, rendering, pricing, planning, the event loop,
finish and writing — so that they add up to the run; and progress lines from the long phases
outside the event loop."""
from __future__ import annotations

import functools
import io
import re
import time

import pytest

import sst_cdma
from sst_cdma.engine import runner
from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.progress import PHASES, PhaseClock, Progress, tick, timed

#: a progress line of a phase outside the event loop: what, how many done, of how many
PHASE_LINE = re.compile(r"sst: (.+) (\d+) of (\d+), \d+ s$")
DIGITS = ["--network", "digits_cnn", "--policy", "all", "--no-baselines"]
# each test renders a batch no other test does: a rendered stream is kept (render.py's cache),
# and a second run of it would render, price and plan nothing


def test_a_phase_inside_another_is_counted_once():
    now = [0.0]
    clock = PhaseClock(clock=lambda: now[0])
    with clock.phase("setup_s"):
        now[0] = 1.0
        with clock.phase("pricing_s"):
            now[0] = 4.0
            with clock.phase("planning_s"):
                now[0] = 4.5
        now[0] = 5.0
    assert clock.seconds == {"setup_s": 1.5, "pricing_s": 3.0, "planning_s": 0.5}
    assert sum(clock.seconds.values()) == 5.0


def test_timed_and_tick_do_nothing_outside_a_run():
    with timed("pricing_s"):
        tick("pricing kernels: layer", 1, 2)  # no active clock: no error, nothing counted


def test_a_run_accounts_for_its_whole_wall_time(repo, tmp_path):
    start = time.perf_counter()
    result = sst_cdma.run(repo / "topologies/pascal_cdma.py", DIGITS + ["--batch", "37"],
                          console=io.StringIO(),
                          output_directory=tmp_path / "out")
    wall = time.perf_counter() - start
    t = result.timing
    for key in ("script_s", "build_s", "setup_s", "render_s", "pricing_s", "planning_s",
                "run_s", "finish_s", "writing_s"):
        assert t.get(key, 0) > 0, (key, t)
    assert set(t) <= set(PHASES)
    # what is not in a phase is the few checks between them (options, the output folder)
    assert wall - 0.05 * wall - 0.05 < sum(t.values()) <= wall


def test_long_phases_outside_the_event_loop_print_progress(repo, monkeypatch):
    monkeypatch.setattr(runner, "Progress", functools.partial(Progress, after_s=0, every_s=0))
    err = io.StringIO()
    sst_cdma.run(repo / "topologies/pascal_cdma.py", DIGITS + ["--batch", "39"],
                 console=io.StringIO(), progress=err)
    lines = err.getvalue().splitlines()
    assert any(ln.startswith("sst: pricing kernels: layer ") for ln in lines), lines
    assert any(ln.startswith("sst: pricing kernels: convolution pass ") for ln in lines), lines
    assert any(ln.startswith("sst: scheduling the backward pass: layer ") for ln in lines)
    # issue #34: every line's counter has moved, from nothing and from the line before
    counts = [(m[1], int(m[2]), int(m[3])) for m in map(PHASE_LINE.match, lines) if m]
    assert counts and all(done > 0 for _, done, _ in counts), lines
    assert all(a != b for a, b in zip(counts, counts[1:])), lines
    backward = [c for c in counts if c[0] == "scheduling the backward pass: layer"]
    assert backward[-1][1] == backward[-1][2]  # the last layer's line: N of N


def test_a_phase_line_shows_only_a_counter_that_has_moved():
    now = [0.0]
    out = io.StringIO()
    progress = Progress(out, after_s=3, every_s=5, clock=lambda: now[0])
    now[0] = 3.0
    progress.phase("scheduling the backward pass: layer", 0, 524)  # nothing done: no line
    now[0] = 4.0
    progress.phase("scheduling the backward pass: layer", 1, 524)
    now[0] = 9.0
    progress.phase("scheduling the backward pass: layer", 1, 524)  # has not moved: no line
    now[0] = 10.0
    progress.phase("scheduling the backward pass: layer", 2, 524)
    assert out.getvalue().splitlines() == [
        "sst: scheduling the backward pass: layer 1 of 524, 4 s",
        "sst: scheduling the backward pass: layer 2 of 524, 10 s"]


def test_timing_info_breaks_the_total_down_by_phase(repo, capsys):
    assert main(["--timing-info", str(repo / "topologies/pascal_cdma.py"), "--", *DIGITS,
                 "--batch", "41"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("Wall time by phase"):].splitlines()[1:]
    total = float(out.split("Total time:")[1].split()[0])
    seconds = {line.split(":")[0].strip(): float(line.rsplit(":", 1)[1].split()[0])
               for line in block}
    for what in ("pricing the kernels", "rendering the iteration's streams",
                 "planning memory (schedules, the planner)", "the event loop",
                 "writing the statistics and the output files"):
        assert what in seconds, block
    assert sum(seconds.values()) == pytest.approx(total, abs=1e-5 * len(seconds))
