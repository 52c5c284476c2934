"""A GH200 Grace Hopper superchip: its H100 GPU (132 SMs, 67 TFLOP/s fp32, 96 GB HBM3 at
4 TB/s) reaches the Grace CPU's LPDDR5X (480 GB at 500 GB/s) over NVLink-C2C, 450 GB/s per
direction, instead of PCIe (sources in docs/gpus.md and docs/model.md). The host is Grace
(``--cpu grace``: 72 Neoverse V2 cores; docs/host_cpu.md). Each superchip has
its own Grace CPU and LPDDR5X, so with ``--gpus N`` every GPU gets a host memory of its own
(``--gpus-per-host`` overrides).

    sst topologies/gh200_cdma.py -- --network vgg16 --batch 64
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="gh200_cdma.py", gpu="gh200", link="nvlink_c2c", gpus_per_host=1,
      cpu="grace")
