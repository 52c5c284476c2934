"""Four Tesla P100s, each on its own PCIe gen3 x16 link (12.44 GB/s per direction), behind one
CPU root complex whose aggregate bandwidth (31.1 GB/s per direction by default) is less than the
four links' 49.8 GB/s: the worked example of docs/topologies.md.

    sst topologies/root_complex_4gpu.py -- --network alexnet --batch 32 --policy all
    sst topologies/root_complex_4gpu.py -- --network alexnet --batch 32 --policy all \\
        --no-root-complex
"""
import sys

import sst
from components.baselines import add_baselines
from components.codecs import element_type as codec_element
from sst_cdma.model.gpus import GPUS
from sst_cdma.builder.topology import LINKS, ModelOptionParser

parser = ModelOptionParser(prog="root_complex_4gpu.py", allow_abbrev=False,
                           description="GPUs sharing one CPU root complex")
parser.add_argument("--network", default="vgg16", help="network (default: vgg16)")
parser.add_argument("--batch", default="64", help="batch size (default: 64)")
parser.add_argument("--policy", default="conv", help="vDNN offload policy (default: conv)")
parser.add_argument("--algorithm", default="zvc", help="cDMA algorithm (default: zvc)")
parser.add_argument("--gpus", type=int, default=4, help="number of GPUs (default: 4)")
parser.add_argument("--root-complex-bandwidth", default="", metavar="RATE",
                    help="aggregate bandwidth per direction (default: cdma.RootComplex's)")
parser.add_argument("--no-root-complex", action="store_true",
                    help="wire every GPU's link straight to host memory instead")
o = parser.parse_args(sys.argv[1:])
if o.gpus < 1:
    parser.error(f"--gpus must be >= 1, got {o.gpus}")

p100 = GPUS["pascal"]
host = sst.Component("host", "cdma.HostMemory")
if not o.no_root_complex:
    rc = sst.Component("rc", "cdma.RootComplex")
    if o.root_complex_bandwidth:
        rc.addParam("bandwidth", o.root_complex_bandwidth)
    sst.Link("rc.l_host", "0ps").connect((rc, "host"), (host, "pcie0"))

for i in range(o.gpus):
    gpu = sst.Component(f"gpu{i}", "cdma.GPU")
    gpu.addParam("gpu_preset", "pascal")
    workload = gpu.setSubComponent("workload", "cdma.NetworkWorkload")
    workload.addParams({"network": o.network, "batch": o.batch, "policy": o.policy,
                        "write_stream": i == 0})
    gpu.setSubComponent("kernels", "cdma.FittedKernels")
    hbm = sst.Component(f"gpu{i}.hbm", "cdma.HBM")
    hbm.addParams({"bandwidth": p100.dram_bandwidth, "capacity": p100.dram_capacity})
    dma = sst.Component(f"gpu{i}.dma", "cdma.CDMAEngine")
    if o.algorithm != "none":  # none: no codec, a plain copy engine
        dma.setSubComponent("codec", codec_element(o.algorithm))
    pcie = sst.Component(f"gpu{i}.pcie", "cdma.PCIeBridge")
    pcie.addParams(LINKS["pcie3x16"])
    sst.Link(f"gpu{i}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    sst.Link(f"gpu{i}.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"gpu{i}.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"gpu{i}.l_pcie", "0ps").connect((dma, "pcie"), (pcie, "gpu"))
    upstream = (host, f"pcie{i}") if o.no_root_complex else (rc, f"down{i}")
    sst.Link(f"gpu{i}.l_host", "0ps").connect((pcie, "host"), upstream)

add_baselines()
sst.Component("report", "cdma.Reporter")
if sst.getProgramOptions().get("output-directory"):
    sst.setStatisticLoadLevel(2)
    sst.enableAllStatisticsForAllComponents()
    sst.setStatisticOutput("sst.statOutputCSV", {"filepath": "StatisticOutput.csv"})
