"""The cdma elements find each other through declared interfaces: the GPU and the engine get the
HBM as a MemoryPool, the engine gets its path to host memory (HostPath) through its bridge and
any switch, and host memory as the HostStore at the end of it."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

import sst_cdma
from components.interfaces import (CodecKernels, HostPath, HostStore, HostTier, MemoryPool,
                                   StateCodec, TransferCosts)
from sst_cdma.engine.interfaces import interface_members
from sst_cdma.engine.runner import RunError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dgx1():
    """A DGX-1 node without baselines: GPUs behind bridges, two per PCIe switch."""
    return sst_cdma.run(REPO / "topologies" / "dgx1_cdma.py",
                        ["--network", "alexnet", "--batch", "8", "--no-baselines"],
                        console=io.StringIO()).simulation


def test_gpu_and_engine_get_their_hbm_and_the_engine_its_host_path(dgx1):
    comps = dgx1.components
    gpu, dma, hbm = comps["gpu0"], comps["gpu0.dma"], comps["gpu0.hbm"]
    assert gpu.hbm is hbm and gpu.hbm_resource == "gpu0.hbm.bandwidth"
    assert dma.hbm_resource == "gpu0.hbm.bandwidth"
    assert dma.host is comps["host"]
    assert dma.path.link_names == ["gpu0.pcie", "switch0"]
    assert dma.path.d2h == ["gpu0.pcie.d2h", "switch0.up.d2h", "host.dram"]
    assert dma.path.h2d == ["gpu0.pcie.h2d", "switch0.up.h2d", "host.dram"]
    assert dma.path.latency_ps == comps["gpu0.pcie"].params["latency"] + \
        comps["switch0"].params["latency"]
    assert comps["gpu3.dma"].path.link_names == ["gpu3.pcie", "switch1"]


def test_every_provider_implements_what_it_declares(dgx1):
    checked = set()
    for element in dgx1.elements():
        for interface in element.provided_interfaces():
            assert isinstance(element, interface), (element.name, interface.__name__)
            assert all(hasattr(element, m) for m in interface_members(interface))
            checked.add((element.type_name(), interface.__name__))
    assert checked == {("cdma.HBM", "MemoryPool"), ("cdma.HostMemory", "HostStore"),
                       ("cdma.CDMAEngine", "TransferCosts"), ("cdma.CDMAEngine", "CodecKernels"),
                       ("cdma.HostMemory", "HostPath"), ("cdma.PCIeBridge", "HostPath"),
                       ("cdma.PCIeSwitch", "HostPath"), ("cdma.HostMemory", "HostTier"),
                       ("cdma.CDMAEngine", "StateCodec")}
    assert {MemoryPool, HostStore, HostPath, TransferCosts,
            CodecKernels, HostTier, StateCodec} == {i for el in dgx1.elements()
                                                 for i in el.provided_interfaces()}


def _run(tmp_path, *parts: str):
    script = tmp_path / "wiring.py"
    script.write_text("import sst\n" + "".join(textwrap.dedent(p) for p in parts))
    return sst_cdma.run(script, console=io.StringIO())


GPU = """
    gpu = sst.Component("gpu", "cdma.GPU")
    gpu.setSubComponent("workload", "cdma.NetworkWorkload").addParams(
        {"network": "alexnet", "batch": 1, "policy": "all", "write_stream": "false"})
    hbm = sst.Component("hbm", "cdma.HBM")
    dma = sst.Component("dma", "cdma.CDMAEngine")
    sst.Link("l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    sst.Link("l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link("l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
"""


def test_an_engine_wired_to_a_bridge_facing_the_wrong_way_is_told_so(tmp_path):
    with pytest.raises(RunError, match=r"dma \(cdma.CDMAEngine\): port 'pcie' is connected to "
                       r"pcie \(cdma.PCIeBridge\) port 'host', which does not provide HostPath "
                       r"\(it provides nothing\)$"):
        _run(tmp_path, GPU, """
            pcie = sst.Component("pcie", "cdma.PCIeBridge")
            host = sst.Component("host", "cdma.HostMemory")
            sst.Link("l_pcie", "0ps").connect((dma, "pcie"), (pcie, "host"))
            sst.Link("l_host", "0ps").connect((pcie, "gpu"), (host, "pcie0"))
        """)


def test_links_that_loop_back_instead_of_reaching_the_host_are_an_error(tmp_path):
    with pytest.raises(RunError, match=r"switch \(cdma.PCIeSwitch\): the links towards the host "
                       r"loop back through port 'up'"):
        _run(tmp_path, GPU, """
            switch = sst.Component("switch", "cdma.PCIeSwitch")
            pcie = sst.Component("pcie", "cdma.PCIeBridge")
            sst.Link("l_pcie", "0ps").connect((dma, "pcie"), (switch, "down0"))
            sst.Link("l_up", "0ps").connect((switch, "up"), (pcie, "gpu"))
            sst.Link("l_back", "0ps").connect((pcie, "host"), (switch, "down1"))
        """)
