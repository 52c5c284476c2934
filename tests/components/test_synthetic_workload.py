"""cdma.SyntheticWorkload, the worked example of docs/topologies.md ("Adding a workload
source"): a GPU runs the chain it generates, its copies hidden behind its kernels but the first
prefetch of the backward pass."""
from __future__ import annotations

SYSTEM = """
import sst
gpu = sst.Component("gpu0", "cdma.GPU")
chain = gpu.setSubComponent("workload", "cdma.SyntheticWorkload")
chain.addParams({"layers": 4, "activation": "64MiB", "kernel_time": "100ms"})
hbm = sst.Component("hbm", "cdma.HBM")
hbm.addParams({"bandwidth": "732GB/s", "capacity": "16GiB"})
dma = sst.Component("dma", "cdma.CDMAEngine")  # no codec: a plain copy engine
pcie = sst.Component("pcie", "cdma.PCIeBridge")
host = sst.Component("host", "cdma.HostMemory")
sst.Link("l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
sst.Link("l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
sst.Link("l_pcie", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
sst.Link("l_host", "0ps").connect((pcie, "host"), (host, "pcie0"))
"""


def test_the_chain_runs_and_only_the_first_prefetch_stalls(run_script):
    result, _ = run_script(SYSTEM)
    gpu = result.results["gpu0"]
    assert gpu.compute_time_ps == 8 * 100_000_000_000  # 4 layers, forward and backward
    assert gpu.offloaded_bytes == gpu.prefetched_bytes == 4 * 64 * 2**20
    first = next(event for event in gpu.timeline if event[0] == "prefetch")
    assert gpu.stall_time_ps == first[3] - first[2] > 0
