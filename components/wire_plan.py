"""What a cDMA engine sends for each tensor a GPU moves: :func:`plan_wires` turns an
:class:`~components.messages.OffloadManifest` into a :class:`WirePlan` (bytes on the link per
tensor, every algorithm's ratio on it, its density, the real compressed streams in functional
mode), from the density profile or the real tensors, through the engine's codec. A pure
function of its inputs: the engine keeps the plan of the manifest its GPU sends at init, and
prices a cost query with a fresh plan it then drops."""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Mapping, Optional

import numpy as np

from sst_cdma.codecs import registry
from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.model.compression import ALGORITHMS, ratio_from_density, wire_bytes

from .messages import MovedTensor, OffloadManifest

if TYPE_CHECKING:
    from .codecs import Codec

__all__ = ["DensitySources", "WirePlan", "plan_wires", "density_provenance"]

_ESTIMATES_SIZE = 1 << 14  # estimates kept (a run needs one per tensor and progress)
#: (id of the profile, tensor name, sparse, progress and its type, dtype) -> (the profile,
#: every algorithm's ratio, the density): every engine of a run estimates the same tensors
#: from the same (immutable, shared) profile; a codec registered or removed forgets them
_estimates: dict[tuple, tuple[Any, dict[str, float], float]] = {}
registry.watch(_estimates.clear)


@frozen_record
class DensitySources(FrozenRecord):
    """Where an engine learns how compressible each tensor is: the density ``profile`` (a
    shipped network name or a JSON path; '' = the workload's network) at ``progress``, or the
    real tensors of ``samples`` (a ``SampleSet`` read from ``tensors``; ``real``, its arrays
    by tensor name); ``functional`` keeps the real compressed streams. ``engine`` names the
    engine in error messages."""

    engine: str
    profile: str = ""
    progress: float = 0.5
    tensors: str = ""
    functional: bool = False
    samples: Any = None
    real: Mapping[str, np.ndarray] = field(default_factory=dict)


@frozen_record
class WirePlan(FrozenRecord):
    """The engine's plan for a manifest's tensors: ``wire``, the bytes each crosses the link
    as; ``ratios``, every algorithm's ratio on each compressible tensor (what the summary's
    ratio by algorithm adds up); ``raw_bytes``, their uncompressed sizes; ``densities``;
    ``plain``, the tensors the workload copies raw; ``payloads``, the real compressed
    streams (functional mode)."""

    gpu: str = ""
    wire: Mapping[str, int] = field(default_factory=dict)
    ratios: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    raw_bytes: Mapping[str, int] = field(default_factory=dict)
    densities: Mapping[str, float] = field(default_factory=dict)
    plain: frozenset[str] = frozenset()
    payloads: Mapping[str, bytes] = field(default_factory=dict)
    #: where the densities came from (:func:`density_provenance`; empty: no profile read)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, later: "WirePlan") -> "WirePlan":
        """This plan with ``later``'s tensors added (a later manifest's entries win)."""
        return WirePlan(later.gpu, {**self.wire, **later.wire}, {**self.ratios, **later.ratios},
                        {**self.raw_bytes, **later.raw_bytes},
                        {**self.densities, **later.densities}, self.plain | later.plain,
                        {**self.payloads, **later.payloads},
                        later.provenance or self.provenance)

    def ratio_by_algorithm(self, bypass: bool) -> dict[str, float]:
        """The compression ratio (raw / wire bytes, ``bypass`` of incompressible data
        included) every registered algorithm reaches over the planned tensors."""
        raw = {t: self.raw_bytes[t] for t in self.ratios if self.raw_bytes.get(t)}
        if not raw:
            return {}
        total = sum(raw.values())
        return {algo: total / sum(wire_bytes(raw[t], self.ratios[t][algo], bypass) for t in raw)
                for algo in ALGORITHMS[1:]}


class _NoDensities(Exception):
    """A plain copy engine found no densities: it needs none."""


def plan_wires(workload: OffloadManifest, sources: DensitySources,
               codec: Optional["Codec"]) -> WirePlan:
    """The wire size of every tensor ``workload`` moves, through ``codec`` (None: a plain
    copy engine, which still measures every algorithm's ratio for the summary)."""
    plain = frozenset(t.name for t in workload.tensors if t.plain)
    wire = {t.name: t.raw_bytes for t in workload.tensors if t.name in plain}
    coded = [t for t in workload.tensors if t.name not in plain]
    raw_bytes = {t.name: t.raw_bytes for t in coded}
    real = sources.real
    if sources.samples is not None:
        _check_real(workload, sources, codec is not None, plain)
    try:
        profile = _profile_for(workload, coded, sources, codec is not None)
    except _NoDensities:  # every tensor crosses raw
        return WirePlan(workload.gpu, {**wire, **raw_bytes}, {}, raw_bytes, {}, plain, {})
    ratios: dict[str, dict[str, float]] = {}
    densities: dict[str, float] = {}
    payloads: dict[str, bytes] = {}
    for t in coded:
        if t.name in real:
            ratios[t.name], densities[t.name], wire[t.name], payload = _plan_real(
                t, real[t.name], workload.dtype, codec)
            if sources.functional and payload is not None:
                payloads[t.name] = payload
            continue
        ratios[t.name], densities[t.name] = _estimate(t, profile, sources.progress,
                                                      workload.dtype)
        wire[t.name] = codec.wire_bytes(t.raw_bytes, ratios[t.name][codec.algorithm]) \
            if codec is not None else wire_bytes(t.raw_bytes, 1.0)
    real_count = sum(t.name in real for t in coded)
    return WirePlan(workload.gpu, wire, ratios, raw_bytes, densities, plain, payloads,
                    density_provenance(profile, sources.profile or workload.network, real_count)
                    if profile is not None or real_count else {})


def density_provenance(profile: Any, named: str, real_tensors: int = 0) -> dict[str, Any]:
    """Where a plan's densities came from: the ``profile`` as it was ``named`` (a shipped
    profile's name or the path given), its provenance ``kind`` (``measured``, ``estimated`` or ``derived``) with what its provenance says it rests
    on (``source``: the estimate's basis, the measured model and data, or the profile it was
    derived from), and how many tensors were compressed from ``real_tensors`` instead."""
    out: dict[str, Any] = {"real_tensors": real_tensors}
    if profile is None:
        return out
    prov = profile.provenance
    if prov.kind == "measured":
        source = f"{prov.model} on {prov.data}" + \
            (f", {prov.steps} steps" if prov.steps else "")
    else:
        source = prov.source
    out.update(profile=named, kind=prov.kind, source=source)
    return out


def _profile_for(workload: OffloadManifest, coded: list[MovedTensor], sources: DensitySources,
                 compresses: bool) -> Any:
    """The density profile the tensors without real bytes need (None: none needs one).
    ``_NoDensities`` where a plain copy engine (``compresses`` False) finds none for sparse
    tensors."""
    from sst_cdma.profiles import ProfileError, load_profile
    from sst_cdma.profiles.network_names import check_known_tensors

    real = sources.real
    need_profile = [t.name for t in coded if t.sparse and t.name not in real]
    if need_profile:
        source = sources.profile or workload.network
        try:
            profile = load_profile(source)
            profile.require_network(workload.network)
            profile.require_tensors(need_profile)
        except ProfileError as exc:
            if not compresses:
                raise _NoDensities() from None
            raise _profile_fault(sources.engine, exc, source) from None
        try:  # a tensor the network does not have: a typo, or another network's profile
            check_known_tensors(profile.tensors, workload.network, profile.source)
        except ProfileError as exc:
            raise _profile_fault(sources.engine, exc, source) from None
        _check_sample_shapes(profile, coded, sources.engine, source, workload.network)
        return profile
    if any(t.name not in real for t in coded):
        # also for a plain copy engine: its ratio by algorithm covers the same tensors
        return _dense_profile(workload.network, sources)
    if sources.profile:  # a profile given for a run that moves nothing is still checked
        _dense_profile(workload.network, sources)
    return None


def _check_sample_shapes(profile: Any, coded: list[MovedTensor], engine: str,
                         source: str, network: str) -> None:
    """Refuse a profile whose recorded sample shape of a tensor this run moves (or of any
    tensor of a network whose shapes are fixed: a CNN's) is not the simulated tensor's (batch
    left out): it was measured on another input size or network."""
    from sst_cdma.profiles.network_names import network_tensor_shapes
    from sst_cdma.profiles.schema import tensor_path

    shapes = {name: shape for name, shape in (network_tensor_shapes(network) or {}).items()
              if shape is not None}
    shapes.update((t.name, tuple(t.shape[1:])) for t in coded if t.shape is not None)
    for name, entry in profile.tensors.items():
        want = shapes.get(name)
        if entry.sample_shape is None or want is None:
            continue
        if tuple(entry.sample_shape) != want:
            raise ConfigError(f"{engine}: {tensor_path(name)}.sample_shape "
                              f"{list(entry.sample_shape)} is not the simulated tensor's "
                              f"{list(want)} (one sample, batch left out): measured on "
                              "another input size", source)


def _estimate(t: MovedTensor, profile: Any, progress: float, dtype: str
              ) -> tuple[dict[str, float], float]:
    """Every algorithm's ratio on a tensor without real bytes, and its density (worked out
    once per profile, tensor, progress and element type; see ``_estimates``)."""
    key = (id(profile), t.name, t.sparse, progress, type(progress), dtype)
    known = _estimates.get(key)
    if known is None or known[0] is not profile:
        if len(_estimates) >= _ESTIMATES_SIZE:
            _estimates.clear()
        ratios, density = _estimate_afresh(t, profile, progress, dtype)
        known = _estimates[key] = (profile, ratios, density)
    return dict(known[1]), known[2]


def _estimate_afresh(t: MovedTensor, profile: Any, progress: float, dtype: str
                     ) -> tuple[dict[str, float], float]:
    """:func:`_estimate` worked out."""
    known = profile.tensors if profile is not None else {}
    # a dense tensor takes the profile's numbers only where it measured ratios in this run's
    # dtype (transformers: bf16 LZ4/zstd/byte-plane); else density 1.0
    measured_dense = not t.sparse and t.name in known and any(
        profile.ratio(t.name, algo, progress, dtype=dtype) for algo in ALGORITHMS[1:])
    use_profile = t.sparse or measured_dense
    density = profile.density(t.name, progress) if use_profile else 1.0
    ratios = {}
    for algo in ALGORITHMS:
        # ratios measured in another element type are not reused: derived from the density
        # for this run's dtype instead (docs/profiles.md)
        measured = profile.ratio(t.name, algo, progress, dtype=dtype) \
            if (profile is not None and use_profile and algo != "none") else None
        ratios[algo] = measured if measured else ratio_from_density(algo, density, dtype)
    return ratios, density


def _plan_real(t: MovedTensor, array: np.ndarray, dtype: str, codec: Optional["Codec"]
               ) -> tuple[dict[str, float], float, int, Optional[bytes]]:
    """Every algorithm's ratio on a tensor's real bytes, its density, its wire size and the
    stream ``codec`` compresses it to (None without a codec)."""
    from sst_cdma import codecs

    # raw bfloat16 words (uint16) go through the codecs tagged as what they are
    element_type = "bfloat16" if dtype == "bfloat16" and array.dtype == np.uint16 else None
    ratios = {"none": 1.0}
    for algo in ALGORITHMS[1:]:
        ratios[algo] = array.nbytes / codecs.compressed_size(array, algo,
                                                             element_type=element_type)
    density = float(np.count_nonzero(array.view(np.dtype(f"u{array.dtype.itemsize}")))) / \
        max(array.size, 1)
    if codec is None:
        return ratios, density, t.raw_bytes, None
    # the sample is the simulated tensor (checked), so the stream is what crosses the link
    payload = codec.compress(array, element_type)
    return ratios, density, codec.stream_wire_bytes(t.raw_bytes, len(payload)), payload


def _check_real(workload: OffloadManifest, sources: DensitySources, compresses: bool,
                plain: frozenset[str]) -> None:
    """Refuse real tensors that are not the ones simulated: samples of another network,
    element type, shape or batch (functional mode would check a different tensor)."""
    from sst_cdma.profiles import ProfileError
    from sst_cdma.profiles.network_names import check_known_tensors

    real = sources.real
    shapes = workload.shapes()
    coded = [t.name for t in workload.tensors if t.name not in plain]
    if sources.functional and compresses and coded and not any(t in real for t in coded):
        raise ConfigError(f"{sources.engine}: functional mode has nothing to check: none of the "
                          f"{len(real)} tensors in {sources.tensors} "
                          f"({', '.join(sorted(real)[:4])}"
                          f"{', ...' if len(real) > 4 else ''}) is one this run "
                          f"compresses ({', '.join(coded[:4])}"
                          f"{', ...' if len(coded) > 4 else ''})")
    try:
        sources.samples.check_network(workload.network)
        check_known_tensors(real, workload.network, sources.samples.index or sources.tensors,
                            what="sample")
        for t in workload.tensors:
            if t.name in real:
                sources.samples.check(t.name, dtype=workload.dtype, shape=shapes.get(t.name),
                                      nbytes=t.raw_bytes)
    except ProfileError as exc:
        raise ConfigError(f"{sources.engine}: {exc}") from None


def _profile_fault(engine: str, exc: Exception, source: str) -> ConfigError:
    """A profile error at ``source`` (the file, or a shipped profile's name), which the
    message names once, where the error says where."""
    message = str(exc)
    if message.startswith(f"{source}: "):
        message = message[len(source) + 2:]
    return ConfigError(f"{engine}: {message}", source)


def _dense_profile(network: str, sources: DensitySources) -> Any:
    """The profile for a workload without sparse tensors: the ``profile`` source (which must
    load and describe ``network``), else the network's shipped one if there is one."""
    from sst_cdma.profiles import ProfileError, load_profile, shipped_profiles
    from sst_cdma.profiles.network_names import check_known_tensors

    source = sources.profile
    if not source and network not in shipped_profiles():
        return None
    try:
        profile = load_profile(source or network)
        profile.require_network(network)
        check_known_tensors(profile.tensors, network, profile.source)
    except ProfileError as exc:
        raise _profile_fault(sources.engine, exc, source or network) from None
    return profile
