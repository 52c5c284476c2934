"""The kernel model's tensor-core path (sst_cdma/model/kernel_model.py): float16/bfloat16 GEMMs
and fused attention priced from the dense tensor peak, with the same tiles and waves as the
fp32 model; the GPU presets' tensor peaks; fp32 pricing exactly as before."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.kernel_model import (TENSOR_CORE, Hardware, KernelParams, ModelError,
                                         gemm_times, price_attention, price_gemm)

# Ten SMs, bandwidth high enough that no kernel here is memory-bound; tensor cores at 16x fp32.
HW = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, tensor_flops=1.6e14)
#: no launch interval: a call's time is its work alone (the launch hides behind longer work)
KP = replace(KernelParams(), launch_s=0.0)
NO_TC = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18)


def _busy(seconds: float) -> float:
    return seconds


def test_a_large_gemm_on_tensor_cores_is_faster_by_the_peak_and_efficiency_ratio():
    # 1280 x 2560: 10 x 10 tiles of 128x256 (one wave per 10 SMs, ten waves), a long reduction
    m, n, k = 1280, 2560, 1 << 16
    fp32 = _busy(price_gemm(m, n, k, HW, KP).seconds)
    bf16 = price_gemm(m, n, k, HW, KP, dtype="bfloat16")
    assert bf16.algorithm == "TENSOR_GEMM"
    # fp32: 128x128 tiles at gemm x blas efficiency x 64 / (64 + tile_reuse)
    fp32_share = KP.gemm_efficiency * KP.blas_efficiency * 64 / (64 + KP.tile_reuse)
    expected = (HW.tensor_flops * TENSOR_CORE.gemm_efficiency) / (HW.peak_flops * fp32_share)
    assert fp32 / _busy(bf16.seconds) == pytest.approx(expected, rel=0.01)
    # and the big GEMM reaches the assumed share of the tensor peak
    assert 2 * m * n * k / _busy(bf16.seconds) == pytest.approx(
        HW.tensor_flops * TENSOR_CORE.gemm_efficiency, rel=0.01)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_without_tensor_cores_16_bit_gemms_compute_at_the_fp32_rate(dtype):
    m, n, k = 1280, 1280, 1 << 14
    fp32 = price_gemm(m, n, k, NO_TC, KP)
    half = price_gemm(m, n, k, NO_TC, KP, dtype=dtype)
    assert half.algorithm == "GEMM" and half.seconds == fp32.seconds


def test_float16_without_tensor_cores_runs_at_the_half2_rate_where_the_gpu_has_one():
    p100_like = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, fp16_flops=2e13)
    m, n, k = 1280, 1280, 1 << 14
    fp32 = _busy(price_gemm(m, n, k, p100_like, KP).seconds)
    fp16 = _busy(price_gemm(m, n, k, p100_like, KP, dtype="float16").seconds)
    bf16 = _busy(price_gemm(m, n, k, p100_like, KP, dtype="bfloat16").seconds)
    assert fp16 == pytest.approx(fp32 / 2, rel=1e-12)
    assert bf16 == fp32  # no bfloat16 arithmetic: the fp32 rate


def test_volta_tensor_cores_take_float16_only():
    volta = kernel_model_for("volta").hardware
    assert volta.on_tensor_cores("float16") and not volta.on_tensor_cores("bfloat16")
    assert not volta.on_tensor_cores("float32")


def test_small_gemms_pay_for_a_whole_wave():
    # GEMMs of 64x64x64 on 10 SMs: up to 20 run in one wave of 128x64 tiles (two per SM), up
    # to 40 in one wave of 64x64 tiles (four per SM, less reuse); the 41st needs a second wave
    one, twenty, full, over = (price_gemm(64, 64, 64, HW, KP, batch=b, dtype="bfloat16").seconds
                               for b in (1, 20, 40, 41))
    assert one == twenty < full
    assert _busy(over) == pytest.approx(2 * _busy(full), rel=1e-12)
    # a small GEMM reaches a small share of the peak
    rate = 2 * 64**3 / _busy(one)
    assert rate < 0.1 * HW.tensor_flops * TENSOR_CORE.gemm_efficiency


def test_a_batched_gemm_is_one_launch_and_shares_its_waves():
    single = price_gemm(512, 512, 64, HW, KP, dtype="bfloat16").seconds
    batched = price_gemm(512, 512, 64, HW, KP, batch=12, dtype="bfloat16").seconds
    assert batched < 12 * single - 11 * KP.launch_s
    assert batched > single


def test_16_bit_operands_halve_the_bytes_of_a_memory_bound_gemm():
    slow_dram = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e9, tensor_flops=1.6e14)
    m, n, k = 16, 4096, 4096
    operands = m * k + k * n + m * n
    for dtype, size in (("float32", 4), ("bfloat16", 2)):
        t = _busy(price_gemm(m, n, k, slow_dram, KP, dtype=dtype).seconds)
        assert t == pytest.approx(operands * size / (1e9 * KP.memory_efficiency), rel=1e-9)


# -- fused attention ---------------------------------------------------------------------------

def _attention(pass_: str, causal: bool, hw: Hardware = HW, **shape: int) -> float:
    s = dict(batch=1, heads=20, seq_q=8192, seq_k=8192, head_dim=128)
    s.update(shape)
    return _busy(price_attention(s["batch"], s["heads"], s["seq_q"], s["seq_k"], s["head_dim"],
                                 pass_, hw, KP, causal=causal).seconds)


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_causal_attention_costs_about_half(pass_):
    ratio = _attention(pass_, True) / _attention(pass_, False)
    # 64 x 64 blocks of 128: the 2080 on or below the diagonal of 4096 are computed
    assert 0.5 < ratio <= 2080 / 4096 * 1.01


def test_full_attention_runs_at_the_assumed_share_of_the_tensor_peak():
    # 20 heads x 64 query tiles: 128 waves of 10 CTAs, each 64 blocks of 4 x 128 x 128 x 128
    flops = 4 * 20 * 8192**2 * 128
    assert flops / _attention("fwd", False) == pytest.approx(
        HW.tensor_flops * TENSOR_CORE.gemm_efficiency * TENSOR_CORE.attention_fwd, rel=1e-9)
    # the backward pass does 2.5x the forward's FLOPs, at its own share
    assert _attention("bwd", False) / _attention("fwd", False) == pytest.approx(
        2.5 * TENSOR_CORE.attention_fwd / TENSOR_CORE.attention_bwd, rel=1e-9)


def test_attention_of_few_heads_pays_for_a_whole_wave():
    # 2048 queries: 16 query tiles per head; 10 SMs take 10 CTAs at a time
    one_head = _attention("fwd", False, heads=1, seq_q=2048, seq_k=2048)   # 16 CTAs: 2 waves
    five = _attention("fwd", False, heads=5, seq_q=2048, seq_k=2048)       # 80 CTAs: 8 waves
    assert five == pytest.approx(4 * one_head, rel=1e-9)


def test_memory_bound_attention_moves_each_tensor_once_per_pass():
    slow_dram = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e9, tensor_flops=1.6e14)
    b, h, s, d = 2, 4, 1024, 64
    fwd_bytes = b * h * (4 * s * d * 2 + s * 4)   # Q, K, V in, O out (bf16); statistics fp32
    t = _attention("fwd", True, slow_dram, batch=b, heads=h, seq_q=s, seq_k=s, head_dim=d)
    assert t == pytest.approx(fwd_bytes / (1e9 * KP.memory_efficiency), rel=1e-9)
    bwd = _attention("bwd", True, slow_dram, batch=b, heads=h, seq_q=s, seq_k=s, head_dim=d)
    assert bwd > 2 * t


def test_attention_backward_holds_an_fp32_dq_accumulator():
    fwd = price_attention(2, 4, 1000, 1000, 64, "fwd", HW, KP)
    bwd = price_attention(2, 4, 1000, 1000, 64, "bwd", HW, KP)
    assert fwd.workspace_bytes == 0
    assert bwd.workspace_bytes == 2 * 4 * 1024 * (64 + 1) * 4  # queries rounded to 128s
    assert fwd.algorithm == bwd.algorithm == "FLASH_ATTENTION"


def test_causal_attention_with_more_keys_than_queries_sees_the_earlier_keys():
    # bottom-right aligned: 128 new queries over 8192 keys see all of them
    full = _attention("fwd", False, seq_q=128, seq_k=8192)
    assert _attention("fwd", True, seq_q=128, seq_k=8192) == full


def test_attention_without_tensor_cores_is_slower():
    assert _attention("fwd", True, NO_TC) > 5 * _attention("fwd", True)


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: price_gemm(8, 8, 8, HW, KP, dtype="float64"), r"unknown dtype 'float64'"),
    (lambda: price_gemm(0, 8, 8, HW, KP), r"GEMM: m must be a positive integer, got 0"),
    (lambda: price_gemm(8, 8, 8, HW, KP, batch=0), r"GEMM: batch must be a positive integer"),
    (lambda: price_attention(1, 2, 64, 64, 64, "bwd_data", HW, KP),
     r"attention: unknown pass 'bwd_data' \(one of fwd, bwd\)"),
    (lambda: price_attention(1, 0, 64, 64, 64, "fwd", HW, KP),
     r"attention: heads must be a positive integer, got 0"),
    (lambda: price_attention(1, 2, 64, 64, 64, "fwd", HW, KP, dtype="int8"),
     r"unknown dtype 'int8'"),
])
def test_bad_requests_are_one_clear_error(call, message):
    with pytest.raises(ModelError, match=message):
        call()


# -- presets and fp32 --------------------------------------------------------------------------

def test_every_tensor_core_preset_has_a_dense_peak_above_its_fp32_peak():
    with_tc = {name for name, spec in GPUS.items() if spec.tensor_flops}
    assert with_tc == {"volta", "ampere", "hopper", "h100_pcie", "h200", "gh200", "t4"}
    for name in with_tc:
        spec = GPUS[name]
        assert 5 * spec.peak_flops < spec.tensor_flops < 20 * spec.peak_flops
        assert kernel_model_for(name).hardware.tensor_flops == spec.tensor_flops
    assert GPUS["pascal"].fp16_flops == 2 * GPUS["pascal"].peak_flops


def test_the_summary_line_says_tensor_core_kernels_are_not_fitted():
    model = kernel_model_for("h100_pcie")
    assert model.describe("float32") == model.description
    text = model.describe("bfloat16")
    assert text.startswith(model.description)
    assert "tensor cores" in text and "not fitted to measurements" in text
    assert "no bfloat16 tensor cores" in kernel_model_for("volta").describe("bfloat16")
    assert "half2" in kernel_model_for("pascal").describe("float16")


@pytest.mark.parametrize("preset, shape, seconds", [
    # price_gemm in fp32 with the committed fit (exact reprs; the tensor-core path must not
    # move them, a refit of kernel_params.json does)
    ("pascal", (7655, 760, 4980), 0.006937773786170905),
    ("pascal", (5733, 3436, 732), 0.00336873516190713),
    ("hopper", (7655, 760, 4980), 0.001312060749929087),
    ("hopper", (4600, 4578, 1667), 0.0014954232522451664),
    ("maxwell", (5733, 3436, 732), 0.007336700512817673),
])
def test_fp32_gemms_price_exactly_as_before(preset, shape, seconds):
    model = kernel_model_for(preset)
    assert price_gemm(*shape, model.hardware, model.params).seconds == seconds
    assert float(gemm_times(*([x] for x in shape), model.hardware, model.params)[0]) == seconds
    assert price_gemm(*shape, model.hardware, model.params).algorithm == "GEMM"


def test_tensor_core_peak_bounds_every_gemm():
    hw, kp = kernel_model_for("hopper").hardware, kernel_model_for("hopper").params
    for m, n, k in ((4096, 2304, 768), (4096, 50304, 768), (8192, 8192, 8192), (1, 1, 1)):
        t = price_gemm(m, n, k, hw, replace(kp, launch_s=0.0), dtype="bfloat16").seconds
        assert 2 * m * n * k / t <= hw.tensor_flops * TENSOR_CORE.gemm_efficiency * (1 + 1e-9)
        assert math.isfinite(t) and t > 0
