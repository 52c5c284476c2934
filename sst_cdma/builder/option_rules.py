"""Rules between model options that no one element can check, declared beside the options
(:mod:`sst_cdma.builder.model_options`): an option given for an element this run does not
build, or given beside a choice that leaves it nothing to set. Each rule names the element
params it relates; its fault names them in the caller's words
(:func:`sst_cdma.engine.param_words.param_word`: the flags, as the builder parses a command
line).

A rule between one element's own params is that element's (its ``check_params``, which every
graph that builds it meets, a hand-built one too); the topology's own shape (GPU counts, hosts,
switches, host links, drives) is the builder's (:mod:`sst_cdma.builder.topology`).
"""
from __future__ import annotations

import argparse
from typing import Callable, Optional

from components.codecs import DE_CODECS

from sst_cdma.builder.model_options import (CODEC, ELEMENT_OPTIONS, ENGINE, FABRIC, GPU,
                                            HOST_CPU, MEASURED, NETWORK, RENDERED_ONLY, STREAM,
                                            ElementOption, explicit, options_of)
from sst_cdma.engine.param_words import NO_VALUE, param_word
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.engine.units import parse_bytes

__all__ = ["Chosen", "Rule", "RULES", "STREAM_RULES", "TOPOLOGY", "broken_rule"]

#: the "element" of the topology's own options (``--kernel-model``): a rule names them by
#: their destination
TOPOLOGY = "topology"
#: the roofline kernel times, whose efficiency ``--compute-efficiency`` sets
ROOFLINE = "cdma.RooflineKernels"
#: the Decompression Engine's own params of the codec slot
DE_PARAMS = ("sm_compress_throughput", "sm_decompress_throughput", "de_chunk", "de_max_buffer")
#: the codecs Blackwell's Decompression Engine decompresses (components.codecs.DE_CODECS)
DE_WORDS = "Snappy, LZ4, Deflate and GZip"


@frozen_record
class Chosen(FrozenRecord):
    """What a rule reads: the parsed options, by the element param each sets, and whether the
    workload element needs a host CPU (its own decision: ``needs_host_cpu``)."""

    options: argparse.Namespace
    host_cpu: bool

    def _option(self, element: str, param: str) -> Optional[ElementOption]:
        return next((o for o in ELEMENT_OPTIONS if (o.element, o.param) == (element, param)),
                    None)

    def _dest(self, element: str, param: str) -> str:
        option = self._option(element, param)
        if option is None:
            if element != TOPOLOGY:
                raise KeyError(f"no model option sets {param!r} of {element}")
            return param
        return option.dest

    def value(self, element: str, param: str) -> object:
        """The value the options give ``param`` of ``element`` (given or by default)."""
        return getattr(self.options, self._dest(element, param))

    def given(self, element: str, param: str) -> bool:
        """True when the command line gave the option that sets ``param`` of ``element``."""
        return explicit(self.options, self._dest(element, param)) is not None

    def word(self, element: str, param: str, value: object = NO_VALUE) -> str:
        """How the fault names ``param`` of ``element`` (with ``value``): the caller's words
        for an element param; the flag of a topology option or of the option that picks the
        element filling a slot (``--algorithm``), which only a command line has."""
        option = self._option(element, param)
        if option is not None and option.declaration is None:
            return param_word(element, param, value)
        flag = option.flag if option is not None else f"--{param.replace('_', '-')}"
        return flag if value is NO_VALUE else f"{flag} {value}"


@frozen_record
class Rule(FrozenRecord):
    """A rule between options: ``params`` ((element, param), the one it refuses first) are
    the params it relates; ``broken`` says whether the options break it, ``why`` the fault."""

    params: tuple[tuple[str, str], ...]
    broken: Callable[[Chosen], bool]
    why: Callable[[Chosen], str]


def _needs_data_parallel(param: str) -> Rule:
    """The all-reduce's options need a data-parallel run; the bucket size also sizes the
    gradient buckets copied to a host CPU that steps."""
    return Rule(((FABRIC, param), (GPU, "data_parallel")),
                lambda c: c.given(FABRIC, param) and not c.value(GPU, "data_parallel")
                and not (param == "bucket" and c.host_cpu),
                lambda c: f"{c.word(FABRIC, param)} needs {c.word(GPU, 'data_parallel', True)}:"
                          " it sets the gradient all-reduce, and this run is not data parallel")


def _needs_host_cpu(param: str) -> Rule:
    """The host CPU's options need a host CPU that steps."""
    return Rule(((HOST_CPU, param), (NETWORK, "optimizer_states")),
                lambda c: c.given(HOST_CPU, param) and not c.host_cpu,
                lambda c: f"{c.word(HOST_CPU, param)} needs the host CPU to step the optimizer: "
                          "it describes that CPU, and in this run nothing steps on the host "
                          f"(give {c.word(NETWORK, 'optimizer', 'adam')} "
                          f"{c.word(NETWORK, 'optimizer_states', 'host')}, or nvme)")


def _not_in_flow_mode(param: str) -> Rule:
    """Bursts and the staging buffer exist in chunk mode."""
    return Rule(((ENGINE, param), (ENGINE, "mode")),
                lambda c: c.given(ENGINE, param) and c.value(ENGINE, "mode") == "flow",
                lambda c: f"{c.word(ENGINE, param)} contradicts {c.word(ENGINE, 'mode', 'flow')}"
                          ": bursts and the staging buffer exist in "
                          f"{c.word(ENGINE, 'mode', 'chunk')}")


def _needs_a_codec(param: str) -> Rule:
    """The codec units' options need a codec in the engine's slot."""
    return Rule(((CODEC, param), (CODEC, "algorithm")),
                lambda c: c.given(CODEC, param) and c.value(CODEC, "algorithm") == "none",
                lambda c: f"{c.word(CODEC, param)} contradicts "
                          f"{c.word(CODEC, 'algorithm', 'none')}: the codec units exist in an "
                          "engine with a codec, and a plain copy engine has none")


def _needs_the_de(param: str) -> Rule:
    """The Decompression Engine's options need it."""
    return Rule(((CODEC, param), (CODEC, "engine")),
                lambda c: c.given(CODEC, param) and c.value(CODEC, "engine") != "blackwell-de",
                lambda c: f"{c.word(CODEC, param)} needs "
                          f"{c.word(CODEC, 'engine', 'blackwell-de')}: it describes Blackwell's "
                          f"Decompression Engine, and this engine is {c.value(CODEC, 'engine')}")


def _rendered_only(element: str, param: str,
                   gives: Optional[Callable[[Chosen], bool]] = None) -> Rule:
    """An option of what only a rendered network uses (its element's, or the topology's
    ``--workspace``), refused beside a ``--workload`` stream, which declares its own tensors,
    ops and kernel times; ``gives``: whether the options give it, where that is not whether
    the command line named it."""
    def broken(c: Chosen) -> bool:
        named = gives(c) if gives is not None else c.given(element, param)
        return named and bool(c.value(STREAM, "file"))

    return Rule(((element, param), (STREAM, "file")), broken,
                lambda c: f"{c.word(element, param)} contradicts {c.word(STREAM, 'file')}: it "
                          f"applies to a rendered {c.word(NETWORK, 'network')}, and a "
                          f"{c.word(STREAM, 'file')} stream declares its own")


def _workspace(c: Chosen) -> bool:
    """A workspace other than none: the cuDNN workspace applies to a rendered network."""
    text = str(c.value(TOPOLOGY, "workspace"))
    return bool(text) and parse_bytes(text) > 0


RULES: tuple[Rule, ...] = (
    *(_needs_data_parallel(o.param) for o in options_of(FABRIC)),
    *(_needs_host_cpu(o.param) for o in options_of(HOST_CPU)),
    Rule(((ROOFLINE, "compute_efficiency"), (MEASURED, "layer_times")),
         lambda c: c.given(ROOFLINE, "compute_efficiency") and bool(c.value(MEASURED,
                                                                            "layer_times")),
         lambda c: f"{c.word(ROOFLINE, 'compute_efficiency')} contradicts "
                   f"{c.word(MEASURED, 'layer_times')}: every kernel takes its measured time, "
                   "so no roofline efficiency applies"),
    Rule(((ROOFLINE, "compute_efficiency"), (TOPOLOGY, "kernel_model")),
         lambda c: c.given(ROOFLINE, "compute_efficiency") and
         c.value(TOPOLOGY, "kernel_model") == "fitted",
         lambda c: f"{c.word(ROOFLINE, 'compute_efficiency')} contradicts "
                   f"{c.word(TOPOLOGY, 'kernel_model', 'fitted')}: the roofline's efficiency "
                   f"applies to {c.word(TOPOLOGY, 'kernel_model', 'roofline')} (the fitted "
                   "model has its own)"),
    *(_needs_a_codec(param) for param in ("codec_units", "codec_unit_throughput")),
    *(_needs_the_de(param) for param in DE_PARAMS),
    Rule(((CODEC, "algorithm"), (CODEC, "engine")),
         lambda c: c.value(CODEC, "engine") == "blackwell-de" and c.given(CODEC, "algorithm")
         and c.value(CODEC, "algorithm") not in DE_CODECS,
         lambda c: f"{c.word(CODEC, 'engine', 'blackwell-de')} contradicts "
                   f"{c.word(CODEC, 'algorithm', c.value(CODEC, 'algorithm'))}: the "
                   f"Decompression Engine decompresses {DE_WORDS} "
                   f"({c.word(CODEC, 'algorithm', ' or '.join(DE_CODECS))})"),
    *(_not_in_flow_mode(param) for param in ("burst", "buffer")),
)

#: the rules of a ``--workload`` stream, which brings what a rendered network's options set
#: (checked after the elements' own rules: a fault of those is named first)
STREAM_RULES: tuple[Rule, ...] = (
    *(_rendered_only(option.element, option.param) for option in options_of(*RENDERED_ONLY)),
    _rendered_only(TOPOLOGY, "workspace", _workspace),
    Rule(((STREAM, "file"), (TOPOLOGY, "no_baselines")),
         lambda c: bool(c.value(STREAM, "file")) and not c.value(TOPOLOGY, "no_baselines"),
         lambda c: f"{c.word(STREAM, 'file')} needs {c.word(TOPOLOGY, 'no_baselines')}: the "
                   "oracle (the same stream with nothing offloaded) cannot be derived from an "
                   f"arbitrary stream, and baselines rendered from {c.word(NETWORK, 'network')} "
                   "would compare another workload"),
)


def broken_rule(chosen: Chosen, rules: tuple[Rule, ...] = RULES) -> Optional[str]:
    """The fault of the first of ``rules`` the options break, else None."""
    for rule in rules:
        if rule.broken(chosen):
            return rule.why(chosen)
    return None
