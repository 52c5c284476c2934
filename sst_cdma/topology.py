"""Building blocks for cDMA topology scripts: the model options every topology takes, and
functions that add a GPU system (cores, HBM, cDMA engine, host link) to the configuration with
the ``sst`` API. A topology script picks a GPU and a host link and calls :func:`build`.

Every run also simulates the same network as the *oracle* (no offload, on a hypothetical GPU
with enough memory) and as *vDNN* (offload without compression), in separate systems of the
same graph, so the summary can put the speed-up in front of the user.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from .codecs.registry import ALGORITHM_CHOICES
from .config import ConfigError
from .model.gpus import GPUS, GPUSpec
from .model.links import MIN_DMA_BURST
from .units import UnitError, parse_bytes

LINKS = {
    "pcie3x16": {"protocol": "pcie", "generation": 3, "lanes": 16},
    "pcie4x16": {"protocol": "pcie", "generation": 4, "lanes": 16},
    "pcie5x16": {"protocol": "pcie", "generation": 5, "lanes": 16},
    "nvlink2x3": {"protocol": "nvlink", "nvlink_links": 3, "nvlink_rate": "25GB/s"},
    "nvlink1x4": {"protocol": "nvlink", "nvlink_links": 4, "nvlink_rate": "20GB/s"},
}


class ModelOptionParser(argparse.ArgumentParser):
    """argparse whose errors become ConfigError (one line, naming the option) instead of
    printing usage and exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        """Raise instead of exiting."""
        raise ConfigError(f"model option error: {message}")


def finite_float(text: str) -> float:
    """An argparse type: a float that is neither NaN nor infinite (NaN would pass every range
    check, since it compares false with everything)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def option_parser(prog: str, gpu: str = "pascal", link: Optional[str] = None,
                  gpus: int = 1) -> ModelOptionParser:
    """The model options of every cDMA topology (defaults differ per script)."""
    p = ModelOptionParser(prog=prog, description="cDMA system model options")
    p.add_argument("--network", default="vgg16", help="alexnet overfeat nin vgg16 squeezenet "
                   "googlenet resnet50, or a network definition file")
    p.add_argument("--batch", type=int, default=64, help="batch size")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--policy", default="conv", choices=("none", "all", "conv"),
                   help="vDNN offload policy")
    p.add_argument("--algorithm", default="zvc", choices=ALGORITHM_CHOICES,
                   help="cDMA compression algorithm")
    p.add_argument("--mode", default="flow", choices=("flow", "chunk"),
                   help="bandwidth model: flows (exact, fast) or bursts through buffers")
    p.add_argument("--gpu", default=gpu, choices=sorted(GPUS), help="GPU preset")
    p.add_argument("--link", default=link, choices=sorted(LINKS),
                   help="host link (default: the GPU preset's)")
    p.add_argument("--pcie-gen", type=int, choices=(3, 4, 5, 6), default=None,
                   help="override the PCIe generation of the host link")
    p.add_argument("--gpus", type=int, default=gpus, help="number of GPUs")
    p.add_argument("--gpus-per-host", type=int, default=0,
                   help="GPUs per host (node): each host has its own memory and PCIe root "
                        "(0: every GPU on one host)")
    p.add_argument("--gpus-per-switch", type=int, default=0,
                   help="GPUs sharing one PCIe switch upstream port (0: no switch)")
    p.add_argument("--engines", type=int, default=8, help="cDMA engines per GPU")
    p.add_argument("--engine-throughput", default="32GB/s",
                   help="uncompressed bytes/s per engine")
    p.add_argument("--burst", default="1MiB", help="burst size in chunk mode (at least 4KiB, "
                   "one page)")
    p.add_argument("--buffer", default="4MiB", help="engine staging buffer in chunk mode (at "
                   "least one burst)")
    p.add_argument("--progress", type=finite_float, default=0.5,
                   help="training progress (0..1) at which densities are taken")
    p.add_argument("--profile", default="", help="density profile (name or JSON path)")
    p.add_argument("--workload", default="", help="run this workload stream file instead of "
                   "rendering one for --network/--batch/--policy")
    p.add_argument("--kernel-model", default="fitted", choices=("fitted", "roofline"),
                   help="how kernels are priced: 'fitted' (algorithm-aware model fitted to "
                        "measured cuDNN kernels, docs/kernel_model.md) or 'roofline' (peak "
                        "FLOP/s x --compute-efficiency against DRAM bandwidth) (default fitted)")
    p.add_argument("--compute-efficiency", type=finite_float, default=0.6, metavar="E",
                   help="fraction of peak FLOP/s the roofline's kernels reach (default 0.6; "
                        "only with --kernel-model roofline; sst-cdma time-layers --gpu derives "
                        "one from measured times)")
    p.add_argument("--optimizer", default="none", choices=("none", "sgd", "momentum", "adam"),
                   help="end the iteration with this optimizer's step: its state in GPU "
                        "memory, one update kernel per layer with weights (default none)")
    p.add_argument("--allocation", default="liveness", choices=("liveness", "network-wide"),
                   help="GPU memory allocation: liveness (a buffer from its birth to its death, "
                        "default) or network-wide (vDNN's baseline: every buffer but the "
                        "offloaded ones for the whole iteration)")
    p.add_argument("--workspace", default="", metavar="SIZE",
                   help="cuDNN workspace limit, e.g. 256MiB: the fitted model picks each "
                        "convolution's fastest algorithm whose workspace fits (default: no "
                        "limit); under --kernel-model roofline every convolution kernel gets "
                        "SIZE (default 0B)")
    p.add_argument("--layer-times", default="", metavar="FILE",
                   help="measured kernel times per layer (sst-cdma time-layers writes one) "
                        "instead of the kernel model; measured on another --gpu preset (the "
                        "file's 'gpu'), they are scaled by the model")
    p.add_argument("--tensors", default="", help="NPZ of real tensors for the cDMA engine")
    p.add_argument("--functional", action="store_true",
                   help="move and check real compressed bytes (needs --tensors)")
    p.add_argument("--no-contention", action="store_true",
                   help="kernels do not compete with DMA for DRAM bandwidth")
    p.add_argument("--no-baselines", action="store_true",
                   help="skip the oracle and vDNN baselines")
    p.add_argument("--stats", default="", choices=("", "csv", "json", "txt", "console"),
                   help="statistic output format (default: csv with --output-directory, "
                        "else none)")
    return p


@dataclass
class SystemSpec:
    """Everything :func:`build` needs to know about one system."""

    gpu: GPUSpec
    link: dict[str, Any]
    options: argparse.Namespace


def _gpu_system(sst: Any, name: str, spec: SystemSpec, policy: str, algorithm: str,
                unlimited: bool, label: str) -> tuple[Any, Any]:
    """Add one GPU with its HBM, engine and host link; returns (gpu, link component)."""
    o = spec.options
    gpu = sst.Component(name, "cdma.GPU")
    fitted = o.kernel_model == "fitted"
    gpu.addParams({"network": o.network, "batch": o.batch, "dtype": o.dtype, "policy": policy,
                   "peak_flops": spec.gpu.peak_flops, "label": label,
                   "kernel_model": o.kernel_model, "gpu_preset": o.gpu,
                   "workspace_limit": o.workspace if fitted else "",
                   "memory_capacity": "0B" if unlimited else spec.gpu.dram_capacity,
                   "compute_efficiency": o.compute_efficiency,
                   "hbm_contention": not o.no_contention, "layer_times": o.layer_times,
                   "optimizer": o.optimizer,
                   "workspace": "0B" if fitted else (o.workspace or "0B"),
                   "allocation": o.allocation,
                   "write_stream": label == "main" and name == "gpu0",
                   "workload": o.workload if label == "main" else ""})
    hbm = sst.Component(f"{name}.hbm", "cdma.HBM")
    hbm.addParams({"bandwidth": spec.gpu.dram_bandwidth, "capacity": spec.gpu.dram_capacity,
                   "unlimited": unlimited})
    sst.Link(f"{name}.l_hbm", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    if policy == "none":
        return gpu, None
    dma = sst.Component(f"{name}.dma", "cdma.CDMAEngine")
    dma.addParams({"algorithm": algorithm, "engines": o.engines,
                   "engine_throughput": o.engine_throughput, "mode": o.mode, "burst": o.burst,
                   "buffer": o.buffer, "progress": o.progress, "profile": o.profile,
                   "tensors": o.tensors, "functional": o.functional})
    link = sst.Component(f"{name}.pcie", "cdma.PCIeBridge")
    link.addParams(spec.link)
    sst.Link(f"{name}.l_dma", "0ps").connect((gpu, "dma"), (dma, "gpu"))
    sst.Link(f"{name}.l_dram", "0ps").connect((dma, "hbm"), (hbm, "dma"))
    sst.Link(f"{name}.l_pcie", "0ps").connect((dma, "pcie"), (link, "gpu"))
    return gpu, link


def _system(sst: Any, prefix: str, spec: SystemSpec, policy: str, algorithm: str,
            unlimited: bool, label: str) -> None:
    """Add ``--gpus`` GPUs, their switches and host memories under ``prefix``: one host per
    ``--gpus-per-host`` GPUs (a DGX-1 node holds eight), all on one host when that is 0."""
    o = spec.options
    per_host = o.gpus_per_host or o.gpus
    hosts = -(-o.gpus // per_host)
    host = None
    port = 0
    switch = None
    for i in range(o.gpus):
        if i % per_host == 0:
            h = i // per_host
            host = sst.Component(f"{prefix}host" if hosts == 1 else f"{prefix}host{h}",
                                 "cdma.HostMemory")
            port = 0
        _, link = _gpu_system(sst, f"{prefix}gpu{i}", spec, policy, algorithm, unlimited, label)
        if link is None:
            continue
        if o.gpus_per_switch:
            k, j = divmod(i, o.gpus_per_switch)
            if j == 0:
                switch = sst.Component(f"{prefix}switch{k}", "cdma.PCIeSwitch")
                switch.addParams({**{k2: v for k2, v in spec.link.items()}, "latency": "0ns"})
                sst.Link(f"{prefix}switch{k}.l_up", "0ps").connect((switch, "up"),
                                                                   (host, f"pcie{port}"))
                port += 1
            sst.Link(f"{prefix}gpu{i}.l_host", "0ps").connect((link, "host"), (switch, f"down{j}"))
        else:
            sst.Link(f"{prefix}gpu{i}.l_host", "0ps").connect((link, "host"), (host, f"pcie{port}"))
            port += 1


def _check_burst(o: argparse.Namespace) -> None:
    """--burst is at least one 4 KiB page (:data:`MIN_DMA_BURST`) and --buffer holds a burst."""
    try:
        burst = parse_bytes(o.burst)
    except UnitError as exc:
        raise ConfigError(f"model option error: --burst: {exc}") from None
    try:
        buffer = parse_bytes(o.buffer)
    except UnitError as exc:
        raise ConfigError(f"model option error: --buffer: {exc}") from None
    if burst < MIN_DMA_BURST:
        raise ConfigError(f"model option error: --burst {o.burst} is smaller than a DMA burst "
                          f"can be: at least {MIN_DMA_BURST} B (one 4 KiB page; docs/model.md)")
    if buffer < burst:
        raise ConfigError(f"model option error: --buffer {o.buffer} is smaller than one "
                          f"--burst ({o.burst}): the staging buffer must hold a burst")


def build(sst: Any, argv: Sequence[str], prog: str, gpu: str = "pascal",
          link: Optional[str] = None, gpus: int = 1, gpus_per_switch: int = 0,
          gpus_per_host: int = 0,
          system: str = "") -> argparse.Namespace:
    """Parse the model options and add the main system plus its oracle and vDNN baselines."""
    parser = option_parser(prog, gpu, link, gpus)
    parser.set_defaults(gpus_per_switch=gpus_per_switch, gpus_per_host=gpus_per_host)
    o = parser.parse_args(list(argv))
    if o.batch < 1:
        raise ConfigError(f"model option error: --batch must be >= 1, got {o.batch}")
    if o.gpus < 1:
        raise ConfigError(f"model option error: --gpus must be >= 1, got {o.gpus}")
    if o.engines < 1:
        raise ConfigError(f"model option error: --engines must be >= 1, got {o.engines}")
    if o.gpus_per_host < 0:
        raise ConfigError(f"model option error: --gpus-per-host must be >= 0 (0: one host), "
                          f"got {o.gpus_per_host}")
    if o.gpus_per_host and o.gpus_per_switch and o.gpus_per_host % o.gpus_per_switch:
        raise ConfigError(f"model option error: --gpus-per-host {o.gpus_per_host} is not a "
                          f"multiple of --gpus-per-switch {o.gpus_per_switch} (a switch sits "
                          "in one host)")
    if o.gpus_per_switch < 0:
        raise ConfigError(f"model option error: --gpus-per-switch must be >= 0 (0: no switch), "
                          f"got {o.gpus_per_switch}")
    _check_burst(o)
    if not 0.0 < o.compute_efficiency <= 1.0:
        raise ConfigError(f"model option error: --compute-efficiency must be in (0, 1], got "
                          f"{o.compute_efficiency}")
    if not 0.0 <= o.progress <= 1.0:
        raise ConfigError(f"model option error: --progress must be in [0, 1], got {o.progress}")
    from .workloads import NETWORKS, WorkloadError
    from .workloads.loader import network_path

    try:
        network_path(o.network)
    except WorkloadError:
        raise ConfigError(f"model option error: unknown network {o.network!r} (one of "
                          f"{', '.join(NETWORKS)}, digits_cnn, or a .yaml network definition)") \
            from None
    try:
        workspace = parse_bytes(o.workspace) if o.workspace else 0
    except UnitError as exc:
        raise ConfigError(f"model option error: --workspace: {exc}") from None
    if o.workload and (o.optimizer != "none" or workspace):
        raise ConfigError("model option error: --optimizer and --workspace apply to a --network; "
                          "a --workload stream declares its own")
    if o.workload and o.allocation != "liveness":
        raise ConfigError("model option error: --allocation applies to a --network; a --workload "
                          "stream's alloc and free ops are its own")
    if o.kernel_model == "roofline":
        kernel_times = "roofline"
    else:
        from .model.fitted import kernel_model_for
        from .model.kernel_model import ModelError
        try:
            kernel_times = kernel_model_for(o.gpu).description
        except ModelError as exc:
            raise ConfigError(f"model option error: --gpu {o.gpu}: {exc}") from None
    if o.layer_times:
        if o.workload:
            raise ConfigError("model option error: --layer-times applies to a --network; a "
                              "--workload stream carries its own time= keys")
        from .workloads import load_network
        from .workloads.layer_times import load_layer_times
        try:
            measured = load_layer_times(o.layer_times)
            measured.check(load_network(o.network), o.batch, o.dtype)
        except WorkloadError as exc:
            raise ConfigError(f"model option error: --layer-times: {exc}") from None
        kernel_times = f"measured on {measured.device} ({o.layer_times})"
        if measured.gpu and measured.gpu != o.gpu:
            if o.kernel_model != "fitted":
                raise ConfigError(f"model option error: --layer-times {o.layer_times} was "
                                  f"measured on GPU preset {measured.gpu!r}, not {o.gpu!r}: "
                                  "scaling it needs --kernel-model fitted")
            kernel_times += (f", predicted for {o.gpu} from {measured.gpu} by the kernel "
                             "model's per-layer ratio")
    if o.workload and not o.no_baselines:
        raise ConfigError("model option error: --workload needs --no-baselines: the oracle "
                          "(the same stream with nothing offloaded) cannot be derived from an "
                          "arbitrary stream, and baselines rendered from --network would "
                          "compare another workload")
    spec_gpu = GPUS[o.gpu]
    link_name = o.link or spec_gpu.host_link
    link_params = dict(LINKS[link_name])
    if o.pcie_gen is not None and link_params["protocol"] != "pcie":
        raise ConfigError(f"model option error: --pcie-gen {o.pcie_gen} applies to a PCIe host "
                          f"link, and the link is {link_name} (NVLink); pick a PCIe --link "
                          "instead")
    if o.pcie_gen is not None:
        link_params = {"protocol": "pcie", "generation": o.pcie_gen, "lanes": 16}
    spec = SystemSpec(spec_gpu, link_params, o)
    _system(sst, "", spec, o.policy, o.algorithm, False, "main")
    if not o.no_baselines:
        _system(sst, "oracle.", replace(spec), "none", "none", True, "oracle")
        _system(sst, "vdnn.", replace(spec), o.policy if o.policy != "none" else "conv", "none",
                False, "vdnn")
    reporter = sst.Component("report", "cdma.Reporter")
    reporter.addParam("kernel_times", kernel_times)
    reporter.addParam("system", system or f"{spec_gpu.name}, {link_name if o.pcie_gen is None else f'pcie{o.pcie_gen}x16'}, "
                      f"{o.gpus} GPU(s)")
    options = sst.getProgramOptions()
    fmt = o.stats or ("csv" if options.get("output-directory") else "")
    if fmt:
        sst.setStatisticLoadLevel(2)
        sst.enableAllStatisticsForAllComponents()
        kind = {"csv": "CSV", "json": "JSON", "txt": "TXT", "console": "Console"}[fmt]
        params = {} if fmt == "console" else {"filepath": f"StatisticOutput.{fmt}"}
        sst.setStatisticOutput(f"sst.statOutput{kind}", params)
    return o
