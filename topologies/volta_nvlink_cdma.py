"""A V100 (15.7 TFLOP/s, 900 GB/s HBM2) whose host link is NVLink 2 to the CPU (three bricks,
as on POWER9 systems).

    sst topologies/volta_nvlink_cdma.py -- --network resnet50 --batch 64
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="volta_nvlink_cdma.py", gpu="volta", link="nvlink2x3")
