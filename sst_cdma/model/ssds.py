"""Data-center NVMe SSD presets (``cdma.NVMe``'s ``preset``) and the
queue-depth model of a drive's throughput. The figures are the vendors' datasheet ones;
docs/storage.md names each datasheet, the pages each figure was found on (and which were not
found) and explains the model; tests/docs/test_facts_tables.py keeps its table equal to these."""
from __future__ import annotations


from sst_cdma.engine.records import FrozenRecord, frozen_record
from sst_cdma.engine.units import parse_bandwidth, parse_bytes, parse_time_ps

PS_PER_S = 10 ** 12


@frozen_record
class SSDSpec(FrozenRecord):
    """One SSD model as its datasheet gives it: capacity, sequential read and write
    bandwidth (128 KiB transfers, high queue depth), typical read and write latency of a
    small (4 KiB) command, and the PCIe link the drive has (generation, lanes)."""

    name: str
    capacity: str
    read_bandwidth: str
    write_bandwidth: str
    read_latency: str
    write_latency: str
    generation: int
    lanes: int
    source: str

    def figures(self) -> dict[str, float]:
        """The datasheet figures as numbers: bytes, B/s and ps."""
        return {"capacity": parse_bytes(self.capacity),
                "read_bandwidth": parse_bandwidth(self.read_bandwidth),
                "write_bandwidth": parse_bandwidth(self.write_bandwidth),
                "read_latency": parse_time_ps(self.read_latency),
                "write_latency": parse_time_ps(self.write_latency)}


SSDS: dict[str, SSDSpec] = {
    "micron7450": SSDSpec("Micron 7450 PRO 3.84 TB (U.3)", "3.84TB", "6800MB/s", "5300MB/s",
                          "80us", "15us", 4, 4, "Micron 7450 NVMe SSD product brief"),
    "micron9550": SSDSpec("Micron 9550 PRO 7.68 TB (U.2)", "7.68TB", "14000MB/s", "10000MB/s",
                          "70us", "10us", 5, 4, "Micron 9550 NVMe SSD product brief"),
}

#: the preset a ``cdma.NVMe`` without one is
DEFAULT_SSD = "micron7450"


def queue_limited_bandwidth(bandwidth: float, queue_depth: int, io_size: int,
                            latency_ps: int) -> float:
    """The throughput (B/s) a drive of sequential ``bandwidth`` sustains when the host keeps
    ``queue_depth`` commands of ``io_size`` bytes outstanding, each served in the fixed command
    ``latency_ps`` plus its transfer at the full bandwidth (Little's law: throughput is the
    bytes in flight over the time one command takes, and never more than the bandwidth)."""
    service_s = latency_ps / PS_PER_S + io_size / bandwidth
    return min(bandwidth, queue_depth * io_size / service_s)
