"""Pipeline parallelism: --pp GPUs, each a stage of a chain of identical layers, sending
activations forward and their gradients back over point-to-point links, in GPipe, 1F1B or
interleaved 1F1B order; the bubble comes out of the simulation (docs/parallel.md).

    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule 1f1b
    sst topologies/pipeline_cdma.py -- --pp 4 --micro-batches 8 --schedule interleaved --vpp 2
"""
import sys

import sst
from sst_cdma.builder.pipeline import build_pipeline

build_pipeline(sst, sys.argv[1:], prog="pipeline_cdma.py", gpu="hopper")
