"""Declared interfaces between elements: a peer is looked up on a named port and must declare
the interface on its own port and implement it; services are looked up by class on the
simulation; elements schedule callbacks with ``schedule_at``."""
from __future__ import annotations

import textwrap
from typing import Any, Protocol

import pytest

from sst_cdma.engine import library
from sst_cdma.engine.element import Component, Param, Port
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.engine.interfaces import interface_members
from sst_cdma.engine.kernel import Service, SimulationError, Simulator
from sst_cdma.engine.runner import RunError, run


class Greeter(Protocol):
    """What Asker asks its peer for."""

    name: str

    def greet(self) -> str:
        """A greeting naming the greeter."""
        ...


class Hello(Component):
    """Provides Greeter on port 'out' only."""

    library = "iface"
    PORTS = (Port("out", "greets the peer", provides=(Greeter,)),
             Port("back", "provides nothing"))

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        for port in self.connected_ports():
            self.configure_link(port, self.refuse_event)

    def greet(self) -> str:
        """A greeting naming this element."""
        return f"hello from {self.name}"


class Liar(Component):
    """Declares Greeter on 'out' but has no greet()."""

    library = "iface"
    PORTS = Hello.PORTS

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.configure_link("out", self.refuse_event)


class Asker(Component):
    """Asks for a Greeter on ``port`` at ``when``, leaves the greeting in the reports; at setup
    also schedules three callbacks with schedule_at and records them."""

    library = "iface"
    PARAMS = (Param("port", "str", "in", "the port to ask on"),
              Param("when", "str", "setup", "construct, init or setup",
                    choices=("construct", "init", "setup")),
              Param("ask_for", "str", "Greeter", "the interface asked for, or a type form "
                    "that is not a class", choices=("Greeter", "Greeter | None")))
    PORTS = (Port("in", "towards a greeter"), Port("spare", "another port"))

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        for port in self.connected_ports():
            self.configure_link(port, self.refuse_event)
        self.seen: list[tuple[int, Any]] = []
        if self.params["when"] == "construct":
            self.ask()

    def ask(self) -> None:
        """Look the greeter up and report its greeting."""
        interface = Greeter if self.params["ask_for"] == "Greeter" else Greeter | None
        greeter = self.peer_provider(self.params["port"], interface)
        self.simulation.reports[self.name] = greeter.greet()

    def init(self, phase: int) -> None:
        """Ask during init when told to."""
        if phase == 0 and self.params["when"] == "init":
            self.ask()

    def setup(self) -> None:
        """Ask during setup when told to; schedule the callbacks."""
        if self.params["when"] == "setup":
            self.ask()
        self.schedule_at(30, self.record, "late")
        self.schedule_at(10, self.record, "early")
        self.schedule_at(10, lambda _: self.record("early, second"))
        self.simulation.reports["seen"] = self.seen

    def record(self, event: Any) -> None:
        """Write down when ``event`` arrived."""
        self.seen.append((self.sim.now, event))


@pytest.fixture
def iface_library(monkeypatch):
    """Library ``iface`` holds the elements above."""
    real = library.load_library

    def load(name: str) -> dict[str, type]:
        if name == "iface":
            return {"Hello": Hello, "Liar": Liar, "Asker": Asker}
        return real(name)

    monkeypatch.setattr(library, "load_library", load)


def _script(tmp_path, body: str):
    path = tmp_path / "wiring.py"
    path.write_text("import sst\n" + textwrap.dedent(body))
    return path


def _run_pair(tmp_path, asker_params: str = "{}", asker_port: str = "in",
              peer: str = "iface.Hello", peer_port: str = "out"):
    return run(_script(tmp_path, f"""
        a = sst.Component("asker", "iface.Asker")
        a.addParams({asker_params})
        b = sst.Component("peer", "{peer}")
        sst.Link("l", "1ns").connect((a, "{asker_port}"), (b, "{peer_port}"))
    """), console=None)


@pytest.mark.parametrize("when", ["init", "setup"])
def test_peer_provider_returns_the_peer_that_provides_it(iface_library, tmp_path, when):
    result = _run_pair(tmp_path, f'{{"when": "{when}"}}')
    assert result.reports["asker"] == "hello from peer"


def test_an_interface_that_is_not_a_class_is_refused_with_the_asker_and_port(
        iface_library, tmp_path):
    with pytest.raises(RunError) as err:
        _run_pair(tmp_path, '{"ask_for": "Greeter | None"}')
    assert err.value.message.startswith("asker (iface.Asker): asks on port 'in' for ")
    assert err.value.message.endswith(", which is not an interface class")


def test_a_peer_that_does_not_provide_it_names_both_elements_the_ports_and_the_interface(
        iface_library, tmp_path):
    with pytest.raises(RunError) as err:
        _run_pair(tmp_path, peer_port="back")
    assert err.value.message == ("asker (iface.Asker): port 'in' is connected to peer "
                                 "(iface.Hello) port 'back', which does not provide Greeter "
                                 "(it provides nothing)")
    assert err.value.where.endswith("wiring.py:3")  # where the asker was configured


def test_a_real_element_that_does_not_provide_it_says_what_it_does_provide(iface_library,
                                                                           tmp_path):
    with pytest.raises(RunError, match=r"asker \(iface.Asker\): port 'in' is connected to peer "
                       r"\(cdma.HostMemory\) port 'pcie0', which does not provide Greeter "
                       r"\(it provides HostStore, HostPath\)$"):
        _run_pair(tmp_path, peer="cdma.HostMemory", peer_port="pcie0")


def test_a_peer_that_declares_it_but_lacks_a_member_is_named(iface_library, tmp_path):
    with pytest.raises(RunError, match=r"peer \(iface.Liar\): declares Greeter on port 'out' "
                       r"but lacks greet \(asked by asker on port 'in'\)"):
        _run_pair(tmp_path, peer="iface.Liar")


def test_asking_on_an_unconnected_or_undeclared_port_or_too_early_is_an_error(iface_library,
                                                                            tmp_path):
    with pytest.raises(RunError, match=r"asker \(iface.Asker\): port 'spare' is not connected; "
                       "it needs a Greeter"):
        _run_pair(tmp_path, '{"port": "spare"}')
    with pytest.raises(RunError, match=r"asks for Greeter on undeclared port 'nope'"):
        _run_pair(tmp_path, '{"port": "nope"}')
    with pytest.raises(RunError, match=r"asks for Greeter on port 'in' while the simulation is "
                       r"being built; ask from init\(\) or setup\(\) on"):
        _run_pair(tmp_path, '{"when": "construct"}')


def test_schedule_at_calls_back_at_that_time_in_scheduling_order(iface_library, tmp_path):
    result = _run_pair(tmp_path)
    assert result.reports["seen"] == [(10, "early"), (10, "early, second"), (30, "late")]


def test_schedule_at_refuses_the_past(iface_library, tmp_path, monkeypatch):
    def late(self: Asker) -> None:
        self.schedule_at(5, lambda _: self.schedule_at(4, self.record, "too late"))

    monkeypatch.setattr(Asker, "setup", late)
    with pytest.raises(RunError, match=r"cannot schedule in the past \(4 ps"):
        _run_pair(tmp_path)


def test_provided_interfaces_are_declared_per_port():
    from components.hbm import HBM
    from components.host_memory import HostMemory
    from components.pcie_bridge import PCIeBridge
    from components.pcie_switch import PCIeSwitch
    from components.interfaces import HostPath, HostStore, HostTier, MemoryPool

    assert HBM.provided_interfaces() == (MemoryPool,)
    assert HostMemory.provided_interfaces() == (HostStore, HostPath, HostTier)
    assert HostMemory.find_port("pcie0").provides == (HostStore, HostPath)
    assert PCIeBridge.find_port("gpu").provides == (HostPath,)
    assert PCIeBridge.find_port("host").provides == ()
    assert PCIeSwitch.find_port("down3").provides == (HostPath,)
    assert PCIeSwitch.find_port("up").provides == ()
    assert Hello.provided_interfaces() == (Greeter,)


def test_interface_members_list_what_a_provider_must_implement():
    from components.interfaces import HostPath, HostStore, MemoryPool

    assert interface_members(Greeter) == ["greet", "name"]
    assert interface_members(HostStore) == ["load", "name", "release", "store"]
    assert interface_members(HostPath) == ["host_path", "name"]
    assert interface_members(MemoryPool) == ["allocate", "average_usage", "bandwidth_resource",
                                             "capacity", "free", "name", "oom", "peak",
                                             "unlimited", "usage_curve"]


# -- services ----------------------------------------------------------------------------------
class Counter(Service):
    """A made-up service."""

    def __init__(self, sim: Simulator) -> None:
        super().__init__(sim)
        self.count = 0


def test_a_service_is_one_instance_per_simulation():
    sim, other = Simulator(), Simulator()
    assert sim.service(Counter) is sim.service(Counter)
    assert sim.service(Counter).sim is sim
    assert other.service(Counter) is not sim.service(Counter)
    assert sim.service(FlowNetwork) is not sim.service(Counter)


def test_only_declared_services_are_handed_out():
    with pytest.raises(SimulationError, match=r"'dict' is not a declared service \(a subclass of "
                       r"sst_cdma.engine.kernel.Service\)"):
        Simulator().service(dict)  # type: ignore[type-var]
