"""The model-state driver is a subcomponent in the GPU's ``model_states`` slot with ports of its
own: a topology script that wires it by hand (no builder) runs as ``build()``'s system does,
the builder fills the slot only where the host CPU steps, a port it needs left unconnected or
the slot left empty is one line naming what to wire, a driver whose GPU keeps its states does
nothing, and ``sst-info`` lists the slot, the driver's ports and the engine's ``states`` port."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

import sst_cdma
from sst_cdma.builder.topology import LINKS
from sst_cdma.engine.runner import RunError
from sst_cdma.model.gpus import GPUS
from sst_cdma.tools.cli.sst_info import main as sst_info

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "topologies" / "pascal_cdma.py"
ALEX = ["--network", "alexnet", "--batch", "16", "--dtype", "float16", "--optimizer", "adam",
        "--policy", "none", "--no-baselines"]
#: the workload params of ALEX
WORKLOAD = {"network": "alexnet", "batch": 16, "dtype": "float16", "optimizer": "adam",
            "policy": "none"}
WIRE_DMA = 'sst.Link("gpu0.l_states", "0ps").connect((states, "dma"), (dma, "states"))\n'
WIRE_CPU = 'sst.Link("gpu0.l_cpu", "0ps").connect((states, "cpu"), (cpu, "gpu0"))\n'


def by_hand(placement: dict[str, str], wiring: str) -> str:
    """One P100 wired as ``build()`` wires it, its workload placing the model states by
    ``placement``, a host CPU on the host memory, and the model-state driver (``states``)
    in the GPU's slot wired by ``wiring``."""
    p100, link = GPUS["pascal"], LINKS["pcie3x16"]
    return f"""import sst

gpu = sst.Component("gpu0", "cdma.GPU")
gpu.addParam("gpu_preset", "pascal")
gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams({ {**WORKLOAD, **placement} !r})
states = gpu.setSubComponent("model_states", "cdma.ModelStateDriver")
hbm = sst.Component("gpu0.hbm", "cdma.HBM")
hbm.addParams({{"bandwidth": "{p100.dram_bandwidth}", "capacity": "{p100.dram_capacity}"}})
dma = sst.Component("gpu0.dma", "cdma.CDMAEngine")
dma.setSubComponent("codec", "cdma.ZVC")
pcie = sst.Component("gpu0.pcie", "cdma.PCIeBridge")
pcie.addParams({link!r})
host = sst.Component("host", "cdma.HostMemory")
cpu = sst.Component("cpu", "cdma.HostCPU")
sst.Link("cpu.l_memory", "0ps").connect((cpu, "memory"), (host, "cpu"))
sst.Link("gpu0.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("gpu0.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("gpu0.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("gpu0.l_pcie", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
sst.Link("gpu0.l_host", "0ps").connect((pcie, "host"), (host, "pcie0"))
{wiring}sst.Component("report", "cdma.Reporter")
"""


def run_by_hand(write_script, placement: dict[str, str], wiring: str = WIRE_DMA + WIRE_CPU
                ) -> sst_cdma.RunResult:
    return sst_cdma.run(write_script(by_hand(placement, wiring)), [], console=io.StringIO())


def built(options: list[str]) -> sst_cdma.RunResult:
    return sst_cdma.run(TOPOLOGY, [*ALEX, *options], console=io.StringIO())


def error_by_hand(write_script, placement: dict[str, str], wiring: str) -> str:
    with pytest.raises(RunError) as err:
        run_by_hand(write_script, placement, wiring)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("placement, options", [
    ({"optimizer_states": "host"}, ["--optimizer-states", "host"]),
    ({"optimizer_states": "host", "delayed_update": "true", "gradients": "host"},
     ["--optimizer-states", "host", "--delayed-update", "--gradients", "host"]),
    ({"optimizer_states": "host", "state_compression": "engine"},
     ["--optimizer-states", "host", "--state-compression", "engine"]),
], ids=["host", "delayed-gradients-host", "engine-compression"])
def test_the_driver_wired_by_hand_runs_as_the_builders(write_script, placement, options):
    hand = run_by_hand(write_script, placement).results["gpu0"]
    ref = built(options).results["gpu0"]
    assert hand.model_states["buckets"] >= 1
    assert hand.model_states == ref.model_states
    assert hand.iteration_time_ps == ref.iteration_time_ps
    assert hand.timeline == ref.timeline  # every copy and step on the GPU's timeline


def test_the_builder_fills_the_slot_only_where_the_host_cpu_steps():
    with_states = built(["--optimizer-states", "host"]).graph
    driver = with_states.element_config("gpu0:model_states[0]")
    assert driver is not None and driver.type == "cdma.ModelStateDriver"
    ends = {(e.component, e.port) for name in ("gpu0.l_cpu", "gpu0.l_states")
            for e in with_states.links[name].ends}
    assert ends == {("gpu0:model_states[0]", "cpu"), ("cpu", "gpu0"),
                    ("gpu0:model_states[0]", "dma"), ("gpu0.dma", "states")}
    plain = built([]).graph
    assert plain.element_config("gpu0:model_states[0]") is None
    assert "gpu0.l_cpu" not in plain.links


def test_a_driver_whose_gpu_keeps_its_states_does_nothing(write_script):
    kept = run_by_hand(write_script, {}).results["gpu0"]
    assert kept.model_states == {}
    assert kept.iteration_time_ps == built([]).results["gpu0"].iteration_time_ps


@pytest.mark.parametrize("wiring, words", [
    (WIRE_DMA, "gpu0:model_states[0]: optimizer_states=host: the optimizer step runs on the "
               "host CPU, and port 'cpu' is not connected to a cdma.HostCPU"),
    (WIRE_CPU, "gpu0:model_states[0]: optimizer_states=host: the gradients and weights cross "
               "a host link, and port 'dma' is not connected to an engine with one"),
], ids=["cpu", "dma"])
def test_a_driver_port_left_unconnected_is_one_line_naming_it(write_script, wiring, words):
    assert words in error_by_hand(write_script, {"optimizer_states": "host"}, wiring)


def test_an_empty_slot_with_states_on_the_host_says_what_fills_it(write_script):
    script = by_hand({"optimizer_states": "host"}, "").replace(
        'states = gpu.setSubComponent("model_states", "cdma.ModelStateDriver")\n', "")
    with pytest.raises(RunError) as err:
        sst_cdma.run(write_script(script), [], console=io.StringIO())
    message = str(err.value)
    assert "\n" not in message
    assert "gpu0: optimizer_states=host: the model states' copies and the host CPU's steps " \
           "need a driver, and slot 'model_states' is empty: setSubComponent('model_states', " \
           "'cdma.ModelStateDriver')" in message


def test_the_gpu_no_longer_has_a_cpu_port(write_script):
    wiring = WIRE_DMA + 'sst.Link("gpu0.l_cpu", "0ps").connect((gpu, "cpu"), (cpu, "gpu0"))\n'
    message = error_by_hand(write_script, {"optimizer_states": "host"}, wiring)
    assert "gpu0 (cdma.GPU) has no port 'cpu' (ports: hbm, dma, nvlink)" in message


def test_sst_info_lists_the_slot_the_driver_and_the_engines_states_port(capsys):
    assert sst_info(["cdma.GPU"]) == 0
    gpu = capsys.readouterr().out
    assert "model_states: the model states kept off the GPU" in gpu
    assert "[ModelStates; optional]" in gpu and "filled by: cdma.ModelStateDriver" in gpu
    assert "\n         cpu:" not in gpu  # the port moved to the driver
    assert sst_info(["cdma.ModelStateDriver"]) == 0
    driver = capsys.readouterr().out
    assert "Interface: ModelStates" in driver and "Parameters (0 total)" in driver
    assert "Ports (2 total)" in driver
    assert "dma: the cDMA engine's 'states' port" in driver
    assert "cpu: the host CPU (cdma.HostCPU" in driver
    assert sst_info(["cdma.CDMAEngine"]) == 0
    assert "states: the model-state copies of the driver in the GPU's 'model_states' slot" \
        in capsys.readouterr().out
