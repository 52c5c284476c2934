"""A Maxwell Titan X (12 GB GDDR5 at 336.5 GB/s, ~6.6 TFLOP/s) on PCIe gen3 x16: the system of
the vDNN and cDMA papers' era.

    sst topologies/maxwell_titanx_cdma.py -- --network alexnet --batch 128
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="maxwell_titanx_cdma.py", gpu="maxwell")
