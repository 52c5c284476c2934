"""Host-link bandwidth from first principles."""
from __future__ import annotations

import pytest

from sst_cdma.model.links import PCIeLink, nvlink_bandwidth


def test_gen3_x16_raw_rate_is_15_75_GBps():
    assert PCIeLink(3, 16).raw == pytest.approx(15.754e9, rel=1e-4)


def test_gen3_x16_lands_where_pinned_memcpy_measures():
    # pinned copies on gen3 x16 measure 12.15 (to the GPU) and 12.89 GB/s (from it) on a P100
    # (docs/model.md, "Pinned-copy measurements beside the model", with the source)
    assert 12e9 <= PCIeLink(3, 16).effective <= 13e9


def test_gen3_stays_where_it_was_at_128_B_payloads():
    assert PCIeLink(3, 16).payload == 128
    assert PCIeLink(3, 16).effective == pytest.approx(15.754e9 * 128 / 154 * 0.95, rel=1e-4)


def test_gen4_and_gen5_run_256_B_payloads_and_land_where_pinned_copies_measure():
    # x16 pinned copies measure 23.9-27.1 GB/s at gen4 and 52.8 GB/s from an H100 at gen5
    # (docs/model.md, "Pinned-copy measurements beside the model", with the sources)
    g4, g5 = PCIeLink(4, 16), PCIeLink(5, 16)
    assert g4.payload == g5.payload == 256
    assert 24e9 <= g4.effective <= 28e9 and 0.85 <= g4.effective / g4.raw <= 0.87
    assert 53e9 <= g5.effective <= 56e9
    assert g5.effective == pytest.approx(2 * g4.effective)


def test_generations_double_at_the_same_payload_and_payload_size_matters():
    g3, g4, g5 = (PCIeLink(g, 16, max_payload=128).effective for g in (3, 4, 5))
    assert g4 == pytest.approx(2 * g3) and g5 == pytest.approx(4 * g3)
    assert PCIeLink(3, 16, max_payload=256).effective > PCIeLink(3, 16, max_payload=128).effective
    assert PCIeLink(3, 8).effective == pytest.approx(PCIeLink(3, 16).effective / 2)


def test_gen2_uses_8b10b_encoding():
    assert PCIeLink(2, 16).raw == pytest.approx(5e9 * 0.8 * 16 / 8)


def test_nvlink_bricks_add_up():
    assert nvlink_bandwidth(3, 25e9, 0.9) == pytest.approx(67.5e9)
