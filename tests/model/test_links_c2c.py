"""NVLink-C2C (Grace Hopper) host-link bandwidth against NVIDIA's published figures."""
from __future__ import annotations

import pytest

from sst_cdma.model.links import PCIeLink, c2c_bandwidth
from sst_cdma.builder.topology import LINKS
from sst_cdma.engine.units import parse_bandwidth


def test_c2c_preset_signals_450GBps_each_way_900_in_all():
    # GH200 datasheet: NVLink-C2C, 900 GB/s bidirectional
    rate = parse_bandwidth(LINKS["nvlink_c2c"]["c2c_rate"])
    assert rate == 450e9 and 2 * rate == 900e9


def test_c2c_payload_is_the_rate_times_its_efficiency():
    assert c2c_bandwidth(450e9, 0.9) == pytest.approx(405e9)
    assert c2c_bandwidth(450e9, 1.0) == pytest.approx(450e9)


def test_c2c_carries_about_eight_times_pcie_gen5_x16():
    # the GH200 whitepaper's "7x the bandwidth of PCIe Gen5" compares 900 GB/s with gen5 x16's
    # 128 GB/s both ways raw; the payload ratio with the model's overheads is a little higher
    ratio = c2c_bandwidth(450e9) / PCIeLink(5, 16).effective
    assert 7.0 < ratio < 9.0
