"""An H100 SXM (67 TFLOP/s fp32, 3.35 TB/s HBM3) on PCIe gen5 x16: compute grew ~6x since
Pascal, the host link 4x.

    sst topologies/hopper_pcie5_cdma.py -- --network vgg16 --batch 128
"""
import sys

import sst
from sst_cdma.topology import build

build(sst, sys.argv[1:], prog="hopper_pcie5_cdma.py", gpu="hopper", link="pcie5x16")
