"""Building blocks for cDMA topology scripts: the model options every topology takes, and
functions that add a GPU system (cores, HBM, cDMA engine, host link) to the configuration with
the ``sst`` API. A topology script picks a GPU and a host link and calls :func:`build`.

Every run also simulates the same network as the *oracle* (no offload, on a hypothetical GPU
with enough memory) and as *vDNN* (offload without compression), in separate systems of the
same graph, so the summary can put the speed-up in front of the user.
"""
from __future__ import annotations

import argparse
import functools
import os
import re
from dataclasses import field
from typing import Any, NoReturn, Optional, Sequence

from components.baselines import add_baselines
from components.network_workload import NetworkWorkload
from components.workload_source import WorkloadSource

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.config_api import current_graph
from sst_cdma.engine.machine import available_memory
from sst_cdma.engine.records import Record, record
from sst_cdma.model.cpu_adam import MIN_PARAMS_PER_S, CpuAdamError, load_cpu_adam, \
    step_traffic_floor
from sst_cdma.model.gpus import GPUS, GPUSpec, gpu_choices, gpu_preset
from sst_cdma.model.hosts import (DEFAULT_PLATFORM, GPU_HOSTS, HostPlatform, PLATFORMS,
                                  adam_origin, platform_fault, platform_names)
from sst_cdma.model.compression import ALGORITHMS, DECOMPRESSION_ENGINE
from sst_cdma.model.links import HOST_LINKS
from sst_cdma.model.ssds import DEFAULT_SSD, SSDS
from sst_cdma.engine.element import Param, ParamRuleError
from sst_cdma.engine.library import find_element
from sst_cdma.builder.model_options import (CODEC, ELEMENT_OPTIONS, ENGINE, FITTED, HOST_CPU,
                                            HOST_MEMORY,
                                            LINK, NETWORK, NVME, STREAM, add_element_options,
                                            element_params,
                                            explicit, flag_words, given_options, options_of,
                                            param_type)
from sst_cdma.builder.option_rules import STREAM_RULES, Chosen, broken_rule
from sst_cdma.engine.units import UnitError, parse_bandwidth, parse_bytes
from sst_cdma.engine.param_words import speak_flags

#: model options that were renamed, and their names now
RENAMED_OPTIONS = {"--engines": "--codec-units", "--engine-throughput": "--codec-unit-throughput"}

#: ``--kernel-model`` -> the element that fills each GPU's ``kernels`` slot (with
#: ``--layer-times``, ``cdma.MeasuredKernels`` with that model beside the measurement)
KERNEL_ELEMENTS = {"fitted": "cdma.FittedKernels", "roofline": "cdma.RooflineKernels"}

#: the host-link presets ``--link`` names (the model's table)
LINKS = HOST_LINKS


#: ``--nvme N``: the SSDs of each host, each a PCIe endpoint with a bus number of its own
NVME_COUNT = Param("nvme", "int", 0, "NVMe SSDs per host", minimum=0, maximum=256,
                   why_minimum="0: no SSD",
                   why_maximum="each drive is a PCIe endpoint on a bus of its own, and a "
                               "host's PCIe segment numbers at most 256 buses: the bus number "
                               "is 8 bits")


class ModelOptionParser(argparse.ArgumentParser):
    """argparse whose errors become ConfigError (one line, naming the option) instead of
    printing usage and exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        """Raise instead of exiting; an option that was renamed says its new name."""
        for old, new in RENAMED_OPTIONS.items():
            if "unrecognized arguments" in message and \
                    re.search(rf"(^|\s){re.escape(old)}(=|\s|$)", message):
                message += f" ({old} is now {new})"
                break
        else:
            message += self._did_you_mean(message)
        raise ConfigError(f"model option error: {message}")

    def _did_you_mean(self, message: str) -> str:
        """`` (did you mean --network?)`` for each unrecognized option close to a known one."""
        if "unrecognized arguments" not in message:
            return ""
        import difflib

        flags = [f for action in self._actions for f in action.option_strings
                 if f.startswith("--")]
        hints = []
        for word in message.split("unrecognized arguments:", 1)[1].split():
            flag = word.split("=", 1)[0]
            close = difflib.get_close_matches(flag, flags, n=1) if flag.startswith("--") else []
            if close:
                hints.append(f"{flag}: did you mean {close[0]}?")
        return f" ({'; '.join(hints)})" if hints else ""


def _parser_inputs() -> tuple[Any, ...]:
    """What :func:`option_parser` reads besides its arguments, as a value: the registered
    codecs, the GPU, link, host and SSD presets, and the element classes whose params the
    options are made from. A parser made when any of these differed is not reused."""
    elements = sorted({opt.element.partition(":")[0] for opt in ELEMENT_OPTIONS})
    return (tuple(ALGORITHMS), tuple(GPUS), tuple(LINKS), tuple(PLATFORMS), tuple(GPU_HOSTS),
            tuple(SSDS), tuple(find_element(name) for name in elements))


@functools.lru_cache(maxsize=16)
def _cached_parser(prog: str, gpu: str, link: Optional[str], gpus: int, cpu: str,
                   defaults: tuple[tuple[str, Any], ...],
                   inputs: tuple[Any, ...]) -> ModelOptionParser:
    """:func:`option_parser` with ``defaults`` set, made once per process for each set of
    arguments and :func:`_parser_inputs` (``inputs``: part of the key only). Parsing leaves a
    parser as it was and every default is immutable, so one parser serves every run of a
    sweep's points: making it is 64 ``add_argument`` calls, a third of executing a topology
    script."""
    parser = option_parser(prog, gpu, link, gpus, cpu)
    parser.set_defaults(**dict(defaults))
    return parser


def option_parser(prog: str, gpu: str = "pascal", link: Optional[str] = None,
                  gpus: int = 1, cpu: str = DEFAULT_PLATFORM.name) -> ModelOptionParser:
    """The model options of every cDMA topology (defaults differ per script): the element
    params' options (:mod:`sst_cdma.builder.model_options`) and the topology's own."""
    p = ModelOptionParser(prog=prog, description="cDMA system model options",
                          allow_abbrev=False)
    add_element_options(p)
    p.add_argument("--kernel-model", default="fitted", choices=sorted(KERNEL_ELEMENTS),
                   help="how kernels are priced: 'fitted' (cdma.FittedKernels: the "
                        "algorithm-aware model fitted to measured cuDNN kernels; "
                        "docs/kernel_model.md) or 'roofline' (cdma.RooflineKernels: peak FLOP/s "
                        "x --compute-efficiency against DRAM bandwidth); with --layer-times, "
                        "the model beside the measurement (default: fitted)")
    p.add_argument("--gpu", default=gpu, type=gpu_preset, choices=sorted(GPUS),
                   metavar=gpu_choices(),
                   help=f"GPU preset (default: {gpu}; h100 and h100_sxm name hopper, v100 "
                        "volta, p100 pascal; docs/gpus.md)")
    p.add_argument("--cpu", default=None, metavar="NAME",
                   help=f"host platform: each host's CPU socket and its DRAM, which the host "
                        f"memory and the host CPU share ({', '.join(platform_names())}; "
                        f"default: {cpu}, or the GPU's own host on a superchip: "
                        f"{', '.join(f'{g} {h}' for g, h in sorted(GPU_HOSTS.items()))}; "
                        "docs/host_cpu.md)")
    p.add_argument("--link", default=link, choices=sorted(LINKS),
                   help="host link preset (default: the GPU preset's)")
    p.add_argument("--gpus", type=int, default=gpus, help=f"number of GPUs (default: {gpus}; refused when more than this machine's "
                        f"memory holds, at about 0.7 MiB a GPU)")
    p.add_argument("--gpus-per-host", type=int, default=0,
                   help="GPUs per host (node): each host has its own memory and PCIe root "
                        "(default: 0, every GPU on one host)")
    p.add_argument("--simulate-every-node", action="store_true",
                   help="simulate every node (host) of the system: by default, where --gpus "
                        "fills several nodes that share nothing (no --data-parallel fabric), "
                        "node 0 alone is simulated and every node reported with its figures "
                        "(docs/topologies.md, \"Identical nodes\")")
    p.add_argument("--gpus-per-switch", type=int, default=0,
                   help="GPUs sharing one PCIe switch upstream port (default: 0, no switch)")
    p.add_argument("--workspace", default="", metavar="SIZE",
                   help="cuDNN workspace limit, e.g. 256MiB: the fitted model picks each "
                        "convolution's fastest algorithm whose workspace fits; under "
                        "--kernel-model roofline every convolution kernel gets SIZE (default: "
                        "no limit; 0B under roofline)")
    p.add_argument("--nvme", type=param_type(NVME_COUNT), default=0, metavar="N",
                   help="NVMe SSDs per host, each on a PCIe link of its own behind the host's "
                        "PCIe switches (round robin) or its root complex; every GPU of the "
                        "host stripes its nvme-tier transfers across them (default: 0, none; "
                        "docs/storage.md)")
    add_nvme_preset_option(p)
    p.add_argument("--no-baselines", action="store_true",
                   help="skip the oracle and vDNN baselines")
    p.add_argument("--stats", default="", choices=("", "csv", "json", "txt", "console"),
                   metavar="{csv,json,txt,console}", help="statistic output format (default: csv with --output-directory, "
                        "else none)")
    return p


@record
class SystemSpec(Record):
    """Everything :func:`build` needs to know about one system."""

    gpu: GPUSpec
    link: dict[str, Any]
    options: argparse.Namespace
    #: the host memories' params beyond the GPU preset's (a node's DDR5)
    host_memory: Optional[dict[str, Any]] = None
    #: the element in each GPU's ``workload`` slot and the first GPU's params for it
    workload: tuple[str, dict[str, Any]] = field(default_factory=lambda: (STREAM, {}))
    #: each host has a CPU stepping model states: the workload element needs one
    host_cpu: bool = False
    #: the host platform: each host's CPU socket and its DRAM
    host: HostPlatform = DEFAULT_PLATFORM


def _gpu_system(sst: Any, name: str, spec: SystemSpec, first: bool) -> Any:
    """Add one GPU with its workload and kernel times, HBM, engine and host link; returns the
    host link component."""
    o = spec.options
    gpu = sst.Component(name, "cdma.GPU")
    gpu.addParams({**element_params(o, "cdma.GPU"), "gpu_preset": o.gpu})
    kind, params = spec.workload
    gpu.setSubComponent("workload", kind).addParams(
        params if first or kind != NETWORK else {**params, "write_stream": False})
    _fill_kernels(gpu, o)
    hbm = sst.Component(f"{name}.hbm", "cdma.HBM")
    hbm.addParams({"bandwidth": spec.gpu.dram_bandwidth, "capacity": spec.gpu.dram_capacity})
    sst.Link(f"{name}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    dma = sst.Component(f"{name}.dma", "cdma.CDMAEngine")
    dma.addParams(element_params(o, "cdma.CDMAEngine"))
    algorithm, codec_params = _codec(o)
    if algorithm != "none":  # none: the slot stays empty, a plain copy engine
        from components.codecs import element_type

        codec = dma.setSubComponent("codec", element_type(algorithm))
        codec.addParams(codec_params)
    link = sst.Component(f"{name}.pcie", "cdma.PCIeBridge")
    link.addParams(spec.link)
    sst.Link(f"{name}.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"{name}.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"{name}.l_pcie", "0ps").connect((dma, "pcie"), (link, "gpu"))
    return link


def _drives(sst: Any, o: argparse.Namespace, host: Any, port: int, switches: list[Any],
            engines: list[Any], prefix: str) -> None:
    """``--nvme`` SSDs for one host: each on its own link to the host's switches in turn
    (after their GPUs' ports) or, with none, to the host's root ports from ``port`` on; every
    engine of the host on every drive."""
    params = {"preset": o.nvme_preset, **element_params(o, NVME)}
    for d in range(o.nvme):
        drive = sst.Component(f"{prefix}nvme{d}", NVME)
        drive.addParams(params)
        if switches:
            switch = switches[d % len(switches)]
            up = (switch, f"down{o.gpus_per_switch + d // len(switches)}")
        else:
            up = (host, f"pcie{port + d}")
        sst.Link(f"{prefix}nvme{d}.l_host", "0ps").connect((drive, "host"), up)
        for g, engine in enumerate(engines):
            sst.Link(f"{engine.getFullName()}.l_nvme{d}", "0ps").connect((engine, f"nvme{d}"),
                                                               (drive, f"dma{g}"))


def _workload(o: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The element in the GPU's ``workload`` slot and the first GPU's params for it (it writes
    its stream into the output directory): the ``--workload`` stream file, or the network
    rendered. Where no option places the model states, policy auto's planner may (when the
    element says it plans them); where the element has a host CPU step them, an explicit
    bucket size sizes the gradient buckets copied to it."""
    if o.workload:
        return STREAM, element_params(o, STREAM)
    fitted = o.kernel_model == "fitted"
    params = {**element_params(o, NETWORK),
              "workspace": "0B" if fitted else (o.workspace or "0B"), "write_stream": True}
    states = {"plan_states": "nvme" if o.nvme else "host"}
    if any(explicit(o, name) for name in PLACEMENT_OPTIONS) or \
            not NetworkWorkload.plans_states(_validated(NETWORK, {**params, **states})):
        states = {}  # the options' placement
    if explicit(o, "bucket_size") and _needs_host_cpu(NETWORK, {**params, **states}):
        params["gradient_bucket"] = o.bucket_size  # the buckets copied to the host CPU
    return NETWORK, {**params, **states}


def _needs_host_cpu(element: str, params: dict[str, Any]) -> bool:
    """What the workload element ``element`` says of ``params``: a host CPU steps its model
    states."""
    cls = find_element(element)
    return issubclass(cls, WorkloadSource) and cls.needs_host_cpu(_validated(element, params))


def _validated(element: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as ``element`` reads them (a broken rule of its own refused in the options'
    words)."""
    try:
        return find_element(element).validate_params(params, where=element)
    except ParamRuleError as exc:
        _refuse(exc.reason)


#: the workload params that place the model states (given, ``--policy auto`` leaves them be)
PLACEMENT_OPTIONS = ("optimizer_states", "weights", "gradients")


def _host_cpu(sst: Any, o: argparse.Namespace, host: Any, name: str) -> Any:
    """The host's CPU (``cdma.HostCPU``, one socket of the ``--cpu`` platform) on the host
    memory's ``cpu`` port."""
    cpu = sst.Component(name, HOST_CPU)
    cpu.addParams({"platform": o.cpu, **element_params(o, HOST_CPU)})
    sst.Link(f"{name}.l_memory", "0ps").connect((cpu, "memory"), (host, "cpu"))
    return cpu


def _fill_kernels(gpu: Any, o: argparse.Namespace) -> None:
    """The GPU's ``kernels`` slot: ``--layer-times`` measured (beside ``--kernel-model``), or
    the ``--kernel-model``; a ``--workload`` stream's kernels without a time take the
    roofline."""
    limit = o.workspace if o.kernel_model == "fitted" else ""
    if o.workload:
        kind, params = "cdma.RooflineKernels", element_params(o, "cdma.RooflineKernels")
    elif o.layer_times:
        kind = "cdma.MeasuredKernels"
        # measured times beside the fitted model: the model's params as the options set them
        params = {**element_params(o, kind), "kernel_model": o.kernel_model,
                  "workspace_limit": limit, **element_params(o, FITTED)}
    elif o.kernel_model == "fitted":
        kind, params = FITTED, {"workspace_limit": limit, **element_params(o, FITTED)}
    else:
        kind, params = "cdma.RooflineKernels", element_params(o, "cdma.RooflineKernels")
    gpu.setSubComponent("kernels", kind).addParams(params)


def _host_memory_params(spec: SystemSpec) -> dict[str, Any]:
    """Each host memory's params: one socket's DRAM bandwidth of the platform (or
    ``--cpu-memory-bandwidth``), the pinned pool of the GPU preset's system (a superchip's CPU
    memory) if it names one, and the topology's own."""
    own = element_params(spec.options, HOST_MEMORY)
    capacity = {"pinned_capacity": spec.gpu.host_memory_capacity} \
        if spec.gpu.host_memory_capacity else {}
    return {"bandwidth": spec.host.dram_text, **capacity, **(spec.host_memory or {}), **own}


def _fabric(sst: Any, o: argparse.Namespace) -> None:
    """Data parallel: one ``cdma.NVSwitch`` fabric with every GPU's ``nvlink`` port on its
    ``gpuI`` port (the ring visits them in order)."""
    fabric = sst.Component("nvswitch", "cdma.NVSwitch")
    fabric.addParams(element_params(o, "cdma.NVSwitch"))
    if explicit(o, "bucket_size"):
        fabric.addParam("first_bucket", "0B")  # as DDP given a bucket_cap_mb: every bucket
    for i in range(o.gpus):
        gpu = sst.findComponentByName(f"gpu{i}")
        sst.Link(f"gpu{i}.l_nvlink", "0ps").connect((gpu, "nvlink"), (fabric, f"gpu{i}"))


def _model_states(sst: Any, gpu: str, cpu: Any, cpu_port: str) -> None:
    """The GPU's ``model_states`` slot: the driver of the states the host CPU steps, its
    copies on the engine's ``states`` port and its steps on the CPU's ``cpu_port``."""
    driver = sst.findComponentByName(gpu).setSubComponent("model_states",
                                                          "cdma.ModelStateDriver")
    sst.Link(f"{gpu}.l_states", "0ps").connect((driver, "dma"),
                                               (sst.findComponentByName(f"{gpu}.dma"), "states"))
    sst.Link(f"{gpu}.l_cpu", "0ps").connect((driver, "cpu"), (cpu, cpu_port))


def _system(sst: Any, spec: SystemSpec) -> None:
    """Add ``--gpus`` GPUs, their switches and host memories: one host per ``--gpus-per-host``
    GPUs (a DGX-1 node holds eight), all on one host when that is 0."""
    o = spec.options
    per_host = o.gpus_per_host or o.gpus
    hosts = -(-o.gpus // per_host)  # the names of the whole system's, node 0 alone or not
    host = None
    port = 0
    switch = None
    cpu = None
    switches: list[Any] = []
    engines: list[Any] = []
    for i in range(o.gpus // o.node_copies):
        if i % per_host == 0:
            h = i // per_host
            host = sst.Component("host" if hosts == 1 else f"host{h}", "cdma.HostMemory")
            host.addParams(_host_memory_params(spec))
            port = 0
            if spec.host_cpu:
                cpu = _host_cpu(sst, o, host, "cpu" if hosts == 1 else f"cpu{h}")
            switches, engines = [], []
        link = _gpu_system(sst, f"gpu{i}", spec, i == 0)
        engines.append(sst.findComponentByName(f"gpu{i}.dma"))
        if cpu is not None:
            _model_states(sst, f"gpu{i}", cpu, f"gpu{i % per_host}")
        if o.gpus_per_switch:
            k, j = divmod(i, o.gpus_per_switch)
            if j == 0:
                switch = sst.Component(f"switch{k}", "cdma.PCIeSwitch")
                switch.addParams({**{k2: v for k2, v in spec.link.items()}, "latency": "0ns"})
                sst.Link(f"switch{k}.l_up", "0ps").connect((switch, "up"), (host, f"pcie{port}"))
                port += 1
                switches.append(switch)
            sst.Link(f"gpu{i}.l_host", "0ps").connect((link, "host"), (switch, f"down{j}"))
        else:
            sst.Link(f"gpu{i}.l_host", "0ps").connect((link, "host"), (host, f"pcie{port}"))
            port += 1
        if o.nvme and (i % per_host == per_host - 1 or i == o.gpus - 1):
            _drives(sst, o, host, port, switches, engines, "" if hosts == 1 else f"host{h}.")
    if o.data_parallel:
        _fabric(sst, o)


def _refuse(message: str) -> NoReturn:
    """Refuse the model options: one line, ``message`` naming them and the fault."""
    raise ConfigError(f"model option error: {message}")


#: memory a simulated GPU takes, its oracle and vDNN copies included: the peak resident size of
#: ``pascal_cdma.py --network alexnet --batch 32`` grew from 59.4 MiB at --gpus 16 to 93.3 MiB
#: at --gpus 64 (a lower bound: bigger networks take more)
GPU_MEMORY_BYTES = 700 * 1024


def _check_memory(gpus: int, simulated: int) -> None:
    """Refuse a GPU count whose simulation (of ``simulated`` GPUs) cannot fit in this
    machine's memory."""
    need, have = simulated * GPU_MEMORY_BYTES, available_memory()
    if have is not None and need > have:
        shown = f"{gpus}" if simulated == gpus else f"{gpus} ({simulated} simulated)"
        _refuse(f"--gpus {shown} needs at least {need / 2**30:.1f} GiB of memory (about "
                f"{GPU_MEMORY_BYTES / 2**20:.1f} MiB per simulated GPU, baselines included), "
                f"more than the {have / 2**30:.1f} GiB this process may use")


def node_copies(o: argparse.Namespace) -> int:
    """How many nodes node 0 stands for (1: every GPU simulated): the hosts ``--gpus`` fills,
    where it fills them all alike and nothing joins them (no data-parallel fabric), unless
    ``--simulate-every-node``."""
    per_host = o.gpus_per_host or o.gpus
    if o.simulate_every_node or o.data_parallel or o.gpus % per_host:
        return 1
    return o.gpus // per_host


def node_strides(o: argparse.Namespace) -> str:
    """The reporter's ``node_strides``: how many GPUs, hosts, host CPUs and switches a node
    holds (:mod:`components.node_twins`)."""
    per_host = o.gpus_per_host or o.gpus
    switches = per_host // o.gpus_per_switch if o.gpus_per_switch else 0
    return f"gpu:{per_host} host:1 cpu:1 switch:{switches}"


def _check_topology(o: argparse.Namespace) -> None:
    """The topology's own options: counts and how GPUs group into hosts and switches (and
    how many nodes node 0 stands for, ``o.node_copies``)."""
    if o.gpus < 1:
        _refuse(f"--gpus must be >= 1, got {o.gpus}")
    if o.gpus_per_host < 0:
        _refuse(f"--gpus-per-host must be >= 0 (0: one host), got {o.gpus_per_host}")
    o.node_copies = node_copies(o)
    _check_memory(o.gpus, o.gpus // o.node_copies)
    if o.gpus_per_switch < 0:
        _refuse(f"--gpus-per-switch must be >= 0 (0: no switch), got {o.gpus_per_switch}")
    if o.data_parallel and o.gpus < 2:
        _refuse(f"--data-parallel needs at least 2 GPUs to reduce gradients among, got --gpus "
                f"{o.gpus} (give --gpus N or --no-data-parallel)")
    try:
        o.workspace_bytes = parse_bytes(o.workspace) if o.workspace else 0
    except UnitError as exc:
        _refuse(f"--workspace: {exc}")
    except ValueError:  # a number of more digits than Python converts
        _refuse(f"--workspace: {len(o.workspace)} characters is not a size (e.g. 256MiB)")


#: the options that describe the ``--nvme`` SSDs: their preset, how the engines reach them,
#: and the SSD element's own
NVME_OPTIONS = ("nvme_preset", "nvme_path", *(opt.dest for opt in options_of(NVME)))


def add_nvme_preset_option(p: argparse.ArgumentParser) -> None:
    """``--nvme-preset NAME``: the datasheet of the ``--nvme`` SSDs (a :data:`SSDS` name)."""
    p.add_argument("--nvme-preset", default=DEFAULT_SSD, metavar="NAME",
                   help=f"the SSDs' datasheet: {', '.join(sorted(SSDS))} (default: "
                        f"{DEFAULT_SSD}; docs/storage.md)")


def _check_storage(o: argparse.Namespace) -> None:
    """``--nvme N`` SSDs: a count, a known preset, and the options that need them."""
    from difflib import get_close_matches

    if o.nvme_preset not in SSDS:
        close = get_close_matches(o.nvme_preset, SSDS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        _refuse(f"--nvme-preset {o.nvme_preset!r} is not a known SSD ({hint}one of "
                f"{', '.join(sorted(SSDS))}; docs/storage.md)")
    if o.offload_to == "nvme" and not o.nvme:
        _refuse("--offload-to nvme needs an NVMe SSD to offload to: give --nvme N (N >= 1)")
    for name in ("optimizer_states", "weights"):
        if getattr(o, name, "gpu") != "nvme":
            continue
        flag = f"--{name.replace('_', '-')} nvme"
        if not o.nvme:
            _refuse(f"{flag} needs an NVMe SSD to hold it: this system has no NVMe element "
                    "(give --nvme N, N >= 1)")
    if not o.nvme:
        for name in NVME_OPTIONS:
            if explicit(o, name):
                _refuse(f"{explicit(o, name)} needs --nvme N: it describes the SSDs, and this "
                        "run has none")


def _check_links(o: argparse.Namespace, link_name: str) -> None:
    """The host link and the switches and hosts GPUs share: an error naming both options."""
    nvlink = LINKS[link_name]["protocol"] != "pcie"  # type: ignore[index]
    if o.pcie_gen is not None and nvlink:
        _refuse(f"--pcie-gen {o.pcie_gen} contradicts --link {link_name}: the generation "
                "applies to a PCIe host link, and this one is NVLink; pick a PCIe --link")
    chosen: Any = LINKS[link_name]
    if o.pcie_gen is not None and explicit(o, "link") and \
            (chosen["generation"], chosen["lanes"]) != (o.pcie_gen, 16):
        _refuse(f"--pcie-gen {o.pcie_gen} contradicts --link {link_name} (PCIe gen "
                f"{chosen['generation']} x{chosen['lanes']}): give one of them"
                + (f" (--link pcie{o.pcie_gen}x16 is gen {o.pcie_gen} x16)"
                   if f"pcie{o.pcie_gen}x16" in LINKS else ""))
    if o.gpus_per_switch and nvlink:
        _refuse(f"--gpus-per-switch {o.gpus_per_switch} contradicts --link {link_name}: GPUs "
                "share a PCIe switch, and this host link is NVLink")
    if o.gpus_per_host and o.gpus_per_switch and o.gpus_per_host % o.gpus_per_switch:
        default = "" if explicit(o, "gpus_per_host") else " (this topology's default)"
        _refuse(f"--gpus-per-host {o.gpus_per_host}{default} is not a multiple of "
                f"--gpus-per-switch {o.gpus_per_switch} (a switch sits in one host)")


def _host_platform(o: argparse.Namespace, default: str) -> HostPlatform:
    """The ``--cpu`` platform: given, else the GPU's own host on a superchip, else the
    topology's; an unknown name is refused naming the closest. Sets ``o.cpu`` to it."""
    o.cpu = o.cpu or GPU_HOSTS.get(o.gpu) or default
    fault = platform_fault(o.cpu)
    if fault:
        _refuse(f"--cpu {o.cpu!r} is {fault}")
    return PLATFORMS[o.cpu]


def _check_dram(o: argparse.Namespace, host: HostPlatform) -> None:
    """``--cpu-memory-bandwidth``: at least the host CPU step's traffic floor (the slowest
    CPU Adam a host may run, on one core, at the step's bytes a parameter) and at most the
    raw rate of the platform's channels."""
    text = o.cpu_memory_bandwidth
    if text is None:
        return
    given = parse_bandwidth(text)
    floor = step_traffic_floor()
    if given < floor:
        _refuse(f"--cpu-memory-bandwidth {text} is below the host CPU step's traffic floor, "
                f"{floor / 1e6:g} MB/s: the slowest CPU Adam a host may run "
                f"({MIN_PARAMS_PER_S:g} parameters/s on one core) at the step's "
                f"{floor / MIN_PARAMS_PER_S:g} bytes a parameter")
    if given > host.dram_bandwidth:
        _refuse(f"--cpu-memory-bandwidth {text} is above the raw rate of the --cpu "
                f"{host.name} platform's memory channels, {host.dram_bandwidth / 1e9:g} GB/s "
                f"per socket ({host.channels_per_socket} channels of {host.memory}): pick a "
                "--cpu whose DRAM is that fast")


def _note_adam_cpu(o: argparse.Namespace, host: HostPlatform) -> None:
    """A ``--cpu-adam-file`` measured on another CPU than the host platform's: one warning
    naming both CPUs and saying how its rate was carried to the host's core (scaled, or taken
    unscaled where the table knows neither the CPU nor the file its width and clock); a file
    the element cannot read is its own to refuse."""
    if not o.cpu_adam_file:
        return
    try:
        profile = load_cpu_adam(o.cpu_adam_file)
    except CpuAdamError:
        return
    notices = current_graph().notices
    origin = adam_origin(profile.cpu, profile.shipped, host, profile.simd_bits,
                         profile.cpu_mhz)
    note = origin.note(f"--cpu-adam-file {o.cpu_adam_file}")
    if note and note not in notices:
        notices.append(note)


def _check_rules(chosen: Chosen) -> None:
    """The rules between options (:mod:`sst_cdma.builder.option_rules`) and the engine's own
    rules between its params, as the options set them."""
    fault = broken_rule(chosen)
    if fault:
        _refuse(fault)
    _validated(ENGINE, element_params(chosen.options, ENGINE))
    fault = broken_rule(chosen, STREAM_RULES)
    if fault:
        _refuse(fault)


def _codec(o: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The codec in each engine's slot and its params: the options', and with ``--engine
    blackwell-de`` the Decompression Engine's preset for those the options do not give."""
    algorithm, params = o.algorithm, element_params(o, CODEC)
    if o.engine == "blackwell-de":
        given = {name: value for name, value in DECOMPRESSION_ENGINE.items()
                 if not explicit(o, name)}
        algorithm = given.pop("algorithm", algorithm)
        params.update({name: value for name, value in given.items() if name in params})
    return algorithm, params


def _check_kernel_times(o: argparse.Namespace) -> None:
    """The network renders, the fitted model prices this preset, and a layer-times file
    matches the network (and, measured on another preset, can be scaled)."""
    from workloads import NETWORKS, WorkloadError, load_network
    from workloads.layer_times import kernel_times_source, load_layer_times
    from workloads.loader import CAPTURE_NETWORKS, network_path

    from sst_cdma.model.kernel_model import ModelError

    try:
        network_path(o.network)
    except WorkloadError:
        if o.network.endswith((".yaml", ".yml")) or os.sep in o.network:
            _refuse(f"--network {o.network}: no such file")
        import difflib

        names = NETWORKS + CAPTURE_NETWORKS
        close = difflib.get_close_matches(o.network, names, n=1)
        _refuse(f"unknown network {o.network!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + f" (one of {', '.join(names)}, or a .yaml network definition)")
    if o.layer_times:
        try:
            measured = load_layer_times(o.layer_times)
            net = load_network(o.network, getattr(o, "seq_len", 0) or 0,
                               getattr(o, "attention", "") or "")
            measured.check(net, o.batch, o.dtype)
        except WorkloadError as exc:
            _refuse(f"--layer-times: {exc}")
        if measured.gpu and measured.gpu != o.gpu and o.kernel_model != "fitted":
            _refuse(f"--layer-times {o.layer_times} was measured on GPU preset "
                    f"{measured.gpu!r}, not {o.gpu!r}: scaling it needs --kernel-model fitted")
    try:
        kernel_times_source(o.kernel_model, o.gpu)
    except ModelError as exc:
        _refuse(f"--gpu {o.gpu}: {exc}")
    if o.kernel_model == "fitted":
        from sst_cdma.model.fitted import kernel_model_for

        model = kernel_model_for(o.gpu)
        try:
            model.tf32_mode(o.tf32)
            if getattr(o, "attention", ""):
                model.attention_kernel(o.attention)
        except ModelError as exc:
            _refuse(str(exc))


def build(sst: Any, argv: Sequence[str], prog: str, gpu: str = "pascal",
          link: Optional[str] = None, gpus: int = 1, gpus_per_switch: int = 0,
          gpus_per_host: int = 0,
          system: str = "", data_parallel: bool = False,
          host_memory: Optional[dict[str, Any]] = None,
          cpu: str = DEFAULT_PLATFORM.name) -> argparse.Namespace:
    """Parse the model options and add the main system plus its oracle and vDNN baselines;
    ``cpu`` is the topology's host platform (``--cpu`` overrides it)."""
    parser = _cached_parser(prog, gpu, link, gpus, cpu,
                            (("gpus_per_switch", gpus_per_switch),
                             ("gpus_per_host", gpus_per_host), ("data_parallel", data_parallel)),
                            _parser_inputs())
    o = parser.parse_args(list(argv))
    o.given = given_options(argv, parser)
    speak_flags(flag_words())  # errors raised below name the flags the user typed
    spec_gpu = GPUS[o.gpu]
    link_name = o.link or spec_gpu.host_link
    host = _host_platform(o, cpu)
    _check_dram(o, host)
    _check_topology(o)
    _check_storage(o)
    _check_links(o, link_name)
    workload = _workload(o)
    host_cpu = _needs_host_cpu(*workload)
    _check_rules(Chosen(o, host_cpu))
    if host_cpu:
        _note_adam_cpu(o, host)
    if not o.workload:
        _check_kernel_times(o)
    # the preset, then what the options set on the link through its params' declarations
    # (--pcie-gen: 'generation'; refused above on an NVLink preset)
    link_params = {**LINKS[link_name], **element_params(o, LINK)}
    spec = SystemSpec(spec_gpu, link_params, o, host_memory, workload, host_cpu, host)
    _system(sst, spec)
    if not o.no_baselines:
        add_baselines()
    reporter = sst.Component("report", "cdma.Reporter")
    if o.node_copies > 1:
        reporter.addParams({"nodes": o.node_copies, "node_strides": node_strides(o)})
    if system:  # the topology's own name for its shape, which --gpus may have changed
        reporter.addParam("system", system if o.gpus == gpus else
                          f"{system}, run with {o.gpus} of its {gpus} GPUs")
    options = sst.getProgramOptions()
    # statistics are written where there is a folder for them; a saved graph carries them
    # so that replaying it into a folder writes them too
    fmt = o.stats or ("csv" if any(options.get(k) for k in ("output-directory", "output-json",
                                                             "output-config")) else "")
    if fmt:
        sst.setStatisticLoadLevel(2)
        sst.enableAllStatisticsForAllComponents()
        kind = {"csv": "CSV", "json": "JSON", "txt": "TXT", "console": "Console"}[fmt]
        params = {} if fmt == "console" else {"filepath": f"StatisticOutput.{fmt}"}
        sst.setStatisticOutput(f"sst.statOutput{kind}", params)
        if not o.stats:  # there for a saved graph: written where there is a folder only
            reporter.addParam("statistics_need_folder", "true")
    return o
