"""Activations offloaded to NVMe, checked against the closed form where nothing interferes: with
kernels as timers (``--no-contention``) every transfer is alone on its path, so it lasts its
start-up latency plus its bytes over the slowest resource it crosses (each resource's capacity
over the bytes it carries per byte moved). docs/storage.md, "Timing, where nothing interferes"."""
from __future__ import annotations

import io
import math

import pytest

import sst_cdma
from sst_cdma.model.links import PCIeLink
from sst_cdma.model.ssds import SSDS
from sst_cdma.engine.units import parse_bandwidth

US = 1_000_000  # ps

#: a run whose offloads are alone on their path: one GPU, kernels as timers, plain copies
QUIET = ("--no-baselines", "--network", "alexnet", "--batch", "16", "--policy", "conv",
         "--algorithm", "none", "--no-contention", "--offload-to", "nvme")


def run(repo, *opts):
    return sst_cdma.run(repo / "topologies" / "pascal_cdma.py", [*QUIET, *opts],
                        console=io.StringIO())


def ps(nbytes: int, rate: float) -> int:
    """Whole picoseconds to move ``nbytes`` at ``rate`` B/s, rounded up as the flows do."""
    return math.ceil(nbytes / rate * 1e12 - 1e-9)


def transfers(result, direction):
    engine = result.simulation.components["gpu0.dma"]
    moved = [t for t in engine.transfers if t[0] == direction]
    assert moved, f"the run made no {direction}"
    return moved


def host_dram(result) -> float:
    return result.simulation.components["host"].params["bandwidth"]


def test_a_bounce_offload_lasts_its_latency_plus_its_bytes_over_the_ssd_write_rate(repo):
    result = run(repo, "--nvme", "1")
    ssd = SSDS["micron7450"].figures()
    gpu_link = PCIeLink(3, 16).effective                  # the P100's gen3 x16
    rate = min(gpu_link, host_dram(result) / 2, PCIeLink(4, 4).effective,
               ssd["write_bandwidth"])
    assert rate == ssd["write_bandwidth"]                   # the drive's writes bind
    latency = 1 * US + ssd["write_latency"]                 # the GPU link's 1 us, the command
    for _, tensor, raw, wire, start, end in transfers(result, "offload"):
        assert wire == raw
        assert end - start == latency + ps(raw, rate), tensor


def test_a_bounce_prefetch_is_capped_by_the_drives_own_link(repo):
    result = run(repo, "--nvme", "1")
    ssd = SSDS["micron7450"].figures()
    rate = min(PCIeLink(3, 16).effective, host_dram(result) / 2, PCIeLink(4, 4).effective,
               ssd["read_bandwidth"])
    assert rate == PCIeLink(4, 4).effective                 # 6.79 GB/s of link, 6.8 of flash
    for _, tensor, raw, _, start, end in transfers(result, "prefetch"):
        assert end - start == 1 * US + ssd["read_latency"] + ps(raw, rate), tensor


def test_striping_over_two_drives_doubles_the_drive_side_rate(repo):
    result = run(repo, "--nvme", "2")
    ssd = SSDS["micron7450"].figures()
    rate = min(PCIeLink(3, 16).effective, host_dram(result) / 2,
               2 * PCIeLink(4, 4).effective, 2 * ssd["write_bandwidth"])
    assert rate == 2 * ssd["write_bandwidth"]
    for _, tensor, raw, _, start, end in transfers(result, "offload"):
        assert end - start == 1 * US + ssd["write_latency"] + ps(raw, rate), tensor


def test_a_shallow_queue_lets_the_latency_cap_the_rate(repo):
    result = run(repo, "--nvme", "1", "--nvme-queue-depth", "1")
    ssd = SSDS["micron7450"].figures()
    io_size = 1 << 20
    one_at_a_time = io_size / (ssd["write_latency"] / 1e12 + io_size / ssd["write_bandwidth"])
    assert one_at_a_time < ssd["write_bandwidth"]
    for _, tensor, raw, _, start, end in transfers(result, "offload"):
        assert end - start == 1 * US + ssd["write_latency"] + ps(raw, one_at_a_time), tensor


def test_gpudirect_skips_host_dram_and_bounce_crosses_it_twice(repo):
    # an H100 PCIe (gen5 x16) on eight gen5 drives: the drives outrun the GPU's link, and two
    # crossings of the host DRAM (76.8 GB/s) give the bounce path 38.4 GB/s, below the link
    opts = ("--gpu", "h100_pcie", "--nvme", "8", "--nvme-preset", "micron9550")
    bounce = run(repo, *opts)
    gds = run(repo, *opts, "--nvme-path", "gds")
    ssd = SSDS["micron9550"].figures()
    gpu_link = PCIeLink(5, 16).effective
    drives = min(8 * PCIeLink(5, 4).effective, 8 * ssd["write_bandwidth"])
    dram = host_dram(bounce)
    assert dram == parse_bandwidth("76.8GB/s")
    assert min(gpu_link, drives, dram / 2) == dram / 2
    for result, rate in ((bounce, dram / 2), (gds, min(gpu_link, drives))):
        for _, tensor, raw, _, start, end in transfers(result, "offload"):
            assert end - start == 1 * US + ssd["write_latency"] + ps(raw, rate), tensor
    offloaded = sum(t[3] for t in transfers(bounce, "offload"))
    fetched = sum(t[3] for t in transfers(bounce, "prefetch"))
    dram_bytes = bounce.simulation.components["host"].resource.busy_units
    assert dram_bytes == pytest.approx(2 * (offloaded + fetched))
    assert gds.simulation.components["host"].resource.busy_units == 0
    assert gds.reports["summary"]["iteration_time_s"] < \
        bounce.reports["summary"]["iteration_time_s"]


@pytest.mark.parametrize("path", ["bounce", "gds"])
def test_the_planners_copy_costs_to_nvme_are_the_simulated_times(repo, path):
    from components.messages import MovedTensor, OffloadManifest

    result = run(repo, "--nvme", "2", "--nvme-path", path)
    engine = result.simulation.components["gpu0.dma"]
    moved = {t[1]: t for t in engine.transfers}
    manifest = OffloadManifest("gpu0", "alexnet", "float32", 16,
                               tuple(MovedTensor(name, t[2], False) for name, t in
                                     moved.items()), tier="nvme")
    costs = engine.transfer_costs(manifest)
    host = engine.transfer_costs(OffloadManifest("gpu0", "alexnet", "float32", 16,
                                                 manifest.tensors))
    for direction, tensor, _, _, start, end in engine.transfers:
        cost = costs[tensor]
        priced = cost.plain_out_ps if direction == "offload" else cost.plain_in_ps
        assert priced == end - start, tensor
        assert host[tensor].plain_out_ps < cost.plain_out_ps  # the SSDs are slower
