"""The same Tesla P100 system with vDNN's plain copy engine (no compression).

    sst topologies/pascal_vdnn.py -- --network vgg16 --batch 64
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, ["--algorithm", "none", *sys.argv[1:]], prog="pascal_vdnn.py", gpu="pascal")
