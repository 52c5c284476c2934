"""A GB200 Grace Blackwell superchip: a B200 GPU (148 SMs, 75 TFLOP/s fp32, 2.25 PFLOP/s dense
16-bit tensor, 192 GB HBM3e at 8 TB/s) reaches the Grace CPU's LPDDR5X (480 GB at 500 GB/s)
over NVLink-C2C, 900 GB/s both ways together, 450 GB/s per direction, as in
``gh200_cdma.py`` (sources in docs/gpus.md and docs/model.md); the host is Grace (``--cpu
grace``: 72 Neoverse V2 cores; docs/host_cpu.md). A superchip holds two B200s
beside one Grace, so ``--gpus 2`` is one superchip: both GPUs, each on its own C2C link, share
that Grace's memory (``--gpus-per-host`` overrides). ``--engine blackwell-de`` models
Blackwell's Decompression Engine instead of a compressing cDMA engine (docs/model.md).

    sst topologies/gb200_cdma.py -- --network vgg16 --batch 64
    sst topologies/gb200_cdma.py -- --network vgg16 --batch 64 --engine blackwell-de
"""
import sys

import sst
from sst_cdma.builder.topology import build

build(sst, sys.argv[1:], prog="gb200_cdma.py", gpu="b200", link="nvlink_c2c", gpus_per_host=2,
      cpu="grace",
      host_memory={"pinned_capacity": "480GB"})
