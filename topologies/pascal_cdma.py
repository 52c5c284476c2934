"""Tesla P100-class system (56 SMs, 16 GiB HBM2 at 732 GB/s, PCIe gen3 x16) training with vDNN
and a compressing DMA engine (ZVC by default).

    sst topologies/pascal_cdma.py -- --network vgg16 --batch 64 --policy conv --algorithm zvc
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="pascal_cdma.py", gpu="pascal")
