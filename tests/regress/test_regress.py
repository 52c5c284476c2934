"""Batch regression: passing suites, edited references, tolerances, --update, bad suites, and
the project's own suite."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from sst_cdma.cli.sst_cdma_main import main
from sst_cdma.regress import Tolerance, load_suite, run_suite
from sst_cdma.sweep import SpecError

REPO = Path(__file__).resolve().parents[2]
PHOLD = REPO / "topologies" / "phold_torus.py"

SUITE = f"""
name: tiny
cases:
  - name: small
    topology: {PHOLD}
    options: {{size: 3, events: 2, time-limit: 100ns}}
    compare: [sim_time_ps, events, end_reason, stat.events_received.Sum]
    tolerance:
      events: {{abs: 5}}
  - name: override
    topology: {PHOLD}
    options: {{size: 3, events: 1, time-limit: 100ns}}
    params:
      "node_*": {{max_delay: 0ns}}
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A two-case suite with blessed references."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "suite.yaml").write_text(textwrap.dedent(SUITE).lstrip(), encoding="utf-8")
    assert main(["regress", str(folder), "--update"]) == 0
    return folder


def _edit(folder: Path, case: str, key: str, value) -> None:
    path = folder / "reference" / f"{case}.json"
    data = json.loads(path.read_text())
    data["values"][key] = value
    path.write_text(json.dumps(data))


def test_update_writes_references(suite):
    small = json.loads((suite / "reference" / "small.json").read_text())
    assert set(small["values"]) == {"sim_time_ps", "events", "end_reason",
                                    "stat.events_received.Sum"}
    assert small["values"]["events"] == small["values"]["stat.events_received.Sum"] > 0
    assert small["model_options"] == ["--size", "3", "--events", "2", "--time-limit", "100ns"]
    override = json.loads((suite / "reference" / "override.json").read_text())
    assert set(override["values"]) == {"sim_time_ps", "events", "end_reason"}   # default "*"


def test_passing_suite_exits_0(suite, capsys):
    assert main(["regress", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "PASSED    small" in out and "PASSED    override" in out
    assert "2 cases: 2 passed" in out


def test_edited_reference_fails_with_the_difference_printed(suite, capsys):
    _edit(suite, "override", "sim_time_ps", 1)
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "FAILED    override  (1 difference)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("override ") and "sim_time_ps"
                in ln)
    assert line.split()[:3] == ["override", "sim_time_ps", "1"]
    assert line.split()[-1] == "exact"
    assert "PASSED    small" in out


def test_tolerance_is_respected(suite, capsys):
    events = json.loads((suite / "reference" / "small.json").read_text())["values"]["events"]
    _edit(suite, "small", "events", events + 5)                  # within abs 5
    assert main(["regress", str(suite)]) == 0
    _edit(suite, "small", "events", events + 6)                  # beyond it
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert any(ln.split()[:4] == ["small", "events", str(events + 6), str(events)]
               for ln in out.splitlines())
    assert "abs 5" in out


def test_update_rewrites_an_edited_reference(suite):
    path = suite / "reference" / "small.json"
    blessed = path.read_text()
    _edit(suite, "small", "sim_time_ps", 7)
    assert main(["regress", str(suite)]) == 1
    assert main(["regress", str(suite), "--update"]) == 0
    assert path.read_text() == blessed
    assert main(["regress", str(suite)]) == 0


def test_missing_reference_fails(suite, capsys):
    (suite / "reference" / "override.json").unlink()
    assert main(["regress", str(suite)]) == 1
    assert "no reference file" in capsys.readouterr().out


def test_a_case_that_cannot_run_fails(suite, capsys):
    text = (suite / "suite.yaml").read_text().replace("events: 1,", "events: -1,")
    (suite / "suite.yaml").write_text(text)
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "ERROR     override" in out and "initial_events" in out


def test_cases_run_on_dask_workers_too(suite):
    outcome = run_suite(suite, workers=2)
    assert outcome.ok and [c.status for c in outcome.cases] == ["passed", "passed"]


@pytest.mark.parametrize("body, line, words", [
    ("cases:\n  - name: a\n    topology: nowhere.py\n", 3, "not found"),
    ("cases:\n  - name: a\n    topology: {phold}\n    colour: red\n", 4, "unknown key 'colour'"),
    ("cases:\n  - name: a\n    topology: {phold}\n    tolerance: {{events: {{abs: -1}}}}\n", 4,
     "number >= 0"),
    ("cases:\n  - name: a\n    topology: {phold}\n  - name: a\n    topology: {phold}\n", 4,
     "listed twice"),
    ("cases:\n  - name: a\n    topology: {phold}\n    compare: [stat.nodot]\n", 4,
     "STATISTIC.FIELD"),
    ("name: x\n", 1, "no cases"),
])
def test_malformed_suite_is_one_line_with_file_and_line(tmp_path, capsys, body, line, words):
    (tmp_path / "suite.yaml").write_text(body.format(phold=PHOLD))
    with pytest.raises(SpecError) as info:
        load_suite(tmp_path)
    assert info.value.line == line and words in str(info.value)
    assert main(["regress", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sst-cdma: ") and f"suite.yaml:{line}:" in err


def test_tolerance_rule():
    assert Tolerance().allows(3, 3) and not Tolerance().allows(3, 4)
    assert Tolerance(abs=1).allows(3, 4) and not Tolerance(abs=1).allows(3, 5)
    assert Tolerance(rel=0.1).allows(100, 109.9) and not Tolerance(rel=0.1).allows(100, 111)
    assert Tolerance(abs=1, rel=0.5).allows(1, 1.9)             # the wider of the two
    assert not Tolerance(abs=10).allows("a", "b") and Tolerance().allows("a", "a")
    assert not Tolerance(abs=10).allows(True, 1.0)
    assert str(Tolerance()) == "exact" and str(Tolerance(abs=2, rel=0.01)) == "abs 2, rel 0.01"


def test_the_project_suite_passes():
    outcome = run_suite(REPO / "regress")
    assert len(outcome.cases) >= 3
    assert outcome.ok, [(d.case, d.key, d.reference, d.got) for d in outcome.differences]
