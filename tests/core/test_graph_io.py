"""The configuration graph: --output-json runs again identically, --output-dot, --run-mode."""
from __future__ import annotations

import io
import json

import pytest

from sst_cdma.config import ConfigError, ConfigGraph
from sst_cdma.runner import RunError, run

TOPO = """
import sst
sst.setStatisticLoadLevel(2)
sst.setStatisticOutput("sst.statOutputCSV", {"filepath": "stats.csv"})
a = sst.Component("a", "testElement.Echo")
a.addParams({"pings": 2, "rounds": 4})
a.enableAllStatistics({"type": "sst.HistogramStatistic", "minvalue": "0", "binwidth": "5000",
                       "numbins": "4"})
c = a.setSubComponent("counter", "testElement.Counter")
c.enableAllStatistics()
b = sst.Component("b", "testElement.Echo")
b.addParam("rounds", 4)
sst.Link("l", "2ns").connect((a, "port", "3ns"), (b, "port"))
"""


def test_output_json_reruns_to_identical_statistics(write_script, tmp_path):
    script = write_script(TOPO)
    first = run(script, output_directory=tmp_path / "one", output_json="graph.json",
                console=io.StringIO())
    graph_file = tmp_path / "one" / "graph.json"
    data = json.loads(graph_file.read_text())
    assert data["format"] == "sst-cdma-config"
    assert {c["name"] for c in data["components"]} == {"a", "b"}
    second = run(graph_file, output_directory=tmp_path / "two", console=io.StringIO())
    assert first.sim_time_ps == second.sim_time_ps and first.events == second.events
    assert (tmp_path / "one" / "stats.csv").read_bytes() == \
        (tmp_path / "two" / "stats.csv").read_bytes()


def test_output_dot_lists_components_and_links(write_script, tmp_path):
    run(write_script(TOPO), output_directory=tmp_path, output_dot="g.dot", console=io.StringIO())
    dot = (tmp_path / "g.dot").read_text()
    assert dot.startswith('graph "sst" {')
    assert '"a" [label="a\\ntestElement.Echo"]' in dot
    assert '"a" -- "b"' in dot and 'taillabel="port"' in dot


def test_run_mode_init_checks_without_running(write_script):
    result = run(write_script(TOPO), run_mode="init", console=io.StringIO())
    assert result.events == 0 and result.end_reason == "run-mode init"
    broken = write_script('import sst\nsst.Component("a", "testElement.Echo")\n', "bad.py")
    with pytest.raises(RunError, match="required port 'port' is not connected"):
        run(broken, run_mode="init")


def test_malformed_graph_json_is_one_clear_error(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('{"format": "sst-cdma-config", "components": [{"name": "a"}]}')
    with pytest.raises(RunError, match="malformed configuration graph: KeyError: 'type'"):
        run(path)
    path.write_text("[1, 2]")
    with pytest.raises(RunError, match="not an sst-cdma configuration graph"):
        run(path)
    path.write_text("{nope")
    with pytest.raises(RunError, match="cannot read configuration graph"):
        run(path)


def test_graph_is_held_in_networkx(write_script):
    result = run(write_script(TOPO), run_mode="init", console=io.StringIO())
    g = result.graph.graph
    assert sorted(g.nodes) == ["a", "b"] and list(g.edges(keys=True)) == [("a", "b", "l")]


def test_from_json_rejects_a_link_to_an_unknown_component():
    data = {"format": "sst-cdma-config", "components": [{"name": "a", "type": "testElement.Echo"}],
            "links": [{"name": "l", "latency": "1ns",
                       "ends": [{"component": "a", "port": "port"},
                                {"component": "zz", "port": "port"}]}]}
    with pytest.raises(ConfigError, match="link 'l' names unknown component 'zz'"):
        ConfigGraph.from_json(data, "g.json")


GRAPH = {"format": "sst-cdma-config",
         "components": [{"name": "a", "type": "testElement.Echo", "params": {"pings": "2", "rounds": "4"}},
                        {"name": "b", "type": "testElement.Echo"}],
         "links": [{"name": "l", "latency": "1ns",
                    "ends": [{"component": "a", "port": "port"},
                             {"component": "b", "port": "port"}]}]}


def _graph_with(**component_a):
    data = json.loads(json.dumps(GRAPH))
    data["components"][0].update(component_a)
    return data


def test_a_valid_hand_written_graph_runs(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    assert run(path, console=io.StringIO()).events > 0


@pytest.mark.parametrize("change,message", [
    ({"type": "testElement.Nope"}, "component 'a': unknown element 'testElement.Nope'"),
    ({"type": "nolib.Echo"}, "component 'a': unknown element library 'nolib'"),
    ({"type": 7}, "component 'a': type: expected a string"),
    ({"params": "rounds=4"}, "component 'a': params: expected a mapping (JSON object), got "
                             "string"),
    ({"params": ["rounds", 4]}, "component 'a': params: expected a mapping (JSON object), got "
                                "array"),
    ({"statistics": [{"name": "x", "params": "p"}]},
     "component 'a': statistics[0].params: expected a mapping"),
    ({"subcomponents": [{"name": "c", "type": "testElement.Nope", "slot_name": "counter"}]},
     "subcomponent 'c': unknown element 'testElement.Nope'"),
])
def test_a_bad_component_in_a_graph_file_is_one_line_naming_file_and_component(
        tmp_path, change, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph_with(**change)))
    with pytest.raises(RunError) as err:
        run(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: ") and message in text, text


def test_a_graph_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(b'{"format": "sst-cdma-config", "x": "\xff"}')
    with pytest.raises(RunError) as err:
        run(path)
    assert str(err.value) == (f"{path}: cannot read configuration graph: not UTF-8 text "
                              f"(byte 0xff at offset 36)")


def test_sst_command_reports_a_bad_graph_in_one_line_with_status_1(tmp_path, capsys):
    from sst_cdma.cli.sst_main import main

    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph_with(params="rounds=4")))
    assert main([str(path)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "component 'a': params" in err and str(path) in err, err
