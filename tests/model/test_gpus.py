"""The GPU presets (sst_cdma/model/gpus.py) describe real parts: SMs, fp32 lanes per SM and peak
FLOP/s imply the clock each was specified at."""
from __future__ import annotations

import pytest

from sst_cdma.model.gpus import GPUS

#: boost clocks of the parts (GHz), from NVIDIA's datasheets and whitepapers
BOOST_GHZ = {"maxwell": 1.075, "pascal": 1.48, "titanx_pascal": 1.531, "titanxp": 1.582,
             "volta": 1.53, "ampere": 1.41, "hopper": 1.98, "h100_pcie": 1.755, "h200": 1.98,
             "gh200": 1.98, "a100_80gb": 1.41, "a100_pcie": 1.41, "b200": 1.98, "m40": 1.114,
             "gtx1080ti": 1.582, "t4": 1.59}


@pytest.mark.parametrize("preset", sorted(GPUS))
def test_sms_lanes_and_peak_give_the_part_s_boost_clock(preset):
    spec = GPUS[preset]
    clock = spec.peak_flops / (spec.sms * spec.sm_fp32_lanes * 2)
    assert clock / 1e9 == pytest.approx(BOOST_GHZ[preset], rel=0.02)


def test_every_preset_has_its_boost_clock_listed():
    assert set(BOOST_GHZ) == set(GPUS)
