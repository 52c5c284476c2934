"""Durations as text and as integer picoseconds: ``parse_duration("1.25ms") == 1_250_000_000``
and ``format_ps`` writes a picosecond count back as exact text (``format_ps(1_250_000_000) ==
"1.25ms"``). Kernel times are integers everywhere; text is only where a stream or a
layer-times file is read or written."""
from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

__all__ = ["parse_duration", "format_ps"]

_DURATION_RE = re.compile(r"^((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(ps|ns|us|ms|s)$")
_MAX_PS = Decimal(10) ** 24  # ~30 years: anything longer is a typo
_PS_PER = {"ps": 1, "ns": 10**3, "us": 10**6, "ms": 10**9, "s": 10**12}


def parse_duration(text: str) -> int:
    """Parse ``"1.25ms"`` / ``"800us"`` / ``"3e-3s"`` into integer picoseconds (ValueError if bad)."""
    m = _DURATION_RE.match(text)
    if not m:
        raise ValueError(f"bad duration {text!r} (expected a number with ps, ns, us, ms or s)")
    try:
        value = Decimal(m.group(1)) * _PS_PER[m.group(2)]
        if value > _MAX_PS:
            raise ValueError(f"duration {text!r} is implausibly long")
        return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    except (ArithmeticError, InvalidOperation):
        raise ValueError(f"bad duration {text!r}") from None


def format_ps(ps: int) -> str:
    """A duration in picoseconds as exact text in the largest unit it reaches (``parse_duration``
    reads it back to the same picosecond)."""
    for unit, digits in (("ms", 9), ("us", 6), ("ns", 3)):
        if ps >= 10**digits:
            whole, frac = divmod(ps, 10**digits)
            tail = f"{frac:0{digits}d}".rstrip("0")
            return f"{whole}.{tail}{unit}" if tail else f"{whole}{unit}"
    return f"{ps}ps"
