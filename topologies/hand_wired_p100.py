"""A Tesla P100 system wired by hand, element by element, as ``sst-info cdma`` documents them:
the same machine as ``pascal_cdma.py`` with names of its own. The GPU's workload (VGG-16
rendered for it) and its kernel times (the fitted model) are subcomponents in its slots.
``add_baselines`` adds the oracle and vDNN systems the summary compares it with (see
docs/topologies.md).

    sst topologies/hand_wired_p100.py
"""
import sst
from components.baselines import add_baselines

gpu = sst.Component("P100", "cdma.GPU")
gpu.addParam("gpu_preset", "pascal")
workload = gpu.setSubComponent("workload", "cdma.NetworkWorkload")
workload.addParams({"network": "vgg16", "batch": 64, "policy": "conv"})
gpu.setSubComponent("kernels", "cdma.FittedKernels")
hbm = sst.Component("P100_hbm2", "cdma.HBM")
hbm.addParams({"bandwidth": "732GB/s", "capacity": "16GiB"})
cdma = sst.Component("P100_cdma", "cdma.CDMAEngine")
codec = cdma.setSubComponent("codec", "cdma.ZVC")   # no codec: vDNN's plain copy engine
codec.addParams({"codec_units": 8, "codec_unit_throughput": "32GB/s"})
link = sst.Component("x16_slot", "cdma.PCIeBridge")
link.addParams({"protocol": "pcie", "generation": 3, "lanes": 16})
dram = sst.Component("xeon_dram", "cdma.HostMemory")

sst.Link("kernels_to_dram", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
sst.Link("copy_requests", "0ps").connect((gpu, "dma"), (cdma, "gpu"))
sst.Link("dma_to_dram", "0ps").connect((cdma, "hbm"), (hbm, "dma"))
sst.Link("dma_to_slot", "0ps").connect((cdma, "pcie"), (link, "gpu"))
sst.Link("slot_to_host", "0ps").connect((link, "host"), (dram, "pcie0"))

add_baselines()
sst.Component("summary", "cdma.Reporter")
if sst.getProgramOptions().get("output-directory"):
    sst.setStatisticLoadLevel(2)
    sst.enableAllStatisticsForAllComponents()
    sst.setStatisticOutput("sst.statOutputCSV", {"filepath": "StatisticOutput.csv"})
