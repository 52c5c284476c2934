"""``sst_cdma.run()`` prints nothing unless the caller gives ``console=`` (issue #34: it printed
the console summary to standard output by default). What ``sst`` prints for the same run comes
back on the result as ``console_text`` either way, and ``sst`` itself shows it on its standard
output."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from sst_in_process import run_sst

import sst_cdma
from sst_cdma.engine.runner import execute_script
from sst_cdma.engine.simulation import Simulation
from sst_cdma.engine.units import UnitAlgebra

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"
#: the one wall-clock figure a console line holds (a heartbeat's), which differs run to run
WALL = re.compile(r"\(Real CPU time since last period \d+\.\d+ seconds\)")

#: case -> (topology, model options, program options by SST's names)
CASES: dict[str, tuple[Path, list[str], dict[str, str]]] = {
    "the cDMA console summary": (REPO / "topologies" / "pascal_cdma.py",
                                 ["--network", "alexnet", "--batch", "8"], {}),
    "heartbeats and console statistics": (PHOLD, ["--size", "2"],
                                          {"heartbeat-sim-period": "300ns"}),
}


def _sst_stdout(script: Path, options: list[str], program: dict[str, str]) -> str:
    """What the ``sst`` command prints on standard output for the same run."""
    flags = [arg for key, value in program.items() for arg in (f"--{key}", value)]
    done = run_sst(*flags, script, "--", *options, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("case", CASES)
def test_run_prints_nothing_and_keeps_the_text_sst_prints(case, capfd):
    script, options, program = CASES[case]
    result = sst_cdma.run(script, options, program_options=program)
    assert capfd.readouterr() == ("", "")
    printed = _sst_stdout(script, options, program)
    # sst's closing line is the command's own, printed after the run
    closing = ("Simulation is complete, simulated time: "
               f"{UnitAlgebra(f'{result.sim_time_ps}ps').toStringBestSI(6)}\n")
    assert printed.endswith(closing)
    assert WALL.sub("", result.console_text) == WALL.sub("", printed[:-len(closing)])


def test_the_cases_hold_a_summary_heartbeats_and_console_statistics():
    summary = sst_cdma.run(*CASES["the cDMA console summary"][:2]).console_text
    assert summary.startswith("== sst-cdma: alexnet batch 8 float32")
    script, options, program = CASES["heartbeats and console statistics"]
    text = sst_cdma.run(script, options, program_options=program).console_text
    assert text.startswith("# Creating simulation heartbeat at simulated time period of 300ns.\n")
    assert len(WALL.findall(text)) == 3  # at 300, 600 and 900 ns of a 1 us run
    assert " node_1_1.events_received : Accumulator : Sum.u64 = " in text


def test_a_given_console_gets_the_text_and_the_result_keeps_it(capfd):
    shown = io.StringIO()
    result = sst_cdma.run(PHOLD, ["--size", "2"], console=shown)
    assert shown.getvalue() == result.console_text
    assert result.console_text.count("events_received : Accumulator") == 4
    assert capfd.readouterr() == ("", "")


def test_console_stdout_prints_the_text_as_sst_does(capsys):
    result = sst_cdma.run(PHOLD, ["--size", "2"], console=sys.stdout)
    out, err = capsys.readouterr()
    assert out == result.console_text and out.count("events_received") == 4
    assert err == ""


def test_a_simulation_built_by_hand_prints_nothing_and_keeps_its_console(capfd):
    simulation = Simulation(execute_script(PHOLD, ["--size", "2"]))
    simulation.build()
    simulation.run()
    assert capfd.readouterr() == ("", "")
    console = simulation.console
    assert isinstance(console, io.StringIO)  # its own buffer, as nobody gave it a stream
    assert console.getvalue().count("events_received : Accumulator") == 4
