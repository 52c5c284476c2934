"""A subcomponent's own ports are checked as a component's: a required one left unconnected
is refused before the run, in one line naming the subcomponent and the port; wired, its peer
is found by ``peer_provider`` from the subcomponent."""
from __future__ import annotations

import pytest

from sst_cdma.engine.runner import RunError

METER_WITH_TAP = """
import sst
e = sst.Component("e", "testElement.Echo")
e.addParam("pings", 2)
m = sst.Component("m", "testElement.Meter")
tap = m.setSubComponent("tally", "testElement.TapTally")
"""


def test_a_required_subcomponent_port_left_unconnected_is_refused(run_script):
    body = METER_WITH_TAP + 'f = sst.Component("f", "testElement.Echo")\n' \
        'sst.Link("l", "1ns").connect((e, "port"), (f, "port"))\n'
    with pytest.raises(RunError) as err:
        run_script(body)
    message = str(err.value)
    assert "m:tally[0] (testElement.TapTally): required port 'tap' is not connected" in message
    assert "\n" not in message
    assert err.value.where.endswith(":6")  # the line that filled the slot


def test_a_wired_subcomponent_port_carries_events_and_finds_its_peer(run_script):
    result, _ = run_script(METER_WITH_TAP + 'sst.Link("l", "1ns").connect((e, "port"), '
                                            '(tap, "tap"))\n')
    simulation = result.simulation
    tally = simulation.components["m"].subcomponent("tally")
    assert tally.total == 1 + 2  # setup's tick, then the two pings on its own port
    peer, port = simulation.peer(tally.name, "tap")
    assert (peer.name, port) == ("e", "port")
    assert simulation.peer("e", "port")[0] is tally
