"""The ``sst`` module inside topology scripts: SST-core 16 semantics."""
from __future__ import annotations

import pytest

from sst_cdma.engine.runner import RunError

PAIR = """
import sst
a = sst.Component("a", "testElement.Echo")
a.addParams({"pings": 1, "rounds": 2})
b = sst.Component("b", "testElement.Echo")
b.addParam("rounds", 2)
"""


def test_ping_pong_latencies_and_reports(run_script):
    result, _ = run_script(PAIR + 'sst.Link("l").connect((a, "port", "10ns"), (b, "port", "3ns"))')
    # a sends at 0 (+10ns) -> b at 10ns answers (+3ns) -> a at 13ns -> b at 23ns -> a at 26 ...
    times_b = [t for t, _ in result.reports["b"]]
    times_a = [t for t, _ in result.reports["a"]]
    assert times_b[:2] == [10_000, 23_000]
    assert times_a[:2] == [13_000, 26_000]


def test_link_default_latency_applies_to_ends_without_one(run_script):
    result, _ = run_script(PAIR + 'sst.Link("l", "5ns").connect((a, "port"), (b, "port", "1ns"))')
    assert result.reports["b"][0][0] == 5_000
    assert result.reports["a"][0][0] == 6_000


def test_link_without_latency_is_an_error(run_script):
    with pytest.raises(RunError, match="no latency"):
        run_script(PAIR + 'sst.Link("l").connect((a, "port"), (b, "port"))')


def test_link_with_three_ends_is_an_error(run_script):
    body = PAIR + """
c = sst.Component("c", "testElement.Echo")
l = sst.Link("l", "1ns")
l.connect((a, "port"), (b, "port"))
c.addLink(l, "port")
"""
    with pytest.raises(RunError, match="already has two ends") as err:
        run_script(body)
    assert err.value.where.endswith(":11")  # the addLink line


def test_sys_argv_holds_model_options(run_script):
    body = PAIR + """
import sys
assert sys.argv[1:] == ["--x", "1", "y z"], sys.argv
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""
    run_script(body, ["--x", "1", "y z"])
    run_script(body, "--x 1 'y z'")


def test_enable_all_for_all_components_only_touches_existing_ones(run_script):
    body = """
import sst
sst.setStatisticLoadLevel(1)
a = sst.Component("a", "testElement.Echo")
a.addParam("pings", 1)
sst.enableAllStatisticsForAllComponents()
b = sst.Component("b", "testElement.Echo")
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""
    result, console = run_script(body)
    assert set(result.statistics["ComponentName"]) == {"a"}
    assert " a.arrival_ps : Accumulator" in console


def test_load_level_zero_loads_no_statistics(run_script, capsys):
    body = PAIR + """
sst.enableAllStatisticsForAllComponents()
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""
    result, console = run_script(body)
    assert result.statistics.empty and console == ""
    assert "load level" in capsys.readouterr().err


def test_component_load_level_overrides_global(run_script):
    body = """
import sst
sst.setStatisticLoadLevel(0)
p = sst.Component("p", "testElement.StatProbe")
p.addParam("count", 5)
p.setStatisticLoadLevel(2)
p.enableAllStatistics()
"""
    result, _ = run_script(body)
    assert sorted(result.statistics["StatisticName"]) == ["values_u32", "values_u64"]


def test_name_prefixes_and_find_component(run_script):
    body = """
import sst
sst.pushNamePrefix("sys")
sst.pushNamePrefix("gpu0")
a = sst.Component("a", "testElement.Echo")
sst.popNamePrefix()
b = sst.Component("b", "testElement.Echo")
sst.popNamePrefix()
assert a.getFullName() == "sys.gpu0.a" and b.getFullName() == "sys.b"
assert sst.findComponentByName("sys.gpu0.a").getType() == "testElement.Echo"
assert sst.findComponentByName("nope") is None
assert sst.getMPIRankCount() == 1 and sst.getMyMPIRank() == 0
assert sst.UnitAlgebra("16GB/s") == sst.UnitAlgebra("16e9B/s")
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""
    result, _ = run_script(body)
    assert set(result.graph.components) == {"sys.gpu0.a", "sys.b"}


def test_program_options_from_script_and_command_line(run_script):
    body = PAIR + """
sst.setProgramOption("stop-at", "15ns")
assert sst.getProgramOptions()["stop-at"] == "15ns"
sst.Link("l", "10ns").connect((a, "port"), (b, "port"))
"""
    result, _ = run_script(body)
    assert result.sim_time_ps == 15_000
    result, _ = run_script(body, stop_at="25ns")
    assert result.sim_time_ps == 25_000


def test_unknown_program_option_is_an_error(run_script):
    with pytest.raises(RunError, match="unknown program option 'stop-after'"):
        run_script('import sst\nsst.setProgramOption("stop-after", "1ns")\n')


def test_subcomponent_in_slot_counts_and_reports_statistics(run_script):
    body = PAIR + """
sst.setStatisticLoadLevel(1)
c = a.setSubComponent("counter", "testElement.Counter")
c.addParam("weight", 5)
c.enableAllStatistics()
sst.Link("l", "1ns").connect((a, "port"), (b, "port"))
"""
    result, _ = run_script(body)
    row = result.statistics.set_index("ComponentName").loc["a:counter[0]"]
    # a starts one ping and answers twice, so it receives two messages of weight 5
    assert row["Sum.u64"] == 5 * 2 and row["Count.u64"] == 2


def test_two_runs_in_one_process_do_not_share_state(run_script):
    one = PAIR + 'sst.Link("l", "1ns").connect((a, "port"), (b, "port"))'
    first, _ = run_script(one)
    second, _ = run_script(one)
    assert list(first.graph.components) == list(second.graph.components) == ["a", "b"]
    assert first.sim_time_ps == second.sim_time_ps and first.events == second.events
    import sys
    assert "sst" not in sys.modules
