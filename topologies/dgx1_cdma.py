"""DGX-1-like: eight P100s per node, two per PCIe switch sharing one gen3 x16 upstream port to
the node's host, the DGX-1's (``--cpu dgx1``: a Xeon E5-2698 v4 socket, 20 cores, four channels
of DDR4-2133; docs/host_cpu.md); more GPUs (--gpus 64) are more such nodes, each with its own
host memory.

    sst topologies/dgx1_cdma.py -- --network vgg16 --batch 64
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="dgx1_cdma.py", gpu="pascal", gpus=8, gpus_per_switch=2,
      gpus_per_host=8, cpu="dgx1")
