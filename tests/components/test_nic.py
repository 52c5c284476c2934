"""A GPU's network card behind the PCIe switch it shares with the GPU (cdma.NIC): on two DGX
H100 nodes (tp 8, dp 2, each dp group one GPU of each node on its own NIC), an offload on
rank 0's link to its switch slows rank 0's dp all-reduce by exactly what max-min sharing of
that link takes from it, and nothing else: the other dp groups, and the same run without the
offload, take the model's time to the picosecond. The offload loses its share too; a card
naming a link with no flow resources is one line."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

import sst_cdma
from components.nic import NICResult
from sst_cdma.engine.runner import RunError
from sst_cdma.model.cluster_graph import build_cluster
from sst_cdma.model.collectives import group_cost, system_tiers
from sst_cdma.model.links import PCIeLink

#: the gradient all-reduced over dp, and the tensor rank 0 offloads beside it
GRAD = 256 << 20
MOVED = 64 << 20
#: H100's host link (pcie5x16, docs/gpus.md) and the NDR NIC's rate as NCCL gets it
LINK_BPS = PCIeLink(5, 16).effective
NIC_BPS = system_tiers("dgx_h100").inter.line("simple").busbw_Bps


def stream(offload: bool) -> str:
    """A kernel writes ``a``; with ``offload`` the copy stream offloads it while the compute
    stream all-reduces the gradient over dp (a collective waits for the kernels only)."""
    move = "offload a layer=l1\n" if offload else ""
    return f"""\
stream version=1 network=dp batch=1 dtype=float16 policy={'all' if offload else 'none'}
tensor a bytes={MOVED} kind=activation layer=l1
tensor dw bytes={GRAD} kind=gradient layer=l1
phase forward
alloc a
compute l1 pass=fwd flops=0 dram=0 time=1ns writes=a
{move}alloc dw
all_reduce dw group=dp
free dw
sync l1
free a
end
"""


def script(streams: list[Path]) -> str:
    """16 GPUs (rank = index) on two DGX H100 nodes, tp 8: each with its HBM, a plain copy
    engine over a pcie5x16 link of no start-up latency to a host memory of its own, and a
    network card sharing that link; the fabric prices the collectives."""
    return f"""\
import sst
fabric = sst.Component("fabric", "cdma.ClusterFabric")
fabric.addParams({{"node": "dgx_h100", "nodes": 2, "tp": 8}})
for rank, path in enumerate({[str(p) for p in streams]!r}):
    name = f"gpu{{rank}}"
    gpu = sst.Component(name, "cdma.GPU")
    gpu.addParam("gpu_preset", "hopper")
    gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", path)
    gpu.setSubComponent("kernels", "cdma.RooflineKernels")
    port = gpu.setSubComponent("collectives", "cdma.CollectivePort")
    hbm = sst.Component(f"{{name}}.hbm", "cdma.HBM")
    hbm.addParams({{"bandwidth": "3.35TB/s", "capacity": "80GB"}})
    dma = sst.Component(f"{{name}}.dma", "cdma.CDMAEngine")
    link = sst.Component(f"{{name}}.pcie", "cdma.PCIeBridge")
    link.addParams({{"generation": 5, "lanes": 16, "latency": "0ps"}})
    host = sst.Component(f"host{{rank}}", "cdma.HostMemory")
    host.addParams({{"bandwidth": "10TB/s"}})
    nic = sst.Component(f"{{name}}.nic", "cdma.NIC")
    nic.addParams({{"bandwidth": "{NIC_BPS:.0f}B/s", "gpu_link": f"{{name}}.pcie"}})
    sst.Link(f"{{name}}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    sst.Link(f"{{name}}.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"{{name}}.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"{{name}}.l_pcie", "0ps").connect((dma, "pcie"), (link, "gpu"))
    sst.Link(f"{{name}}.l_host", "0ps").connect((link, "host"), (host, "pcie0"))
    sst.Link(f"{{name}}.l_fabric", "0ps").connect((port, "fabric"), (fabric, f"gpu{{rank}}"))
    sst.Link(f"{{name}}.l_nic", "0ps").connect((nic, "fabric"), (fabric, f"nic{{rank}}"))
"""


def run(tmp_path: Path, write_script, offload_on: set[int]):
    paths = []
    for rank in range(16):
        path = tmp_path / f"rank{rank}.stream"
        path.write_text(stream(rank in offload_on), encoding="utf-8")
        paths.append(path)
    return sst_cdma.run(write_script(script(paths)), [], console=io.StringIO())


def priced_ps(ranks: tuple[int, ...]) -> int:
    cost = group_cost(build_cluster("dgx_h100", 2), ranks, "ring", "all_reduce", GRAD)
    return math.ceil(cost.time_s * 1e12)


def test_without_offloads_every_collective_takes_the_models_time(tmp_path, write_script):
    result = run(tmp_path, write_script, set())
    records = result.results["fabric"].collectives
    assert sorted(r.ranks for r in records) == [(i, i + 8) for i in range(8)]
    for r in records:
        assert r.network_delay_ps == 0 and r.time_ps == priced_ps(r.ranks)
    nic = result.results["gpu0.nic"]
    assert isinstance(nic, NICResult) and nic.flows == 1 and nic.pcie_lost_ps == 0
    # a ring of 2 ranks moves the buffer once each way through each rank's card
    assert nic.sent_bytes == pytest.approx(GRAD) and nic.received_bytes == pytest.approx(GRAD)


def test_an_offload_on_the_shared_link_slows_that_ranks_network_phase_by_hand(
        tmp_path, write_script):
    result = run(tmp_path, write_script, {0})
    records = {r.ranks: r for r in result.results["fabric"].collectives}
    engine = result.results["gpu0.dma"]
    [(start, end, _)] = engine.copies
    slowed = records[(0, 8)]
    # The copy starts when issued, the collective once the kernel before it has ended: the
    # copy runs alone at the link's rate until then.
    ahead_s = (slowed.last_ps - start) * 1e-12
    assert 0 <= ahead_s < 1e-8
    left = MOVED - LINK_BPS * ahead_s
    # Then both flows cross gpu0.pcie.d2h: max-min gives each half the link (below the card's
    # rate and the copy's other resources) until the copy has moved its bytes; the card's
    # flow then runs at its own rate. Its loss is the overlap's share it missed.
    overlap_s = left / (LINK_BPS / 2)
    expected = overlap_s * (1 - LINK_BPS / 2 / NIC_BPS) * 1e12
    assert LINK_BPS / 2 < NIC_BPS < LINK_BPS
    assert abs(slowed.network_delay_ps - expected) <= 2
    assert slowed.time_ps == priced_ps((0, 8)) + slowed.network_delay_ps
    assert slowed.network_delay_ps > 500_000_000  # half a millisecond
    assert abs((end - slowed.last_ps) - overlap_s * 1e12) <= 2
    # the copy lost what it would have taken alone, at the link
    lost = engine.copy_lost_ps["gpu0.pcie.d2h"]
    assert abs(lost - left / LINK_BPS * 1e12) <= 2
    assert abs(result.results["gpu0.nic"].pcie_lost_ps - slowed.network_delay_ps) <= 2
    # only where the link is shared: the other dp groups take the model's time
    for ranks, r in records.items():
        if ranks != (0, 8):
            assert r.network_delay_ps == 0 and r.time_ps == priced_ps(ranks)
            assert result.results[f"gpu{ranks[0]}.nic"].pcie_lost_ps == 0
    # both members of the slowed group wait for it
    assert result.results["gpu8"].iteration_time_ps == slowed.end_ps
    assert result.results["gpu1"].iteration_time_ps < slowed.end_ps


def test_a_gpu_link_without_flow_resources_is_one_line(tmp_path, write_script):
    path = tmp_path / "s.stream"
    path.write_text(stream(False), encoding="utf-8")
    body = script([path] * 16).replace('f"{name}.pcie"}', '"nowhere"}')
    with pytest.raises(RunError) as err:
        sst_cdma.run(write_script(body), [], console=io.StringIO())
    assert "gpu_link='nowhere' has no flow resource 'nowhere.d2h'" in str(err.value)
    assert "\n" not in str(err.value)
