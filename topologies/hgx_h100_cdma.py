"""An 8-GPU HGX H100 node (as in the DGX H100): eight H100 SXM5 GPUs (132 SMs, 80 GiB HBM3 at
3.35 TB/s) on NVLink4 through the NVSwitch fabric (18 links x 25 GB/s per direction per GPU),
each on PCIe gen5 x16 to the host through PCIe switches, two GPUs per switch, the switches of
four GPUs on one CPU socket with its own DDR5 (sources in docs/topologies.md). Training is data
parallel: every GPU reduces its weight gradients with the others (ring all-reduce in 25 MiB
buckets) while its cDMA engine offloads, both sharing the GPU's HBM.

    sst topologies/hgx_h100_cdma.py -- --network vgg16 --batch 128
    sst topologies/hgx_h100_cdma.py -- --network vgg16 --batch 128 --no-data-parallel
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="hgx_h100_cdma.py", gpu="hopper", link="pcie5x16", gpus=8,
      gpus_per_switch=2, gpus_per_host=4, data_parallel=True,
      cpu="dgx-h100", host_memory={"pinned_capacity": "1TB"},
      system="HGX H100 8-GPU, NVLink4/NVSwitch, PCIe gen5 x16, 2 per switch")
