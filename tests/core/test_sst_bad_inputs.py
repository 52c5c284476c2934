"""Bad SST configurations and options (issue 24's list): each is refused with one line naming
the file or option and the thing at fault, and leaves nothing outside the output folder."""
from __future__ import annotations

import json
import time

import pytest

from sst_cdma.tools.cli.sst_main import main
from sst_cdma.engine.runner import RunError, run

PROBE = 'import sst\nc = sst.Component("c", "testElement.StatProbe")\n'
GRAPH = {"program_options": {"stop-at": "5ns"},
         "components": [{"name": "a", "type": "testElement.Echo", "params": {"pings": "1"}},
                        {"name": "b", "type": "testElement.Echo", "params": {}},
                        {"name": "c", "type": "testElement.Echo", "params": {}},
                        {"name": "d", "type": "testElement.Echo", "params": {}}],
         "links": [{"name": "l", "left": {"component": "a", "port": "port", "latency": "1ns"},
                    "right": {"component": "b", "port": "port", "latency": "1ns"}},
                   {"name": "m", "left": {"component": "c", "port": "port", "latency": "1ns"},
                    "right": {"component": "d", "port": "port", "latency": "1ns"}}]}


def _graph(tmp_path, **changes):
    doc = json.loads(json.dumps(GRAPH))
    doc.update(changes)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    return path


def _one_line(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # the option parser's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_the_graph_runs(tmp_path):
    run(_graph(tmp_path))


def test_a_graph_with_two_links_of_one_name_is_refused(tmp_path, capsys):
    links = GRAPH["links"]
    path = _graph(tmp_path, links=[links[0], {**links[1], "name": "l"}])
    err = _one_line(capsys, [str(path)])
    assert "g.json" in err and "duplicate link name 'l'" in err


def test_a_graph_with_an_unknown_program_option_is_refused(tmp_path, capsys):
    err = _one_line(capsys, [str(_graph(tmp_path, program_options={"stop-att": "5ns"}))])
    assert "g.json" in err and "unknown program option 'stop-att'" in err \
        and "did you mean 'stop-at'" in err


def test_two_links_of_one_name_in_a_script_name_the_duplicate(run_script):
    with pytest.raises(RunError, match="duplicate link name 'l'") as err:
        run_script("""
import sst
a, b = sst.Component("a", "testElement.Echo"), sst.Component("b", "testElement.Echo")
c, d = sst.Component("c", "testElement.Echo"), sst.Component("d", "testElement.Echo")
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
sst.Link("l", "1ns").connect((c, "port"), (d, "port"))
""")
    assert err.value.where.endswith(":6") and "topo.py:5" in str(err.value)


def test_a_negative_statistic_rate_is_refused(run_script):
    with pytest.raises(RunError, match=r"c.values_u32: rate '-5ns' is negative"):
        run_script(PROBE + 'sst.setStatisticLoadLevel(1)\n'
                   'c.enableStatistics(["values_u32"], {"rate": "-5ns"})\n')


@pytest.mark.parametrize("latency", ["1e30 s", "18446745s"])
def test_a_latency_beyond_the_simulations_range_is_refused(run_script, latency):
    with pytest.raises(RunError, match="beyond the simulation's range"):
        run_script(f"""
import sst
a, b = sst.Component("a", "testElement.Echo"), sst.Component("b", "testElement.Echo")
sst.Link("l", "{latency}").connect((a, "port"), (b, "port"))
""")


def test_the_longest_latency_in_range_is_taken(run_script):
    run_script("""
import sst
a, b = sst.Component("a", "testElement.Echo"), sst.Component("b", "testElement.Echo")
sst.Link("l", "18446744073709551615ps").connect((a, "port"), (b, "port"))
""", run_mode="init")


@pytest.mark.parametrize("name", ["../../../x/gpu", "x\\\\y", "a/b"])
def test_a_component_name_that_would_leave_the_output_folder_is_refused(
        run_script, tmp_path, name):
    with pytest.raises(RunError, match="is not allowed in a name"):
        run_script(f'import sst\nsst.Component({name!r}, "testElement.StatProbe")\n',
                   output_directory=tmp_path / "deep" / "er" / "out")
    assert not (tmp_path / "x").exists() and not (tmp_path / "deep" / "er" / "out").exists()


def test_a_graph_file_component_name_with_a_slash_is_refused(tmp_path, capsys):
    comps = [dict(c) for c in GRAPH["components"]]
    comps[0]["name"] = "../../../x/gpu"
    err = _one_line(capsys, [str(_graph(tmp_path, components=comps, links=[]))])
    assert "'../../../x/gpu'" in err


@pytest.mark.parametrize("filepath", ["/tmp/elsewhere/stats.csv", "../../stats.csv",
                                      "sub/../../stats.csv"])
def test_a_graph_files_statistics_filepath_outside_the_folder_is_refused(tmp_path, capsys,
                                                                        filepath):
    """The attack: a graph file from someone else names where its statistics go, outside the
    output folder (absolute or climbing out with ``..``), to write over a file of the user's.
    The run refuses it in one line naming the file and the value, and writes nothing."""
    stats = {"statisticLoadLevel": 1, "statisticOutput": "sst.statOutputCSV",
             "params": {"filepath": filepath}}
    comps = [{"name": "p", "type": "testElement.StatProbe", "params": {},
              "statistics_options": {"enable_all_statistics": True}}]
    path = _graph(tmp_path, components=comps, links=None, statistics_options=stats)
    out = tmp_path / "a" / "b" / "out"
    err = _one_line(capsys, [str(path), "--output-directory", str(out)])
    assert str(path) in err and "points outside the output folder" in err and \
        repr(filepath) in err
    assert not out.exists() and not (tmp_path / "a" / "stats.csv").exists()
    assert not (tmp_path / "stats.csv").exists()


@pytest.mark.parametrize("where", ["graph", "component"])
@pytest.mark.parametrize("level", ["abc", 1.5, True, [1]])
def test_a_graph_files_load_level_that_is_not_a_whole_number_is_refused(tmp_path, capsys,
                                                                       where, level):
    """A statistic load level must be a whole number: text, a fraction, a boolean or a list is
    one line naming the field, not ``ValueError: invalid literal for int()``."""
    comps = [{"name": "p", "type": "testElement.StatProbe", "params": {}}]
    stats = {"statisticLoadLevel": 1}
    if where == "graph":
        stats["statisticLoadLevel"] = level
        field = "statisticLoadLevel"
    else:
        comps[0]["statistics_options"] = {"statistic_load_level": level}
        field = "statistic_load_level"
    path = _graph(tmp_path, components=comps, links=None, statistics_options=stats)
    err = _one_line(capsys, [str(path)])
    assert str(path) in err and field in err and "is not a whole number" in err
    assert "invalid literal" not in err


def test_stop_at_with_a_huge_exponent_is_one_line_at_once(write_script, capsys):
    script = write_script(PROBE)
    t0 = time.perf_counter()
    err = _one_line(capsys, ["--stop-at", "1e99999999ps", str(script)])
    assert time.perf_counter() - t0 < 5
    assert "--stop-at" in err and "exponent 99999999 is out of range" in err


def test_stop_at_beyond_the_simulations_range_is_refused(write_script, capsys):
    err = _one_line(capsys, ["--stop-at", "1e300s", str(write_script(PROBE))])
    assert "--stop-at 1e300s: beyond the simulation's range" in err


@pytest.mark.parametrize("option", ["--stop-at", "--heartbeat-sim-period"])
def test_a_5000_digit_number_is_one_line(write_script, capsys, option):
    err = _one_line(capsys, [option, "7" * 5000 + "ps", str(write_script(PROBE))])
    assert option in err and "the number has 5000 characters" in err
    assert "4300" not in err and len(err) < 300


def test_a_5000_deep_json_graph_is_one_line(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text('{"components": ' + "[" * 5000 + "]" * 5000 + "}")
    err = _one_line(capsys, [str(path)])
    assert "deep.json" in err and "nested too deeply" in err


@pytest.mark.parametrize("params, head", [
    ({"outputsimtime": "0"}, "ComponentName, StatisticName, StatisticSubId, StatisticType, Rank"),
    ({"outputrank": "0"}, "ComponentName, StatisticName, StatisticSubId, StatisticType, SimTime"),
    ({"outputsimtime": "false", "outputrank": "0"},
     "ComponentName, StatisticName, StatisticSubId, StatisticType, Sum.u32")])
def test_csv_outputsimtime_and_outputrank_leave_their_columns_out(run_script, tmp_path, params,
                                                                   head):
    run_script(PROBE + f'sst.setStatisticOutput("sst.statOutputCSV", {params!r})\n'
               'sst.setStatisticLoadLevel(1)\nc.enableAllStatistics()\n',
               output_directory=tmp_path / "o")
    lines = (tmp_path / "o" / "StatisticOutput.csv").read_text().splitlines()
    assert lines[0].startswith(head)
    assert len(lines[0].split(", ")) == len(lines[1].split(", "))


@pytest.mark.parametrize("argv, warning", [
    (["--lib-path", "/opt/sst/lib"], "--lib-path: "),
    (["--add-lib-path=/opt/x"], "--add-lib-path: "),
    (["--output-prefix-core", "@x"], "--output-prefix-core: "),
    (["--partitioner", "sst.roundrobin"], "partitioner sst.roundrobin: this run has one rank"),
    (["--dot-verbosity", "2", "--no-env-config", "--timebase", "1ps"], None)])
def test_job_file_options_are_taken(write_script, capsys, argv, warning):
    assert main([*argv, str(write_script(PROBE))]) == 0
    err = capsys.readouterr().err
    assert (warning in err) if warning else err == ""


def test_print_env_prints_the_environment(write_script, capsys, monkeypatch):
    monkeypatch.setenv("SST_CDMA_PROBE", "42")
    assert main(["--print-env", str(write_script(PROBE))]) == 0
    assert "SST_CDMA_PROBE=42" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--timebase", "1ns"], ["--partitioner", "zoltan"]])
def test_job_file_options_sst_cdma_cannot_take_are_one_line(write_script, capsys, argv):
    err = _one_line(capsys, [*argv, str(write_script(PROBE))])
    assert f"argument {argv[0]}" in err


def test_usage_and_help_of_one_option(capsys):
    assert main(["--usage"]) == 0 and "--stop-at" in capsys.readouterr().out
    assert main(["-h"]) == 0 and "--timebase" in capsys.readouterr().out
    assert main(["--help=heartbeat-sim-period"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--heartbeat-sim-period") and "--stop-at" not in out


def test_a_graph_file_with_a_key_given_twice_is_refused(tmp_path, capsys):
    """The attack: which of two ``params`` a reader keeps decides the run (``json.loads`` kept
    the last silently)."""
    path = tmp_path / "g.json"
    text = json.dumps(GRAPH).replace('"params": {"pings": "1"}',
                                     '"params": {"pings": "1"}, "params": {}')
    path.write_text(text)
    err = _one_line(capsys, [str(path)])
    assert "g.json" in err and "duplicate key 'params'" in err


@pytest.mark.parametrize("make", ["fifo", "/dev/zero"])
def test_a_graph_file_or_cpu_adam_file_that_is_no_regular_file_is_one_line(tmp_path, capsys,
                                                                           make):
    """The attack: a FIFO given as a graph or as ``--cpu-adam-file`` blocked ``sst`` forever;
    ``/dev/zero`` ended in a MemoryError. Both are refused at once, naming the file."""
    import os

    path = tmp_path / "in.json"
    if make == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(make)
    fault = "FIFO" if make == "fifo" else "character device"
    err = _one_line(capsys, [str(path)])
    assert ("in.json" in err or make in err) and fault in err  # the link, or what it names
    err = _one_line(capsys, ["pascal_cdma.py", "--", "--network", "alexnet", "--batch", "1",
                             "--optimizer", "adam", "--optimizer-states", "host",
                             "--cpu-adam-file", str(path)])
    assert "--cpu-adam-file" in err and "in.json" in err and fault in err
