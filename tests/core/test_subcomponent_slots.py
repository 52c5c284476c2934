"""Subcomponent slots as SST element libraries declare them: what a slot accepts, a slot the
component needs, a slot's default element, one subcomponent or several; each wrong filling is
one error naming the component, the slot and what it accepts."""
from __future__ import annotations

import json

import pytest

from sst_cdma.tools.cli.sst_info import main as sst_info
from sst_cdma.engine.runner import RunError

METER = 'import sst\nm = sst.Component("m", "testElement.Meter")\nm.addParam("ticks", 3)\n'
ACCEPTS = "a Tally (testElement.DownTally, testElement.TapTally, testElement.UpTally)"


def test_filled_slots_count_and_the_empty_default_slot_loads_its_element(run_script):
    result, _ = run_script(METER + 'm.setSubComponent("tally", "testElement.DownTally")\n'
                           'm.setSubComponent("extras", "testElement.UpTally", 0)\n'
                           'm.setSubComponent("extras", "testElement.DownTally", 1)\n')
    # backup was left empty: its default, an UpTally, was loaded
    assert result.reports["m"] == {"backup": [3], "extras": [3, -3], "tally": [-3]}


def test_a_default_subcomponent_records_statistics_as_its_parent_enables_them(run_script):
    result, _ = run_script(METER + 'm.setSubComponent("tally", "testElement.UpTally")\n'
                           'sst.setStatisticLoadLevel(1)\nm.enableAllStatistics()\n')
    # a configured subcomponent's statistics are enabled on it (as in SST); the default one,
    # which the script never sees, follows its parent
    assert set(result.statistics["ComponentName"]) == {"m:backup[0]"}


@pytest.mark.parametrize("body, words", [
    ('m.setSubComponent("tally", "testElement.Counter")\n',
     f"m (testElement.Meter): slot 'tally' takes {ACCEPTS}, not testElement.Counter"),
    ('m.setSubComponent("tally", "testElement.Echo")\n',
     f"m (testElement.Meter): slot 'tally' takes {ACCEPTS}; testElement.Echo is a component"),
    ('m.setSubComponent("tally", "testElement.UpTally")\n'
     'm.setSubComponent("tally", "testElement.DownTally")\n',
     "m (testElement.Meter): slot tally[0] is already filled (with testElement.UpTally, "),
    ('m.setSubComponent("tally", "testElement.UpTally", 1)\n',
     "m (testElement.Meter): slot 'tally' takes one subcomponent, in slot number 0 (not 1)"),
    ('m.setSubComponent("counter", "testElement.UpTally")\n',
     "m (testElement.Meter) has no subcomponent slot 'counter' (slots: tally, backup, extras)"),
    ("", f"m (testElement.Meter): slot 'tally' is empty; it needs {ACCEPTS}: "
         "setSubComponent('tally', TYPE)"),
])
def test_a_wrong_filling_is_one_line_naming_component_slot_and_what_it_accepts(
        run_script, body, words):
    with pytest.raises(RunError) as err:
        run_script(METER + body)
    message = str(err.value)
    assert words in message and "\n" not in message


def test_a_json_graph_with_the_wrong_kind_in_a_slot_is_refused_when_built(tmp_path):
    from sst_cdma.engine.runner import run

    graph = {"program_options": {}, "components": [{
        "name": "m", "type": "testElement.Meter", "params": {},
        "subcomponents": [{"slot_name": "tally", "slot_number": 0,
                           "type": "testElement.Counter", "params": {}}]}], "links": []}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    with pytest.raises(RunError, match=f"slot 'tally' takes {ACCEPTS[:8]}.*not "
                                       "testElement.Counter"):
        run(str(path))


def test_sst_info_lists_each_slot_its_interface_and_what_fills_it(capsys):
    assert sst_info(["testElement.Meter"]) == 0
    out = capsys.readouterr().out
    assert "tally: the tally setup counts into [Tally; required]" in out
    assert "backup: a second tally [Tally; default testElement.UpTally]" in out
    assert "extras: more tallies [Tally; optional; several]" in out
    assert out.count("filled by: testElement.DownTally, testElement.TapTally, "
                     "testElement.UpTally") == 3
    assert sst_info(["testElement.UpTally"]) == 0
    assert "Interface: Tally" in capsys.readouterr().out
