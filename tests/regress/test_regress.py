"""Batch regression: passing suites, edited references, tolerances, --update, bad suites, and
the project's own suite."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from sst_cdma.tools.cli.sst_cdma_main import main
from sst_cdma.tools.regress import Tolerance, load_suite, run_suite
from sst_cdma.tools.sweep import SpecError

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


def test_missing_reference_fails_and_says_how_to_write_it(suite, capsys):
    (suite / "reference" / "override.json").unlink()
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "no reference file" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("MISSING"))
    assert "override.json" in line and f"sst-cdma regress {suite} --update --case override" in line
    assert main(["regress", str(suite), "--update", "--case", "override"]) == 0  # as it says
    assert main(["regress", str(suite)]) == 0


@pytest.mark.parametrize("node, fault", [
    ("!!python/tuple [small]", "the tag 'tag:yaml.org,2002:python/tuple' is not allowed"),
    ("!foo small", "the tag '!foo' is not allowed"),
    ("!!binary c21hbGw=", "the tag 'tag:yaml.org,2002:binary' is not allowed"),
    ("[small, other]", "case name must be a name, not a sequence"),
    ("!!seq [small]", "case name must be a name, not a sequence")])
def test_a_yaml_tag_or_a_list_as_a_case_name_is_refused(suite, capsys, node, fault):
    """The attack: a tag makes a value another type than it reads as, and a list for a name
    became a case named ``[Located(...)]`` that passed. Each is one line naming the line."""
    text = (suite / "suite.yaml").read_text().replace("name: small", f"name: {node}")
    (suite / "suite.yaml").write_text(text)
    assert main(["regress", str(suite)]) == 1
    err = capsys.readouterr().err
    assert f"suite.yaml:3: {fault}" in err, err
    assert len(err.strip().splitlines()) == 1 and "Located" not in err


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
    ("cases:\n  - name: a\n    topology: {phold}\n    tolerance: {{events: {{rel: .inf}}}}\n", 4,
     "events.rel must be a finite number >= 0, not inf"),
    ("cases:\n  - name: a\n    topology: {phold}\n    tolerance: {{events: {{abs: .nan}}}}\n", 4,
     "events.abs must be a finite number >= 0, not nan"),
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


# -- compare entries and tolerances that match nothing; references of another simulation --------

def _suite(tmp_path: Path, case_body: str, head: str = "") -> Path:
    """A one-case suite (case ``c``, a 3x3 PHOLD torus) with ``case_body`` appended to the
    case."""
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    text = (f"name: t\n{head}cases:\n  - name: c\n    topology: {PHOLD}\n"
            "    options: {size: 3, events: 2, time-limit: 100ns}\n" + case_body)
    (folder / "suite.yaml").write_text(text, encoding="utf-8")
    return folder


def _one_error_line(capsys, *words: str) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("sst-cdma: "), err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("selector, words", [
    ("stat.nosuch.Sum", "no element declares a statistic 'nosuch'"),
    ("stat.events_received.Average", "no statistic has a field 'Average'"),
    ("stat.d2h_bytes.Average", "no statistic has a field 'Average'"),
])
def test_a_selector_no_element_or_statistic_type_allows_is_refused_before_running(
        tmp_path, capsys, selector, words):
    folder = _suite(tmp_path, f"    compare: [sim_time_ps,\n              {selector}]\n")
    with pytest.raises(SpecError) as info:
        load_suite(folder)
    assert info.value.line == 7 and words in str(info.value)
    assert main(["regress", str(folder), "--update"]) == 1
    _one_error_line(capsys, "suite.yaml:7:", "case c", selector[len("stat."):], words)
    assert not (folder / "reference").exists()


def test_update_refuses_a_statistic_selector_that_matches_nothing_in_the_run(tmp_path, capsys):
    # a declared statistic, but no component matches the glob: known only once the case ran
    folder = _suite(tmp_path, '    compare: [sim_time_ps, "stat.nonode*:events_received.Sum"]\n')
    assert main(["regress", str(folder), "--update"]) == 1
    _one_error_line(capsys, "suite.yaml:6:", "case c", "'stat.nonode*:events_received.Sum'",
                    "matches no statistic of the run")
    assert not (folder / "reference").exists()


def test_a_null_reference_of_a_statistic_that_matches_nothing_does_not_pass(tmp_path, capsys):
    # what --update used to bless: the selector's value null; it PASSED ever after
    folder = _suite(tmp_path, '    compare: [sim_time_ps, "stat.nonode*:events_received.Sum"]\n')
    (folder / "reference").mkdir()
    (folder / "reference" / "c.json").write_text(json.dumps({
        "case": "c", "format": 1, "topology": str(PHOLD), "params": {},
        "model_options": ["--size", "3", "--events", "2", "--time-limit", "100ns"],
        "values": {"sim_time_ps": 109000, "stat.nonode*:events_received.Sum": None}}))
    assert main(["regress", str(folder)]) == 1
    _one_error_line(capsys, "suite.yaml:6:", "case c", "matches no statistic of the run or its "
                    "reference")


def test_a_statistic_the_reference_has_and_the_run_lost_is_a_difference(suite, capsys):
    _edit(suite, "small", "stat.events_received.Sum", 5)
    text = (suite / "suite.yaml").read_text().replace("stat.events_received.Sum]",
                                                      '"stat.nonode*:events_received.Sum"]')
    (suite / "suite.yaml").write_text(text)
    _edit(suite, "small", "stat.nonode*:events_received.Sum", 5)
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert any(ln.split()[:4] == ["small", "stat.nonode*:events_received.Sum", "5", "(missing)"]
               for ln in out.splitlines()), out


@pytest.mark.parametrize("entry, kind", [("nosuchkey", "key"), ('"nomatch*"', "glob")])
def test_update_refuses_a_compare_entry_that_matches_nothing(tmp_path, capsys, entry, kind):
    folder = _suite(tmp_path, f"    compare: [events, sim_time_ps,\n"
                              f"              {entry}]\n")
    assert main(["regress", str(folder), "--update"]) == 1
    _one_error_line(capsys, "suite.yaml:7:", "case c", f"compare {kind} {entry.strip(chr(34))!r}",
                    "matches nothing in the run", "no reference was updated")
    assert not (folder / "reference").exists()


def test_update_writes_no_reference_when_one_case_is_refused(suite, capsys):
    blessed = (suite / "reference" / "small.json").read_text()
    text = (suite / "suite.yaml").read_text()
    text = text.replace("      events: {abs: 5}\n", "      events: {abs: 5}\n"
                        "    params:\n      \"node_*\": {max_delay: 0ns}\n")
    text += '    compare: [sim_time_ps, "nomatch*"]\n'
    (suite / "suite.yaml").write_text(text)
    assert main(["regress", str(suite), "--update"]) == 1
    _one_error_line(capsys, "case override", "'nomatch*'")
    assert (suite / "reference" / "small.json").read_text() == blessed   # not half updated


@pytest.mark.parametrize("entry, kind", [("nosuchkey", "key"), ('"nomatch*"', "glob")])
def test_a_compare_entry_matching_nothing_in_run_or_reference_is_an_error(suite, capsys, entry,
                                                                          kind):
    text = (suite / "suite.yaml").read_text()
    (suite / "suite.yaml").write_text(text + f"    compare: [sim_time_ps, {entry}]\n")
    assert main(["regress", str(suite)]) == 1
    _one_error_line(capsys, "suite.yaml:14:", "case override",
                    f"compare {kind} {entry.strip(chr(34))!r}", "matches nothing in the run or "
                    "its reference")


def test_a_tolerance_on_a_key_not_compared_is_refused_before_running(tmp_path, capsys):
    folder = _suite(tmp_path, "    compare: [sim_time_ps, events]\n    tolerance:\n"
                              "      events: {abs: 1}\n      nosuchkey2: {abs: 1}\n")
    with pytest.raises(SpecError) as info:
        load_suite(folder)
    assert info.value.line == 9 and "tolerance 'nosuchkey2' applies to no compared key" in \
        str(info.value)
    assert main(["regress", str(folder), "--update"]) == 1
    _one_error_line(capsys, "suite.yaml:9:", "case c", "'nosuchkey2'")


@pytest.mark.parametrize("update", [True, False])
def test_a_tolerance_on_a_key_no_glob_compares_is_an_error(suite, capsys, update):
    text = (suite / "suite.yaml").read_text()   # case override compares "*": known after the run
    (suite / "suite.yaml").write_text(text + "    tolerance:\n      nosuchkey2: {abs: 1}\n")
    assert main(["regress", str(suite)] + (["--update"] if update else [])) == 1
    _one_error_line(capsys, "suite.yaml:15:", "case override",
                    "tolerance 'nosuchkey2' applies to no compared key")


@pytest.mark.parametrize("compare, at_load", [("[sim_time_ps]", True), ('["*"]', False)])
def test_a_suite_tolerance_no_case_uses_is_an_error(tmp_path, capsys, compare, at_load):
    folder = _suite(tmp_path, f"    compare: {compare}\n",
                    head="tolerance:\n  \"*_time_s\": {rel: 1.0e-9}\n")
    if at_load:   # every compared key is written out: no need to run the case to know
        with pytest.raises(SpecError):
            load_suite(folder)
    else:         # "*" is known once the case ran
        load_suite(folder)
    assert main(["regress", str(folder), "--update"]) == 1
    _one_error_line(capsys, "suite.yaml:3:", "tolerance '*_time_s' applies to no key any case "
                    "compares")
    assert not (folder / "reference").exists()


def _case_edit(folder: Path, old: str, new: str) -> None:
    text = (folder / "suite.yaml").read_text()
    assert old in text
    (folder / "suite.yaml").write_text(text.replace(old, new, 1))


def test_a_reference_made_with_other_options_fails_until_updated(suite, capsys):
    _case_edit(suite, "tolerance:\n      events: {abs: 5}",
               "tolerance:\n      events: {abs: 1000000}\n      sim_time_ps: {rel: 1}\n"
               "      stat.events_received.Sum: {rel: 1}")
    assert main(["regress", str(suite)]) == 0
    capsys.readouterr()
    _case_edit(suite, "events: 2,", "events: 3,")          # within the loose tolerances
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "FAILED    small     (1 difference)" in out and "PASSED    override" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("small "))
    assert row.split()[1] == "(options)" and "--events 2" in row and "--events 3" in row
    assert row.endswith("reference made with other options: run --update")
    assert main(["regress", str(suite), "--update"]) == 0
    assert main(["regress", str(suite)]) == 0


def test_options_in_another_order_are_the_same_case(suite):
    _case_edit(suite, "{size: 3, events: 2, time-limit: 100ns}",
               "{time-limit: 100ns, events: 2, size: 3}")
    assert main(["regress", str(suite)]) == 0


def test_a_reference_made_with_other_params_or_topology_fails(suite, tmp_path, capsys):
    _case_edit(suite, "max_delay: 0ns", "max_delay: 1ns")
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("override "))
    assert row.split()[1] == "(params)" and row.endswith("reference made with other params: "
                                                         "run --update")
    _case_edit(suite, "max_delay: 1ns", "max_delay: 0ns")
    assert main(["regress", str(suite)]) == 0
    copy = tmp_path / "phold_copy.py"
    copy.write_text(PHOLD.read_text())
    _case_edit(suite, f"topology: {PHOLD}", f"topology: {copy}")
    assert main(["regress", str(suite)]) == 1
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("small "))
    assert row.split()[1] == "(topology)" and "reference made with other topology" in row
