"""The pipeline topology's builder: ``pp`` GPUs of one preset, each a stage
(``cdma.PipelineStageWorkload``) of a chain of identical layers or, with ``--network``, of a
transformer's blocks, with its own HBM, stage to stage over point-to-point ports
(``cdma.PipelinePorts``), and the reporter (docs/parallel.md, "The simulated pipeline" and
"Stages of a transformer"). With ``--tp`` each stage is ``tp`` GPUs in Megatron's rank order
running one tensor-parallel rank's shard, their collectives on one ``cdma.ClusterFabric``.
``topologies/pipeline_cdma.py`` calls :func:`build_pipeline`."""
from __future__ import annotations

import argparse
from dataclasses import replace
import re
from typing import Any, Optional, Sequence

from sst_cdma.builder.model_options import (PIPELINE_OPTIONS, PORTS, STAGE, ElementOption,
                                            add_element_options, element_params, flag_words,
                                            given_options)
from sst_cdma.builder.cluster_node import wire_nic
from sst_cdma.builder.stage_hosts import StageHosts, replicas_share_hosts
from sst_cdma.builder.model_options import param_type
from sst_cdma.builder.topology import NVME_COUNT, ModelOptionParser, add_nvme_preset_option
from sst_cdma.model.ssds import SSDS
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.param_words import speak_flags
from sst_cdma.model.clusters import NODES
from sst_cdma.model.compression import ALGORITHMS
from sst_cdma.model.gpus import GPUS, gpu_choices, gpu_preset
from sst_cdma.model.links import HOST_LINKS
from sst_cdma.engine.param_words import Flag
from workloads import WorkloadError, load_network
from workloads.parallel import LayoutError, ModelShape, make_layout
from workloads.parallel.tensor import shard_transformer, transformer_dims
from workloads.parallel.zero_offload import OFFLOAD_ZERO

__all__ = ["pipeline_parser", "build_pipeline", "in_flags"]

#: the layout's param names and the flags that set them, as its errors name them
LAYOUT_FLAGS = {"pp": "--pp", "vpp": "--vpp", "micro_batches": "--micro-batches",
                "schedule": "--schedule", "stage_split": "--stage-split", "tp": "--tp",
                "sequence_parallel": "--sequence-parallel", "dp": "--dp", "zero": "--zero",
                "global_batch": "--global-batch", "micro_batch_size": "--batch"}
#: the options of a transformer's stages (``--network``), on the stage element
NETWORK_OPTIONS: tuple[ElementOption, ...] = (
    ElementOption("--network", STAGE, "network"),
    ElementOption("--batch", STAGE, "batch"),
    ElementOption("--seq-len", STAGE, "seq_len"),
    ElementOption("--dtype", STAGE, "dtype"),
    ElementOption("--policy", STAGE, "policy"),
    ElementOption("--optimizer", STAGE, "optimizer"),
    ElementOption("--stage-split", STAGE, "stage_split"),
    ElementOption("--tp", STAGE, "tp"),
    ElementOption("--sequence-parallel", STAGE, "sequence_parallel"),
    ElementOption("--dp", STAGE, "dp"),
    ElementOption("--zero", STAGE, "zero"),
    ElementOption("--optimizer-states", STAGE, "optimizer_states"),
    ElementOption("--delayed-update", STAGE, "delayed_update"),
)
#: the element type a cluster topology's stages train in unless --dtype says: bfloat16, as
#: large-model training on A100s and H100s runs (Llama 3's 405B: BF16 MFU, "The Llama 3 Herd
#: of Models", arXiv 2407.21783, Table 4; EVALUATION.md, "Llama 3 405B against its published
#: MFU"); the pipeline topology keeps the element's own default
CLUSTER_DTYPE = "bfloat16"
#: the options of the chain of identical layers, which a network's stages do not take
CHAIN_ONLY = ("layers", "forward_time", "backward_time", "activation")


def network_options(cluster: bool) -> tuple[ElementOption, ...]:
    """The options of a transformer's stages: on a cluster topology ``--dtype`` defaults to
    :data:`CLUSTER_DTYPE`."""
    if not cluster:
        return NETWORK_OPTIONS
    return tuple(replace(opt, default=CLUSTER_DTYPE) if opt.flag == "--dtype" else opt
                 for opt in NETWORK_OPTIONS)


def pipeline_parser(prog: str, gpu: str, cluster: bool = False) -> ModelOptionParser:
    """The pipeline topology's options: the stages' and ports' params
    (:data:`~sst_cdma.builder.model_options.PIPELINE_OPTIONS`) and the GPU preset; a
    cluster's (``cluster``) train in :data:`CLUSTER_DTYPE` unless ``--dtype`` says."""
    p = ModelOptionParser(prog=prog, description="pipeline-parallel stages model options",
                          allow_abbrev=False)
    add_element_options(p, PIPELINE_OPTIONS + network_options(cluster))
    p.add_argument("--algorithm", default="zvc", choices=ALGORITHMS,
                   help="with --network: the codec of each stage's DMA engine, which offloads "
                        "what --policy moves (none: a plain copy engine, vDNN) (default: zvc, "
                        "cDMA)")
    p.add_argument("--global-batch", type=int, default=None, metavar="N",
                   help="with --network: samples per optimizer step, micro-batches x --batch x "
                        "--dp; derives --micro-batches (default: --micro-batches gives it)")
    p.add_argument("--simulate-every-rank", action="store_true",
                   help="with --dp or --tp above 1: simulate every data-parallel replica and "
                        "every tensor-parallel rank of a stage (default: replica 0 alone, "
                        "unless its GPUs share a host CPU with other replicas' under "
                        "--optimizer-states host, and each stage's tp rank 0 alone, unless "
                        "a --policy, --nvme or --optimizer-states puts its ranks' traffic on "
                        "the host socket they share; the twins are identical: "
                        "docs/parallel.md, \"Symmetry\")")
    p.add_argument("--nvme", type=param_type(NVME_COUNT), default=0, metavar="N",
                   help="with --network: NVMe SSDs per host (each node socket's, or each "
                        "stage's own), on its root ports, every GPU's engine of the host on "
                        "each: the tier of --optimizer-states nvme (default: 0, none; "
                        "docs/storage.md)")
    add_nvme_preset_option(p)
    p.add_argument("--gpu", default=gpu, type=gpu_preset, choices=sorted(GPUS),
                   metavar=gpu_choices(),
                   help=f"GPU preset of every stage: its HBM bandwidth and capacity (default: "
                        f"{gpu}; docs/gpus.md)")
    return p


def in_flags(message: str) -> str:
    """A layout error in the command line's words: each param the layout names as its flag."""
    return re.sub(r"\b(" + "|".join(LAYOUT_FLAGS) + r")\b",
                  lambda m: LAYOUT_FLAGS[m.group(1)], message)


def _check_network_layout(o: argparse.Namespace) -> None:
    """A network's stages: no option of the chain, and the network's blocks split over the
    virtual stages as the layout says; one line naming the flags otherwise."""
    for dest in CHAIN_ONLY:
        if dest in o.given:
            raise ConfigError(f"model option error: --{dest.replace('_', '-')} sets the chain "
                              f"of identical layers; --network {o.network} gives the layers")
    split = None
    if o.stage_split:
        try:
            split = tuple(int(part) for part in o.stage_split.split(","))
        except ValueError:
            raise ConfigError(f"model option error: --stage-split {o.stage_split!r}: expected "
                              "layer counts separated by commas, e.g. 4,4,2,2") from None
    try:
        d = transformer_dims(load_network(o.network, o.seq_len))
    except WorkloadError as exc:
        raise ConfigError(f"model option error: --network {o.network}: not a transformer whose "
                          f"blocks the stages split: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"model option error: --network {o.network}: {exc}") from None
    try:
        shape = ModelShape(layers=d.blocks, heads=d.heads, kv_heads=d.kv_heads,
                           hidden=d.hidden, ffn=d.ffn, vocab=d.vocab)
        given = "micro_batches" in o.given or o.global_batch is None
        layout = make_layout(shape, tp=o.tp, pp=o.pp, dp=o.dp, zero=o.zero, vpp=o.vpp,
                             schedule=o.schedule,
                             micro_batches=o.micro_batches if given else None,
                             global_batch=o.global_batch, micro_batch_size=o.batch,
                             stage_split=split, sequence_parallel=o.sequence_parallel)
        o.micro_batches = layout.micro_batches
        if o.dp == 1 and o.zero:
            raise LayoutError(f"zero {o.zero} with dp 1: ZeRO shards the model states over "
                              "the data-parallel ranks, and one rank has none to share them "
                              "with (give dp above 1, or zero 0)")
        _check_offload(o)
        if o.tp > 1:
            shard_transformer(load_network(o.network, o.seq_len), o.tp, o.sequence_parallel)
    except (LayoutError, WorkloadError) as exc:
        raise ConfigError(f"model option error: --network {o.network}: "
                          f"{in_flags(str(exc))}") from None
    if o.tp > 1 or o.dp > 1:
        node_of(o)


def _check_layout(o: argparse.Namespace) -> None:
    """The layers split evenly over the virtual stages, and the layout holds; one line naming
    the flags otherwise."""
    if o.network:
        _check_network_layout(o)
        return
    network_only = [f"--{d.replace('_', '-')}" for d in
                    ("batch", "seq_len", "dtype", "policy", "optimizer", "stage_split", "tp",
                     "sequence_parallel", "dp", "zero", "global_batch", "simulate_every_rank",
                     "optimizer_states", "delayed_update", "nvme", "nvme_preset")
                    if d in o.given]
    if network_only:
        raise ConfigError(f"model option error: {', '.join(network_only)} need --network: the "
                          "chain of identical layers has none")
    stages = o.pp * o.vpp
    if o.layers % stages:
        raise ConfigError(f"model option error: --layers {o.layers} do not split evenly over "
                          f"--pp {o.pp} x --vpp {o.vpp} = {stages} virtual stages")
    shape = ModelShape(layers=o.layers, heads=1, kv_heads=1, hidden=1, ffn=1, vocab=1)
    try:
        make_layout(shape, pp=o.pp, vpp=o.vpp, schedule=o.schedule,
                    micro_batches=o.micro_batches)
    except LayoutError as exc:
        raise ConfigError(f"model option error: {in_flags(str(exc))}") from None


def _check_offload(o: argparse.Namespace) -> None:
    """ZeRO-Offload on the stages: Adam, ``auto`` with ``--policy auto`` (each stage's
    planner places them), and at ``--dp`` above 1 ZeRO 1, 2 or 3 (each rank's
    partition on its host), SSDs for the nvme tier (ZeRO-Infinity), a known SSD preset;
    ``--delayed-update`` needs it; a LayoutError naming the flags."""
    if o.nvme_preset not in SSDS:
        raise LayoutError(f"--nvme-preset {o.nvme_preset!r} is not a known SSD (one of "
                          f"{', '.join(sorted(SSDS))}; docs/storage.md)")
    if o.optimizer_states == "gpu":
        if o.delayed_update:
            raise LayoutError("--delayed-update overlaps the host CPU's optimizer step with "
                              "the next iteration: it needs --optimizer-states host")
        return
    if o.optimizer_states == "auto" and o.policy != "auto":
        raise LayoutError(f"--optimizer-states auto lets each stage's planner move them to "
                          f"the host: it needs --policy auto, not {o.policy}")
    if o.optimizer != "adam":
        raise LayoutError(f"--optimizer-states {o.optimizer_states} runs the step on the host "
                          f"CPU, whose rate is measured for Adam: give --optimizer adam, not "
                          f"{o.optimizer}")
    if o.optimizer_states == "nvme" and not o.nvme:
        raise LayoutError("--optimizer-states nvme needs an NVMe SSD to hold the states: the "
                          "hosts have none (give --nvme N, N >= 1)")
    if o.dp > 1 and o.zero not in OFFLOAD_ZERO:  # param names: in_flags makes them flags
        raise LayoutError(f"--optimizer-states {o.optimizer_states} with dp {o.dp} and "
                          f"zero {o.zero}: ZeRO-Offload keeps each rank's partition of the "
                          "optimizer states on its host: give zero 1, 2 or 3")


def node_of(o: argparse.Namespace) -> str:
    """The cluster node preset whose GPUs are ``--gpu`` (the tensor-parallel ranks' fabric);
    one line naming ``--gpu`` and the presets that have a node otherwise."""
    nodes = [name for name, node in sorted(NODES.items()) if node.gpu == o.gpu]
    if not nodes:
        have = ", ".join(f"{node.gpu} ({name})" for name, node in sorted(NODES.items()))
        what = f"--tp {o.tp}" if o.tp > 1 else f"--dp {o.dp}"
        raise ConfigError(f"model option error: {what} puts each stage's ranks on a "
                          f"cluster node, but no node preset holds --gpu {o.gpu}'s GPUs (those "
                          f"that do: {have})")
    return nodes[0]


def rank_of_gpu(o: argparse.Namespace, s: int, t: int, d: int = 0) -> int:
    """The global rank of stage ``s``'s tensor-parallel rank ``t`` in data-parallel replica
    ``d``, in Megatron's order: t + tp x d + tp x dp x s."""
    return t + o.tp * d + o.tp * o.dp * s


def gpu_name(o: argparse.Namespace, s: int, t: int, d: int = 0) -> str:
    """The GPU of stage ``s``'s tensor-parallel rank ``t`` in replica ``d``: ``gpuR`` with R
    its global rank (:func:`rank_of_gpu`), and with tp or dp above 1 its coordinates
    (``gpu3-tp1-pp1``; ``gpu6-tp0-pp1-dp1``)."""
    rank = rank_of_gpu(o, s, t, d)
    if o.tp == 1 and o.dp == 1:
        return f"gpu{rank}"
    tp = f"-tp{t}" if o.tp > 1 else ""
    dp = f"-dp{d}" if o.dp > 1 else ""
    return f"gpu{rank}{tp}-pp{s}{dp}"


def replicas(o: argparse.Namespace) -> int:
    """The data-parallel replicas simulated: every one with ``--simulate-every-rank``, or
    where replica 0's GPUs share a host CPU with other replicas' (``--optimizer-states
    host``: the twins' steps queue on the same cores), else replica 0 alone (its twins are
    identical: docs/parallel.md, "Symmetry")."""
    return o.dp if o.simulate_every_rank or _host_twins(o) else 1


def tp_ranks(o: argparse.Namespace) -> int:
    """The tensor-parallel ranks simulated in each stage: every one with
    ``--simulate-every-rank`` or where a stage's ranks put traffic on the host socket they
    share (:func:`tp_twins_share_hosts`), else tp rank 0 alone (the others run the same
    stream: docs/parallel.md, "Symmetry")."""
    return o.tp if o.simulate_every_rank or tp_twins_share_hosts(o) else 1


def tp_twins_share_hosts(o: argparse.Namespace) -> bool:
    """True when a stage's tp ranks, on one node's socket, would move bytes through its host
    memory or CPU: an offloading ``--policy`` (any but none), ``--nvme`` drives, or the
    optimizer states on the host; simulating rank 0 alone would leave the others' load off
    the socket."""
    if o.tp == 1 or not o.network:
        return False
    return o.policy != "none" or bool(o.nvme) or o.optimizer_states != "gpu"


def _host_twins(o: argparse.Namespace) -> bool:
    """True when the host CPUs step model states and replica 0's GPUs share a socket with
    another replica's."""
    if not o.network or o.optimizer_states == "gpu":
        return False
    return replicas_share_hosts(_node(o), o.tp, o.pp, o.dp)


def _node(o: argparse.Namespace) -> Optional[str]:
    """The node preset the ranks sit on (None: no nodes, each stage a host of its own)."""
    if o.tp == 1 and o.dp == 1 and not o.cluster:
        return None
    return o.cluster or node_of(o)


def _stage(sst: Any, o: argparse.Namespace, s: int, t: int, d: int, fabric: Any,
           hosts: StageHosts) -> Any:
    """Stage ``s``'s tensor-parallel rank ``t`` of replica ``d``: its GPU with its workload
    and ports, its HBM and, with tp or dp above 1, its port to the cluster fabric; returns
    the p2p ports."""
    spec = GPUS[o.gpu]
    name = gpu_name(o, s, t, d)
    rank = rank_of_gpu(o, s, t, d)
    gpu = sst.Component(name, "cdma.GPU")
    gpu.addParams({"gpu_preset": o.gpu})
    work = gpu.setSubComponent("workload", STAGE)
    work.addParams({**element_params(o, STAGE, PIPELINE_OPTIONS + NETWORK_OPTIONS),
                    "layers": o.layers, "stage": s, "tp_rank": t, "dp_rank": d})
    ports = gpu.setSubComponent("p2p", PORTS)
    ports.addParams({**element_params(o, PORTS, PIPELINE_OPTIONS), "stage": s,
                     **across_nodes(o)})
    hbm = sst.Component(f"{name}.hbm", "cdma.HBM")
    hbm.addParams({"bandwidth": spec.dram_bandwidth, "capacity": spec.dram_capacity})
    sst.Link(f"{name}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    if fabric is not None:
        port = gpu.setSubComponent("collectives", "cdma.CollectivePort")
        sst.Link(f"{name}.l_fabric", "0ps").connect((port, "fabric"), (fabric, f"gpu{rank}"))
    if o.network:
        _offload_path(sst, o, gpu, hbm, name, hosts.host(rank))
        hosts.engine_on_drives(name, rank)
        if o.optimizer_states != "gpu":
            hosts.model_states(gpu, name, rank)
    if o.cluster:
        wire_nic(sst, o, name, rank, f"{name}.pcie", fabric, ports)
    return ports


def _fabric(sst: Any, o: argparse.Namespace) -> Any:
    """With tp or dp above 1, the cluster fabric that prices the ranks' collectives: nodes of
    the ``--gpu``'s node preset, as many as the tp x pp x dp ranks fill (8 a node), the
    layout's tp, pp and dp, and with one replica simulated its ``representative`` mode; None
    with tp and dp 1."""
    if o.tp == 1 and o.dp == 1 and not o.cluster:
        return None
    node = o.cluster or node_of(o)
    gpus = o.tp * o.pp * o.dp
    fabric = sst.Component("fabric", "cdma.ClusterFabric")
    fabric.addParams({"node": node, "nodes": -(-gpus // NODES[node].gpus), "tp": o.tp,
                      "pp": o.pp, "dp": o.dp, "representative": replicas(o) < o.dp,
                      "tp_representative": tp_ranks(o) < o.tp})
    if o.cluster:
        fabric.addParam("fabric", CLUSTER_FABRICS[o.cluster])
    return fabric


def _offload_path(sst: Any, o: argparse.Namespace, gpu: Any, hbm: Any, name: str,
                  host: tuple[Any, str]) -> None:
    """A network's stage: its DMA engine (the ``--algorithm`` codec in its slot) on the GPU's
    HBM, over the preset's host link to ``host`` (its host memory and port there:
    :class:`~sst_cdma.builder.stage_hosts.StageHosts`), for what ``--policy`` offloads and
    the model states' copies."""
    spec = GPUS[o.gpu]
    dma = sst.Component(f"{name}.dma", "cdma.CDMAEngine")
    if o.algorithm != "none":  # none: the slot stays empty, a plain copy engine
        from components.codecs import element_type

        dma.setSubComponent("codec", element_type(o.algorithm))
    link = sst.Component(f"{name}.pcie", "cdma.PCIeBridge")
    link.addParams(HOST_LINKS[spec.host_link])
    sst.Link(f"{name}.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"{name}.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"{name}.l_pcie", "0ps").connect((dma, "pcie"), (link, "gpu"))
    sst.Link(f"{name}.l_host", "0ps").connect((link, "host"), host)


def build_pipeline(sst: Any, argv: Sequence[str], prog: str, gpu: str = "hopper",
                   cluster: Optional[str] = None) -> argparse.Namespace:
    """Parse the options and add ``--pp`` stages of ``--tp`` GPUs each, in Megatron's rank
    order, stage s's ``next`` port wired to stage s + 1's ``prev`` between the GPUs of the
    same tp (and dp) rank (and the last stage's to the first's with virtual stages, whose
    chunks go round the ring), with tp or dp above 1 every GPU's collectives port on one
    cluster fabric (replica 0 alone unless ``--simulate-every-rank``), and the reporter.
    ``cluster`` (a :data:`~sst_cdma.model.clusters.NODES` preset) makes it a cluster of
    those nodes: its GPUs, a fabric always, and the stages' messages over the NICs where
    neighbouring stages sit on different nodes (docs/parallel.md, "The cluster
    topology")."""
    parser = pipeline_parser(prog, NODES[cluster].gpu if cluster else gpu, bool(cluster))
    o = parser.parse_args(list(argv))
    o.given = given_options(argv, parser)
    o.cluster = cluster
    if cluster:
        _check_cluster(o)
    speak_flags({**flag_words(), **{(opt.element, opt.param): Flag(opt.flag, opt.invert)
                                    for opt in NETWORK_OPTIONS}})
    if o.layers is None:
        o.layers = 2 * o.pp * o.vpp
    _check_layout(o)
    fabric = _fabric(sst, o)
    hosts = StageHosts(sst, o, _node(o), bool(o.network) and o.optimizer_states != "gpu")
    links = o.pp if o.vpp > 1 else o.pp - 1
    ports = {}
    for s, d in ((s, d) for s in range(o.pp) for d in range(replicas(o))):  # in rank order
        ports.update({(s, d, t): _stage(sst, o, s, t, d, fabric, hosts)
                      for t in range(tp_ranks(o))})
        if o.network:  # the twins' sockets, as a run of every rank has them
            for t in range(tp_ranks(o), o.tp):
                hosts.host(rank_of_gpu(o, s, t, d))
    for d in range(replicas(o)):
        for t in range(tp_ranks(o)):
            for s in range(links):
                sst.Link(f"{gpu_name(o, s, t, d)}.l_next", "0ps").connect(
                    (ports[(s, d, t)], "next"), (ports[((s + 1) % o.pp, d, t)], "prev"))
    reporter = sst.Component("report", "cdma.Reporter")
    reporter.addParam("system", _system(o))
    if tp_ranks(o) < o.tp:
        reporter.addParam("tp_twins", tp_twins(o, hosts))
    return o


def tp_twins(o: argparse.Namespace, hosts: StageHosts) -> str:
    """The reporter's ``tp_twins``: each stage's tp ranks but 0, of each simulated replica,
    named with their simulated rank 0 and, with a network, its host and theirs
    (:mod:`components.rank_twins`)."""
    entries = []
    for s, d in ((s, d) for s in range(o.pp) for d in range(replicas(o))):
        sim = gpu_name(o, s, 0, d)
        for t in range(1, o.tp):
            entry = f"{sim} {gpu_name(o, s, t, d)} {t}"
            if o.network:
                entry += (f" {hosts.host_name(rank_of_gpu(o, s, 0, d))}"
                          f" {hosts.host_name(rank_of_gpu(o, s, t, d))}")
            entries.append(entry)
    return ";".join(entries)


#: the scale-out fabric of each cluster's nodes: their NICs' generation (docs/clusters.md)
CLUSTER_FABRICS = {"dgx_h100": "rail_ndr", "dgx_a100": "rail_hdr"}


def _check_cluster(o: argparse.Namespace) -> None:
    """A cluster's run: a network's stages on its node's GPUs; one line otherwise."""
    if not o.network:
        raise ConfigError("model option error: a cluster's stages run a transformer: give "
                          "--network (e.g. --network llama3_70b)")
    if "gpu" in o.given:
        raise ConfigError(f"model option error: --gpu {o.gpu}: the cluster's GPUs are its "
                          f"{NODES[o.cluster].name} nodes' ({NODES[o.cluster].gpu})")


def across_nodes(o: argparse.Namespace) -> dict[str, str]:
    """On a cluster whose neighbouring stages sit on different nodes (tp x dp at least the
    GPUs of a node) and with no ``--p2p-bandwidth``/``--p2p-latency`` given: the ports'
    bandwidth and latency of one NIC, the network tier's large-message line of the node's
    collective model (a send/recv is one step over the sender's NIC: docs/clusters.md);
    otherwise nothing (the ports' own, NVLink's)."""
    if not o.cluster or o.tp * o.dp < NODES[o.cluster].gpus:
        return {}
    from sst_cdma.model.collectives import system_tiers

    line = system_tiers(o.cluster).inter.line("simple")
    out = {"bandwidth": f"{line.busbw_Bps:.0f}B/s",
           "latency": f"{round(line.step_latency_s * 1e12)}ps"}
    return {k: v for k, v in out.items() if f"p2p_{k}" not in o.given}


def _system(o: argparse.Namespace) -> str:
    """The console's ``system:`` line: the layout and, with the optimizer states on the
    host, where each rank's CPU Adam runs."""
    line = _layout_line(o)
    if not o.network or o.optimizer_states == "gpu":
        return line
    where = ("its node socket's host CPU, shared with the socket's other GPUs"
             if _node(o) else "a host CPU of its own")
    part = f"each rank's {'1/' + str(o.dp) + ' ' if o.dp > 1 else ''}partition"
    if o.optimizer_states == "nvme":
        return (f"{line}; optimizer states on the hosts' {o.nvme} SSD(s) each (ZeRO-Infinity: "
                f"{part} read into host memory and stepped by {where})")
    if o.optimizer_states == "auto":
        return (f"{line}; optimizer states on the GPU, or on the hosts where a stage's plan "
                f"does not fit with them there (ZeRO-Offload: {part} stepped by {where})")
    return f"{line}; optimizer states on the hosts (ZeRO-Offload: {part} stepped by {where})"


def _tp_sim(o: argparse.Namespace) -> str:
    """With tp above 1: which tp ranks of a stage were simulated, and why all where they
    were."""
    if o.tp == 1:
        return ""
    if tp_ranks(o) < o.tp:
        return f", tp rank 0 of each stage simulated, its {o.tp - 1} twins copied"
    if o.simulate_every_rank:
        return ", every tp rank simulated"
    return (", every tp rank simulated (a stage's ranks share their node socket's host "
            "memory or CPU)")


def _layout_line(o: argparse.Namespace) -> str:
    """The layout part of the ``system:`` line."""
    stages = f"{o.pp} pipeline stages" if o.pp > 1 else "1 pipeline stage"
    model = f" of {o.network}'s blocks" if o.network else ""
    if o.tp == 1 and o.dp == 1 and not o.cluster:
        return (f"{stages}{model}, one {GPUS[o.gpu].name} each, stage to stage over "
                "point-to-point links")
    node = NODES[o.cluster or node_of(o)]
    if o.dp == 1 and not o.cluster:
        sp = " with sequence parallelism" if o.sequence_parallel else ""
        return (f"{stages}{model}, each tp {o.tp}{sp} on {o.tp} {GPUS[o.gpu].name}s (rank = "
                f"tp + {o.tp} x pp), stage to stage over point-to-point links, "
                f"tensor-parallel collectives on {node.name} nodes' fabric{_tp_sim(o)}")
    sim = ("every replica simulated" if replicas(o) == o.dp else
           f"replica 0 simulated, its {o.dp - 1} twins priced with it") + _tp_sim(o)

    return (f"{stages}{model} x tp {o.tp} x dp {o.dp} (ZeRO {o.zero}) = "
            f"{o.tp * o.pp * o.dp} {GPUS[o.gpu].name}s (rank = tp + {o.tp} x dp + "
            f"{o.tp * o.dp} x pp) on {-(-o.tp * o.pp * o.dp // node.gpus)} {node.name} nodes, "
            f"{sim}; collectives on the nodes' fabric")
