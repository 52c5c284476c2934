"""The on-disk format of density profiles: constants and a validating parser.

``parse_profile(data, source)`` checks a decoded JSON document field by field and returns plain,
normalised Python values; every failure raises :class:`ProfileError` naming ``source`` and the
dotted path of the offending field (``tensors.conv3.points[2].density``). The format itself is
documented in ``docs/profiles.md``.
"""
from __future__ import annotations

import functools
import math
import re
from datetime import datetime
from typing import Any, Callable, Optional, Sequence

from sst_cdma.codecs.registry import algorithm_names
from sst_cdma.model.dtypes import PROFILE_DTYPES, PROFILE_ITEMSIZES
from sst_cdma.profiles.errors import ProfileError

__all__ = [
    "FORMAT",
    "VERSION",
    "KNOWN_ALGORITHMS",  # noqa: F822  (the module's __getattr__ gives it)
    "KNOWN_DTYPES",
    "parse_profile",
    "tensor_path",
]

FORMAT = "sst-cdma-density-profile"
"""Value of the top-level ``format`` field."""

VERSION = 1
"""The only ``version`` this code reads and writes."""



def __getattr__(name: str) -> Any:
    """``KNOWN_ALGORITHMS``: the algorithms a point's ``ratios`` may name, i.e. the codecs
    registered in ``sst_cdma.codecs.registry`` as of the access."""
    if name == "KNOWN_ALGORITHMS":
        return algorithm_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


KNOWN_DTYPES: tuple[str, ...] = PROFILE_DTYPES
"""Element types a profile may describe."""

_TOP_REQUIRED = ("format", "version", "network", "dtype", "provenance", "tensors")
_TENSOR_REQUIRED = ("points",)
_TENSOR_OPTIONAL = ("sample_shape",)
_POINT_REQUIRED = ("progress", "density")
_POINT_OPTIONAL = ("ratios", "ratios_by_dtype")
_PROVENANCE_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required fields besides "kind", optional fields)
    "measured": (("model", "data", "steps", "command", "date"), ("seed", "notes", "software")),
    "estimated": (("source",), ("notes",)),
    "derived": (("source", "method", "command", "date"), ("notes",)),
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def tensor_path(name: str) -> str:
    """Path of tensor ``name`` in error messages: ``tensors.conv3`` or ``tensors["a.b"]``."""
    if _IDENT.match(name):
        return f"tensors.{name}"
    return f"tensors[{_show(name)}]"


def _show(value: Any) -> str:
    """Short JSON-like rendering of a value for an error message."""
    if isinstance(value, str):
        text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    """JSON name of a value's type, for 'expected X, got Y' messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class _Checker:
    """Raises :class:`ProfileError` prefixed with the source name."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.source}: {path}: {problem}")

    def obj(self, value: Any, path: str, required: tuple[str, ...],
            optional: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, got {_type_name(value)} {_show(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(path, f"field names must be strings, got {_show(key)}")
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing field {_show(key)}")
        allowed = set(required) | set(optional)
        for key in value:
            if key not in allowed:
                expected = ", ".join(sorted(allowed))
                raise self.fail(path, f"unknown field {_show(key)} (expected: {expected})")
        return value

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        """An object with free-form (string) keys."""
        return self.obj(value, path, (), tuple(value) if isinstance(value, dict) else ())

    def string(self, value: Any, path: str, *, nonempty: bool = True) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_type_name(value)} {_show(value)}")
        if nonempty and not value.strip():
            raise self.fail(path, "must not be empty")
        return value

    def integer(self, value: Any, path: str, *, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_type_name(value)} {_show(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"{value} is less than {minimum}")
        return value

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a number, got {_type_name(value)} {_show(value)}")
        if not math.isfinite(value):
            raise self.fail(path, f"{_show(value)} is not a finite number")
        return float(value)

    def unit_interval(self, value: Any, path: str) -> float:
        number = self.number(value, path)
        if not 0.0 <= number <= 1.0:
            raise self.fail(path, f"{_show(value)} is not in [0, 1]")
        return number


def parse_profile(data: Any, source: str) -> dict[str, Any]:
    """Validate a decoded profile document and return it normalised.

    The result has the same shape as the input with numbers as ``float``/``int``, ``points``
    as lists of dicts and ``ratios`` only where present. Raises :class:`ProfileError` naming
    ``source`` and the field at fault.
    """
    c = _Checker(source)
    top = c.obj(data, "(top level)", _TOP_REQUIRED)
    if top["format"] != FORMAT:
        raise c.fail("format", f"expected {_show(FORMAT)}, got {_show(top['format'])}")
    version = c.integer(top["version"], "version")
    if version != VERSION:
        raise c.fail("version", f"{version} is not supported (this sst-cdma reads version {VERSION})")
    network = c.string(top["network"], "network")
    dtype = c.string(top["dtype"], "dtype")
    if dtype not in KNOWN_DTYPES:
        raise c.fail("dtype", f"{_show(dtype)} is not one of {', '.join(KNOWN_DTYPES)}")
    provenance = _parse_provenance(c, top["provenance"])
    tensors_raw = c.mapping(top["tensors"], "tensors")
    if not tensors_raw:
        raise c.fail("tensors", "is empty; a profile needs at least one tensor")
    tensors = {}
    for name, entry in tensors_raw.items():
        path = tensor_path(name)
        if not name.strip():
            raise c.fail(path, "tensor names must not be empty")
        tensors[name] = _parse_tensor(c, entry, path, dtype)
    return {"format": FORMAT, "version": VERSION, "network": network, "dtype": dtype,
            "provenance": provenance, "tensors": tensors}


def _parse_provenance(c: _Checker, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise c.fail("provenance", f"expected an object, got {_type_name(value)} {_show(value)}")
    if "kind" not in value:
        raise c.fail("provenance", "missing field \"kind\"")
    kind = value["kind"]
    if kind not in _PROVENANCE_FIELDS:
        raise c.fail("provenance.kind",
                     f"expected \"measured\", \"estimated\" or \"derived\", got "
                     f"{_show(kind)}")
    required, optional = _PROVENANCE_FIELDS[kind]
    c.obj(value, "provenance", ("kind", *required), optional)
    out: dict[str, Any] = {"kind": kind}
    for key in (*required, *optional):
        if key not in value:
            continue
        item, path = value[key], f"provenance.{key}"
        if key == "steps":
            out[key] = None if item is None else c.integer(item, path, minimum=0)
        elif key == "seed":
            out[key] = None if item is None else c.integer(item, path)
        elif key == "software":
            soft = c.mapping(item, path)
            out[key] = {k: c.string(v, f"{path}.{k}") for k, v in soft.items()}
        elif key == "date":
            text = c.string(item, path)
            try:
                datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise c.fail(path, f"{_show(text)} is not an ISO 8601 date") from None
            out[key] = text
        else:
            out[key] = c.string(item, path)
    return out


def _parse_tensor(c: _Checker, value: Any, path: str, dtype: str) -> dict[str, Any]:
    entry = c.obj(value, path, _TENSOR_REQUIRED, _TENSOR_OPTIONAL)
    out: dict[str, Any] = {}
    if "sample_shape" in entry:
        shape_path = f"{path}.sample_shape"
        shape = entry["sample_shape"]
        if not isinstance(shape, list):
            raise c.fail(shape_path, f"expected an array, got {_type_name(shape)} {_show(shape)}")
        out["sample_shape"] = [c.integer(dim, f"{shape_path}[{i}]", minimum=1)
                               for i, dim in enumerate(shape)]
    points = entry["points"]
    points_path = f"{path}.points"
    if not isinstance(points, list):
        raise c.fail(points_path, f"expected an array, got {_type_name(points)} {_show(points)}")
    if not points:
        raise c.fail(points_path, "is empty; at least one point is needed")
    parsed = []
    previous: float | None = None
    known = algorithm_names()
    names = frozenset(known)
    for i, point in enumerate(points):
        item = _plain_point(point, previous, dtype, known, names)
        if item is None:
            item = _checked_point(c, point, f"{points_path}[{i}]", previous, dtype)
        previous = item["progress"]
        parsed.append(item)
    out["points"] = parsed
    return out


def _checked_point(c: _Checker, point: Any, ppath: str, previous: Optional[float],
                   dtype: str) -> dict[str, Any]:
    """One point of a tensor's ``points``, every field checked (an error names ``ppath``)."""
    raw = c.obj(point, ppath, _POINT_REQUIRED, _POINT_OPTIONAL)
    progress = c.unit_interval(raw["progress"], f"{ppath}.progress")
    if previous is not None and progress <= previous:
        raise c.fail(f"{ppath}.progress",
                     f"{_show(raw['progress'])} is not greater than the previous point's "
                     f"{previous!r} (progress must be strictly increasing)")
    item: dict[str, Any] = {"progress": progress,
                            "density": c.unit_interval(raw["density"], f"{ppath}.density")}
    if "ratios" in raw:
        item["ratios"] = _parse_ratios(c, raw["ratios"], f"{ppath}.ratios", dtype,
                                       item["density"])
    if "ratios_by_dtype" in raw:
        bpath = f"{ppath}.ratios_by_dtype"
        by_dtype = c.mapping(raw["ratios_by_dtype"], bpath)
        item["ratios_by_dtype"] = {}
        for other, ratios in by_dtype.items():
            if other not in KNOWN_DTYPES or other == dtype:
                raise c.fail(bpath, f"{_show(other)} is not another element type than the "
                                    f"profile's {dtype} (expected one of "
                                    f"{', '.join(t for t in KNOWN_DTYPES if t != dtype)})")
            # the point's density is of its own element type: converted to another, a
            # tensor may gain zeros (values under the other type's smallest), so only
            # the type's own ceiling (every element zero) binds there
            item["ratios_by_dtype"][other] = _parse_ratios(c, ratios, f"{bpath}.{other}",
                                                           other, 0.0)
    return item


#: the fields a point may have, for :func:`_plain_point`
_POINT_FIELDS = frozenset(_POINT_REQUIRED + _POINT_OPTIONAL)


def _plain_unit(value: Any) -> bool:
    """A JSON number (not a boolean) in [0, 1]."""
    return type(value) in (int, float) and 0.0 <= value <= 1.0


def _plain_point(point: Any, previous: Optional[float], dtype: str, known: Sequence[str],
                 names: frozenset[str]) -> Optional[dict[str, Any]]:
    """A point that passes every check of :func:`_checked_point`, parsed as it parses it,
    quickly (a profile holds thousands); None for anything else, which
    :func:`_checked_point` then reads, and says what is wrong with."""
    if type(point) is not dict or not point.keys() <= _POINT_FIELDS:
        return None
    progress: Any = point.get("progress")
    density: Any = point.get("density")
    if not (_plain_unit(progress) and _plain_unit(density)) \
            or (previous is not None and progress <= previous):
        return None
    item: dict[str, Any] = {"progress": float(progress), "density": float(density)}
    if "ratios" in point:
        ratios = _plain_ratios(point["ratios"], dtype, item["density"], known, names)
        if ratios is None:
            return None
        item["ratios"] = ratios
    if "ratios_by_dtype" in point:
        by_dtype = point["ratios_by_dtype"]
        if type(by_dtype) is not dict:
            return None
        item["ratios_by_dtype"] = {}
        for other, value in by_dtype.items():
            ratios = _plain_ratios(value, other, 0.0, known, names) \
                if other in KNOWN_DTYPES and other != dtype else None
            if ratios is None:
                return None
            item["ratios_by_dtype"][other] = ratios
    return item


def _plain_ratios(ratios: Any, dtype: str, density: float, known: Sequence[str],
                  names: frozenset[str]) -> Optional[dict[str, float]]:
    """:func:`_parse_ratios` of ``ratios`` where it passes every check; None otherwise."""
    if type(ratios) is not dict or not ratios.keys() <= names:
        return None
    most = _ceilings(dtype)
    bits = _ELEMENT_BITS.get(dtype)
    out = {}
    for algorithm in known:
        if algorithm in ratios:
            ratio = ratios[algorithm]
            # ratio_ceiling_fault's two tests, each ceiling worked out once per element type
            if type(ratio) not in (int, float) or not 0 < ratio < math.inf \
                    or ratio > most.get(algorithm, math.inf) or (
                        algorithm == "zvc" and bits is not None
                        and ratio > bits / (1 + bits * density) * 1.001):
                return None
            out[algorithm] = float(ratio)
    return out


@functools.lru_cache(maxsize=None)
def _ceilings(dtype: str) -> dict[str, float]:
    """The most each byte codec of :data:`RATIO_CEILINGS` reaches on ``dtype`` elements (none
    for a type without a profile item size)."""
    if dtype not in PROFILE_ITEMSIZES:
        return {}
    return {algorithm: ceiling(PROFILE_ITEMSIZES[dtype])
            for algorithm, ceiling in RATIO_CEILINGS.items()}


#: bits per element of each profile element type: ZVC spends one mask bit on each
_ELEMENT_BITS = {name: 8 * size for name, size in PROFILE_ITEMSIZES.items()}
#: the most each byte-oriented codec can compress anything, whatever its size (the stream
#: header only lowers it), as a function of the element size in bytes: RLE spends one 4-byte
#: token per 65535 zero elements (codecs/rle.py); DEFLATE at most 1032:1 (258-byte matches of
#: one code, RFC 1951); an LZ4 block one length byte per 255 bytes of match (LZ4 block
#: format); a Zstandard block regenerates at most 128 KiB from at least 4 bytes (a 3-byte
#: block header and one RLE byte, RFC 8878), byte planes each the same
RATIO_CEILINGS: dict[str, Callable[[int], float]] = {
    "rle": lambda itemsize: 65535 * itemsize / 4,
    "zlib": lambda itemsize: 1032.0,
    "lz4": lambda itemsize: 255.0,
    "zstd": lambda itemsize: 131072 / 4,
    "bplane_zstd": lambda itemsize: 131072 / 4,
}


def _parse_ratios(c: _Checker, value: Any, path: str, dtype: str,
                  density: float) -> dict[str, float]:
    """A ``ratios`` object: registered algorithm -> positive ratio, in registry order. A ZVC
    ratio above what its density allows in ``dtype`` (``bits / (1 + bits x density)``: a mask
    bit per element and the non-zero elements whole; the stream header only lowers it) is
    refused: the density and the ratio cannot both be right (with ``density`` 0, only the
    element type's ceiling, every element zero, binds)."""
    known = algorithm_names()
    ratios = c.mapping(value, path)
    for algorithm in ratios:
        if algorithm not in known:
            raise c.fail(path, f"unknown algorithm {_show(algorithm)} "
                               f"(registered: {', '.join(known)})")
    out = {}
    for algorithm in known:
        if algorithm in ratios:
            rpath = f"{path}.{algorithm}"
            ratio = c.number(ratios[algorithm], rpath)
            if ratio <= 0:
                raise c.fail(rpath, f"{_show(ratios[algorithm])} is not a positive number")
            fault = ratio_ceiling_fault(algorithm, ratio, dtype, density)
            if fault:
                raise c.fail(rpath, f"{_show(ratios[algorithm])} exceeds {fault}")
            out[algorithm] = ratio
    return out


def ratio_ceiling_fault(algorithm: str, ratio: float, dtype: str, density: float) -> str:
    """Why ``ratio`` of ``algorithm`` on ``dtype`` elements at ``density`` cannot be measured
    ("" when it can): above ZVC's ``bits / (1 + bits x density)`` (a mask bit per element,
    the non-zero ones whole; with ``density`` 0 only the mask binds) or above what a byte
    codec reaches on anything (:data:`RATIO_CEILINGS`). The text follows "exceeds"."""
    bits = _ELEMENT_BITS.get(dtype)
    if algorithm == "zvc" and bits is not None:
        ceiling = bits / (1 + bits * density)
        if ratio > ceiling * 1.001:
            at = f"at the point's density {density:g}" if density else \
                "(one mask bit per element)"
            return f"{ceiling:.4g}, the most ZVC reaches on {dtype} {at}"
    if algorithm in RATIO_CEILINGS and dtype in PROFILE_ITEMSIZES:
        most = RATIO_CEILINGS[algorithm](PROFILE_ITEMSIZES[dtype])
        if ratio > most:
            return f"{most:.6g}, the most {algorithm} can compress any {dtype} tensor"
    return ""
