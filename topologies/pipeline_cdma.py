"""Pipeline parallelism: --pp GPUs, each a stage of a chain of identical layers or, with
--network, of a transformer's blocks (each stage with its DMA engine for what --policy
offloads), sending activations forward and their gradients back over point-to-point links, in
GPipe, 1F1B or interleaved 1F1B order; the bubble comes out of the simulation
(docs/parallel.md).

    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule 1f1b
    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule interleaved --vpp 2
    sst topologies/pipeline_cdma.py -- --network gpt2_small --pp 4 --micro-batches 8 --batch 1 --seq-len 512
"""
import sys

import sst
from sst_cdma.builder.pipeline import build_pipeline

build_pipeline(sst, sys.argv[1:], prog="pipeline_cdma.py", gpu="hopper")
