"""Model options generated from the elements' declared params: each option that sets an
element param is declared once, by the param (kind, default, choices, range, units, doc), and
this table only says which option sets which param. ``--help`` shows each default; a value
the param refuses is one line naming the option.

Options that shape the topology itself (``--gpu``, ``--link``, ``--gpus``...) are declared by
:mod:`sst_cdma.builder.topology`; this module knows nothing of them.
"""
from __future__ import annotations

import argparse
from typing import Any, Optional, Sequence

from sst_cdma.engine.element import Param, ParamError
from sst_cdma.engine.library import find_element, slot_interface
from sst_cdma.engine.param_words import Flag
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.compression import ALGORITHMS

__all__ = ["ElementOption", "ELEMENT_OPTIONS", "PIPELINE_OPTIONS", "STAGE", "PORTS",
           "add_element_options", "element_params", "given_options", "declared_param",
           "option_param", "param_type", "CODEC", "HOST_MEMORY",
           "RENDERED_ONLY", "options_of", "flag_words"]

#: ``default`` of an option whose default is "not given" (the topology decides)
UNSET = None


@frozen_record
class ElementOption(FrozenRecord):
    """One model option that sets one element param. ``default`` overrides the param's own
    default for topology scripts (``"vgg16"`` for the GPU's network); ``invert`` makes a flag
    that sets a boolean param false (``--no-contention``); ``unset_help`` is the help text's
    default where the option's default is "not given" (or the empty choice, ``--tf32``'s)."""

    flag: str
    element: str
    param: str
    default: Any = ...
    invert: bool = False
    unset_help: str = ""
    #: a flag that also has a ``--no-`` form, so a topology can turn it on by default
    negatable: bool = False
    #: the option's own declaration, for an option that picks the element filling a slot
    #: rather than set a param (``--algorithm``: the codec in the engine's slot); the topology
    #: reads it, :func:`element_params` leaves it out
    declaration: Optional[Param] = None

    @property
    def dest(self) -> str:
        """The argparse destination: the flag without dashes, dashes as underscores."""
        return self.flag.lstrip("-").replace("-", "_")


GPU, ENGINE, LINK, FABRIC = "cdma.GPU", "cdma.CDMAEngine", "cdma.PCIeBridge", "cdma.NVSwitch"
#: the SSDs of ``--nvme N``
NVME = "cdma.NVMe"
#: the subcomponent in the engine's ``codec`` slot (``ELEMENT:SLOT``): its params are declared
#: by the slot's interface, which every codec element shares
CODEC = f"{ENGINE}:codec"
#: which codec fills the engine's slot (``none``: it stays empty, a plain copy engine)
ALGORITHM = Param("algorithm", "str", "zvc", "compression algorithm (with --engine "
                  "blackwell-de: lz4 unless given, as the Decompression Engine decodes lz4 and "
                  "zlib, not zvc)", choices=ALGORITHMS)
#: the elements of the GPU's workload and kernels slots whose params options set
NETWORK, STREAM = "cdma.NetworkWorkload", "cdma.StreamWorkload"
ROOFLINE, MEASURED = "cdma.RooflineKernels", "cdma.MeasuredKernels"
FITTED = "cdma.FittedKernels"
#: the host CPU stepping model states kept in host memory (ZeRO-Offload)
HOST_CPU = "cdma.HostCPU"
#: the host memory (one socket's DRAM) that offloads and the host CPU's step share
HOST_MEMORY = "cdma.HostMemory"

ELEMENT_OPTIONS: tuple[ElementOption, ...] = (
    ElementOption("--network", NETWORK, "network", default="vgg16"),
    ElementOption("--batch", NETWORK, "batch"),
    ElementOption("--seq-len", NETWORK, "seq_len"),
    ElementOption("--attention", NETWORK, "attention",
                  unset_help="the network definition's"),
    ElementOption("--dtype", NETWORK, "dtype"),
    ElementOption("--policy", NETWORK, "policy"),
    ElementOption("--plan", NETWORK, "plan"),
    ElementOption("--algorithm", CODEC, "algorithm", declaration=ALGORITHM),
    ElementOption("--mode", ENGINE, "mode"),
    ElementOption("--pcie-gen", LINK, "generation", default=UNSET,
                  unset_help="the --link preset's"),
    ElementOption("--codec-units", CODEC, "codec_units"),
    ElementOption("--codec-unit-throughput", CODEC, "codec_unit_throughput"),
    ElementOption("--engine", CODEC, "engine"),
    ElementOption("--sm-compress-throughput", CODEC, "sm_compress_throughput"),
    ElementOption("--sm-decompress-throughput", CODEC, "sm_decompress_throughput"),
    ElementOption("--de-chunk", CODEC, "de_chunk"),
    ElementOption("--de-max-buffer", CODEC, "de_max_buffer"),
    ElementOption("--burst", ENGINE, "burst"),
    ElementOption("--buffer", ENGINE, "buffer"),
    ElementOption("--progress", ENGINE, "progress"),
    ElementOption("--profile", ENGINE, "profile"),
    ElementOption("--workload", STREAM, "file", default=""),
    ElementOption("--compute-efficiency", ROOFLINE, "compute_efficiency"),
    ElementOption("--optimizer", NETWORK, "optimizer"),
    ElementOption("--allocation", NETWORK, "allocation"),
    ElementOption("--optimizer-states", NETWORK, "optimizer_states"),
    ElementOption("--weights", NETWORK, "weights"),
    ElementOption("--gradients", NETWORK, "gradients"),
    ElementOption("--delayed-update", NETWORK, "delayed_update"),
    ElementOption("--grad-accum", NETWORK, "grad_accum"),
    ElementOption("--state-compression", NETWORK, "state_compression"),
    ElementOption("--cpu-cores", HOST_CPU, "cores"),
    ElementOption("--cpu-adam-throughput", HOST_CPU, "adam_throughput"),
    ElementOption("--cpu-adam-file", HOST_CPU, "adam_file"),
    ElementOption("--cpu-memory-bandwidth", HOST_MEMORY, "bandwidth", default=UNSET,
                  unset_help="one socket's DRAM of the --cpu platform"),
    ElementOption("--layer-times", MEASURED, "layer_times", default=""),
    ElementOption("--tf32", FITTED, "tf32", unset_help="PyTorch's, as above"),
    ElementOption("--stack", FITTED, "stack"),
    ElementOption("--tensors", ENGINE, "tensors"),
    ElementOption("--functional", ENGINE, "functional"),
    ElementOption("--no-contention", GPU, "hbm_contention", invert=True),
    ElementOption("--data-parallel", GPU, "data_parallel", negatable=True),
    ElementOption("--bucket-size", FABRIC, "bucket"),
    ElementOption("--nvlink-links", FABRIC, "nvlink_links"),
    ElementOption("--nvlink-rate", FABRIC, "nvlink_rate"),
    ElementOption("--allreduce-step-latency", FABRIC, "step_latency"),
    ElementOption("--offload-to", GPU, "offload_to"),
    ElementOption("--nvme-path", ENGINE, "nvme_path"),
    ElementOption("--nvme-capacity", NVME, "capacity", default=UNSET,
                  unset_help="the --nvme-preset's"),
    ElementOption("--nvme-queue-depth", NVME, "queue_depth"),
)

#: params the topology sets from the option of another param, (element, param) -> that
#: param's (element, param): ``--bucket-size`` also sizes the gradient buckets copied to the
#: host CPU (:mod:`sst_cdma.builder.topology`), so their errors name it too
ALSO_SETS: dict[tuple[str, str], tuple[str, str]] = {
    (NETWORK, "gradient_bucket"): (FABRIC, "bucket"),
}

#: a pipeline stage's elements (topologies/pipeline_cdma.py): the workload in each GPU's
#: ``workload`` slot and the ports in its ``p2p`` slot
STAGE, PORTS = "cdma.PipelineStageWorkload", "cdma.PipelinePorts"
#: the options of the pipeline topology (sst_cdma.builder.pipeline), which the other
#: topologies do not take
PIPELINE_OPTIONS: tuple[ElementOption, ...] = (
    ElementOption("--pp", STAGE, "pp", default=4),
    ElementOption("--micro-batches", STAGE, "micro_batches", default=8),
    ElementOption("--schedule", STAGE, "schedule"),
    ElementOption("--vpp", STAGE, "vpp"),
    ElementOption("--layers", STAGE, "layers", default=UNSET,
                  unset_help="2 a virtual stage, 2 x pp x vpp"),
    ElementOption("--forward-time", STAGE, "forward_time"),
    ElementOption("--backward-time", STAGE, "backward_time"),
    ElementOption("--activation", STAGE, "activation"),
    ElementOption("--p2p-bandwidth", PORTS, "bandwidth"),
    ElementOption("--p2p-latency", PORTS, "latency"),
)

#: the elements only a rendered network uses: a ``--workload`` stream brings its own tensors,
#: ops and kernel times (it runs with the roofline's)
RENDERED_ONLY = (NETWORK, FITTED, MEASURED)


def options_of(*elements: str) -> tuple[ElementOption, ...]:
    """The options that set a param of one of ``elements``."""
    return tuple(opt for opt in ELEMENT_OPTIONS if opt.element in elements)


def declared_param(element: str, name: str) -> Param:
    """The declaration of ``element``'s param ``name``; ``ELEMENT:SLOT`` is the subcomponent in
    that slot, whose params the slot's interface declares."""
    owner, _, slot_name = element.partition(":")
    cls: Any = find_element(owner)
    if slot_name:
        cls = slot_interface(next(s for s in cls.SLOTS if s.name == slot_name))
    for param in cls.PARAMS:
        if param.name == name:
            return param
    raise KeyError(f"{element} declares no param {name!r}")


def option_param(opt: ElementOption) -> Param:
    """What ``opt`` parses its value as: its own declaration, else its element's param."""
    return opt.declaration or declared_param(opt.element, opt.param)


_METAVARS = {"int": "N", "float": "X", "bytes": "SIZE", "bandwidth": "RATE", "time": "TIME",
             "frequency": "FREQ", "str": "TEXT"}


def param_type(param: Param) -> Any:
    """An argparse type: the param's own parse (kind, choices, range); the value for numbers
    and names, the text itself for quantities with units (``1MiB``) as the element reads them."""
    def convert(text: str) -> Any:
        try:
            value = param.parse(text)
        except ParamError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value if param.kind in ("int", "float", "str") else text
    convert.__name__ = param.kind  # argparse names the type in its messages
    return convert


def _metavar(param: Param) -> Optional[str]:
    """How the help names an option's value: its choices (the empty one, "not given", left
    out: the help text says what it means), else its kind's placeholder."""
    shown = [str(c) for c in param.choices or () if c != ""]
    return "{" + ",".join(shown) + "}" if shown else _METAVARS.get(param.kind)


def _default_help(opt: ElementOption, param: Param, default: Any) -> str:
    """The help's ``(default: ...)``: what an unset option means (its ``unset_help``, also
    where the default is the empty choice), ``none`` for an empty text, else the value; ""
    where the param's own text already says its default."""
    if "(default:" in param.doc:
        return ""
    if default is UNSET or (default == "" and opt.unset_help):
        return f" (default: {opt.unset_help})"
    return f" (default: {default if default != '' else 'none'})"


def add_element_options(parser: argparse.ArgumentParser,
                        options: Sequence[ElementOption] = ELEMENT_OPTIONS) -> None:
    """Add one argparse option per entry of ``options``, generated from its param."""
    for opt in options:
        param = option_param(opt)
        if param.kind == "bool":
            parser.add_argument(opt.flag, dest=opt.dest, default=False,
                                action=argparse.BooleanOptionalAction if opt.negatable
                                else "store_true",
                                help=f"{'not: ' if opt.invert else ''}{param.doc}"
                                + (" (default: %(default)s)" if opt.negatable else ""))
            continue
        default = param.default if opt.default is ... else opt.default
        parser.add_argument(opt.flag, dest=opt.dest, type=param_type(param),
                            metavar=_metavar(param),
                            default=default if default is UNSET or param.kind not in
                            ("int", "float") else param.parse(default),
                            help=param.doc + _default_help(opt, param, default))


def element_params(values: argparse.Namespace, element: str,
                   options: Sequence[ElementOption] = ELEMENT_OPTIONS) -> dict[str, Any]:
    """The params the parsed options set on ``element`` (unset ones left out)."""
    out: dict[str, Any] = {}
    for opt in options:
        if opt.element != element or opt.declaration is not None:
            continue
        value = getattr(values, opt.dest)
        if value is UNSET:
            continue
        out[opt.param] = (not value) if opt.invert else value
    return out


def given_options(argv: Sequence[str], parser: argparse.ArgumentParser) -> set[str]:
    """The destinations of the options ``argv`` gives explicitly (``--x v`` or ``--x=v``)."""
    by_flag = {flag: action.dest for action in parser._actions for flag in action.option_strings}
    out = set()
    for token in argv:
        flag = token.split("=", 1)[0]
        if flag in by_flag:
            out.add(by_flag[flag])
    return out


def explicit(o: argparse.Namespace, name: str) -> Optional[str]:
    """The flag of destination ``name`` when the options gave it explicitly, else None."""
    return f"--{name.replace('_', '-')}" if name in getattr(o, "given", set()) else None


def flag_words() -> dict[tuple[str, str], Flag]:
    """Each element param a model option sets, keyed by (element type, param), with its flag:
    the vocabulary the builder installs (:func:`sst_cdma.engine.param_words.speak_flags`) so
    that errors raised below name the flags the user typed. A slot's params (``ELEMENT:SLOT``)
    are keyed by the slot's own name, as the elements filling it name them."""
    words = {(opt.element, opt.param): Flag(opt.flag, opt.invert)
             for opt in ELEMENT_OPTIONS if opt.declaration is None}
    words.update({key: words[by] for key, by in ALSO_SETS.items()})
    return words

    return {(opt.element, opt.param): Flag(opt.flag, opt.invert)
            for opt in ELEMENT_OPTIONS + PIPELINE_OPTIONS if opt.declaration is None}
