"""The kernel model's tensor-core path (sst_cdma/model/kernel_model.py): float16/bfloat16 GEMMs,
convolutions and fused attention priced from the dense tensor peak at the tensor-core path's
own constants (fitted: sst_cdma/model/tensor_fit.py), with the same tiles and waves as the fp32
model; TF32; the GPU presets' tensor peaks; fp32 pricing exactly as before."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sst_cdma.model.fitted import kernel_model_for
from sst_cdma.model.gpus import GPUS
from sst_cdma.model.kernel_model import (AttentionParams, ConvProblem, Hardware, KernelParams,
                                         ModelError, TensorCores, gemm_times, price_attention,
                                         price_conv, price_gemm)

# Ten SMs, bandwidth high enough that no kernel here is memory-bound; tensor cores at 16x fp32.
HW = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, tensor_flops=1.6e14)
#: no launch interval: a call's time is its work alone (the launch hides behind longer work)
KP = replace(KernelParams(), launch_s=0.0)
# the tensor-core path's constants: the fp32 defaults but a lower share, FlashAttention-2 at
# half the peak with a head-dimension knee at 32; no launch interval either
TK = KernelParams(gemm_efficiency=0.6, tile_reuse=16.0, launch_s=0.0)
FLASH2 = AttentionParams(0.5, 32.0)
TC = TensorCores("test", TK, {"flash2": FLASH2})
NO_TC = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18)
TOP_REUSE = 256 * 128 / (256 + 128)   # the biggest tensor-core tile's
TC_SHARE = TK.gemm_efficiency * TK.blas_efficiency * TOP_REUSE / (TOP_REUSE + TK.tile_reuse)


def _busy(seconds: float, kp: KernelParams = TK) -> float:
    """A call's time without its launch: the parameters here have none, so all of it."""
    return seconds


def test_a_large_gemm_on_tensor_cores_is_faster_by_the_peak_and_efficiency_ratio():
    # 1280 x 2560: 10 x 10 tiles of 128x256 (one wave per 10 SMs, ten waves), a long reduction
    m, n, k = 1280, 2560, 1 << 16
    fp32 = _busy(price_gemm(m, n, k, HW, KP, tc=TC).seconds, KP)
    bf16 = price_gemm(m, n, k, HW, KP, dtype="bfloat16", tc=TC)
    assert bf16.algorithm == "TENSOR_GEMM"
    # fp32: 128x128 tiles at gemm x blas efficiency x 64 / (64 + tile_reuse)
    fp32_share = KP.gemm_efficiency * KP.blas_efficiency * 64 / (64 + KP.tile_reuse)
    expected = (HW.tensor_flops * TC_SHARE) / (HW.peak_flops * fp32_share)
    assert fp32 / _busy(bf16.seconds) == pytest.approx(expected, rel=0.01)
    # and the big GEMM reaches the tensor path's share of the tensor peak on 256x128 tiles
    assert 2 * m * n * k / _busy(bf16.seconds) == pytest.approx(HW.tensor_flops * TC_SHARE,
                                                               rel=0.01)


def test_a_tensor_core_gpu_priced_without_its_constants_is_an_error():
    with pytest.raises(ModelError, match="tensor-core path's fitted constants"):
        price_gemm(64, 64, 64, HW, KP, dtype="bfloat16")


def test_tf32_gemms_run_at_the_tf32_peak_only_when_asked():
    ampere_like = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, tensor_flops=1.6e14,
                           tf32_flops=8e13)
    m, n, k = 1280, 2560, 1 << 16
    plain = price_gemm(m, n, k, ampere_like, KP, tc=TC)
    tf32 = price_gemm(m, n, k, ampere_like, KP, tc=TC, tf32=True)
    bf16 = price_gemm(m, n, k, ampere_like, KP, tc=TC, dtype="bfloat16")
    assert plain.algorithm == "GEMM" and tf32.algorithm == "TF32_GEMM"
    assert _busy(tf32.seconds) == pytest.approx(2 * _busy(bf16.seconds), rel=0.01)
    # no TF32 on the GPU: fp32 as before
    assert price_gemm(m, n, k, HW, KP, tc=TC, tf32=True) == price_gemm(m, n, k, HW, KP)


def test_16_bit_convolutions_run_on_tensor_cores_with_channels_padded_to_eight():
    wide = ConvProblem(32, 256, 28, 28, 256, 3, 3, 1, 1)
    fp32 = price_conv(wide, "fwd", HW, KP)
    half = price_conv(wide, "fwd", HW, KP, 2, dtype="float16", tc=TC)
    assert half.algorithm == "IMPLICIT_PRECOMP_GEMM"  # no Winograd or FFT on tensor cores
    assert half.seconds < fp32.seconds / 4
    # three input channels compute as eight: no faster than eight
    three = price_conv(ConvProblem(32, 3, 224, 224, 64, 3, 3, 1, 1), "fwd", HW, KP, 2,
                       dtype="float16", tc=TC)
    eight = price_conv(ConvProblem(32, 8, 224, 224, 64, 3, 3, 1, 1), "fwd", HW, KP, 2,
                       dtype="float16", tc=TC)
    assert three.seconds == eight.seconds
    # without tensor cores: the fp32 price, as before
    assert price_conv(wide, "fwd", NO_TC, KP, 2, dtype="float16", tc=TC) == \
        price_conv(wide, "fwd", NO_TC, KP, 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_without_tensor_cores_16_bit_gemms_compute_at_the_fp32_rate(dtype):
    m, n, k = 1280, 1280, 1 << 14
    fp32 = price_gemm(m, n, k, NO_TC, KP)
    half = price_gemm(m, n, k, NO_TC, KP, dtype=dtype, tc=TC)
    assert half.algorithm == "GEMM" and half.seconds == fp32.seconds


def test_float16_without_tensor_cores_runs_at_the_half2_rate_where_the_gpu_has_one():
    p100_like = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, fp16_flops=2e13)
    m, n, k = 1280, 1280, 1 << 14
    fp32 = _busy(price_gemm(m, n, k, p100_like, KP).seconds, KP)
    fp16 = _busy(price_gemm(m, n, k, p100_like, KP, dtype="float16").seconds, KP)
    bf16 = _busy(price_gemm(m, n, k, p100_like, KP, dtype="bfloat16").seconds, KP)
    assert fp16 == pytest.approx(fp32 / 2, rel=1e-12)
    assert bf16 == fp32  # no bfloat16 arithmetic: the fp32 rate


def test_volta_tensor_cores_take_float16_only():
    volta = kernel_model_for("volta").hardware
    assert volta.on_tensor_cores("float16") and not volta.on_tensor_cores("bfloat16")
    assert not volta.on_tensor_cores("float32")


def test_small_gemms_pay_for_a_whole_wave():
    # GEMMs of 64x64x64 on 10 SMs: up to 20 run in one wave of 128x64 tiles (two per SM), up
    # to 40 in one wave of 64x64 tiles (four per SM, less reuse); the 41st needs a second wave
    one, twenty, full, over = (price_gemm(64, 64, 64, HW, KP, batch=b, dtype="bfloat16",
                                          tc=TC).seconds for b in (1, 20, 40, 41))
    assert one == twenty < full
    assert _busy(over) == pytest.approx(2 * _busy(full), rel=1e-12)
    # a small GEMM reaches a small share of the peak
    rate = 2 * 64**3 / _busy(one)
    assert rate < 0.1 * HW.tensor_flops * TC_SHARE


def test_a_batched_gemm_is_one_launch_and_shares_its_waves():
    single = price_gemm(512, 512, 64, HW, KP, dtype="bfloat16", tc=TC).seconds
    batched = price_gemm(512, 512, 64, HW, KP, batch=12, dtype="bfloat16", tc=TC).seconds
    assert batched < 12 * single - 11 * TK.launch_s
    assert batched > single


def test_16_bit_operands_halve_the_bytes_of_a_memory_bound_gemm():
    slow_dram = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e9, tensor_flops=1.6e14)
    m, n, k = 16, 4096, 4096
    operands = m * k + k * n + m * n
    for dtype, size in (("float32", 4), ("bfloat16", 2)):
        t = price_gemm(m, n, k, slow_dram, KP, dtype=dtype, tc=TC).seconds - KP.launch_s
        assert t == pytest.approx(operands * size / (1e9 * KP.memory_efficiency), rel=1e-9)


# -- fused attention ---------------------------------------------------------------------------

def _attention(pass_: str, causal: bool, hw: Hardware = HW, **shape: int) -> float:
    s = dict(batch=1, heads=20, seq_q=8192, seq_k=8192, head_dim=128)
    s.update(shape)
    kp = TK if hw.tensor_flops else KP
    return _busy(price_attention(s["batch"], s["heads"], s["seq_q"], s["seq_k"], s["head_dim"],
                                 pass_, hw, KP, causal=causal, tc=TC).seconds, kp)


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_causal_attention_costs_about_half(pass_):
    ratio = _attention(pass_, True) / _attention(pass_, False)
    # 64 x 64 blocks of 128: the 2080 on or below the diagonal of 4096 are computed
    assert 0.5 < ratio <= 2080 / 4096 * 1.01


def test_full_attention_runs_at_the_kernels_share_of_the_tensor_peak():
    # 20 heads x 64 query tiles: 128 waves of 10 CTAs, each 64 blocks of 4 x 128 x 128 x 128
    flops = 4 * 20 * 8192**2 * 128
    assert flops / _attention("fwd", False) == pytest.approx(
        HW.tensor_flops * 0.5 * 128 / (128 + 32), rel=1e-9)
    # the backward pass does 2.5x the forward's FLOPs, at the same share
    assert _attention("bwd", False) / _attention("fwd", False) == pytest.approx(2.5, rel=1e-9)


def test_attention_share_grows_with_the_head_dimension():
    flops = {d: 4 * 20 * 8192**2 * d for d in (64, 128, 256)}
    rate = {d: flops[d] / _attention("fwd", False, head_dim=d) for d in flops}
    assert rate[64] < rate[128] < rate[256] < HW.tensor_flops * FLASH2.efficiency
    assert rate[64] / rate[128] == pytest.approx(FLASH2.share(64) / FLASH2.share(128))


def test_an_attention_kernel_the_family_does_not_run_is_an_error():
    with pytest.raises(ModelError, match="flash3 does not run on the test tensor cores"):
        price_attention(1, 2, 64, 64, 64, "fwd", HW, KP, tc=TC, kernel="flash3")
    with pytest.raises(ModelError, match="unknown kernel 'flash9'"):
        price_attention(1, 2, 64, 64, 64, "fwd", HW, KP, tc=TC, kernel="flash9")


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
    assert t == pytest.approx(fwd_bytes / (1e9 * TK.memory_efficiency), rel=1e-9)
    bwd = _attention("bwd", True, slow_dram, batch=b, heads=h, seq_q=s, seq_k=s, head_dim=d)
    assert bwd > 2 * t


def test_attention_backward_holds_an_fp32_dq_accumulator():
    fwd = price_attention(2, 4, 1000, 1000, 64, "fwd", HW, KP, tc=TC)
    bwd = price_attention(2, 4, 1000, 1000, 64, "bwd", HW, KP, tc=TC)
    assert fwd.workspace_bytes == 0
    assert bwd.workspace_bytes == 2 * 4 * 1024 * (64 + 1) * 4  # queries rounded to 128s
    assert fwd.algorithm == bwd.algorithm == "FLASH_ATTENTION_2"


def test_causal_attention_with_more_keys_than_queries_sees_the_earlier_keys():
    # bottom-right aligned: 128 new queries over 8192 keys see all of them
    full = _attention("fwd", False, seq_q=128, seq_k=8192)
    assert _attention("fwd", True, seq_q=128, seq_k=8192) == full


def test_attention_without_tensor_cores_is_slower():
    assert _attention("fwd", True, NO_TC) > 5 * _attention("fwd", True)


def test_a_preset_with_a_tensor_family_but_no_tensor_peak_is_an_error():
    from dataclasses import replace

    bad = replace(GPUS["ampere"], tensor_flops=0.0)
    with pytest.raises(ModelError, match=r"GPU preset 'broken': tensor family 'Ampere' but no "
                                         r"tensor peak"):
        kernel_model_for("broken", bad)


def test_tf32_defaults_to_pytorchs_and_is_refused_before_ampere():
    assert kernel_model_for("ampere").tf32_mode() == "conv"
    assert kernel_model_for("volta").tf32_mode() == "none"
    assert kernel_model_for("hopper").tf32_mode("all") == "all"
    with pytest.raises(ModelError, match=r"^tf32=conv: GPU preset 'volta' has no TF32"):
        kernel_model_for("volta").tf32_mode("conv")


def test_fused_attention_is_the_best_kernel_the_gpu_runs():
    assert kernel_model_for("hopper").attention_kernel("fused") == "flash3"
    assert kernel_model_for("ampere").attention_kernel("fused") == "flash2"
    with pytest.raises(ModelError, match=r"^attention=flash3: GPU preset 'ampere'"):
        kernel_model_for("ampere").attention_kernel("flash3")


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
    assert with_tc == {"volta", "ampere", "hopper", "h100_pcie", "h200", "gh200", "a100_80gb",
                       "a100_pcie", "b200", "t4"}
    for name in with_tc:
        spec = GPUS[name]
        # 8x (V100) to 30x (B200: 2.25 PFLOP/s dense against 75 TFLOP/s fp32)
        assert 5 * spec.peak_flops < spec.tensor_flops < 40 * spec.peak_flops
        assert kernel_model_for(name).hardware.tensor_flops == spec.tensor_flops
    assert GPUS["pascal"].fp16_flops == 2 * GPUS["pascal"].peak_flops


def test_the_summary_line_says_what_each_path_was_fitted_on():
    model = kernel_model_for("h100_pcie")
    assert "tf32=conv: TF32 convolutions" in model.describe("float32")
    assert kernel_model_for("volta").describe("float32") == kernel_model_for("volta").description
    text = model.describe("bfloat16", "flash2")
    assert text.startswith(model.description)
    assert "Hopper tensor cores" in text and "T4's DeepBench tensor-core sheet" in text
    assert "attention flash2: FlashAttention-2 fwd+bwd on H100 SXM" in text
    assert "flash3: no measurement" in model.describe("bfloat16", "fused")
    assert "no measurement of Volta" in kernel_model_for("volta").describe("float16")
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
    model = kernel_model_for("hopper")
    hw, kp, tk = model.hardware, model.params, model.tensor.params
    top = tk.gemm_efficiency * tk.blas_efficiency * TOP_REUSE / (TOP_REUSE + tk.tile_reuse)
    for m, n, k in ((4096, 2304, 768), (4096, 50304, 768), (8192, 8192, 8192), (1, 1, 1)):
        no_launch = replace(model.tensor, params=replace(tk, launch_s=0.0))
        t = price_gemm(m, n, k, hw, kp, dtype="bfloat16", tc=no_launch).seconds
        assert 2 * m * n * k / t <= hw.tensor_flops * min(1.0, top) * (1 + 1e-9)
        assert math.isfinite(t) and t > 0


@pytest.mark.parametrize("preset", ["maxwell", "pascal", "volta", "t4"])
def test_flashattention_2_asked_of_a_gpu_before_ampere_is_refused(preset):
    # FlashAttention-2 runs on Ampere, Ada and Hopper (its README); it was priced on Pascal
    with pytest.raises(ModelError, match=f"attention=flash2: GPU preset '{preset}' does not "
                                         "run FlashAttention-2 \\(it needs an Ampere or newer"):
        kernel_model_for(preset).attention_kernel("flash2")


@pytest.mark.parametrize("preset", ["ampere", "hopper", "b200"])
def test_flashattention_2_runs_from_ampere_on(preset):
    assert kernel_model_for(preset).attention_kernel("flash2") == "flash2"
