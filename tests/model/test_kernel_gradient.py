"""The kernel model's closed-form log-gradient (sst_cdma/model/kernel_gradient.py): its seconds are
the model's to the bit, its derivatives are the finite differences' at several points (away from
the model's kinks; at one, one of the two one-sided ones), and the table of the constants each
algorithm uses leaves out none it does use."""
from __future__ import annotations

import numpy as np
import pytest

from sst_cdma.model import calibration as cal
from sst_cdma.model.fitted import load_families
from sst_cdma.model.kernel_gradient import (GEMM_USES, PARAMETERS, conv_log_gradient, conv_uses,
                                            gemm_log_gradient)
from sst_cdma.model.kernel_model import (ALGORITHMS, PASSES, KernelParams, ModelError, conv_times,
                                         gemm_times)

#: GPUs of three kinds of SM: 64 fp32 lanes (P100), 128 (Maxwell's M40), Turing (T4)
GPUS = ("P100", "M40", "T4")
#: log-step of the finite differences, and how far apart the two one-sided ones may be for a
#: kernel to count as away from a kink (a kink's are apart by O(1))
STEP = 1e-6
SMOOTH = 1e-4
#: the agreement asked of the closed form: the finite differences' own error is O(STEP)
AGREE = 2e-5


@pytest.fixture(scope="module")
def sets():
    return cal.load()


def _points() -> list[tuple[str, KernelParams]]:
    """Where the gradient is checked: the defaults, committed fits and two random points within
    the fit's bounds."""
    families = load_families()
    rng = np.random.default_rng(35)
    out = [("defaults", KernelParams()), ("P100 fit", families["P100"].params),
           ("pooled fit", families["Pooled"].params)]
    for i in range(2):
        values = {n: float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
                  for n, (lo, hi) in cal.BOUNDS.items()}
        out.append((f"random {i}", KernelParams(**values)))
    return out


POINTS = _points()


def _moved(kp: KernelParams, j: int, step: float) -> KernelParams:
    values = kp.as_dict()
    values[PARAMETERS[j]] = float(np.exp(np.log(values[PARAMETERS[j]]) + step))
    return KernelParams(**values)


def _seconds(cset: cal.CalibrationSet, kind: str, kp: KernelParams) -> np.ndarray:
    hw = cset.gpu.hardware
    if kind == "gemm":
        return gemm_times(cset.gemm["m"], cset.gemm["n"], cset.gemm["k"], hw, kp)
    return conv_times(cset.conv, kind, hw, kp)["seconds"]


def _gradient(cset: cal.CalibrationSet, kind: str, kp: KernelParams
              ) -> tuple[np.ndarray, np.ndarray]:
    hw = cset.gpu.hardware
    if kind == "gemm":
        return gemm_log_gradient(cset.gemm["m"], cset.gemm["n"], cset.gemm["k"], hw, kp)
    return conv_log_gradient(cset.conv, kind, hw, kp)


@pytest.mark.parametrize("where, kp", POINTS, ids=[p[0] for p in POINTS])
def test_the_seconds_are_the_models_to_the_bit(sets, where, kp):
    for cset in sets.values():
        for kind in cal.KINDS:
            seconds, grad = _gradient(cset, kind, kp)
            assert seconds.tobytes() == _seconds(cset, kind, kp).tobytes(), (cset.name, kind)
            assert grad.shape == seconds.shape + (len(PARAMETERS),)
            assert np.isfinite(grad).all()


@pytest.mark.parametrize("where, kp", POINTS, ids=[p[0] for p in POINTS])
def test_the_gradient_is_the_finite_differences(sets, where, kp):
    kinks = total = 0
    for name in GPUS:
        cset = sets[name]
        for kind in cal.KINDS:
            base = np.log(_seconds(cset, kind, kp))
            grad = _gradient(cset, kind, kp)[1]
            for j in range(len(PARAMETERS)):
                ahead = (np.log(_seconds(cset, kind, _moved(kp, j, STEP))) - base) / STEP
                behind = (base - np.log(_seconds(cset, kind, _moved(kp, j, -STEP)))) / STEP
                smooth = np.abs(ahead - behind) < SMOOTH
                here = grad[:, j]
                where_ = f"{name} {kind} {PARAMETERS[j]}"
                np.testing.assert_allclose(here[smooth], ((ahead + behind) / 2)[smooth],
                                           rtol=0, atol=AGREE, err_msg=where_)
                # at a kink: the side the model picks
                side = np.minimum(np.abs(here - ahead), np.abs(here - behind))
                assert (side[~smooth] < AGREE).all(), where_
                kinks += int((~smooth).sum())
                total += smooth.size
    assert kinks <= total // 100  # a kink is rare: the check is of the smooth pieces


def test_a_constant_an_algorithm_does_not_use_leaves_its_time_alone(sets):
    kp = load_families()["TitanX"].params
    for name in GPUS:
        cset = sets[name]
        hw = cset.gpu.hardware
        for pass_ in PASSES:
            uses = conv_uses(pass_)
            base = conv_times(cset.conv, pass_, hw, kp)["work"]
            grad = conv_log_gradient(cset.conv, pass_, hw, kp)[1]
            picked = conv_times(cset.conv, pass_, hw, kp)["algorithm"]
            for j, param in enumerate(PARAMETERS):
                moved = conv_times(cset.conv, pass_, hw, _moved(kp, j, 0.5))["work"]
                alone = ~uses[:, j]
                assert moved[:, alone].tobytes() == base[:, alone].tobytes(), (pass_, param)
                # every constant the picked algorithm's time moves with is in the table
                moving = grad[:, j] != 0
                launched = grad[:, PARAMETERS.index("launch_s")] == 1
                assert uses[picked[moving & ~launched], j].all(), (pass_, param)
    gemm_alone = [j for j, p in enumerate(PARAMETERS) if p not in GEMM_USES]
    g = sets["P100"].gemm
    base = gemm_times(g["m"], g["n"], g["k"], sets["P100"].gpu.hardware, kp)
    for j in gemm_alone:
        moved = gemm_times(g["m"], g["n"], g["k"], sets["P100"].gpu.hardware, _moved(kp, j, 0.5))
        assert moved.tobytes() == base.tobytes(), PARAMETERS[j]


def test_every_algorithm_has_its_constants_and_a_bad_pass_is_refused():
    for pass_ in PASSES:
        table = conv_uses(pass_)
        assert table.shape == (len(ALGORITHMS), len(PARAMETERS))
        assert table[:, PARAMETERS.index("launch_s")].all()
        assert table[:, PARAMETERS.index("memory_efficiency")].all()
    assert not conv_uses("fwd")[:, PARAMETERS.index("bwd_data_efficiency")].any()
    assert conv_uses("bwd_filter")[:, PARAMETERS.index("bwd_filter_efficiency")].sum() == 7
    with pytest.raises(ModelError, match="unknown pass 'dgrad'"):
        conv_uses("dgrad")
    with pytest.raises(ModelError, match="unknown pass 'dgrad'"):
        conv_log_gradient({}, "dgrad", cal.load()["P100"].gpu.hardware, KernelParams())
