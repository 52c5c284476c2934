"""Exact unit algebra with SST-core's rules (``sst.UnitAlgebra``).

A value is a number followed, optionally after whitespace, by a unit::

    UnitAlgebra("16GB/s")    # 16e9 B/s     (SI prefixes are decimal)
    UnitAlgebra("2KiB")      # 2048 B       (Ki Mi Gi Ti Pi Ei are binary, 1024**n)
    UnitAlgebra("1.4 GHz")   # 1.4e9 Hz, and Hz is 1/s
    UnitAlgebra("1/ns")      # == UnitAlgebra("1GHz")

Grammar
    number  ``[+-]?(digits[.digits] | .digits)([eE][+-]?digits)?`` (int, decimal, scientific)
    unit    ``numerator[/denominator]``; each side is one or more unit terms joined by ``-``
            (multiplication, e.g. ``B-s``); the numerator may be ``1`` or empty (``5/ns``).
            Only one ``/`` is allowed.
    term    ``[prefix]name``. Names: ``s``, ``B`` (byte), ``b`` (bit), ``events`` (base units)
            and ``Hz``/``hz`` (= 1/s), ``Bps`` (= B/s), ``bps`` (= b/s), ``event`` (= events).
            Prefixes: a f p n u m k K M G T P E (decimal; ``k`` and ``K`` are both 1e3) and
            Ki Mi Gi Ti Pi Ei (binary). Unit names and prefixes are case-sensitive
            (``ms`` is milliseconds, ``Ms`` megaseconds).

Decisions other modules rely on
    * Values are exact :class:`fractions.Fraction` in *base* units (s, B, b, events);
      prefixes are folded into the value. ``1.4GHz`` has period exactly 5000/7 ps.
    * Canonical unit strings (``.units``): base units sorted in ASCII order
      (``B`` < ``b`` < ``events`` < ``s``), repeated for powers, joined by ``-``, numerator
      ``/`` denominator, ``1/...`` when the numerator is empty, ``""`` when unitless, and the
      single special case ``1/s`` -> ``"Hz"``. So ``"B/s"``, ``"Hz"``, ``"s"``, ``"B"``,
      ``"b/s"``, ``"B-s"``, ``"1/s-s"``. ``Bps`` becomes ``B/s``; ``B-Hz`` becomes ``B/s``.
    * ``b`` (bit) and ``B`` (byte) are distinct units in the algebra, as in SST: ``8 b`` and
      ``1 B`` cannot be added or compared. The conversion methods (:meth:`~UnitAlgebra.to_bytes`,
      :meth:`~UnitAlgebra.to_bytes_per_second`, :meth:`~UnitAlgebra.to_float`) accept either,
      with 8 b = 1 B.
    * Rounding to an integer (:meth:`~UnitAlgebra.getRoundedValue`,
      :meth:`~UnitAlgebra.to_picoseconds`, :meth:`~UnitAlgebra.to_bytes`) is to the *nearest*
      integer, ties away from zero (as C's ``llround``): 0.5 ps -> 1 ps, 2.5 -> 3, -2.5 -> -3.
    * ``+``, ``-`` and ordering (``<`` ``<=`` ``>`` ``>=``) need identical units, else
      :class:`UnitError`. ``==``/``!=`` between different units answer ``False``/``True``
      instead of raising (as pint and astropy do), so mixed-unit sets and dicts stay safe;
      hash is consistent with ``==``. Plain numbers act as unitless values.
    * Text is SST-core 16's: ``str()``/:meth:`~UnitAlgebra.toString` print base units with no
      prefix, the number rounded to SST's 24 decimal places and shown like C's ``%g``
      (``16000000000 B/s``, ``1e-09 s``); :meth:`~UnitAlgebra.bestSI` uses SST's prefixes
      (``K`` for kilo) and 6 significant digits (``4.29497 GB``). The project's own messages
      use :meth:`~UnitAlgebra.human` (exact digits, ``k``).
    * Objects are immutable; :meth:`~UnitAlgebra.invert` returns a new value.
    * :meth:`~UnitAlgebra.to_picoseconds` and :func:`parse_time_ps` accept a frequency and
      return its period (SST does so for clocks); :meth:`~UnitAlgebra.to_hertz` and
      :func:`parse_frequency` accept a period and return its frequency.
      :meth:`~UnitAlgebra.to_seconds` accepts time only.
    * The ``parse_*`` helpers reject negative values (and bare unitless numbers) unless
      ``allow_negative=True``.
"""
from __future__ import annotations

import math
import numbers
import re
from decimal import ROUND_HALF_UP, Decimal, Inexact, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import Union

__all__ = [
    "UnitAlgebra",
    "UnitError",
    "parse_time_ps",
    "parse_bandwidth",
    "parse_bytes",
    "parse_frequency",
    "SI_PREFIXES",
    "BINARY_PREFIXES",
]


class UnitError(ValueError):
    """A value that cannot be parsed, or units that do not fit the operation."""


#: Decimal SI prefixes (both ``k`` and ``K`` are 1e3, as SST accepts).
SI_PREFIXES: dict[str, Fraction] = {
    "a": Fraction(1, 10**18),
    "f": Fraction(1, 10**15),
    "p": Fraction(1, 10**12),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "K": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

#: Binary prefixes (1024**n).
BINARY_PREFIXES: dict[str, Fraction] = {
    "Ki": Fraction(1024),
    "Mi": Fraction(1024**2),
    "Gi": Fraction(1024**3),
    "Ti": Fraction(1024**4),
    "Pi": Fraction(1024**5),
    "Ei": Fraction(1024**6),
}

# Dimensions: a sorted tuple of (base unit, non-zero integer exponent).
Dims = tuple[tuple[str, int], ...]

# name -> dims it stands for
_NAMED_UNITS: dict[str, Dims] = {
    "s": (("s", 1),),
    "B": (("B", 1),),
    "b": (("b", 1),),
    "events": (("events", 1),),
    "event": (("events", 1),),
    "Hz": (("s", -1),),
    "hz": (("s", -1),),
    "Bps": (("B", 1), ("s", -1)),
    "bps": (("b", 1), ("s", -1)),
}

_NUMBER_RE = re.compile(
    r"\s*(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>.*?)\s*\Z", re.S
)
_TERMS = r"[A-Za-z]+(?:-[A-Za-z]+)*"
_UNIT_RE = re.compile(rf"(?P<num>{_TERMS}|1)?(?:/(?P<den>{_TERMS}))?\Z")
_UNIT_CHARS_RE = re.compile(r"[A-Za-z0-9/\- ]*\Z")

# Names used in error messages, keyed by dims with bits folded into bytes.
_KINDS: dict[Dims, str] = {
    (("s", 1),): "a time",
    (("s", -1),): "a frequency",
    (("B", 1),): "a size",
    (("B", 1), ("s", -1)): "a bandwidth",
    (("events", 1),): "an event count",
    (("events", 1), ("s", -1)): "an event rate",
    (): "a plain number",
}

_TIME: Dims = (("s", 1),)
_FREQ: Dims = (("s", -1),)
_BYTES: Dims = (("B", 1),)
_BW: Dims = (("B", 1), ("s", -1))
_PS_PER_S = 10**12


def _combine(a: Dims, b: Dims, sign: int = 1) -> Dims:
    """Dims of a * b**sign."""
    exps = dict(a)
    for name, e in b:
        exps[name] = exps.get(name, 0) + sign * e
    return tuple(sorted((n, e) for n, e in exps.items() if e))


def _fold_bits(dims: Dims) -> tuple[Fraction, Dims]:
    """Rewrite bits as bytes: returns (factor, dims) with value_in_B_dims = value * factor."""
    exps = dict(dims)
    e = exps.pop("b", 0)
    if not e:
        return Fraction(1), dims
    exps["B"] = exps.get("B", 0) + e
    return Fraction(1, 8) ** e, tuple(sorted((n, x) for n, x in exps.items() if x))


def _units_string(dims: Dims) -> str:
    """Canonical unit text for dims (see module docstring)."""
    if not dims:
        return ""
    if dims == _FREQ:
        return "Hz"
    num = [n for n, e in dims if e > 0 for _ in range(e)]
    den = [n for n, e in dims if e < 0 for _ in range(-e)]
    text = "-".join(num) if num else "1"
    if den:
        text += "/" + "-".join(den)
    return text


def _round_nearest(q: Fraction) -> int:
    """Nearest integer, ties away from zero."""
    r = math.floor(abs(q) + Fraction(1, 2))
    return r if q >= 0 else -r


#: SST-core keeps UnitAlgebra values as fixed point with 24 decimal places (sst_big_num).
_SST_FRACTION_DIGITS = 24
#: ... and 24 whole digits: "all digits" when printing means 48 significant digits.
_SST_ALL_DIGITS = 48


def _format_number(q: Fraction, precision: int | None) -> str:
    """Decimal text for q as SST-core 16 prints a UnitAlgebra number: q rounded to SST's 24
    decimal places, then to ``precision`` significant digits (None or <= 0: all digits), shown
    like C's ``%g`` at that precision (scientific when the exponent is below -4 or not below the
    precision: ``1e-09``, ``7.14285714285714e-10``; else fixed: ``16000000000``, ``2.048``),
    trailing zeros dropped."""
    scale = 10 ** _SST_FRACTION_DIGITS
    units = _round_nearest(q * scale)
    if units == 0:
        return "0"
    digits = _SST_ALL_DIGITS if precision is None or precision <= 0 else precision
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.rounding = ROUND_HALF_UP
        d = +(Decimal(units).scaleb(-_SST_FRACTION_DIGITS))
    exponent = d.adjusted()
    if exponent < -4 or exponent >= digits:
        sign, mant_digits, _ = d.as_tuple()
        mant = "".join(map(str, mant_digits)).rstrip("0") or "0"
        text = mant[0] + ("." + mant[1:] if len(mant) > 1 else "")
        return f"{'-' if sign else ''}{text}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _format_human(q: Fraction) -> str:
    """Decimal text for messages: exact when it terminates within 20 significant digits, else
    12 significant digits (no exponent between 1e-7 and 1e20)."""
    if q == 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = 20
        ctx.traps[Inexact] = False
        d = Decimal(q.numerator) / Decimal(q.denominator)
        if ctx.flags[Inexact]:
            ctx.prec = 12
            d = Decimal(q.numerator) / Decimal(q.denominator)
        d = d.normalize()
    return format(d, "f") if -7 <= d.adjusted() <= 20 else format(d, "e")


@lru_cache(maxsize=4096)
def _parse_term(term: str) -> tuple[Fraction, Dims] | None:
    dims = _NAMED_UNITS.get(term)
    if dims is not None:
        return Fraction(1), dims
    if len(term) > 2 and term[:2] in BINARY_PREFIXES and term[2:] in _NAMED_UNITS:
        return BINARY_PREFIXES[term[:2]], _NAMED_UNITS[term[2:]]
    if len(term) > 1 and term[0] in SI_PREFIXES and term[1:] in _NAMED_UNITS:
        return SI_PREFIXES[term[0]], _NAMED_UNITS[term[1:]]
    return None


@lru_cache(maxsize=4096)
def _parse_units(unit: str) -> tuple[Fraction, Dims] | str:
    """(multiplier, dims) for a unit expression, or an error reason (str)."""
    if unit == "":
        return Fraction(1), ()
    m = _UNIT_RE.match(unit)
    if m is None or (m.group("num") in (None, "1") and m.group("den") is None):
        return f"malformed unit '{unit}'"
    mult = Fraction(1)
    dims: Dims = ()
    for group, sign in (("num", 1), ("den", -1)):
        text = m.group(group)
        if text is None or text == "1":
            continue
        for term in text.split("-"):
            parsed = _parse_term(term)
            if parsed is None:
                return f"unknown unit '{term}'"
            tmult, tdims = parsed
            mult = mult * tmult if sign > 0 else mult / tmult
            dims = _combine(dims, tdims, sign)
    return mult, dims


#: the longest number text a value may have, and the largest power of ten it may name: far
#: beyond SST's fixed point (24 whole and 24 decimal digits), and small enough that a value is
#: parsed, printed and compared at once (``1e99999999`` would build a 100-million-digit integer)
MAX_NUMBER_CHARS = 100
MAX_EXPONENT = 400


def abbreviate(text: str) -> str:
    """``text`` for a message: long text cut to its start and its length."""
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _check_number(num: str, text: str) -> None:
    """Refuse a number too long to be meant, or a power of ten beyond any range."""
    mantissa, _, exponent = num.lower().partition("e")
    if len(mantissa) > MAX_NUMBER_CHARS:
        raise UnitError(f"'{abbreviate(text)}': the number has {len(mantissa)} characters (at most "
                        f"{MAX_NUMBER_CHARS})")
    if exponent and len(exponent.lstrip("+-0")) > 5 or exponent and \
            abs(int(exponent)) > MAX_EXPONENT:
        raise UnitError(f"'{abbreviate(text)}': exponent {exponent} is out of range (at most "
                        f"{MAX_EXPONENT} either way)")


@lru_cache(maxsize=4096)
def _parse_value(text: str) -> tuple[Fraction, Dims]:
    m = _NUMBER_RE.match(text)
    if m is None or not _UNIT_CHARS_RE.match(m.group("unit")):
        raise UnitError(f"'{abbreviate(text)}' is not a number with a unit")
    _check_number(m.group("num"), text)
    parsed = _parse_units(m.group("unit"))
    if isinstance(parsed, str):
        raise UnitError(f"cannot parse '{text}': {parsed}")
    mult, dims = parsed
    return Fraction(m.group("num")) * mult, dims


def _to_fraction(x: object) -> Fraction:
    """Exact Fraction for a plain number; floats go through their shortest repr (0.1 -> 1/10)."""
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, numbers.Rational):
        return Fraction(x.numerator, x.denominator)  # type: ignore[call-overload]
    if isinstance(x, Decimal):
        if not x.is_finite():
            raise UnitError(f"'{x}' is not a finite number")
        return Fraction(x)
    if isinstance(x, numbers.Real):
        f = float(x)
        if not math.isfinite(f):
            raise UnitError(f"'{f}' is not a finite number")
        return Fraction(repr(f))
    raise TypeError(f"expected a number, got {type(x).__name__}")


_Operand = Union["UnitAlgebra", int, float, Fraction, Decimal]


class UnitAlgebra:
    """An exact number with units, following SST-core's ``UnitAlgebra``.

    ``UnitAlgebra(x)`` accepts a string (see the module docstring for the grammar), a plain
    number (unitless; floats are taken at their shortest decimal repr) or another
    ``UnitAlgebra`` (copied). Immutable and hashable.

    Attributes:
        value: exact value in base units (s, B, b, events; Hz is 1/s), a ``Fraction``.
        units: canonical unit string, e.g. ``"B/s"``, ``"Hz"``, ``"s"``, ``""``.
    """

    __slots__ = ("_value", "_dims", "_text")
    __array_ufunc__ = None  # let numpy scalars defer to our reflected operators

    _value: Fraction
    _dims: Dims
    _text: str | None

    def __init__(self, value: str | int | float | Fraction | Decimal | UnitAlgebra) -> None:
        if isinstance(value, UnitAlgebra):
            v, dims, text = value._value, value._dims, value._text
        elif isinstance(value, str):
            v, dims = _parse_value(value)
            text = value.strip()
        elif isinstance(value, (numbers.Real, Decimal)):
            v, dims, text = _to_fraction(value), (), None
        else:
            raise TypeError(
                f"UnitAlgebra() takes a string, a number or a UnitAlgebra, "
                f"not {type(value).__name__}"
            )
        object.__setattr__(self, "_value", v)
        object.__setattr__(self, "_dims", dims)
        object.__setattr__(self, "_text", text)

    @classmethod
    def _make(cls, value: Fraction, dims: Dims) -> UnitAlgebra:
        obj = object.__new__(cls)
        object.__setattr__(obj, "_value", value)
        object.__setattr__(obj, "_dims", dims)
        object.__setattr__(obj, "_text", None)
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("UnitAlgebra is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("UnitAlgebra is immutable")

    def __reduce__(self):  # pickling: rebuild from exact parts
        return (_rebuild, (self._value, self._dims))

    # ----------------------------------------------------------------- accessors
    @property
    def value(self) -> Fraction:
        """Exact value in base units."""
        return self._value

    @property
    def units(self) -> str:
        """Canonical unit string (``"Hz"`` for 1/s; ``""`` when unitless)."""
        return _units_string(self._dims)

    def _describe(self) -> str:
        """The text the user wrote, or the best-SI rendering for computed values."""
        return self._text if self._text is not None else self.human()

    def hasUnits(self, unit: str) -> bool:
        """True when this value has the dimensions of ``unit``; prefixes in ``unit`` are
        ignored (``hasUnits("GB/s")`` is true for any B/s value), ``Hz`` and ``1/s`` are the
        same, ``b`` and ``B`` differ. Raises UnitError for an unknown unit."""
        parsed = _parse_units(unit.strip())
        if isinstance(parsed, str):
            raise UnitError(f"cannot parse unit '{unit}': {parsed}")
        return parsed[1] == self._dims

    def isValueZero(self) -> bool:
        """True when the value is exactly zero."""
        return self._value == 0

    def invert(self) -> UnitAlgebra:
        """1/self as a new value (units inverted: ``s`` <-> ``Hz``). Zero raises
        ZeroDivisionError."""
        if self._value == 0:
            raise ZeroDivisionError(f"cannot invert zero ('{self._describe()}')")
        return UnitAlgebra._make(1 / self._value, tuple((n, -e) for n, e in self._dims))

    def getRoundedValue(self) -> int:
        """Value in base units rounded to the nearest integer (ties away from zero)."""
        return _round_nearest(self._value)

    def getDoubleValue(self) -> float:
        """Value in base units as a float (correctly rounded)."""
        return float(self._value)

    getFloatValue = getDoubleValue  # the name SST's Python module uses

    # ----------------------------------------------------------------- text
    def toString(self, precision: int | None = None) -> str:
        """Value in base units with canonical units and no prefix, as SST-core 16 prints it:
        ``"1400000000 Hz"``, ``"1e-09 s"``, ``"7.14285714285714e-10 s"``. ``precision`` =
        significant digits; None (or <= 0) prints every digit SST keeps (24 decimal places).
        This is ``str()``."""
        num = _format_number(self._value, precision)
        units = self.units
        return f"{num} {units}" if units else num

    def _best_prefix(self, kilo: str) -> tuple[Fraction, str]:
        """(value scaled, prefix) putting the number in [1, 1000); no prefix for unitless
        values, units without a numerator (``1/B``) and zero."""
        units = self.units
        if not units or units.startswith("1/") or self._value == 0:
            return self._value, ""
        mag = abs(self._value)
        exp3 = 0
        while exp3 < 18 and mag >= Fraction(10) ** (exp3 + 3):
            exp3 += 3
        while exp3 > -18 and mag < Fraction(10) ** exp3:
            exp3 -= 3
        prefix = {-18: "a", -15: "f", -12: "p", -9: "n", -6: "u", -3: "m", 0: "",
                  3: kilo, 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}[exp3]
        return self._value / Fraction(10) ** exp3, prefix

    def toStringBestSI(self, precision: int | None = 6) -> str:
        """Text with the SI prefix that puts the number in [1, 1000), as SST-core 16's
        ``bestSI()``: SST's prefixes (``K`` for kilo) and ``precision`` significant digits
        (default 6, as SST): ``"16 GB/s"``, ``"2.048 KB"``, ``"4.29497 GB"``,
        ``"714.286 ps"``. Units without a numerator (``1/B``) and unitless values get no
        prefix."""
        value, prefix = self._best_prefix("K")
        num = _format_number(value, precision)
        units = self.units
        return f"{num} {prefix}{units}" if units else num

    bestSI = toStringBestSI  # the name SST's Python module uses

    def human(self) -> str:
        """Best-SI text for the project's own messages: exact when the number terminates within
        20 digits, else 12 significant digits, ``k`` for kilo (``"714.285714286 ps"``,
        ``"2.048 kB"``). Not SST's format: see :meth:`toStringBestSI` for that."""
        value, prefix = self._best_prefix("k")
        num = _format_human(value)
        units = self.units
        return f"{num} {prefix}{units}" if units else num

    def __str__(self) -> str:
        return self.toString()

    def __repr__(self) -> str:
        return f"UnitAlgebra('{self.toString()}')"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    # ----------------------------------------------------------------- conversions
    def _kind_error(self, kind: str, expected: str) -> UnitError:
        if not self._dims:  # a bare number: the unit was left out
            return UnitError(f"'{self._describe()}' is not {kind}: it has no unit (expected "
                             f"{expected})")
        return UnitError(f"'{self._describe()}' is not {kind} (expected {expected})")

    def to_picoseconds(self) -> int:
        """Time in integer picoseconds, rounded to nearest (ties away from zero). A frequency
        is taken as a clock and its period returned (``"1.4GHz"`` -> 714)."""
        if self._dims == _TIME:
            return _round_nearest(self._value * _PS_PER_S)
        if self._dims == _FREQ:
            if self._value == 0:
                raise UnitError(f"'{self._describe()}' has no period (frequency is zero)")
            return _round_nearest(_PS_PER_S / self._value)
        raise self._kind_error("a time", "s or Hz")

    def to_seconds(self) -> float:
        """Time in seconds (time units only)."""
        if self._dims != _TIME:
            raise self._kind_error("a time", "s")
        return float(self._value)

    def to_hertz(self) -> float:
        """Frequency in Hz; a time is taken as a period and its frequency returned."""
        if self._dims == _FREQ:
            return float(self._value)
        if self._dims == _TIME:
            if self._value == 0:
                raise UnitError(f"'{self._describe()}' has no frequency (period is zero)")
            return float(1 / self._value)
        raise self._kind_error("a frequency", "Hz or s")

    def to_bytes(self) -> int:
        """Size in bytes (B, or b / 8), rounded to nearest (ties away from zero)."""
        factor, dims = _fold_bits(self._dims)
        if dims != _BYTES:
            raise self._kind_error("a size", "B or b")
        return _round_nearest(self._value * factor)

    def to_bytes_per_second(self) -> float:
        """Bandwidth in B/s (B/s, or b/s / 8)."""
        factor, dims = _fold_bits(self._dims)
        if dims != _BW:
            raise self._kind_error("a bandwidth", "B/s or b/s")
        return float(self._value * factor)

    def to_float(self, expected_unit: str) -> float:
        """Value expressed in ``expected_unit`` (which may carry a prefix: ``"GB/s"``,
        ``"ns"``, ``"KiB"``). Bits and bytes convert (8 b = 1 B); otherwise the dimensions
        must match exactly (no Hz <-> s here). Raises e.g.
        ``UnitError("'12 ns' is not a bandwidth (expected B/s)")``."""
        parsed = _parse_units(expected_unit.strip())
        if isinstance(parsed, str):
            raise UnitError(f"cannot parse unit '{expected_unit}': {parsed}")
        mult, target = parsed
        tfactor, tdims = _fold_bits(target)
        sfactor, sdims = _fold_bits(self._dims)
        if sdims != tdims:
            kind = _KINDS.get(tdims, f"in units of {expected_unit}")
            raise self._kind_error(kind, expected_unit)
        return float(self._value * sfactor / (mult * tfactor))

    def __float__(self) -> float:
        return float(self._value)

    def __int__(self) -> int:
        return self.getRoundedValue()

    def __bool__(self) -> bool:
        return self._value != 0

    # ----------------------------------------------------------------- arithmetic
    @staticmethod
    def _coerce(other: object) -> UnitAlgebra | None:
        if isinstance(other, UnitAlgebra):
            return other
        if isinstance(other, (numbers.Real, Decimal)):
            return UnitAlgebra._make(_to_fraction(other), ())
        return None

    def _same_units(self, other: UnitAlgebra, verb: str) -> None:
        if self._dims != other._dims:
            raise UnitError(
                f"cannot {verb} '{self._describe()}' and '{other._describe()}': units differ "
                f"({self.units or 'unitless'} vs {other.units or 'unitless'})"
            )

    def __add__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        self._same_units(o, "add")
        return UnitAlgebra._make(self._value + o._value, self._dims)

    def __radd__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o.__add__(self)

    def __sub__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        self._same_units(o, "subtract")
        return UnitAlgebra._make(self._value - o._value, self._dims)

    def __rsub__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o.__sub__(self)

    def __mul__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return UnitAlgebra._make(self._value * o._value, _combine(self._dims, o._dims))

    def __rmul__(self, other: _Operand) -> UnitAlgebra:
        return self.__mul__(other)

    def __truediv__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        if o._value == 0:
            raise ZeroDivisionError(f"'{self._describe()}' divided by zero")
        return UnitAlgebra._make(self._value / o._value, _combine(self._dims, o._dims, -1))

    def __rtruediv__(self, other: _Operand) -> UnitAlgebra:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o.__truediv__(self)

    def __neg__(self) -> UnitAlgebra:
        return UnitAlgebra._make(-self._value, self._dims)

    def __pos__(self) -> UnitAlgebra:
        return self

    def __abs__(self) -> UnitAlgebra:
        return UnitAlgebra._make(abs(self._value), self._dims)

    # ----------------------------------------------------------------- comparison
    def __eq__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._dims == o._dims and self._value == o._value

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        if not self._dims:
            return hash(self._value)  # equal plain numbers hash alike
        return hash((self._value, self._dims))

    def _order(self, other: object) -> UnitAlgebra | None:
        o = self._coerce(other)
        if o is not None:
            self._same_units(o, "compare")
        return o

    def __lt__(self, other: _Operand) -> bool:
        o = self._order(other)
        return NotImplemented if o is None else self._value < o._value

    def __le__(self, other: _Operand) -> bool:
        o = self._order(other)
        return NotImplemented if o is None else self._value <= o._value

    def __gt__(self, other: _Operand) -> bool:
        o = self._order(other)
        return NotImplemented if o is None else self._value > o._value

    def __ge__(self, other: _Operand) -> bool:
        o = self._order(other)
        return NotImplemented if o is None else self._value >= o._value


def _rebuild(value: Fraction, dims: Dims) -> UnitAlgebra:
    return UnitAlgebra._make(value, dims)


# --------------------------------------------------------------------- convenience parsers
_Input = Union[str, UnitAlgebra]


def _checked(text: _Input, kind: str, allow_negative: bool) -> UnitAlgebra:
    ua = UnitAlgebra(text) if not isinstance(text, UnitAlgebra) else text
    if not allow_negative and ua.value < 0:
        raise UnitError(f"'{ua._describe()}' is negative; {kind} must not be negative")
    return ua


def parse_time_ps(text: _Input, *, allow_negative: bool = False) -> int:
    """Time in integer picoseconds (``"10ns"`` -> 10000); a frequency gives its period
    (``"1.4GHz"`` -> 714). Rounded to nearest, ties away from zero. Unitless numbers are
    rejected."""
    return _checked(text, "a time", allow_negative).to_picoseconds()


def parse_bandwidth(text: _Input, *, allow_negative: bool = False) -> float:
    """Bandwidth in B/s (``"16GB/s"`` -> 16e9; ``"8Gb/s"`` -> 1e9)."""
    return _checked(text, "a bandwidth", allow_negative).to_bytes_per_second()


def parse_bytes(text: _Input, *, allow_negative: bool = False) -> int:
    """Size in integer bytes (``"2KiB"`` -> 2048; ``"12b"`` -> 2), rounded to nearest."""
    return _checked(text, "a size", allow_negative).to_bytes()


def parse_frequency(text: _Input, *, allow_negative: bool = False) -> float:
    """Frequency in Hz (``"1.4GHz"`` -> 1.4e9); a time gives its inverse (``"1ns"`` -> 1e9)."""
    return _checked(text, "a frequency", allow_negative).to_hertz()
