"""The kernel model's derivatives with respect to its fitted constants, in closed form: for each
kernel, d log(seconds) / d log(parameter) of every :class:`~sst_cdma.model.kernel_model.
KernelParams` field, beside the seconds themselves (the same numbers, bit for bit, as
:func:`~sst_cdma.model.kernel_model.conv_times` and :func:`~sst_cdma.model.kernel_model.
gemm_times` give). The calibration's least squares fits log(predicted / measured) in
log-parameter space, so this is its Jacobian (:func:`sst_cdma.model.calibration.fit`).

The model is piecewise: each kernel's time is the fastest algorithm, of the fastest tile and
split, of the slower of compute and memory, at least the host's issue interval. Each piece is a
product of the constants' powers, except three sums, so its log-derivatives are simple:

* compute of a GEMM tile, (FLOPs + ``tile_fill_k`` x fill) / (peak x share x
  I / (I + ``tile_reuse``)): ``tile_fill_k`` x fill / (FLOPs + ``tile_fill_k`` x fill) on
  ``tile_fill_k``, ``tile_reuse`` / (I + ``tile_reuse``) on ``tile_reuse``, and minus the
  share's on its factors (``gemm_efficiency``, the pass's own factor, ``blas_efficiency``,
  ``winograd_efficiency`` or ``fft_efficiency``; the plane factor plane / (plane +
  ``plane_elements``) gives -``plane_elements`` / (plane + ``plane_elements``));
* memory, bytes / (bandwidth x ``memory_efficiency``): -1 on ``memory_efficiency``;
* the issue interval, ``launch_s`` x calls: 1 on ``launch_s``;
* non-fused Winograd, its GEMMs plus the transforms' DRAM traffic: the two's derivatives
  weighted by their shares of the sum.

The derivative is the piece's that the model picks at these constants (where two pieces tie,
the compute side's, the model's first): the model is smooth within a piece, so away from the
ties this is the derivative, and at a tie it is one of the two one-sided ones
(tests/model/test_kernel_gradient.py checks both against finite differences).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from sst_cdma.model.kernel_model import (ALGORITHMS, PASSES, Hardware, KernelParams, ModelError,
                                         _Conv, _depthwise, _fastest_within, _fft_terms,
                                         _gemm_bounds, _gemm_terms, _gemm_candidates,
                                         _GemmKind, _memory_s, _one_pixel_gemm, _pass_shape, issued,
                                         _PassShape, _TC_TILES, _TILES, _winograd_gemms,
                                         _ELEMENT)

__all__ = ["PARAMETERS", "GEMM_USES", "conv_log_gradient", "conv_uses", "gemm_log_gradient"]

#: The parameters the gradients' columns stand for, in order (:meth:`KernelParams.names`).
PARAMETERS = KernelParams.names()
_COLUMN = {name: i for i, name in enumerate(PARAMETERS)}


def _only(shape: tuple[int, ...], **columns: Any) -> np.ndarray:
    """A gradient of ``shape`` x parameters, zero but for ``columns`` (parameter: value)."""
    out = np.zeros(shape + (len(PARAMETERS),))
    for name, value in columns.items():
        out[..., _COLUMN[name]] = value
    return out


def _slower(a: np.ndarray, grad_a: np.ndarray, b: np.ndarray, grad_b: np.ndarray) -> np.ndarray:
    """The gradient of ``np.maximum(a, b)``: ``a``'s where a >= b, else ``b``'s."""
    return np.where((a >= b)[..., None], grad_a, grad_b)


def _gemm_time(c: Mapping[str, np.ndarray], hw: Hardware, kp: KernelParams, efficiency: Any,
               grad_efficiency: np.ndarray, dram: Any, peak: Any = None,
               smem_bound: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The model's ``_gemm_time`` and its log-gradient, given the log-gradient of
    ``efficiency`` (problems x parameters, or parameters)."""
    compute, memory = _gemm_bounds(c, hw, kp, efficiency, dram, peak, smem_bound)
    both = np.maximum(compute, memory)
    pick = np.argmin(both, axis=-1)[..., None]

    def picked(a: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.broadcast_to(a, both.shape), pick, axis=-1)[..., 0]

    seconds, comp, mem = picked(both), picked(compute), picked(memory)
    fill, flops, reuse = (picked(c[key]) for key in ("fill", "flops", "reuse"))
    extra = kp.tile_fill_k * fill
    grad_compute = -np.broadcast_to(grad_efficiency, seconds.shape + (len(PARAMETERS),))
    grad_compute = grad_compute + _only(seconds.shape, tile_fill_k=extra / (flops + extra),
                                        tile_reuse=kp.tile_reuse / (reuse + kp.tile_reuse))
    grad_memory = _only(seconds.shape, memory_efficiency=-1.0)
    return seconds, _slower(comp, grad_compute, mem, grad_memory)


def _plane_gradient(cv: _Conv, ps: _PassShape, pass_: str, kp: KernelParams) -> np.ndarray:
    """The log-gradient of the pass's share factor (``_PassShape.eff``): its backward
    factors, and the plane factor plane / (plane + ``plane_elements``)."""
    plane = ps.out_h * ps.out_w
    columns: dict[str, Any] = {"plane_elements": -kp.plane_elements / (plane + kp.plane_elements)}
    if pass_ == "bwd_data":
        columns["bwd_data_efficiency"] = 1.0
        columns["strided_dgrad_efficiency"] = ((cv.sh > 1) | (cv.sw > 1)).astype(float)
    elif pass_ == "bwd_filter":
        columns["bwd_filter_efficiency"] = 1.0
    return _only(cv.n.shape, **columns)


def _gemm_busy(m: Any, n: Any, k: Any, hw: Hardware, kp: KernelParams, batch: Any, dtype: str,
               kind: Any) -> tuple[np.ndarray, np.ndarray]:
    """The model's ``_gemm_busy`` (a cuBLAS GEMM's seconds without its launch) and its
    log-gradient (on tensor cores, with respect to ``kind.kp``)."""
    cand, dram, peak = _gemm_terms(m, n, k, hw, batch, dtype,
                                   None if kind is None else kind.peak)
    gk = kp if kind is None else kind.kp
    return _gemm_time(cand, hw, gk, gk.gemm_efficiency * gk.blas_efficiency,
                      _only((), gemm_efficiency=1.0, blas_efficiency=1.0), dram, peak)


def _gemm_algorithms(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware, kp: KernelParams,
                     grad_eff: np.ndarray, tensor_peak: float, space: dict[str, Any]
                     ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The model's GEMM-like algorithms (``_price_gemm_algorithms``) with their gradients;
    their workspace into ``space``."""
    tiles = _TC_TILES if cv.tensor else _TILES
    cand = _gemm_candidates(ps.gm, ps.gn, ps.gk, hw.sms, cv.g, tiles,
                            fill_skinny=pass_ == "bwd_filter")
    gemm, grad = _gemm_time(cand, hw, kp, kp.gemm_efficiency * ps.eff,
                            grad_eff + _only((), gemm_efficiency=1.0), ps.dram,
                            tensor_peak or None, smem_bound=pass_ == "bwd_filter" and
                            not cv.tensor)
    out = {"IMPLICIT_PRECOMP_GEMM": (gemm, grad), "IMPLICIT_GEMM": (gemm * (1 + 1e-9), grad)}
    if pass_ == "fwd":
        space["IMPLICIT_PRECOMP_GEMM"] = ps.gk * 8.0
    one_pixel, gemm_shape, dtype = _one_pixel_gemm(cv, pass_)
    kind = _GemmKind(tensor_peak, kp, cv.element) if cv.tensor else None
    busy, grad_busy = np.full(one_pixel.shape, np.inf), _only(one_pixel.shape)
    if one_pixel.any():
        m, n, k = (x[one_pixel] for x in gemm_shape)
        busy[one_pixel], grad_busy[one_pixel] = _gemm_busy(m, n, k, hw, kp, cv.g[one_pixel],
                                                           dtype, kind)
    out["GEMM"] = (busy, grad_busy)
    depthwise, direct_flops = _depthwise(cv)
    compute = direct_flops / (hw.peak_flops * kp.gemm_efficiency * ps.eff)
    memory = _memory_s(ps.dram, hw, kp)
    out["DEPTHWISE"] = (np.where(depthwise, np.maximum(compute, memory), np.inf),
                        _slower(compute, -grad_eff - _only((), gemm_efficiency=1.0), memory,
                                _only(compute.shape, memory_efficiency=-1.0)))
    return out


def _winograd_fft(cv: _Conv, ps: _PassShape, pass_: str, hw: Hardware, kp: KernelParams,
                  grad_eff: np.ndarray, space: dict[str, Any]
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The model's Winograd and FFT algorithms (``_price_winograd``, ``_price_fft``) with
    their gradients; their workspace into ``space``."""
    out = {}
    grad_memory = _only(cv.n.shape, memory_efficiency=-1.0)
    grad_wino = grad_eff + _only((), winograd_efficiency=1.0)
    rows = cv.wino_ok
    eff, dram, grad_wino = ps.eff[rows], ps.dram[rows], grad_wino[rows]
    for algo, cand, t_in, t_out in _winograd_gemms(cv, ps, pass_, hw):
        t, grad = np.full(rows.shape, np.inf), np.zeros(rows.shape + (len(PARAMETERS),))
        if algo == "WINOGRAD_NONFUSED":
            space[algo] = t_in + t_out
        if cand is None:  # Winograd serves none of these convolutions
            out[algo] = (t, grad)
            continue
        if algo == "WINOGRAD":
            t[rows], grad[rows] = _gemm_time(cand, hw, kp, kp.winograd_efficiency * eff,
                                             grad_wino, dram)
        else:
            moved_in, moved_out = t_in[rows], t_out[rows]
            gemm, grad_gemm = _gemm_time(cand, hw, kp, kp.winograd_efficiency * eff,
                                         grad_wino, moved_in + moved_out)
            moved = _memory_s(dram + moved_in + moved_out, hw, kp)
            t[rows] = gemm + moved
            grad[rows] = (gemm[..., None] * grad_gemm +
                          moved[..., None] * grad_memory[rows]) / t[rows][..., None]
        out[algo] = (t, grad)
    for algo, work, bufs, valid in _fft_terms(cv):
        compute = work / (hw.peak_flops * kp.fft_efficiency * ps.eff)
        memory = _memory_s(ps.dram + 2 * bufs, hw, kp)
        out[algo] = (np.where(valid, np.maximum(compute, memory), np.inf),
                     _slower(compute, -grad_eff - _only((), fft_efficiency=1.0), memory,
                             grad_memory))
        space[algo] = bufs
    return out


def conv_log_gradient(prob: Mapping[str, Any], pass_: str, hw: Hardware, kp: KernelParams,
                      workspace_limit: Any = math.inf, *, tensor_peak: float = 0.0,
                      element: int = _ELEMENT) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~sst_cdma.model.kernel_model.conv_times`' seconds (the same arguments, the same
    numbers) and their log-gradient: problems x :data:`PARAMETERS`, d log(seconds) /
    d log(parameter) of the algorithm, tile and bound the model picks."""
    if pass_ not in PASSES:
        raise ModelError(f"unknown pass {pass_!r} (one of {', '.join(PASSES)})")
    cv = _Conv(prob, element, tensor_peak > 0)
    ps = _pass_shape(cv, pass_, kp)
    grad_eff = _plane_gradient(cv, ps, pass_, kp)
    space: dict[str, Any] = dict.fromkeys(ALGORITHMS, np.zeros(cv.n.shape))
    priced = _gemm_algorithms(cv, ps, pass_, hw, kp, grad_eff, tensor_peak, space)
    if not cv.tensor:
        priced.update(_winograd_fft(cv, ps, pass_, hw, kp, grad_eff, space))
    inf = np.full(cv.n.shape, np.inf)
    times = {a: priced[a][0] if a in priced else inf for a in ALGORITHMS}
    res = _fastest_within(cv, times, space, kp, workspace_limit, pass_)
    pick = res["algorithm"]
    rows = np.arange(pick.size).reshape(pick.shape)
    grads = np.stack([np.broadcast_to(priced[a][1], cv.n.shape + (len(PARAMETERS),))
                      if a in priced else _only(cv.n.shape) for a in ALGORITHMS], axis=-2)
    work = np.stack([times[a] for a in ALGORITHMS], axis=-1)[rows, pick]
    # the host's issue interval rules where it is longer than the work
    launched = (res["seconds"] > work)[..., None]
    return res["seconds"], np.where(launched, _only(cv.n.shape, launch_s=1.0),
                                    grads[rows, pick])


def gemm_log_gradient(m: Any, n: Any, k: Any, hw: Hardware, kp: KernelParams, *,
                      batch: Any = 1, dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """:func:`~sst_cdma.model.kernel_model.gemm_times`' seconds of cuBLAS GEMMs without
    tensor cores (the same numbers) and their log-gradient (GEMMs x :data:`PARAMETERS`)."""
    if hw.on_tensor_cores(dtype):
        raise ModelError(f"gemm_log_gradient: {dtype} runs on this GPU's tensor cores, whose "
                         "constants are not kp")
    busy, grad = _gemm_busy(m, n, k, hw, kp, batch, dtype, None)
    seconds = issued(busy, kp)
    launched = (seconds > busy)[..., None]
    return seconds, np.where(launched, _only(busy.shape, launch_s=1.0), grad)


# Which constants each convolution algorithm's time uses (beside ``launch_s``, which every
# kernel's issue uses): the GEMM tiles' constants where it runs GEMMs, its own share of peak, the
# pass's share factors where it scales the pass's, the DRAM share everywhere.
_GEMM_TILE = ("tile_reuse", "tile_fill_k", "memory_efficiency")
_ALGORITHM_USES: dict[str, tuple[str, ...]] = {
    "IMPLICIT_GEMM": ("gemm_efficiency", "plane_elements") + _GEMM_TILE,
    "IMPLICIT_PRECOMP_GEMM": ("gemm_efficiency", "plane_elements") + _GEMM_TILE,
    "WINOGRAD": ("winograd_efficiency", "plane_elements") + _GEMM_TILE,
    "WINOGRAD_NONFUSED": ("winograd_efficiency", "plane_elements") + _GEMM_TILE,
    "FFT": ("fft_efficiency", "plane_elements", "memory_efficiency"),
    "FFT_TILING": ("fft_efficiency", "plane_elements", "memory_efficiency"),
    "GEMM": ("gemm_efficiency", "blas_efficiency") + _GEMM_TILE,
    "DEPTHWISE": ("gemm_efficiency", "plane_elements", "memory_efficiency"),
}
# the share factor of each pass, which every algorithm but the one-pixel GEMM scales by
_PASS_FACTORS = {"fwd": (), "bwd_data": ("bwd_data_efficiency", "strided_dgrad_efficiency"),
                 "bwd_filter": ("bwd_filter_efficiency",)}
#: The constants a cuBLAS GEMM's time uses without tensor cores (:func:`gemm_log_gradient`).
GEMM_USES = ("gemm_efficiency", "blas_efficiency") + _GEMM_TILE + ("launch_s",)


def conv_uses(pass_: str) -> np.ndarray:
    """Which constants each convolution algorithm's time in ``pass_`` uses: a boolean array of
    :data:`~sst_cdma.model.kernel_model.ALGORITHMS` x :data:`PARAMETERS` (``launch_s`` for
    every algorithm: the host issues each). A constant an algorithm does not use leaves its
    time unchanged, to the bit."""
    if pass_ not in PASSES:
        raise ModelError(f"unknown pass {pass_!r} (one of {', '.join(PASSES)})")
    out = np.zeros((len(ALGORITHMS), len(PARAMETERS)), dtype=bool)
    for i, algo in enumerate(ALGORITHMS):
        factors = () if algo == "GEMM" else _PASS_FACTORS[pass_]
        for name in _ALGORITHM_USES[algo] + factors + ("launch_s",):
            out[i, _COLUMN[name]] = True
    return out
