"""The SSD presets and the queue-depth model of a drive's throughput (docs/storage.md)."""
from __future__ import annotations

import pytest

from sst_cdma.model.links import PCIeLink
from sst_cdma.model.ssds import DEFAULT_SSD, SSDS, queue_limited_bandwidth


def test_there_is_a_gen4_x4_and_a_gen5_x4_preset_and_the_default_is_one():
    links = {(spec.generation, spec.lanes) for spec in SSDS.values()}
    assert {(4, 4), (5, 4)} <= links
    assert DEFAULT_SSD in SSDS


@pytest.mark.parametrize("name", sorted(SSDS))
def test_a_presets_figures_are_numbers_with_writes_no_faster_than_reads(name):
    figures = SSDS[name].figures()
    assert figures["capacity"] > 10 ** 12
    assert 0 < figures["write_bandwidth"] <= figures["read_bandwidth"]
    assert 0 < figures["write_latency"] <= figures["read_latency"]


@pytest.mark.parametrize("name", sorted(SSDS))
def test_the_datasheet_read_rate_is_near_what_its_link_carries(name):
    # a check, not a fit: a sequential read of a data-center drive saturates its x4 link, so
    # the datasheet figure lands within a few per cent of the link's payload rate
    spec = SSDS[name]
    link = PCIeLink(spec.generation, spec.lanes).effective
    assert spec.figures()["read_bandwidth"] == pytest.approx(link, rel=0.05)


def test_a_deep_queue_reaches_the_bandwidth_and_one_command_is_latency_bound():
    bw, io, latency = 5.3e9, 1 << 20, 15_000_000  # 15 us
    assert queue_limited_bandwidth(bw, 64, io, latency) == bw
    one = queue_limited_bandwidth(bw, 1, io, latency)
    assert one == pytest.approx(io / (15e-6 + io / bw))
    # with a slow command, two in flight carry twice what one does
    slow = queue_limited_bandwidth(bw, 1, io, 500_000_000)
    assert slow < bw / 2
    assert queue_limited_bandwidth(bw, 2, io, 500_000_000) == pytest.approx(2 * slow)
    # small commands at depth 1 are far from the bandwidth: 4 KiB every 80 us
    assert queue_limited_bandwidth(6.8e9, 1, 4096, 80_000_000) == pytest.approx(
        4096 / (80e-6 + 4096 / 6.8e9))
