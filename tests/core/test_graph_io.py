"""The configuration graph: --output-json runs again identically, --output-dot, --run-mode."""
from __future__ import annotations

import io
import json

import pytest

from sst_cdma.engine import graph_files
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.graph_files import to_json
from sst_cdma.engine.runner import RunError, run

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
    assert {c["name"] for c in data["components"]} == {"a", "b"}
    assert data["links"] == [{"name": "l", "noCut": False, "nonlocal": False,
                              "left": {"component": "a", "port": "port", "latency": "3 ns"},
                              "right": {"component": "b", "port": "port", "latency": "2 ns"}}]
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
    path.write_text('{"components": [{"name": "a"}]}')
    with pytest.raises(RunError, match="malformed configuration graph: KeyError: 'type'"):
        run(path)
    path.write_text("[1, 2]")
    with pytest.raises(RunError, match="not an SST configuration graph"):
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
        graph_files.from_json(data, "g.json")


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
    from sst_cdma.tools.cli.sst_main import main

    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph_with(params="rounds=4")))
    assert main([str(path)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "component 'a': params" in err and str(path) in err, err


def test_a_graph_file_takes_no_model_options(tmp_path, capsys):
    """They shaped the graph when it was written: given to a saved graph they would be
    silently ignored (a user asking for another network would get the old one)."""
    from sst_cdma.tools.cli.sst_main import main

    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    message = (f"{path}: a JSON graph takes no model options (they shaped the graph when it "
               "was written), got: --network vgg16")
    with pytest.raises(RunError) as err:
        run(path, ["--network", "vgg16"])
    assert str(err.value) == message
    assert main([str(path), "--", "--network", "vgg16"]) == 1
    assert capsys.readouterr().err == f"sst: {message}\n"
    assert main(["--model-options", "--network vgg16", str(path)]) == 1
    assert capsys.readouterr().err == f"sst: {message}\n"


# ------------------------------------------------------------ SST-core 16's graph files
REFERENCE = "tests/data/sst-core-16"
EXAMPLES = ["links_example", "statistics_example"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_output_json_and_config_are_byte_identical_to_sst_core_16(repo, tmp_path, name):
    run(repo / REFERENCE / f"{name}.py", run_mode="init", output_directory=tmp_path,
        output_json="g.json", output_config="g.py")
    assert (tmp_path / "g.json").read_text() == \
        (repo / REFERENCE / f"{name}.json").read_text()
    assert (tmp_path / "g.py").read_text() == \
        (repo / REFERENCE / f"{name}_config.py").read_text()


def test_a_graph_saved_by_sst_core_16_loads_with_links_and_latencies(repo):
    result = run(repo / REFERENCE / "links_example.json", run_mode="init")
    g = result.graph
    assert list(g.components) == ["a", "b"]
    assert g.components["a"].type == "coreTestElement.coreTestComponent"
    assert g.components["b"].params == {"workPerCycle": "1000", "commFreq": "100",
                                        "commSize": "100", "clockFrequency": "1GHz"}
    ends = {name: [(e.component, e.port, g.end_latency_ps(link, i))
                   for i, e in enumerate(link.ends)] for name, link in g.links.items()}
    assert ends == {"ab": [("a", "Elink", 1000), ("b", "Wlink", 2000)],
                    "ba": [("b", "Elink", 5000), ("a", "Wlink", 5000)],
                    "ns": [("a", "Nlink", 3000), ("b", "Slink", 3000)],
                    "sn": [("a", "Slink", 4000), ("b", "Nlink", 4000)]}
    assert [ln.name for ln in g.links.values() if ln.no_cut] == ["ns"]
    assert set(g.components["a"].statistics) == {"*"} and not g.components["b"].statistics
    assert g.components["a"].stat_load_level is None
    assert g.stat_load_level == 7
    assert g.stat_output == ("sst.statOutputCSV", {"filepath": "./links.csv"})
    assert g.program_options["stop-at"] == "10us"


def test_a_graph_saved_by_sst_core_16_loads_its_statistics(repo, tmp_path):
    result = run(repo / REFERENCE / "statistics_example.json", output_directory=tmp_path)
    stats = result.graph.components["gpu0"].statistics
    assert list(stats) == ["stat1_U32", "stat2_U64"]
    assert stats["stat1_U32"].type_name == "sst.AccumulatorStatistic"
    assert stats["stat2_U64"].type_name == "sst.HistogramStatistic"
    assert stats["stat2_U64"].params == {"IncludeOutOfBounds": "1", "binwidth": "1000",
                                         "minvalue": "0", "numbins": "4"}
    assert list(result.graph.components["gpu1"].statistics) == ["*"]
    assert result.sim_time_ps == 20_000  # its stop-at
    rows = (tmp_path / "StatisticOutput.csv").read_text().splitlines()[1:]
    assert [r.split(", ")[:2] + r.split(", ")[3:4] for r in rows] == [
        ["gpu0", "stat1_U32", "Accumulator"], ["gpu0", "stat2_U64", "Histogram"],
        ["gpu1", "stat1_F32", "Accumulator"], ["gpu1", "stat2_F64", "Accumulator"]]


@pytest.mark.parametrize("name", EXAMPLES)
def test_sst_core_16_generated_scripts_rebuild_the_saved_graph(repo, name):
    from_json = run(repo / REFERENCE / f"{name}.json", run_mode="init").graph
    from_script = run(repo / REFERENCE / f"{name}_config.py", run_mode="init").graph
    # SST's script lists the links component by component, its JSON in creation order
    def by_name(data):
        return {**data, "links": sorted(data["links"] or [], key=lambda ln: ln["name"])}
    assert by_name(to_json(from_script)) == by_name(to_json(from_json))


def test_output_config_round_trips_to_an_identical_graph(write_script, tmp_path):
    topo = TOPO + """
sst.setProgramOption("stop-at", "1us")
c2 = sst.Component("c2", "testElement.PHOLD")
c2.addParams({"seed": 3, "max_delay": "2ns"})
c2.setStatisticLoadLevel(1)
c2.enableStatistics(["extra_delay"], {"type": "sst.HistogramStatistic", "numbins": "3",
                                      "binwidth": "1000", "minvalue": "0"})
d2 = sst.Component("d2", "testElement.PHOLD")
l2 = sst.Link("l2", "1.5ns")
l2.setNoCut()
l2.connect((c2, "north"), (d2, "south", "7ps"))
"""
    first = run(write_script(topo), run_mode="init", output_directory=tmp_path / "o",
                output_config="g.py", output_json="g.json")
    script = (tmp_path / "o" / "g.py").read_text()
    assert 'c.enableAllStatistics' not in script  # variables are SST's comp_/subcomp_ names
    assert 'subcomp_a_counter_0_ = comp_a.setSubComponent("counter", "testElement.Counter", 0)' \
        in script
    second = run(tmp_path / "o" / "g.py", run_mode="init")
    assert to_json(second.graph) == to_json(first.graph)
    third = run(tmp_path / "o" / "g.json", run_mode="init")
    assert to_json(third.graph) == to_json(first.graph)
    assert to_json(first.graph)["components"][0]["subcomponents"] == [
        {"slot_name": "counter", "slot_number": 0, "type": "testElement.Counter",
         "statistics_options": {"enable_all_statistics": True}, "params": {}}]


def test_a_saved_graph_replays_the_topology_identically(repo, tmp_path):
    topo = repo / "topologies/pascal_cdma.py"
    opts = ["--network", "alexnet", "--batch", "16", "--stats", "csv"]
    run(topo, opts, run_mode="init", output_directory=tmp_path / "g", output_json="g.json",
        console=io.StringIO())
    direct, replay = io.StringIO(), io.StringIO()
    run(topo, opts, output_directory=tmp_path / "one", console=direct)
    run(tmp_path / "g" / "g.json", output_directory=tmp_path / "two", console=replay)
    assert direct.getvalue() == replay.getvalue()
    for name in ("StatisticOutput.csv", "summary.json", "config.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_a_graph_saved_without_an_output_directory_replays_with_its_statistics(
        repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    topo = repo / "topologies/pascal_cdma.py"
    opts = ["--network", "alexnet", "--batch", "16"]
    run(topo, opts, run_mode="init", output_json="g.json", console=io.StringIO())
    run(topo, opts, output_directory=tmp_path / "one", console=io.StringIO())
    run(tmp_path / "g.json", output_directory=tmp_path / "two", console=io.StringIO())
    for name in ("StatisticOutput.csv", "summary.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_a_saved_graph_replayed_without_a_folder_writes_there_what_the_topology_run_does(
        repo, tmp_path, monkeypatch, capsys):
    """Issue #34: ``sst g.json`` wrote StatisticOutput.csv into the working folder, where the
    topology run it replays writes nothing; with a folder it writes them there."""
    from sst_cdma.tools.cli.sst_main import main

    monkeypatch.chdir(tmp_path)
    topo = [str(repo / "topologies/pascal_cdma.py"), "--", "--network", "digits_cnn",
            "--no-baselines"]
    assert main(topo) == 0
    assert list(tmp_path.iterdir()) == []
    assert main(["--output-json", "g.json", *topo]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]
    assert main(["g.json"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]
    replay = run(tmp_path / "g.json", console=io.StringIO())
    assert len(replay.statistics) > 0   # kept in memory
    assert main(["--output-directory", "out", "g.json"]) == 0
    assert (tmp_path / "out" / "StatisticOutput.csv").stat().st_size > 0
    capsys.readouterr()


def test_a_graph_of_an_explicit_statistic_output_writes_where_sst_writes(repo, tmp_path,
                                                                          monkeypatch):
    """``--stats csv`` asks for the file: the run and its saved graph write it in the working
    folder, as SST does, folder or not."""
    monkeypatch.chdir(tmp_path)
    run(repo / "topologies/pascal_cdma.py", ["--network", "digits_cnn", "--no-baselines",
                                             "--stats", "csv"], output_json="g.json",
        console=io.StringIO())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["StatisticOutput.csv", "g.json"]
    (tmp_path / "StatisticOutput.csv").unlink()
    run(tmp_path / "g.json", console=io.StringIO())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["StatisticOutput.csv", "g.json"]
