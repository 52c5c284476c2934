"""The CPU's root complex (cdma.RootComplex): every downstream port shares its one bandwidth per
direction, it counts what it carried, publishes a link record the reporter lists among the
shared links (by its kind, not its name), and refuses bad params and bad wiring in one line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from components.pcie_bridge import LinkResult
from components.interfaces import HostPath
from sst_cdma.engine.interfaces import interface_members
from sst_cdma.engine.runner import RunError

X = 100_000_000  # bytes each GPU offloads and prefetches
LINK = 12_439_400_599.4006  # PCIe gen3 x16 payload bandwidth (docs/model.md)

# one tensor of X bytes out to host memory in the forward pass and back in the backward pass;
# kernels of 1 ns, so the iteration is the two transfers
MOVE = f"""\
stream version=1 network=move batch=1 dtype=float32 policy=all
tensor a bytes={X} kind=activation layer=l1
phase forward
alloc a
compute l1 pass=fwd flops=0 dram=0 time=1ns writes=a
sync l1
offload a layer=l2
compute l2 pass=fwd flops=0 dram=0 time=1ns reads=a
sync l2
free a
phase backward
alloc a
prefetch a layer=l2
wait a
compute l2 pass=bwd flops=0 dram=0 time=1ns reads=a
sync l2
free a
end
"""


RC_ON_HOST = 'sst.Link("l_rc", "0ps").connect((rc, "host"), (host, "pcie0"))'


def system(gpus: int, workload: str, rc_params: str | None = "{}", upstream: str = "",
           host_side: str = RC_ON_HOST) -> str:
    """A topology of ``gpus`` GPUs moving ``workload``, each on its own PCIe gen3 x16 bridge
    ``pcieI``. With ``rc_params`` (None: no root complex) a root complex ``rc`` with those
    params, wired to the host memory by ``host_side``; the bridges go to ``upstream`` (a
    Python expression of ``i``; default: the root complex's ``downI``, else the host's
    ``pcieI``)."""
    upstream = upstream or ('(rc, f"down{i}")' if rc_params is not None else
                            '(host, f"pcie{i}")')
    root = "" if rc_params is None else f"""
rc = sst.Component("rc", "cdma.RootComplex")
rc.addParams({rc_params})
{host_side}"""
    return f"""
import sst
host = sst.Component("host", "cdma.HostMemory")
{root}
for i in range({gpus}):
    gpu = sst.Component(f"gpu{{i}}", "cdma.GPU")
    gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", {workload!r})
    gpu.setSubComponent("kernels", "cdma.RooflineKernels")
    hbm = sst.Component(f"hbm{{i}}", "cdma.HBM")
    dma = sst.Component(f"dma{{i}}", "cdma.CDMAEngine")
    pcie = sst.Component(f"pcie{{i}}", "cdma.PCIeBridge")
    sst.Link(f"a{{i}}", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    sst.Link(f"b{{i}}", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"c{{i}}", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"d{{i}}", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
    sst.Link(f"e{{i}}", "0ps").connect((pcie, "host"), {upstream})
sst.Component("report", "cdma.Reporter")
if sst.getProgramOptions().get("output-directory"):
    sst.setStatisticLoadLevel(1)
    sst.enableAllStatisticsForComponentType("cdma.RootComplex")
    sst.setStatisticOutput("sst.statOutputCSV", {{"filepath": "StatisticOutput.csv"}})
"""


@pytest.fixture
def move(tmp_path):
    path = tmp_path / "move.stream"
    path.write_text(MOVE, encoding="utf-8")
    return str(path)


def seconds(result, gpu: str = "gpu0") -> float:
    return result.results[gpu].iteration_time_ps * 1e-12


@pytest.mark.parametrize("gpus", [1, 4])
def test_the_downstream_ports_share_the_bandwidth(run_script, move, gpus):
    bandwidth = 20e9  # above one x16 link's 12.44 GB/s, below four of them
    result, _ = run_script(system(gpus, move, '{"bandwidth": "20GB/s"}'))
    each = min(LINK, bandwidth / gpus)  # max-min fair: the tighter of the link and the share
    latency = 2 * 1e-6  # the bridge's start-up latency, once per transfer
    for i in range(gpus):
        t = seconds(result, f"gpu{i}")
        # X bytes out and X back, each way at the share; gpus x X bytes cross the root complex
        assert t >= 2 * X / each and t >= 2 * gpus * X / bandwidth
        assert t == pytest.approx(2 * X / each + latency, rel=1e-6)


def test_four_gpus_behind_a_root_complex_take_longer_than_on_their_own_links(run_script, move):
    alone, _ = run_script(system(4, move, None))
    shared, _ = run_script(system(4, move, '{"bandwidth": "20GB/s"}'))
    assert seconds(alone) == pytest.approx(2 * X / LINK + 2e-6, rel=1e-6)
    assert seconds(shared) > 1.9 * seconds(alone)   # 4 x 12.44 GB/s wanted, 20 GB/s there


def test_statistics_and_the_result_record_count_every_byte(run_script, move, tmp_path):
    result, console = run_script(system(4, move, '{"bandwidth": "20GB/s"}'),
                                 output_directory=tmp_path / "out")
    record = result.results["rc"]
    assert isinstance(record, LinkResult) and record.kind == "root complex"
    assert record.protocol == "pcie" and record.bandwidth_Bps == 20e9
    assert record.d2h_bytes == pytest.approx(4 * X) and record.h2d_bytes == pytest.approx(4 * X)
    stats = result.statistics
    rows = stats[stats["ComponentName"] == "rc"].set_index("StatisticName")["Sum.u64"]
    assert rows["d2h_bytes"] == 4 * X and rows["h2d_bytes"] == 4 * X
    # the reporter lists it among the shared links by its kind, and no switch is counted
    s = result.reports["summary"]
    shared = s["switch_utilization"]
    assert set(shared) == {"rc"} and shared["rc"]["kind"] == "root complex"
    busy = 4 * X / (20e9 * s["iteration_time_s"])
    assert shared["rc"]["d2h"] == pytest.approx(busy) and shared["rc"]["h2d"] == pytest.approx(busy)
    assert s["gpus_per_switch"] == 0 and s["hosts"] == 1
    assert "root complex:    1 shared, busiest rc (20.00 GB/s)" in console
    assert "switch uplink" not in console
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["switch_utilization"]["rc"]["kind"] == "root complex"


def test_a_root_complex_behind_a_switch_gets_its_own_console_line(run_script, move):
    switch = 'sw = sst.Component("sw", "cdma.PCIeSwitch")\n' \
        'sst.Link("l_sw", "0ps").connect((sw, "up"), (rc, "down0"))\n' + RC_ON_HOST
    body = system(2, move, '{"bandwidth": "20GB/s"}', upstream='(sw, f"down{i}")',
                  host_side=switch)
    result, console = run_script(body)
    assert result.results["dma0"].path == ["pcie0", "sw", "rc"]
    s = result.reports["summary"]
    assert {n: u["kind"] for n, u in s["switch_utilization"].items()} == \
        {"sw": "switch", "rc": "root complex"}
    assert s["gpus_per_switch"] == 2
    lines = console.splitlines()
    switch = next(i for i, ln in enumerate(lines) if ln.startswith("switch uplink:   1 shared"))
    assert lines[switch + 1].startswith("root complex:    1 shared, busiest rc (20.00 GB/s)")


def test_a_root_complex_as_the_gpus_own_link_is_named_by_its_kind(run_script, move):
    # no PCIe bridge: the engine's pcie port on the root complex itself
    result, _ = run_script(f"""
import sst
gpu = sst.Component("gpu", "cdma.GPU")
gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", {move!r})
gpu.setSubComponent("kernels", "cdma.RooflineKernels")
hbm = sst.Component("hbm", "cdma.HBM")
dma = sst.Component("dma", "cdma.CDMAEngine")
rc = sst.Component("rc", "cdma.RootComplex")
host = sst.Component("host", "cdma.HostMemory")
sst.Link("a", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("b", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("c", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("d", "0ps").connect((dma, "pcie"), (rc, "down0"))
sst.Link("e", "0ps").connect((rc, "host"), (host, "pcie0"))
sst.Component("report", "cdma.Reporter")
""")
    s = result.reports["summary"]
    assert s["host_link"]["name"] == "root complex" and s["pcie_bandwidth_Bps"] == 31.1e9
    assert "switch_utilization" not in s
    rc = result.simulation.components["rc"]
    assert isinstance(rc, HostPath) and rc.provided_interfaces() == (HostPath,)
    assert all(hasattr(rc, m) for m in interface_members(HostPath))


@pytest.mark.parametrize("params, fault", [
    ('{"bandwidth": "0GB/s"}', "rc (cdma.RootComplex): parameter 'bandwidth': '0GB/s' must be > 0"),
    ('{"bandwidth": "-5GB/s"}', "parameter 'bandwidth': '-5GB/s' must be > 0"),
    ('{"bandwidth": "fast"}', "rc (cdma.RootComplex): parameter 'bandwidth':"),
    ('{"latency": "-1ns"}', "parameter 'latency': '-1ns' must be >= 0"),
    ('{"lanes": 40}', "rc (cdma.RootComplex): unknown parameter 'lanes'"),
])
def test_bad_params_are_refused_naming_the_param(run_script, move, params, fault):
    with pytest.raises(RunError) as err:
        run_script(system(1, move, params))
    message = str(err.value)
    assert fault in message and "topo.py:" in message and "\n" not in message


def test_a_root_complex_with_nothing_downstream_is_refused(run_script, move):
    body = system(1, move, None) + 'rc = sst.Component("rc", "cdma.RootComplex")\n' \
        'sst.Link("l_rc", "0ps").connect((rc, "host"), (host, "pcie9"))\n'
    with pytest.raises(RunError, match=r"topo.py:\d+: rc \(cdma.RootComplex\): no downstream "
                       r"port is connected: wire a PCIe bridge or switch to down0$"):
        run_script(body)


def test_a_root_complex_without_a_host_side_is_refused(run_script, move):
    body = system(1, move, host_side="")
    with pytest.raises(RunError, match=r"topo.py:\d+: rc \(cdma.RootComplex\): required port "
                       r"'host' is not connected$"):
        run_script(body)


def test_a_host_side_that_leads_back_downstream_is_named(run_script, move):
    body = system(1, move, host_side='back = sst.Component("back", "cdma.PCIeBridge")\n'
                  'sst.Link("l_rc", "0ps").connect((rc, "host"), (back, "gpu"))\n'
                  'sst.Link("l_back", "0ps").connect((back, "host"), (rc, "down7"))')
    with pytest.raises(RunError, match=r"rc \(cdma.RootComplex\): the links towards the host "
                       r"loop back through port 'host'"):
        run_script(body)


def test_sst_info_documents_it():
    out = subprocess.run([sys.executable, "-m", "sst_cdma.tools.cli.sst_info", "cdma.RootComplex"],
                         capture_output=True, text=True, check=True).stdout
    assert "bandwidth: aggregate payload bandwidth per direction that all downstream ports " \
           "share" in out and "[31.1GB/s]" in out
    assert "down%d: downstream ports towards PCIe bridges or switches" in out
    assert "d2h_bytes: bytes carried towards host memory" in out
