"""The ``sst`` module's calls that SST-core 16 has (its Python method tables) and sst-cdma
had not: each acts as SST does, or is refused, or is said at run time
(docs/sst_compatibility.md)."""
from __future__ import annotations

import pytest

from sst_cdma.engine.runner import RunError

PROBE = 'import sst\nc = sst.Component("c", "testElement.StatProbe")\n'


def test_shared_param_sets_reach_the_elements_that_name_them(run_script):
    result, _ = run_script(PROBE + """
sst.addSharedParams("probe", {"count": 3, "seed": 9, "not_a_probe_param": 1})
sst.addGlobalParam("probe", "count", 4)
c.addSharedParamSet("probe")
d = sst.Component("d", "testElement.StatProbe")
d.addParam("count", 2)
d.addGlobalParamSet("probe")
sst.setStatisticLoadLevel(1)
sst.enableAllStatisticsForAllComponents()
""")
    table = result.statistics
    counts = table[table.StatisticName == "values_u32"].set_index("ComponentName")["Count.u64"]
    assert int(counts["c"]) == 4 and int(counts["d"]) == 2  # the element's own params win


def test_an_unknown_shared_set_is_refused(run_script):
    with pytest.raises(RunError, match="no shared parameter set 'nope'"):
        run_script(PROBE + 'c.addSharedParamSet("nope")\n')


def test_load_level_for_component_name_and_type(run_script):
    result, _ = run_script(PROBE + """
d = sst.Component("d", "testElement.StatProbe")
sst.enableAllStatisticsForAllComponents()
sst.setStatisticLoadLevelForComponentName("c", 4)
sst.setStatisticLoadLevelForComponentType("testElement.StatProbe", 1)
sst.setStatisticLoadLevelForComponentName("c", 2)
""")
    table = result.statistics
    assert sorted(table[table.ComponentName == "c"].StatisticName) == ["values_u32", "values_u64"]
    assert list(table[table.ComponentName == "d"].StatisticName) == ["values_u32"]


def test_enable_create_and_set_statistic(run_script):
    result, _ = run_script(PROBE + """
sst.setStatisticLoadLevel(4)
s = c.enableStatistic("values_u32")
s.addParam("type", "sst.AccumulatorStatistic")
t = c.createStatistic("values_f64", {"rate": "0ns"})
c.setStatistic("values_f64", t)
""")
    assert sorted(result.statistics.StatisticName) == ["values_f64", "values_u32"]


def test_a_statistic_shared_between_components_is_refused(run_script):
    with pytest.raises(RunError, match="cannot be shared"):
        run_script(PROBE + 'd = sst.Component("d", "testElement.StatProbe")\n'
                   't = c.createStatistic("values_u32")\nd.setStatistic("values_u32", t)\n')


def test_statistic_group_enables_its_statistics_at_its_rate(run_script):
    result, _ = run_script(PROBE + """
sst.setStatisticLoadLevel(1)
g = sst.StatisticGroup("g")
g.addStatistic("values_u32")
g.setFrequency("4ns")
g.addComponent(c)
g.setOutput(sst.StatisticOutput("sst.statOutputConsole"))
""")
    assert list(result.statistics.SimTime)[:2] == [4000, 8000]  # then the end-of-run dump


def test_statistic_group_with_an_output_of_its_own_is_refused(run_script):
    with pytest.raises(RunError, match="an output of its own"):
        run_script(PROBE + 'g = sst.StatisticGroup("g")\n'
                   'g.setOutput(sst.StatisticOutput("sst.statOutputCSV", {"filepath": "x"}))\n')


def test_thread_count_elapsed_time_and_memory(run_script, capsys):
    run_script(PROBE + """
sst.setThreadCount(4)
assert sst.getElapsedExecutionTime().hasUnits("s")
assert sst.getLocalMemoryUsage().getRoundedValue() > 1_000_000
""")
    assert "num-threads 4: this kernel runs one thread" in capsys.readouterr().err


def test_exit_fails_the_run(run_script):
    with pytest.raises(RunError, match="exited with status 255"):
        run_script(PROBE + "sst.exit()\n")


@pytest.mark.parametrize("call, fault", [
    ('c.addPortModule("p", "sst.portmodules.random_drop")', "port modules are not supported"),
    ('sst.Link("l").setNonLocal(1, 0)', "no link can reach another"),
])
def test_calls_sst_cdma_cannot_act_on_are_refused_in_one_line(run_script, call, fault):
    with pytest.raises(RunError, match=fault) as err:
        run_script(PROBE + call + "\n")
    assert err.value.where.endswith(":3")


def test_a_link_to_a_subcomponent_port_carries_events(run_script):
    result, _ = run_script("""
import sst
e = sst.Component("e", "testElement.Echo")
e.addParam("pings", 2)
m = sst.Component("m", "testElement.Meter")
tap = m.setSubComponent("tally", "testElement.TapTally")
tap.enableAllStatistics()
sst.setStatisticLoadLevel(1)
sst.Link("l", "1ns").connect((e, "port"), (tap, "tap"))
""")
    table = result.statistics
    counted = table[table.ComponentName == "m:tally[0]"]["Count.u64"]
    assert list(counted) == [1 + 2]  # setup's tick, then the two pings on its own port


def test_a_subcomponent_port_it_does_not_have_is_named(run_script):
    with pytest.raises(RunError, match=r"m:tally\[0\] \(testElement.TapTally\) has no port 'x'"):
        run_script("""
import sst
e = sst.Component("e", "testElement.Echo")
m = sst.Component("m", "testElement.Meter")
tap = m.setSubComponent("tally", "testElement.TapTally")
sst.Link("l", "1ns").connect((e, "port"), (tap, "x"))
""")


def test_stop_at_cycle_is_the_older_name_of_stop_at(run_script):
    result, _ = run_script(PROBE + 'c.addParam("count", 100)\n'
                           'sst.setProgramOption("stopAtCycle", "5ns")\n')
    assert result.sim_time_ps == 5000


def test_set_rank_elsewhere_is_said_and_coordinates_are_written_back(run_script, tmp_path,
                                                                     capsys):
    run_script(PROBE + "c.setRank(2)\nc.setWeight(3.5)\nc.setCoordinates(1.5, 2, 3)\n",
               output_config=str(tmp_path / "out.py"), run_mode="init")
    assert "setRank(2, 0)" in capsys.readouterr().err
    assert "c.setCoordinates(1.5, 2, 3)" in (tmp_path / "out.py").read_text().replace(
        "comp_c", "c")


@pytest.mark.parametrize("value", ["1ns", "2ps", "1 us"])
def test_a_timebase_other_than_1ps_is_refused(run_script, value):
    with pytest.raises(RunError, match="counts time in picoseconds only"):
        run_script(PROBE + f'sst.setProgramOption("timebase", "{value}")\n')


def test_timebase_1ps_is_sst_default_and_accepted(run_script):
    run_script(PROBE + 'sst.setProgramOption("timebase", "1 ps")\n')


def test_partitioner_unknown_refused_known_said(run_script, capsys):
    with pytest.raises(RunError, match="not one of SST-core's"):
        run_script(PROBE + 'sst.setProgramOption("partitioner", "lib.mine")\n')
    run_script(PROBE + 'sst.setProgramOption("partitioner", "sst.linear")\n')
    assert "partitioner sst.linear: this run has one rank" in capsys.readouterr().err


def test_a_subcomponent_link_survives_graph_files(write_script, tmp_path):
    from sst_cdma.engine.runner import run

    script = write_script("""
import sst
e = sst.Component("e", "testElement.Echo")
e.addParam("pings", 2)
m = sst.Component("m", "testElement.Meter")
tap = m.setSubComponent("tally", "testElement.TapTally")
sst.Link("l", "1ns").connect((e, "port"), (tap, "tap"))
""")
    run(script, run_mode="init", output_json=str(tmp_path / "g.json"),
        output_config=str(tmp_path / "c.py"))
    saved = (tmp_path / "g.json").read_text()
    assert '"component": "m:tally[0]"' in saved
    assert '(subcomp_m_tally_0_, "tap", "1 ns")' in (tmp_path / "c.py").read_text()
    for replay in ("g.json", "c.py"):
        graph = run(tmp_path / replay, run_mode="init").graph
        assert [e.component for e in graph.links["l"].ends] == ["e", "m:tally[0]"]
