"""Host-link bandwidth from first principles."""
from __future__ import annotations

import pytest

from sst_cdma.model.links import PCIeLink, nvlink_bandwidth


def test_gen3_x16_raw_rate_is_15_75_GBps():
    assert PCIeLink(3, 16).raw == pytest.approx(15.754e9, rel=1e-4)


def test_gen3_x16_lands_where_pinned_memcpy_measures():
    # pinned cudaMemcpyAsync on gen3 x16 measures about 12-13 GB/s
    assert 12e9 <= PCIeLink(3, 16).effective <= 13e9


def test_generations_double_and_payload_size_matters():
    g3, g4, g5 = (PCIeLink(g, 16).effective for g in (3, 4, 5))
    assert g4 == pytest.approx(2 * g3) and g5 == pytest.approx(4 * g3)
    assert PCIeLink(3, 16, max_payload=256).effective > PCIeLink(3, 16, max_payload=128).effective
    assert PCIeLink(3, 8).effective == pytest.approx(PCIeLink(3, 16).effective / 2)


def test_gen2_uses_8b10b_encoding():
    assert PCIeLink(2, 16).raw == pytest.approx(5e9 * 0.8 * 16 / 8)


def test_nvlink_bricks_add_up():
    assert nvlink_bandwidth(3, 25e9, 0.9) == pytest.approx(67.5e9)
