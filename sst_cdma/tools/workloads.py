"""Command line of the workloads package: ``python -m sst_cdma.tools.workloads COMMAND ...``.

Commands::

    list                                   the shipped networks with params and GMAC
    info NETWORK [--batch N] [--dtype T]   per-layer table (shapes, params, GFLOP)
    render NETWORK [--batch N] [--dtype T] [--policy P] [--optimizer O] [--allocation A]
           [-o FILE]                       a stream
    stats FILE...                          parse streams, print peak memory and transfers
    table NETWORK...                       markdown: the CNNs' or the transformers' figures
    memory NETWORK:BATCH...                markdown: the vDNN policies' peaks and offloads
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workloads.dtypes import DTYPES
from workloads.errors import WorkloadError
from workloads.loader import CAPTURE_NETWORKS, NETWORKS, load_network
from workloads.render import render_stream
from workloads.stats import stream_stats
from workloads.stream import read_stream
from workloads.tables import (is_transformer, memory_table, networks_table, parse_case,
                     transformers_table)
from workloads.vdnn import ALLOCATIONS, OPTIMIZERS

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sst_cdma.tools.workloads",
                                description="Network definitions and vDNN workload streams.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="shipped networks")
    info = sub.add_parser("info", help="per-layer table of a network")
    info.add_argument("network")
    info.add_argument("--batch", type=int, default=1)
    info.add_argument("--dtype", choices=list(DTYPES), default="float32")
    render = sub.add_parser("render", help="render a workload stream")
    render.add_argument("network")
    render.add_argument("--batch", type=int, default=64)
    render.add_argument("--dtype", choices=list(DTYPES), default="float32")
    render.add_argument("--policy", default="conv",
                        help="none, all, conv, recompute, plan (with --plan) or CHOICE-GROUP "
                             "terms joined by '+', e.g. recompute-attn+offload-ffn "
                             "(docs/workloads.md; auto needs a machine: run a topology)")
    render.add_argument("--plan", type=Path, default=None,
                        help="per-tensor plan file (JSON tensor -> keep, offload, compress, "
                             "recompute); sets policy plan")
    render.add_argument("--optimizer", choices=list(OPTIMIZERS), default="none",
                        help="end the iteration with this optimizer's step")
    render.add_argument("--allocation", choices=list(ALLOCATIONS), default="liveness",
                        help="GPU memory allocation: buffers live from birth to death, or "
                             "network-wide (vDNN's baseline) for the whole iteration")
    render.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    stats = sub.add_parser("stats", help="validate streams and print their figures")
    stats.add_argument("files", nargs="+", type=Path)
    table = sub.add_parser("table", help="markdown table of CNNs' or transformers' figures "
                                         "(docs/workloads.md)")
    table.add_argument("networks", nargs="+", help="networks, all CNNs or all transformers")
    memory = sub.add_parser("memory", help="markdown table of the vDNN policies' peak memory "
                                           "and offloaded bytes (docs/workloads.md)")
    memory.add_argument("cases", nargs="+", metavar="NETWORK:BATCH")
    return p


def _table(names: list[str]) -> str:
    """The table of ``names``: the transformers' if the first is one, else the CNNs'."""
    if is_transformer(load_network(names[0])):
        return transformers_table(names)
    return networks_table(names)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            for name in NETWORKS + CAPTURE_NETWORKS:
                net = load_network(name)
                print(f"{name:12} {net.param_count() / 1e6:8.2f}M params "
                      f"{net.macs() / 1e9:7.3f} GMAC/image  {len(net.layers)} layers")
        elif args.command == "info":
            print(load_network(args.network).summary(args.batch, args.dtype))
        elif args.command == "render":
            policy, choices = args.policy, None
            if args.plan is not None:
                from workloads.policies import load_plan_file

                policy = "plan"
                choices = load_plan_file(args.plan, load_network(args.network), args.batch,
                                         args.dtype)
            text = render_stream(args.network, args.batch, args.dtype, policy,
                                 optimizer=args.optimizer, allocation=args.allocation,
                                 choices=choices)
            if args.output:
                args.output.write_text(text)
            else:
                sys.stdout.write(text)
        elif args.command == "stats":
            for path in args.files:
                st = stream_stats(read_stream(path))
                print(f"{path}: {st.network} batch {st.batch} {st.dtype} policy {st.policy}: "
                      f"peak {st.peak_bytes / 1e9:.3f} GB ({st.peak_phase}, line {st.peak_line}), "
                      f"mean over kernels {st.kernel_mean_bytes / 1e9:.3f} GB, "
                      f"offloaded {st.offloaded_bytes / 1e9:.3f} GB, "
                      f"prefetched {st.prefetched_bytes / 1e9:.3f} GB, "
                      f"{(st.flops_fwd + st.flops_bwd) / 1e12:.3f} TFLOP")
        elif args.command == "table":
            print(_table(args.networks))
        elif args.command == "memory":
            print(memory_table([parse_case(case) for case in args.cases]))
    except WorkloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
