"""A cluster of DGX H100 nodes (8 H100 SXM5 on NVLink4/NVSwitch, 8 ConnectX-7 NDR 400 Gb/s
NICs, one per GPU) on a rail-optimized NDR fabric, training a transformer split tp x pp x dp
in Megatron's rank order: each pipeline stage's tp GPUs run one tensor-parallel rank's shard
with its collectives, stages hand activations over the NICs where they sit on different
nodes, and each stage's gradients are reduced over its dp group (ZeRO 0-3), in bfloat16
unless --dtype says otherwise. One
data-parallel replica is simulated (the others are identical; --simulate-every-rank for all),
every rank reported (docs/parallel.md, "The cluster topology").

    sst topologies/dgx_h100_cluster.py -- --network llama3_70b --tp 8 --pp 4 --dp 16 --micro-batches 16 --batch 1 --seq-len 4096 --dtype bfloat16
"""
import sys

import sst
from sst_cdma.builder.pipeline import build_pipeline

build_pipeline(sst, sys.argv[1:], prog="dgx_h100_cluster.py", cluster="dgx_h100")
