"""Tensor parallelism on a cluster fabric: --nodes DGX nodes of 8 GPUs, each GPU a rank running
a hand-written stream of Megatron-style blocks (two all-reduces over its tp group in the forward
pass and two in the backward pass; with dp > 1 a gradient all-reduce over dp at the end), the
collectives priced on the cluster's graph by the algorithm --algorithm names (docs/parallel.md,
"Collectives on the cluster fabric").

    sst topologies/tp_cdma.py -- --tp 8
    sst topologies/tp_cdma.py -- --nodes 2 --tp 8 --algorithm hierarchical
"""
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import sst
from sst_cdma.builder.topology import ModelOptionParser
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.units import UnitAlgebra, UnitError
from sst_cdma.model.clusters import NODES
from sst_cdma.model.gpus import GPUS

ALGORITHMS = {"ring": "cdma.ClusterRing", "tree": "cdma.ClusterTree",
              "hierarchical": "cdma.ClusterHierarchical"}


def options(argv):
    """The script's options; a bad one is one line naming it."""
    p = ModelOptionParser(prog="tp_cdma.py", description="tensor parallel blocks on a "
                          "cluster fabric", allow_abbrev=False)
    p.add_argument("--node", default="dgx_h100", choices=sorted(NODES),
                   help="node preset (docs/clusters.md; default dgx_h100)")
    p.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    p.add_argument("--tp", type=int, default=8, help="tensor-parallel size (default 8; dp is "
                   "the GPUs over tp)")
    p.add_argument("--algorithm", default="ring", choices=sorted(ALGORITHMS),
                   help="the collectives' algorithm (default ring)")
    p.add_argument("--blocks", type=int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--activation", default="64MiB", help="bytes of each block's all-reduced "
                   "activation, the whole buffer (default 64MiB: 4096 tokens x 8192 hidden, "
                   "fp16)")
    p.add_argument("--gradients", default="256MiB", help="bytes of the gradients all-reduced "
                   "over dp when dp > 1 (default 256MiB)")
    p.add_argument("--attention-time", default="1ms", help="each attention kernel (default 1ms)")
    p.add_argument("--mlp-time", default="2ms", help="each MLP kernel (default 2ms)")
    o = p.parse_args(argv)
    for name in ("nodes", "tp", "blocks"):
        if getattr(o, name) < 1:
            raise ConfigError(f"model option error: --{name} {getattr(o, name)} must be >= 1")
    gpus = o.nodes * NODES[o.node].gpus
    if gpus % o.tp:
        raise ConfigError(f"model option error: --tp {o.tp} does not divide the {gpus} GPUs "
                          f"of --nodes {o.nodes}")
    for name, unit in (("activation", "bytes"), ("gradients", "bytes"),
                       ("attention_time", "ps"), ("mlp_time", "ps")):
        text = getattr(o, name)
        try:
            value = UnitAlgebra(text)
            amount = value.to_bytes() if unit == "bytes" else value.to_picoseconds()
        except UnitError as exc:
            raise ConfigError(f"model option error: --{name.replace('_', '-')} {text}: "
                              f"{exc}") from None
        setattr(o, name, int(amount))
    o.dp = gpus // o.tp
    return o


def stream(o):
    """The hand-written stream every rank runs."""
    lines = ["stream version=1 network=tp_blocks batch=1 dtype=float16 policy=none"]
    lines += [f"tensor {t}{b} bytes={o.activation} kind=activation layer={t}{b}"
              for b in range(o.blocks) for t in ("attn", "mlp")]
    if o.dp > 1:
        lines.append(f"tensor grads bytes={o.gradients} kind=gradient layer=mlp0")
    times = {"attn": o.attention_time, "mlp": o.mlp_time}
    lines.append("phase forward")
    for b in range(o.blocks):
        for t, reads in (("attn", ""), ("mlp", f" reads=attn{b}")):
            lines += [f"alloc {t}{b}",
                      f"compute {t}{b} pass=fwd flops=0 dram=0 time={times[t]}ps{reads} "
                      f"writes={t}{b}",
                      f"all_reduce {t}{b} group=tp"]
    lines.append("phase backward")
    for b in reversed(range(o.blocks)):
        for t in ("mlp", "attn"):
            lines += [f"compute {t}{b} pass=bwd flops=0 dram=0 time={2 * times[t]}ps "
                      f"reads={t}{b}",
                      f"all_reduce {t}{b} group=tp", f"free {t}{b}"]
    if o.dp > 1:
        lines += ["alloc grads", "all_reduce grads group=dp", "free grads"]
    return "\n".join(lines + ["end", ""])


def build(o, path):
    """The ranks' GPUs with their HBM and fabric ports, the fabric and the reporter."""
    spec = GPUS[NODES[o.node].gpu]
    fabric = sst.Component("fabric", "cdma.ClusterFabric")
    fabric.addParams({"node": o.node, "nodes": o.nodes, "tp": o.tp})
    fabric.setSubComponent("collective", ALGORITHMS[o.algorithm])
    for rank in range(o.nodes * NODES[o.node].gpus):
        gpu = sst.Component(f"gpu{rank}", "cdma.GPU")
        gpu.addParam("gpu_preset", NODES[o.node].gpu)
        gpu.setSubComponent("workload", "cdma.StreamWorkload").addParam("file", str(path))
        gpu.setSubComponent("kernels", "cdma.RooflineKernels")
        port = gpu.setSubComponent("collectives", "cdma.CollectivePort")
        hbm = sst.Component(f"gpu{rank}.hbm", "cdma.HBM")
        hbm.addParams({"bandwidth": spec.dram_bandwidth, "capacity": spec.dram_capacity})
        sst.Link(f"gpu{rank}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
        sst.Link(f"gpu{rank}.l_fabric", "0ps").connect((port, "fabric"), (fabric, f"gpu{rank}"))
    reporter = sst.Component("report", "cdma.Reporter")
    reporter.addParam("system", f"{o.nodes} x {NODES[o.node].name}, tp {o.tp} x dp {o.dp}, "
                                f"{o.algorithm} collectives")


def main(argv):
    """Write the stream into a folder of its own (removed when the process ends) and build."""
    o = options(argv)
    folder = Path(tempfile.mkdtemp(prefix="tp_cdma-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "tp_blocks.stream"
    path.write_text(stream(o), encoding="utf-8")
    build(o, path)


main(sys.argv[1:])
