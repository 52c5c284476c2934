"""A cluster of DGX A100 nodes (8 A100 SXM4 80GB on NVLink3/NVSwitch, 8 ConnectX-6 HDR
200 Gb/s NICs, one per GPU) on a rail-optimized HDR fabric, training a transformer split
tp x pp x dp as topologies/dgx_h100_cluster.py does (docs/parallel.md, "The cluster
topology").

    sst topologies/dgx_a100_cluster.py -- --network llama3_8b --tp 8 --pp 2 --dp 4 --micro-batches 8 --batch 1 --seq-len 2048 --dtype bfloat16
"""
import sys

import sst
from sst_cdma.builder.pipeline import build_pipeline

build_pipeline(sst, sys.argv[1:], prog="dgx_a100_cluster.py", cluster="dgx_a100")
