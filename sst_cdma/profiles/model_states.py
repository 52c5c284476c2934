"""Model-state compression profiles: what each codec does to a model's weights, gradients, fp32
master weights and Adam moments, per element type, at points of training
(``docs/profiles.md``, "Model-state profiles").

File format (version 1)::

    {"format": "sst-cdma-model-state-profile", "version": 1, "model": "text_relu_small",
     "parameters": 478976,
     "provenance": {"kind": "measured", "model": ..., "data": ..., "steps": 200,
                    "command": ..., "date": "2026-12-02", ...},
     "roles": {"weights": {"points": [
                   {"progress": 0.0, "step": 0,
                    "dtypes": {"bfloat16": {"density": 1.0,
                                            "ratios": {"zvc": 0.94, "zstd": 1.1, ...}},
                               ...}}, ...]},
               "gradients": ..., "master_weights": ..., "exp_avg": ..., "exp_avg_sq": ...}}

A ratio is the model's bytes of that role in that element type over their compressed bytes,
each parameter tensor compressed as one stream (headers included). ``density`` is the fraction
of elements whose bit pattern is not zero. Read with :func:`load_model_states`; size a copy
with :func:`model_state_ratio`.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Union

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.model.dtypes import DTYPES
from sst_cdma.profiles.errors import ProfileError
from sst_cdma.profiles.interp import interpolate
from sst_cdma.profiles.provenance import Provenance, provenance_from_dict
from sst_cdma.profiles.schema import _Checker, _parse_provenance, _show, ratio_ceiling_fault

__all__ = ["FORMAT", "VERSION", "MODEL_STATE_ROLES", "ROLE_DTYPES", "DEFAULT_MODEL_STATES",
           "StatePoint", "ModelStateProfile", "load_model_states", "model_state_ratio",
           "shipped_model_states"]

FORMAT = "sst-cdma-model-state-profile"
VERSION = 1
#: the model states of mixed-precision Adam training: the 16-bit (or fp32) weights and
#: gradients the GPU holds, the optimizer's fp32 master weights, and Adam's two moments
MODEL_STATE_ROLES: tuple[str, ...] = ("weights", "gradients", "master_weights", "exp_avg",
                                      "exp_avg_sq")
#: the element types each role is measured in: weights and gradients in every simulated type,
#: the optimizer's states in float32
ROLE_DTYPES: dict[str, tuple[str, ...]] = {
    role: tuple(DTYPES) if role in ("weights", "gradients") else ("float32",)
    for role in MODEL_STATE_ROLES}
#: the shipped profile (``workloads/profiles/model_states/NAME.json``) the loader reads by default
DEFAULT_MODEL_STATES = "text_relu_small"
#: a model-state profile: ratios per role, codec, dtype and training step (the shipped are KiB)
MODEL_STATE_FILE = FileKind("a model-state profile", 16 * MIB)
_PACKAGE = "workloads.profiles.model_states"
#: (path, file identity and version) -> the profile read from it: a schedule sizes many copies
_parsed: dict[tuple, "ModelStateProfile"] = {}
_NONE = "none"  # the codec of an uncompressed copy (sst_cdma.codecs.registry.NONE)


@dataclass(frozen=True)
class StatePoint:
    """One role in one element type at one point of training: progress in [0, 1], the
    training step, the density and each codec's measured ratio."""

    progress: float
    step: int
    density: float
    ratios: Mapping[str, float]


@dataclass(frozen=True)
class ModelStateProfile:
    """A model's measured model-state compression: ``points[role][dtype]`` in increasing
    progress."""

    model: str
    parameters: int
    provenance: Provenance
    points: Mapping[str, Mapping[str, tuple[StatePoint, ...]]]
    source: str

    def ratio(self, role: str, codec: str, dtype: str, progress: float = 0.5) -> float:
        """The measured ratio of ``codec`` on ``role`` in ``dtype`` at ``progress``, linear in
        the compressed fraction 1/ratio between points and clamped outside them; codec
        ``none`` is 1. Anything not measured is a :class:`ProfileError` naming what is."""
        if role not in self.points:
            raise ProfileError(f"{self.source}: role {role!r} was not measured (measured: "
                               f"{', '.join(self.points)})")
        if dtype not in self.points[role]:
            raise ProfileError(f"{self.source}: {role} was not measured in {dtype!r} "
                               f"(measured: {', '.join(self.points[role])})")
        if codec == _NONE:
            return 1.0
        points = [p for p in self.points[role][dtype] if codec in p.ratios]
        if not points:
            known = sorted({c for p in self.points[role][dtype] for c in p.ratios})
            raise ProfileError(f"{self.source}: codec {codec!r} was not measured on {role} in "
                               f"{dtype} (measured: {', '.join(known)})")
        fraction = interpolate([p.progress for p in points],
                               [1.0 / p.ratios[codec] for p in points], progress)
        return 1.0 / fraction

    def density(self, role: str, dtype: str, progress: float = 0.5) -> float:
        """The fraction of non-zero elements of ``role`` in ``dtype`` at ``progress``."""
        self.ratio(role, _NONE, dtype)  # the same refusals
        points = self.points[role][dtype]
        return interpolate([p.progress for p in points], [p.density for p in points],
                           progress)


def _parse_point(c: _Checker, value: Any, path: str, role: str) -> dict[str, Any]:
    from sst_cdma.codecs.registry import algorithm_names

    point = c.obj(value, path, ("progress", "step", "dtypes"))
    out = {"progress": c.unit_interval(point["progress"], f"{path}.progress"),
           "step": c.integer(point["step"], f"{path}.step", minimum=0), "dtypes": {}}
    dtypes = c.mapping(point["dtypes"], f"{path}.dtypes")
    if not dtypes:
        raise c.fail(f"{path}.dtypes", "is empty")
    for dtype, entry in dtypes.items():
        where = f"{path}.dtypes.{dtype}"
        if dtype not in ROLE_DTYPES[role]:
            raise c.fail(where, f"{role} is measured in {', '.join(ROLE_DTYPES[role])}, not "
                                f"{_show(dtype)}")
        measured = c.obj(entry, where, ("density", "ratios"))
        density = c.unit_interval(measured["density"], f"{where}.density")
        ratios = {}
        for codec, ratio in c.mapping(measured["ratios"], f"{where}.ratios").items():
            if codec not in algorithm_names():
                raise c.fail(f"{where}.ratios", f"unknown codec {_show(codec)} (registered: "
                                                f"{', '.join(algorithm_names())})")
            if c.number(ratio, f"{where}.ratios.{codec}") <= 0:
                raise c.fail(f"{where}.ratios.{codec}", f"{_show(ratio)} is not positive")
            fault = ratio_ceiling_fault(codec, float(ratio), dtype, density)
            if fault:  # the density and the ratio cannot both be right
                raise c.fail(f"{where}.ratios.{codec}", f"{_show(ratio)} exceeds {fault}")
            ratios[codec] = float(ratio)
        out["dtypes"][dtype] = StatePoint(  # type: ignore[index]
            out["progress"], out["step"], density, ratios)  # type: ignore[arg-type]
    return out


def _parse_role(c: _Checker, value: Any, role: str) -> dict[str, tuple[StatePoint, ...]]:
    entry = c.obj(value, f"roles.{role}", ("points",))
    raw = entry["points"]
    if not isinstance(raw, list) or not raw:
        raise c.fail(f"roles.{role}.points", "expected a non-empty array")
    by_dtype: dict[str, list[StatePoint]] = {}
    previous = -1.0
    for i, item in enumerate(raw):
        point = _parse_point(c, item, f"roles.{role}.points[{i}]", role)
        if point["progress"] <= previous:
            raise c.fail(f"roles.{role}.points[{i}].progress",
                         f"{point['progress']} is not greater than the previous point's "
                         f"{previous} (progress must be strictly increasing)")
        previous = point["progress"]
        for dtype, state in point["dtypes"].items():
            by_dtype.setdefault(dtype, []).append(state)
    return {dtype: tuple(points) for dtype, points in by_dtype.items()}


def parse_model_states(doc: Any, source: str) -> ModelStateProfile:
    """Check a decoded model-state profile; :class:`ProfileError` names ``source`` and the
    field at fault."""
    c = _Checker(source)
    top = c.obj(doc, "(top level)", ("format", "version", "model", "parameters", "provenance",
                                     "roles"))
    if top["format"] != FORMAT:
        raise c.fail("format", f"expected {_show(FORMAT)}, got {_show(top['format'])} (not a "
                               f"model-state profile)")
    if c.integer(top["version"], "version") != VERSION:
        raise c.fail("version", f"{top['version']} is not supported (this sst-cdma reads "
                                f"version {VERSION})")
    roles = c.mapping(top["roles"], "roles")
    if not roles:
        raise c.fail("roles", "is empty; a profile needs at least one role")
    for role in roles:
        if role not in MODEL_STATE_ROLES:
            raise c.fail("roles", f"unknown role {_show(role)} (expected: "
                                  f"{', '.join(MODEL_STATE_ROLES)})")
    return ModelStateProfile(
        model=c.string(top["model"], "model"),
        parameters=c.integer(top["parameters"], "parameters", minimum=1),
        provenance=provenance_from_dict(_parse_provenance(c, top["provenance"])),
        points={role: _parse_role(c, roles[role], role) for role in roles}, source=source)


def shipped_model_states() -> list[str]:
    """Names of the shipped model-state profiles."""
    return sorted(p.stem for p in Path(str(resources.files(_PACKAGE))).glob("*.json"))


def _path(name_or_path: Union[str, Path]) -> Path:
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or text.endswith(".json"):
        return Path(name_or_path)
    path = Path(str(resources.files(_PACKAGE))) / f"{text}.json"
    if not path.is_file():
        raise ProfileError(f"no shipped model-state profile {text!r} (shipped: "
                           f"{', '.join(shipped_model_states()) or 'none'}); pass a file")
    return path


def load_model_states(name_or_path: Union[str, Path] = DEFAULT_MODEL_STATES
                      ) -> ModelStateProfile:
    """Read a model-state profile: a shipped one by name, or a file (a path, or a name ending
    in ``.json``). Unreadable files and bad fields are one-line :class:`ProfileError`\\ s
    naming the file."""
    path = _path(name_or_path)
    try:
        stat = path.stat()
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key in _parsed:
            return _parsed[key]
        doc = load_json(path, MODEL_STATE_FILE)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except FileReadError as exc:
        what = "not a JSON file" if exc.parsing else "cannot read"
        raise ProfileError(f"{path}: {what}: {exc}") from None
    profile = _parsed[key] = parse_model_states(doc, str(path))
    return profile


def model_state_ratio(role: str, codec: str, dtype: str, progress: float = 0.5, *,
                      profile: Union[str, Path, ModelStateProfile] = DEFAULT_MODEL_STATES
                      ) -> float:
    """The measured compression ratio (raw / compressed bytes) of ``codec`` on the model state
    ``role`` (:data:`MODEL_STATE_ROLES`) held in ``dtype``, at training ``progress``, from
    ``profile`` (default the shipped one); see :meth:`ModelStateProfile.ratio`."""
    if not isinstance(profile, ModelStateProfile):
        profile = load_model_states(profile)
    return profile.ratio(role, codec, dtype, progress)
