"""The codecs of the cDMA engine: subcomponents that fill the engine's ``codec`` slot, one element
per codec of the registry (:mod:`sst_cdma.codecs.registry`): ``cdma.ZVC``, ``cdma.RLE``,
``cdma.Zlib``, ``cdma.LZ4``, ``cdma.Zstd``, ``cdma.BplaneZstd``. A codec registered later (a
plug-in, a test) gets its element when it registers, and loses it when it unregisters.

A codec element is the engine's array of compression units: its params (how many units, each
one's throughput, whether incompressible data bypasses it), the flow resource its throughput
is, and its arithmetic: the bytes a tensor becomes on the link (from a ratio, or from the real
stream it compresses a tensor to) and the real streams themselves (functional mode). The bypass
is the codec's business: whether a chunk that would grow leaves the unit compressed or stored
raw (flagged uncompressed) is a property of the unit's output, which the engine only carries.
"""
from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Optional

import numpy as np

from sst_cdma.codecs import registry
from sst_cdma.engine.element import MAX_EXACT_COUNT, MAX_EXACT_COUNT_WHY, MIN_BANDWIDTH, MIN_BANDWIDTH_WHY, Param, StatisticSpec, SubComponent
from sst_cdma.engine.flows import FlowNetwork
from sst_cdma.model.compression import wire_bytes

from .messages import CodecKernel

__all__ = ["Codec", "DE_CODECS", "ENGINES", "codec_elements", "element_name", "element_type"]

#: the element library the codec elements belong to
LIBRARY = "cdma"
#: where a codec runs (param ``engine``): the paper's compressing copy engine, or Blackwell's
#: Decompression Engine
ENGINES = ("cdma", "blackwell-de")
#: the registered codecs Blackwell's Decompression Engine decompresses (it takes Snappy, LZ4,
#: Deflate and GZip; zlib is Deflate in a zlib wrapper)
DE_CODECS = ("lz4", "zlib")
#: the slowest (de)compression rate a codec param accepts, in B/s: every rate's floor
#: (a software codec on one CPU core manages tens of MB/s)
MIN_THROUGHPUT = MIN_BANDWIDTH


class Codec(SubComponent):
    """The interface of the cDMA engine's ``codec`` slot: compression units of one algorithm.

    Statistics (enable level 3, above the level 2 ``build()`` loads): ``raw_bytes`` and
    ``coded_bytes``, the uncompressed and the link-side bytes of every transfer the units
    compressed or decompressed."""

    ABSTRACT = True
    #: the registered codec the units run
    ALGORITHM: ClassVar[str] = ""

    PARAMS = (
        Param("codec_units", "int", 8, "compression/decompression units in the engine (one per "
              "memory controller)", minimum=1, maximum=MAX_EXACT_COUNT,
              why_maximum=MAX_EXACT_COUNT_WHY),
        Param("codec_unit_throughput", "bandwidth", "32GB/s", "uncompressed bytes per second "
              "each unit compresses or decompresses (at least 1 MB/s: slower is no hardware "
              "unit, and one iteration would take years)", minimum=MIN_THROUGHPUT,
              why_minimum=MIN_BANDWIDTH_WHY),
        Param("bypass_incompressible", "bool", "true", "send data that would grow uncompressed"),
        Param("engine", "str", "cdma", "where the codec runs: cdma (compression and "
              "decompression units in the copy engine, the paper's design) or blackwell-de "
              "(Blackwell's Decompression Engine: the units decompress prefetches, SM kernels "
              "compress offloads; docs/model.md)", choices=ENGINES),
        Param("sm_compress_throughput", "bandwidth", "100GB/s", "blackwell-de: uncompressed "
              "bytes per second the GPU's SM kernels compress (an assumption, docs/model.md)",
              minimum=MIN_THROUGHPUT,
              why_minimum=MIN_BANDWIDTH_WHY),
        Param("sm_decompress_throughput", "bandwidth", "300GB/s", "blackwell-de: uncompressed "
              "bytes per second SM kernels decompress buffers the engine does not take (an "
              "assumption, docs/model.md)", minimum=MIN_THROUGHPUT,
              why_minimum=MIN_BANDWIDTH_WHY),
        Param("de_chunk", "bytes", "64KiB", "blackwell-de: the buffers a tensor is compressed "
              "in (nvCOMP's batched chunks)", minimum=4096),
        Param("de_max_buffer", "bytes", "4MiB", "blackwell-de: the largest buffer the engine "
              "decompresses; bigger ones fall back to SM kernels (B200)", minimum=4096),
    )
    STATISTICS = (
        StatisticSpec("raw_bytes", "uncompressed bytes of each transfer through the units", "B",
                      "f64", 3),
        StatisticSpec("coded_bytes", "link-side bytes of each transfer through the units "
                      "(compressed, or raw where the bypass stored them)", "B", "f64", 3),
    )

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        p = self.params
        owner = self.parent.name if self.parent is not None else name
        self.resource = self.service(FlowNetwork).resource(
            f"{owner}.codec", p["codec_units"] * p["codec_unit_throughput"])
        self.stat_raw = self.register_statistic("raw_bytes")
        self.stat_coded = self.register_statistic("coded_bytes")
        if p["engine"] == "blackwell-de" and self.ALGORITHM not in DE_CODECS:
            raise ValueError(f"{name}: engine 'blackwell-de' decompresses Snappy, LZ4, Deflate "
                             f"and GZip only, not {self.ALGORITHM} (use cdma.LZ4 or cdma.Zlib)")

    @property
    def decompression_engine(self) -> bool:
        """Whether this is Blackwell's Decompression Engine: the units only decompress."""
        return self.params["engine"] == "blackwell-de"

    @property
    def decompresses_in_engine(self) -> bool:
        """Whether prefetches decompress in the units (the DE takes the buffers), not on SMs."""
        p = self.params
        return not self.decompression_engine or p["de_chunk"] <= p["de_max_buffer"]

    def sm_kernel(self, direction: str, tensor: str, raw: int, wire: int
                  ) -> Optional[CodecKernel]:
        """The SM kernel a ``direction`` transfer of ``raw`` bytes (``wire`` on the link)
        needs: on the DE, an offload's compression and a decompression the engine does not
        take; None where the units do the work."""
        p = self.params
        if direction == "offload" and self.decompression_engine:
            rate = p["sm_compress_throughput"]
        elif direction == "prefetch" and not self.decompresses_in_engine:
            rate = p["sm_decompress_throughput"]
        else:
            return None
        kind = "compress" if direction == "offload" else "decompress"
        return CodecKernel(kind, tensor, int(math.ceil(raw / rate * 1e12)), raw + wire)

    @property
    def algorithm(self) -> str:
        """The registered codec's name (``zvc``)."""
        return self.ALGORITHM

    @property
    def bypass(self) -> bool:
        """Whether data that would grow leaves the units raw."""
        return self.params["bypass_incompressible"]

    def wire_bytes(self, raw: int, ratio: float) -> int:
        """Link bytes of ``raw`` uncompressed bytes this codec compresses at ``ratio``."""
        return wire_bytes(raw, ratio, self.bypass)

    def compress(self, array: np.ndarray, element_type: Optional[str] = None) -> bytes:
        """The real compressed stream of ``array`` (``element_type``: what raw words are)."""
        from sst_cdma import codecs

        return codecs.compress(array, self.ALGORITHM, element_type=element_type)

    def stream_wire_bytes(self, raw: int, stream: int) -> int:
        """Link bytes of a tensor of ``raw`` bytes whose compressed stream has ``stream``
        bytes: the stream, or the raw bytes where it is not smaller and the units bypass."""
        if raw <= 0:
            return 0
        return raw if self.bypass and stream >= raw else stream

    def decompress(self, stream: bytes) -> np.ndarray:
        """The tensor a stream this codec wrote holds (``CodecError`` when it is corrupt)."""
        from sst_cdma import codecs

        return codecs.decompress(stream)

    def count(self, raw: int, coded: int) -> None:
        """Record one transfer through the units: ``raw`` bytes on the DRAM side, ``coded`` on
        the link side."""
        self.stat_raw.add_data(raw)
        self.stat_coded.add_data(coded)


def element_name(algorithm: str) -> str:
    """The element name of a registered codec: its name's parts of up to three characters are
    acronyms, longer ones words (``zvc`` -> ``ZVC``, ``lz4`` -> ``LZ4``, ``bplane_zstd`` ->
    ``BplaneZstd``)."""
    return "".join(part.upper() if len(part) <= 3 else part.capitalize()
                   for part in algorithm.split("_"))


def element_type(algorithm: str) -> str:
    """``cdma.NAME``: the element type that fills the engine's codec slot with ``algorithm``."""
    registry.get(algorithm)  # an unregistered name is the registry's one-line error
    return f"{LIBRARY}.{element_name(algorithm)}"


def _make_element(spec: registry.CodecSpec) -> type[Codec]:
    """The element class of one registered codec."""
    name = element_name(spec.name)
    doc = (f"The cDMA engine's {spec.name} codec units (stream format id {spec.format_id})"
           f"{': ' + spec.description if spec.description else ''}.")
    return type(name, (Codec,), {"__module__": __name__, "__qualname__": name, "__doc__": doc,
                                 "ALGORITHM": spec.name})


_elements: dict[str, type[Codec]] = {}


def codec_elements() -> dict[str, type[Codec]]:
    """Algorithm -> element class, for every registered codec, in registration order."""
    return dict(_elements)


def _sync(forget_library: Callable[[], None] = lambda: None) -> None:
    """Make this module's element classes those of the registered codecs (a module global per
    element, as the library loader finds elements); ``forget_library`` drops the loaded
    library when the set changed."""
    names = registry.algorithm_names()
    changed = False
    for algorithm in [a for a in _elements if a not in names]:
        globals().pop(_elements.pop(algorithm).__name__, None)
        changed = True
    for spec in registry.specs():
        if spec.name not in _elements:
            cls = _elements[spec.name] = _make_element(spec)
            globals()[cls.__name__] = cls
            changed = True
    if changed:
        forget_library()


def _on_registry_change() -> None:
    from sst_cdma.engine.library import load_library

    _sync(load_library.cache_clear)


_sync()
registry.watch(_on_registry_change)
