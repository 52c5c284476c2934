"""Progress lines of long runs: none for a short run, then one now and then."""
from __future__ import annotations

import inspect
import io
import time

import pytest
from progress_lines import without_progress

import sst_cdma
from sst_cdma.engine.kernel import PROGRESS_EVERY, Simulator
from sst_cdma.engine.progress import Progress


def test_progress_waits_then_reports_now_and_then():
    now = [0.0]
    out = io.StringIO()
    p = Progress(out, after_s=3, every_s=5, clock=lambda: now[0])
    p(1_000_000, 10)
    assert out.getvalue() == ""  # under three seconds: quiet
    now[0] = 3.5
    p(2_000_000_000, 1234567)
    assert out.getvalue() == "sst: simulated 2.000 ms, 1,234,567 events, 4 s\n"
    now[0] = 6.0
    p(3_000_000_000, 2_000_000)
    assert p.lines == 1  # the next line is due at 8.5 s
    now[0] = 9.0
    p(4_000_000_000, 3_000_000)
    assert p.lines == 2


@pytest.mark.parametrize("per_time", [1, 1000])
def test_the_kernel_calls_its_hook_every_few_thousand_events(per_time):
    # one event per time, or many at each time (a big system in lockstep): counted by events
    sim = Simulator()
    seen = []
    sim.progress = lambda now, events: seen.append((now, events))
    for t in range(4 * PROGRESS_EVERY // per_time):
        for _ in range(per_time):
            sim.schedule(t, lambda _: None)
    sim.run()
    counts = [events for _, events in seen]
    assert len(counts) >= 3
    for before, events in zip([0] + counts, counts):  # each after about PROGRESS_EVERY more
        assert PROGRESS_EVERY <= events - before < PROGRESS_EVERY + per_time
    for now, events in seen:  # reported at the time of the last event delivered
        assert now == (events - 1) // per_time


def test_a_run_shorter_than_the_wait_prints_no_progress(repo):
    """A short run says nothing; on a machine so loaded that the same run takes longer than
    Progress's wait, it may print progress lines, but nothing else."""
    err = io.StringIO()
    start = time.perf_counter()
    sst_cdma.run(repo / "topologies/pascal_cdma.py", ["--network", "alexnet", "--batch", "8"],
                 console=io.StringIO(), progress=err)
    wall = time.perf_counter() - start
    wait = inspect.signature(Progress).parameters["after_s"].default
    if wall < wait:
        assert err.getvalue() == ""
    assert without_progress(err.getvalue()) == ""


def test_the_tests_recognise_every_progress_line():
    """tests/progress_lines.py takes out exactly the lines Progress writes, whatever the phase
    (tests that compare a run's stderr use it: progress lines depend on the machine's load)."""
    ticks = iter(range(0, 1000, 2))
    out = io.StringIO()
    p = Progress(out, after_s=0, every_s=0, clock=lambda: float(next(ticks)))
    p(2_000_000_000, 1_234_567)
    p(5, 1)
    p.phase("pricing kernels: layer", 3, 23)
    p.phase("scheduling the backward pass: layer", 1_200, 5_240)
    p.phase("planning memory (policy auto): round", 1, 4)
    assert p.lines == 5 and len(out.getvalue().splitlines()) == 5
    error = "sst: gpu0.nvme: capacity exhausted: layer 3 of 23 needs 10 MB more\n"
    assert without_progress(out.getvalue() + error + out.getvalue()) == error
    assert without_progress("sst: stopped by SIGTERM\n") == "sst: stopped by SIGTERM\n"


# ------------------------------------------------------------ SST-core's heartbeats and limits
import re  # noqa: E402

from sst_cdma.tools.cli.sst_main import main  # noqa: E402
from sst_cdma.engine.progress import SimHeartbeat, WallWatch, parse_wall_time  # noqa: E402

REFERENCE = "tests/data/sst-core-16"


@pytest.mark.parametrize("text, seconds", [("1h", 3600), ("30m", 1800), ("10s", 10),
                                           ("1:30", 90), ("1:00:05", 3605), ("45", 45)])
def test_wall_times_in_sst_formats(text, seconds):
    assert parse_wall_time(text) == seconds


@pytest.mark.parametrize("text", ["2x", "1.5h", "1:2:3:4", "h", ""])
def test_a_bad_wall_time_names_the_formats(text):
    with pytest.raises(ValueError, match="is not a wall time \\(H:M:S, M:S, S, Hh, Mm or Ss"):
        parse_wall_time(text)


def _masked(lines):
    return [re.sub(r"\d+(\.\d+)?", "N", line) for line in lines]


def test_sim_heartbeat_prints_sst_lines(repo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script writes its statistics to ./
    assert main(["--heartbeat-sim-period=2us", "--stop-at", "6us",
                 str(repo / REFERENCE / "links_example.py")]) == 0
    out = capsys.readouterr().out.splitlines()
    reference = (repo / REFERENCE / "heartbeat.out").read_text().splitlines()[1:]
    # the figures SST has and this kernel has no equivalent for are left out
    kept = [line for line in reference
            if not re.search(r"mempool|TimeVortex|Sync data", line)]
    assert _masked(out) == _masked(kept)
    assert out[0] == "# Creating simulation heartbeat at simulated time period of 2us."
    assert [line.split(" (")[0] for line in out if line.startswith("# Simulation Heartbeat")] \
        == [f"# Simulation Heartbeat: Simulated Time {t} us" for t in (2, 4, 6)]


def test_sim_heartbeat_changes_no_result_and_stops_with_the_run(repo, tmp_path):
    topo, opts = repo / "topologies/phold_torus.py", ["--size", "3", "--stats", "csv"]
    plain = sst_cdma.run(topo, opts, output_directory=tmp_path / "a")
    beats = io.StringIO()
    beating = sst_cdma.run(topo, opts, output_directory=tmp_path / "b", console=beats,
                           program_options={"heartbeat-period": "100ns"})
    assert (plain.events, plain.sim_time_ps, plain.end_reason) == \
        (beating.events, beating.sim_time_ps, beating.end_reason)
    assert (tmp_path / "a/phold.csv").read_bytes() == (tmp_path / "b/phold.csv").read_bytes()
    times = re.findall(r"Simulated Time (\S+ \S+) ", beats.getvalue())
    # phold runs to 1 us and its last events arrive a little later; no beat once it is over
    assert times[:3] == ["100 ns", "200 ns", "300 ns"] and len(times) in (10, 11)
    assert "\tGlobal active activities         " in beats.getvalue()


@pytest.mark.parametrize("period", ["0ns", "-1us", "3 bytes", "2xs"])
def test_a_bad_heartbeat_period_is_one_line(repo, capsys, period):
    assert main([f"--heartbeat-sim-period={period}",
                 str(repo / "topologies/phold_torus.py")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"sst: topologies/phold_torus.py: --heartbeat-sim-period {period}: ")


def _busy_sim(n):
    sim = Simulator()
    for t in range(n):
        sim.schedule(t, lambda _: None)
    return sim


def test_wall_heartbeat_and_exit_after_follow_the_wall_clock():
    sim = _busy_sim(10 * PROGRESS_EVERY)
    now = [0.0]

    def clock():
        now[0] += 1.0  # a second per call: the hook runs every PROGRESS_EVERY events
        return now[0]

    out = io.StringIO()
    sim.progress = WallWatch(sim, lambda: out, heartbeat_s=2, exit_after_s=5,
                             exit_after_text="5s", clock=clock)
    sim.run()
    text = out.getvalue()
    assert sim.end_reason == "--exit-after 5s"
    assert sim.now == 5 * PROGRESS_EVERY - 1  # stopped at the fifth check, not at the end
    assert text.count("# Simulation Heartbeat: Simulated Time") == 2
    assert text.endswith("# --exit-after=5s: wall-clock limit reached at simulated time "
                         "81.919 ns; ending the simulation\n")


def test_exit_after_ends_cleanly_with_outputs_written(repo, tmp_path, capsys):
    topo = repo / "topologies/phold_torus.py"
    code = main(["--exit-after=1", "--output-directory", str(tmp_path / "out"), str(topo), "--",
                 "--size", "6", "--time-limit", "1s", "--stats", "csv"])
    assert code == 0
    out = capsys.readouterr().out
    assert "# --exit-after=1: wall-clock limit reached at simulated time " in out
    assert out.splitlines()[-1].startswith("Simulation is complete, simulated time: ")
    assert (tmp_path / "out" / "phold.csv").read_text().count("events_received") == 36


@pytest.mark.parametrize("period", [1, 7, 10, 99, 100, 1000])
def test_the_heartbeat_is_not_counted_and_does_not_move_the_end(period):
    sim = _busy_sim(100)  # one event at each ps 0..99
    out = io.StringIO()
    SimHeartbeat(sim, period, lambda: out).start()
    sim.run()
    assert sim.events_delivered == 100 and sim.now == 99
    assert out.getvalue().count("Simulated Time") == 99 // period


def test_sim_heartbeat_with_periodic_statistics_ends_with_the_run(write_script, tmp_path):
    # periodic statistic dumps also go on only while something else is queued: the two must
    # not keep each other going
    script = write_script("""
        import sst
        sst.setStatisticLoadLevel(2)
        sst.setStatisticOutput("sst.statOutputCSV", {"filepath": "s.csv"})
        a = sst.Component("a", "testElement.PHOLD")
        a.addParams({"time_limit": "300ns", "seed": 2})
        b = sst.Component("b", "testElement.PHOLD")
        b.addParams({"time_limit": "300ns", "seed": 3})
        sst.Link("l", "1ns").connect((a, "east"), (b, "west"))
        sst.enableAllStatisticsForAllComponents({"rate": "70ns"})
    """)
    plain = sst_cdma.run(script, output_directory=tmp_path / "a")
    beats = io.StringIO()
    beating = sst_cdma.run(script, output_directory=tmp_path / "b", console=beats,
                           program_options={"heartbeat-sim-period": "50ns"})
    assert (plain.events, plain.sim_time_ps) == (beating.events, beating.sim_time_ps)
    assert (tmp_path / "a/s.csv").read_bytes() == (tmp_path / "b/s.csv").read_bytes()
    # beats while the model has events (past 300 ns), none for the last dump (at 350 ns)
    assert plain.sim_time_ps == 350_000
    assert re.findall(r"Simulated Time (\d+) ns", beats.getvalue()) == \
        ["50", "100", "150", "200", "250", "300"]
