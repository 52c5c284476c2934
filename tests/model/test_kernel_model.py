"""The kernel model's structure (sst_cdma/model/kernel_model.py): tiles run in waves over the SMs,
Winograd applies to 3x3 stride-1 layers only, the workspace limit rules algorithms out, a bigger
batch is never cheaper, and shapes it cannot price are errors naming the layer."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from sst_cdma.model.calibration import load
from sst_cdma.model.fitted import load_families
from sst_cdma.model.kernel_model import (ALGORITHMS, PASSES, ConvProblem, Hardware, KernelParams,
                                         ModelError, conv_times, gemm_times, price_conv)

# Ten SMs, bandwidth high enough that no kernel here is memory-bound.
HW = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18)
KP = KernelParams()
#: the same parameters with no launch interval: a call's time is its work alone
KP_WORK = replace(KP, launch_s=0.0)


def _problems(**shape: int) -> dict[str, np.ndarray]:
    base = dict(n=8, c=64, h=28, w=28, k=64, r=3, s=3, pad_h=1, pad_w=1, stride_h=1,
                stride_w=1)
    base.update(shape)
    return {k: np.array([float(v)]) for k, v in base.items()}


def _fwd_1x1(tiles: int) -> float:
    """Forward time (launch excluded) of a 1x1 convolution whose GEMM is 128*tiles x 16 x 64:
    ``tiles`` output tiles of 128x16, four per SM, a reduction too short to split."""
    problem = ConvProblem(n=2 * tiles, c=64, h=8, w=8, k=16, r=1, s=1)
    return price_conv(problem, "fwd", HW, KP_WORK).seconds


def test_a_layer_of_two_full_waves_costs_twice_one_wave():
    one_wave = _fwd_1x1(40)            # 10 SMs x 4 tiles each
    assert _fwd_1x1(80) == pytest.approx(2 * one_wave, rel=1e-9)
    assert _fwd_1x1(160) == pytest.approx(4 * one_wave, rel=1e-9)


def test_a_layer_of_half_a_wave_costs_a_whole_wave():
    assert _fwd_1x1(20) == pytest.approx(_fwd_1x1(40), rel=1e-9)
    assert _fwd_1x1(41) == pytest.approx(_fwd_1x1(80), rel=1e-9)  # one tile more: a new wave


def test_gemm_waves_match_the_convolutions():
    t = gemm_times([128 * 20, 128 * 40, 128 * 80], [16] * 3, [64] * 3, HW, KP_WORK)
    assert t[0] == pytest.approx(t[1], rel=1e-9)
    assert t[2] == pytest.approx(2 * t[1], rel=1e-9)


@pytest.mark.parametrize("pass_", PASSES)
def test_winograd_applies_to_3x3_stride_1_only(pass_):
    wino = [ALGORITHMS.index("WINOGRAD_NONFUSED")]
    if pass_ != "bwd_filter":  # cuDNN has no fused Winograd for the filter gradient
        wino.append(ALGORITHMS.index("WINOGRAD"))
    ok = conv_times(_problems(), pass_, HW, KP)["by_algorithm"][0]
    assert all(math.isfinite(ok[i]) for i in wino)
    for shape in (dict(stride_h=2, stride_w=2), dict(r=5, s=5, pad_h=2, pad_w=2),
                  dict(r=1, s=1, pad_h=0, pad_w=0), dict(r=3, s=1, pad_w=0)):
        t = conv_times(_problems(**shape), pass_, HW, KP)["by_algorithm"][0]
        assert all(t[i] == math.inf for i in wino), shape
        assert math.isfinite(t[ALGORITHMS.index("IMPLICIT_PRECOMP_GEMM")])


@pytest.fixture(scope="module")
def deepbench():
    """The shipped measurements' shapes and each GPU's committed parameters."""
    families = load_families()
    return [(cset, families[name].params) for name, cset in load().items()]


@pytest.mark.parametrize("pass_", PASSES)
def test_a_zero_workspace_limit_forbids_nonfused_winograd_and_fft(deepbench, pass_):
    forbidden = {ALGORITHMS.index(a) for a in ("WINOGRAD_NONFUSED", "FFT", "FFT_TILING")}
    picked_unlimited = 0
    for cset, kp in deepbench:
        hw = cset.gpu.hardware
        free = conv_times(cset.conv, pass_, hw, kp)
        none = conv_times(cset.conv, pass_, hw, kp, workspace_limit=0)
        picked_unlimited += sum(int(a) in forbidden for a in free["algorithm"])
        assert not any(int(a) in forbidden for a in none["algorithm"])
        assert np.all(none["workspace"] == 0) and np.all(np.isfinite(none["seconds"]))
        assert np.all(none["seconds"] >= free["seconds"])
    assert picked_unlimited > 0  # without the limit they are picked somewhere


def _batch_sweep(deepbench, pass_: str) -> list[str]:
    """Where doubling (or growing) the batch of a DeepBench shape made a pass cheaper."""
    out = []
    for cset, kp in deepbench:
        previous = None
        for n in (1, 2, 3, 4, 8, 16, 32, 64, 128):
            prob = dict(cset.conv, n=np.full_like(cset.conv["n"], n))
            t = conv_times(prob, pass_, cset.gpu.hardware, kp)["seconds"]
            if previous is not None:
                out += [f"{cset.name} row {i} batch {n}" for i in
                        np.nonzero(t < previous * (1 - 1e-12))[0]]
            previous = t
    return out


@pytest.mark.parametrize("pass_", PASSES)
def test_a_bigger_batch_is_never_cheaper(deepbench, pass_):
    assert _batch_sweep(deepbench, pass_) == []


def test_a_bigger_gemm_is_never_cheaper(deepbench):
    for cset, kp in deepbench:
        m, n, k = (cset.gemm[x] for x in "mnk")
        base = gemm_times(m, n, k, cset.gpu.hardware, kp)
        for grown in ((2 * m, n, k), (m, 2 * n, k), (m, n, 2 * k)):
            assert np.all(gemm_times(*grown, cset.gpu.hardware, kp) >= base)


def test_a_filter_larger_than_its_padded_input_names_the_layer():
    problem = ConvProblem(n=1, c=3, h=4, w=4, k=8, r=7, s=7, pad_h=1, pad_w=1)
    with pytest.raises(ModelError, match=r"layer 'conv1': a 7x7 filter .* larger than its "
                                         r"padded 6x6 input"):
        problem.check("conv1")
    with pytest.raises(ModelError, match="'conv1'"):
        price_conv(problem, "fwd", HW, KP, layer="conv1")
    ConvProblem(n=1, c=3, h=4, w=4, k=8, r=7, s=7, pad_h=2, pad_w=2).check("conv1")  # 8x8: fits


def test_an_unknown_pass_is_an_error():
    with pytest.raises(ModelError, match="unknown pass 'bwd'"):
        conv_times(_problems(), "bwd", HW, KP)


def test_faster_hardware_is_never_slower(deepbench):
    for cset, kp in deepbench:
        hw = cset.gpu.hardware
        faster = Hardware(hw.sms, 2 * hw.peak_flops, 2 * hw.dram_bandwidth)
        for pass_ in PASSES:
            t = conv_times(cset.conv, pass_, hw, kp)["seconds"]
            t2 = conv_times(cset.conv, pass_, faster, kp)["seconds"]
            assert np.all(t2 <= t) and np.all(t2 >= t / 2 - 1e-15)


def _bwd_filter_and_fwd(lanes: int) -> tuple[float, float]:
    """Backward-filter and forward times of a 1x1 layer with a small (64 x 64) filter gradient
    on a GPU of ``lanes`` fp32 lanes per SM (same SMs, peak and bandwidth otherwise)."""
    hw = Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, sm_fp32_lanes=lanes)
    problem = ConvProblem(n=8, c=64, h=56, w=56, k=64, r=1, s=1)
    return (price_conv(problem, "bwd_filter", hw, KP).seconds,
            price_conv(problem, "fwd", hw, KP).seconds)


def test_backward_filter_on_small_tiles_is_capped_by_shared_memory_on_wide_sms():
    wide_wgrad, wide_fwd = _bwd_filter_and_fwd(128)
    narrow_wgrad, narrow_fwd = _bwd_filter_and_fwd(64)
    # a 64x64 tile reads 0.5 words per multiply-add: 32 words per clock feed 64 lanes in full
    # and 128 lanes at half their peak; the widest tile (128x128) would not be capped, so the
    # cap costs at most 2x
    assert 1.2 * narrow_wgrad < wide_wgrad <= 2.0 * narrow_wgrad
    # forward is not staged that way: the SM's width does not change it
    assert wide_fwd == narrow_fwd


def test_a_big_gradient_runs_on_whole_tiles_uncapped():
    # a 512 x 512 gradient runs on 128x128 tiles, which read 0.25 words per
    # multiply-add, which 32 words per clock feed at 128 lanes
    problem = ConvProblem(n=16, c=512, h=14, w=14, k=512, r=1, s=1)
    times = [price_conv(problem, "bwd_filter",
                        Hardware(sms=10, peak_flops=1e13, dram_bandwidth=1e18, sm_fp32_lanes=lanes),
                        KP_WORK).seconds for lanes in (64, 128)]
    assert times[0] == times[1]


def _per_sm_gpu(sms: int) -> Hardware:
    """A GPU of ``sms`` SMs of one TFLOP/s each (so only the SM count changes)."""
    return Hardware(sms=sms, peak_flops=1e12 * sms, dram_bandwidth=1e18)


def test_a_gradient_with_a_16_wide_side_splits_its_reduction_over_the_whole_gpu():
    # a one-channel speech layer: a 32 x 100 filter gradient reduced over 16 x 79 x 341
    # products runs on the 128x16 tile, split into as many slices as fill the waves, so twice
    # the SMs take half the time
    speech = ConvProblem(n=16, c=1, h=161, w=700, k=32, r=5, s=20, stride_h=2, stride_w=2)
    t40, t80 = (price_conv(speech, "bwd_filter", _per_sm_gpu(sms), KP_WORK).seconds
                for sms in (40, 80))
    # each slice also pays the tile's fixed prologue (tile_fill_k steps against ~2700), so
    # twice the slices take a little over half the time, never less
    assert t40 / 2 < t80 < t40 / 2 * 1.01
    # a 64 x 64 gradient keeps to 2-16 slices within two waves: more SMs than those slices
    # fill change nothing
    small = ConvProblem(n=8, c=64, h=56, w=56, k=64, r=1, s=1)
    t20, t40 = (price_conv(small, "bwd_filter", _per_sm_gpu(sms), KP).seconds
                for sms in (20, 40))
    assert t20 == t40


@pytest.mark.parametrize("pass_", PASSES)
def test_a_depthwise_convolution_is_one_memory_bound_kernel(pass_):
    # 512 groups of one channel each: a GEMM per group would pad its one channel to a 16-wide
    # tile and pay 512 launches; the depthwise kernel reads and writes each operand once, in
    # one launch
    hw = Hardware(sms=56, peak_flops=1e13, dram_bandwidth=7e11)
    dw = ConvProblem(n=64, c=512, h=14, w=14, k=512, r=3, s=3, pad_h=1, pad_w=1, groups=512)
    price = price_conv(dw, pass_, hw, KP)
    operands = (2 * 64 * 512 * 14 * 14 + 512 * 9) * 4
    assert price.algorithm == "DEPTHWISE"
    assert price.workspace_bytes == 0
    assert price.seconds == pytest.approx(max(operands / (7e11 * KP.memory_efficiency),
                                              KP.launch_s), rel=1e-12)
    # two channels per group are a grouped GEMM again (ResNeXt-style), one launch per group
    grouped = ConvProblem(n=64, c=512, h=14, w=14, k=512, r=3, s=3, pad_h=1, pad_w=1,
                          groups=256)
    assert price_conv(grouped, pass_, hw, KP).algorithm != "DEPTHWISE"


def test_a_1x1_convolution_of_one_pixel_is_the_fully_connected_gemm():
    # a squeeze-and-excitation layer: N x C in, N x K out, nothing to im2col, so each pass is
    # the GEMM a fully connected layer of the same sizes runs, not an implicit GEMM over a
    # one-element plane
    hw = Hardware(sms=56, peak_flops=1e13, dram_bandwidth=7e11)
    se = ConvProblem(n=64, c=512, h=1, w=1, k=32, r=1, s=1)
    gemms = {"fwd": (64, 32, 512), "bwd_data": (64, 512, 32), "bwd_filter": (32, 512, 64)}
    for pass_, (m, n, k) in gemms.items():
        price = price_conv(se, pass_, hw, KP)
        assert price.algorithm == "GEMM"
        assert price.seconds == pytest.approx(float(gemm_times([m], [n], [k], hw, KP)[0]),
                                              rel=1e-12)
    # a padded 1x1 filter or a bigger plane keeps the convolution algorithms
    for other in (ConvProblem(n=64, c=512, h=2, w=2, k=32, r=1, s=1),
                  ConvProblem(n=64, c=512, h=1, w=1, k=32, r=1, s=1, pad_h=1, pad_w=1)):
        assert price_conv(other, "fwd", hw, KP).algorithm != "GEMM"


def test_winograds_batched_gemms_do_not_split_their_reduction():
    # a 64 x 64 filter gradient per transform point: 36 batched GEMMs of one 64x64 or 128x128
    # tile each, which run as one wave of 36 tiles however many SMs there are (a batched GEMM
    # spreads over the batch and the tiles, not the reduction); the implicit GEMM splits its
    # reduction, so more SMs take it less time
    layer = _problems(n=8, c=64, h=56, w=56, k=64)
    wnf, ipg = ALGORITHMS.index("WINOGRAD_NONFUSED"), ALGORITHMS.index("IMPLICIT_PRECOMP_GEMM")
    t60, t120 = (conv_times(layer, "bwd_filter", _per_sm_gpu(sms), KP)["by_algorithm"][0]
                 for sms in (60, 120))
    assert t60[wnf] == t120[wnf]
    assert t120[ipg] < t60[ipg]


def test_a_launch_costs_time_only_for_kernels_shorter_than_the_host_s_issue_interval():
    # the host enqueues one call every launch_s ahead of the GPU: a long kernel hides it, a
    # short one takes the interval
    long_gemm = gemm_times([4096], [4096], [4096], HW, KP)[0]
    assert long_gemm == gemm_times([4096], [4096], [4096], HW, KP_WORK)[0] > KP.launch_s
    assert gemm_times([16], [16], [16], HW, KP)[0] == KP.launch_s
    small = ConvProblem(n=1, c=16, h=4, w=4, k=16, r=1, s=1)
    assert price_conv(small, "fwd", HW, KP).seconds == KP.launch_s
    # a grouped convolution issues one call per group
    grouped = ConvProblem(n=1, c=32, h=4, w=4, k=32, r=3, s=3, pad_h=1, pad_w=1, groups=4)
    assert price_conv(grouped, "fwd", HW, KP).seconds == pytest.approx(4 * KP.launch_s)
