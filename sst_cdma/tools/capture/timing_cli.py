"""``sst-cdma time-layers``: measure per-layer kernel times in PyTorch for the GPU model.

Example (on the machine whose GPU you want to model)::

    sst-cdma time-layers --network vgg16 --batch 64 --device cuda --output vgg16_b64.json
    sst topologies/pascal_cdma.py -- --network vgg16 --batch 64 --layer-times vgg16_b64.json
    sst-cdma time-layers --network gpt2_small --batch 4 --dtype bfloat16 --device cuda \
        --gpu h100_pcie --output gpt2s_bf16.json   # also checks the tensor-core path

``main(argv)`` returns the exit status: 0 on success, 2 on bad arguments or inputs (with a
one-line ``sst-cdma time-layers: error: ...`` on stderr).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from workloads.errors import WorkloadError
from workloads.layer_times import LayerTimes, implied_compute_efficiency, tensor_core_check
from workloads.loader import CAPTURE_NETWORKS, NETWORKS, load_network
from workloads.network import Network

from sst_cdma.model.dtypes import DTYPES
from sst_cdma.model.gpus import GPUS, gpu_choices, gpu_preset
from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.tools.capture.cli import ToolParser
from sst_cdma.tools.capture.tool_main import run_tool
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.layer_timing import time_layers

__all__ = ["main", "build_parser"]

PROG = "sst-cdma time-layers"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sst-cdma time-layers``."""
    p = ToolParser(prog=PROG, description="Time each layer's forward and backward kernels of a "
                "network definition in PyTorch and write a layer-times file for "
                "'--layer-times' (the GPU model then uses these times instead of its kernel "
                "model).")
    p.add_argument("--network", required=True,
                   help=f"{' '.join(NETWORKS + CAPTURE_NETWORKS)}, or a network definition "
                        "file")
    p.add_argument("--batch", type=int, required=True, help="batch size (a transformer's "
                   "micro-batch)")
    p.add_argument("--seq-len", type=int, default=0, metavar="N", help="sequence length of a "
                   "transformer network (default: its definition's); recorded in the file")
    p.add_argument("--attention", choices=("naive", "fused"), default="",
                   help="attention form of a transformer network (default: its definition's)")
    p.add_argument("--dtype", default="float32", choices=tuple(DTYPES))
    p.add_argument("--device", default="cpu", help="PyTorch device: cpu, cuda, cuda:1, mps "
                   "(default cpu)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per kernel; the median "
                   "counts (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="let cuDNN pick its fastest algorithm per layer during warm-up (as "
                        "frameworks do with torch.backends.cudnn.benchmark)")
    p.add_argument("--gpu", type=gpu_preset, choices=sorted(GPUS), metavar=gpu_choices(),
                   help="the GPU preset of the measured device (h100: hopper): "
                   "recorded in the file, so runs on other presets scale the times by the "
                   "kernel model; also print the roofline compute efficiency the measured "
                   "convolutions imply (for --kernel-model roofline --compute-efficiency) and, "
                   "in float16/bfloat16, the measured over modelled time of the kernels the "
                   "model runs on tensor cores (docs/kernel_model.md, calibrating the "
                   "tensor-core path)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and inputs (default 0)")
    p.add_argument("--output", "-o", required=True, metavar="FILE.json",
                   help="layer-times file to write")
    p.add_argument("--quiet", "-q", action="store_true", help="print no table")
    return p


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.output)
    if not out.parent.is_dir():
        raise CaptureError(f"--output: folder {str(out.parent)!r} does not exist")

    shown: list[str] = []

    def show(layer: str, fwd_ps: int, bwd_ps: int) -> None:
        if not shown:  # the header waits until the request has been checked
            print(f"{'layer':<28}{'fwd ms':>12}{'bwd ms':>12}")
        shown.append(layer)
        print(f"{layer:<28}{fwd_ps / 1e9:>12.3f}{bwd_ps / 1e9:>12.3f}", flush=True)

    network = load_network(args.network, args.seq_len, args.attention)
    times = time_layers(network, args.batch, args.dtype, args.device, args.repeat,
                        args.warmup, args.seed, args.cudnn_benchmark,
                        None if args.quiet else show)
    if args.gpu:
        times = replace(times, gpu=args.gpu)
    times.write(out)
    if not args.quiet:
        fwd = sum(t["fwd"] for t in times.times_ps.values())
        bwd = sum(t["bwd"] for t in times.times_ps.values())
        print(f"{'total':<28}{fwd / 1e9:>12.3f}{bwd / 1e9:>12.3f}")
        print(f"measured on {times.device}; wrote {out}")
    if args.gpu:
        _print_calibration(times, network, args.gpu)
    return 0


def _print_calibration(times: LayerTimes, network: Network, preset: str) -> None:
    """What the measured times say about the GPU model of ``preset``: the roofline efficiency
    of the convolutions, and for 16-bit times the tensor-core path's measured/modelled ratio."""
    spec = GPUS[preset]
    if any(layer.kind == "conv" for layer in network.layers):
        efficiency = implied_compute_efficiency(times, network, spec.peak_flops)
        line = (f"convolutions run at {efficiency:.3f} of the {spec.name}'s fp32 peak "
                f"{spec.peak_flops / 1e12:g} TFLOP/s")
        print(line + (f": --compute-efficiency {efficiency:.3f}" if efficiency <= 1 else
                      ", faster than its peak: not this GPU, or not fp32 arithmetic"))
    if times.dtype == "float32":
        return
    check = tensor_core_check(times, network, preset)
    if not check.kernels:
        print(f"no kernel of this network runs on tensor cores in the model of {preset} "
              f"({times.dtype})")
        return
    tensor = kernel_model_for(preset).tensor
    assert tensor is not None, "a kernel priced on tensor cores was priced by their model"
    print(f"tensor-core kernels ({check.kernels}): measured {check.measured_s * 1e3:.3f} ms, "
          f"modelled {check.modelled_s * 1e3:.3f} ms by the {spec.tensor_flops / 1e12:g} TFLOP/s "
          f"dense peak at the constants of {tensor.family} tensor "
          f"cores: measured/modelled {check.ratio:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sst-cdma time-layers`` with ``argv`` (default ``sys.argv[1:]``); returns the
    status."""
    return run_tool(PROG, _run, argv, (CaptureError, WorkloadError, OSError), torch_errors=True)


if __name__ == "__main__":
    sys.exit(main())
