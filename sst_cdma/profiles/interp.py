"""Piecewise-linear interpolation over training progress, clamped at both ends."""
from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

__all__ = ["interpolate"]


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Value at ``x`` of the polyline through ``(xs[i], ys[i])``.

    ``xs`` must be strictly increasing and non-empty. Outside ``[xs[0], xs[-1]]`` the nearest
    end value is returned (clamping), so a single point gives a constant.
    """
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        return float(ys[-1])
    i = bisect_right(xs, x)  # xs[i-1] <= x < xs[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
