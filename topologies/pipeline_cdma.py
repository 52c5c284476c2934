"""Pipeline parallelism: --pp GPUs, each a stage of a chain of identical layers or, with
--network, of a transformer's blocks (each stage with its DMA engine for what --policy
offloads), sending activations forward and their gradients back over point-to-point links, in
GPipe, 1F1B or interleaved 1F1B order; the bubble comes out of the simulation. With --tp, each
stage is --tp GPUs running one tensor-parallel rank's shard with its collectives (all-reduces,
or with --sequence-parallel all-gathers and reduce-scatters) priced on a cluster fabric
(docs/parallel.md).

    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule 1f1b
    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule interleaved --vpp 2
    sst topologies/pipeline_cdma.py -- --network gpt2_small --pp 4 --micro-batches 8 --batch 1 --seq-len 512
    sst topologies/pipeline_cdma.py -- --network gpt2_small --gpu hopper --pp 2 --tp 2 --micro-batches 4 --batch 1 --seq-len 512
"""
import sys

import sst
from sst_cdma.builder.pipeline import build_pipeline

build_pipeline(sst, sys.argv[1:], prog="pipeline_cdma.py", gpu="hopper")
