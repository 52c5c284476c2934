"""An H100 PCIe card (114 SMs, 51 TFLOP/s fp32, 80 GB HBM2e at 2 TB/s) on PCIe gen5 x16:
compute grew ~5x since Pascal, the host link 4x (sources in docs/gpus.md).

    sst topologies/hopper_pcie5_cdma.py -- --network vgg16 --batch 128
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="hopper_pcie5_cdma.py", gpu="h100_pcie", link="pcie5x16")
