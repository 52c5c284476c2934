"""Link bandwidth from first principles: PCIe generations with their line encoding, TLP and
DLLP overheads and the max payload size the platforms of each generation negotiate; NVLink as
bricks of fixed signalling rate; NVLink-C2C (the Grace superchips' chip-to-chip link) as one
link of fixed per-direction rate. Sources and the measurements they are checked against:
docs/model.md, "Host links from first principles"."""
from __future__ import annotations


from sst_cdma.engine.records import FrozenRecord, frozen_record

# Per-lane transfer rate (GT/s) and line-code efficiency of each PCIe generation.
PCIE_GENERATIONS = {
    1: (2.5, 8 / 10),
    2: (5.0, 8 / 10),
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
    6: (64.0, 242 / 256),  # FLIT mode: 236 B payload of 256 B FLIT incl. FEC/CRC (approx.)
}

#: The max payload size (bytes) a GPU and the root complexes of its PCIe generation negotiate:
#: the link runs at the smaller of the two ends' supported sizes. NVIDIA GPUs support 256 B;
#: the gen3 servers of the P100 era ran at 128 B (256 B would put gen3 x16 at 13.6 GB/s, above
#: every pinned-copy measurement of it), today's gen4/gen5 root complexes support 512 B (not
#: found in the sources searched), so the GPU's 256 B binds. The sources and the measurements
#: the rates are checked against: docs/model.md, "Host links from first principles".
PLATFORM_MAX_PAYLOAD = {1: 128, 2: 128, 3: 128, 4: 256, 5: 256, 6: 256}

#: The smallest chunk-mode burst (bytes): one 4 KiB page, the unit GPU copy engines and the
#: driver's pinned host buffers map and move. A smaller "burst" is no real DMA burst: the wire
#: efficiency of small packets is already priced in the link bandwidth (``max_payload``), and
#: each burst costs the simulation events, so 1 B bursts would take hours for one iteration.
MIN_DMA_BURST = 4096


@frozen_record
class PCIeLink(FrozenRecord):
    """A PCIe link's per-direction bandwidth.

    ``raw`` is the signalling rate after line coding; ``effective`` removes the per-TLP
    overhead (``tlp_overhead``, 26 B: the 4 B STP token with the sequence number, a 4-DW header
    of 16 B for 64-bit host addresses, the 4 B LCRC, and 2 B of allowance for ordered sets and
    idle tokens) for payloads of ``max_payload`` bytes (0: the generation's platform figure,
    :data:`PLATFORM_MAX_PAYLOAD`) and the DLLP traffic (Ack/Nak and UpdateFC, a share of link
    time: about one 8 B DLLP per 128 B TLP).
    """

    generation: int
    lanes: int
    max_payload: int = 0
    tlp_overhead: int = 26
    dllp_overhead: float = 0.05

    @property
    def payload(self) -> int:
        """The max payload size the link runs at (bytes)."""
        return self.max_payload or PLATFORM_MAX_PAYLOAD[self.generation]

    @property
    def raw(self) -> float:
        """Bytes per second after line coding, one direction."""
        gts, code = PCIE_GENERATIONS[self.generation]
        return gts * 1e9 * code * self.lanes / 8

    @property
    def tlp_efficiency(self) -> float:
        """Payload share of every TLP."""
        return self.payload / (self.payload + self.tlp_overhead)

    @property
    def effective(self) -> float:
        """Payload bytes per second, one direction."""
        return self.raw * self.tlp_efficiency * (1.0 - self.dllp_overhead)


def nvlink_bandwidth(links: int, per_link: float, efficiency: float = 0.9) -> float:
    """Payload bytes per second, one direction, of ``links`` NVLink bricks of ``per_link`` B/s
    signalling each (NVLink 1: 20 GB/s, NVLink 2: 25 GB/s, NVLink 4: 25 GB/s per direction per
    link), with ``efficiency`` for packet headers."""
    return links * per_link * efficiency


def c2c_bandwidth(per_direction: float, efficiency: float = 0.9) -> float:
    """Payload bytes per second, one direction, of an NVLink-C2C link signalling
    ``per_direction`` B/s each way (GH200: 450 GB/s, 900 GB/s both ways together), with
    ``efficiency`` for packet headers (an assumption: NVIDIA publishes no payload efficiency;
    docs/model.md)."""
    return per_direction * efficiency


#: The host-link presets (a topology's host link): a cdma.PCIeBridge's params for each (PCIe
#: generation and lanes; NVLink bricks and their rate; NVLink-C2C's per-direction rate); what
#: each figure rests on: docs/model.md, "Host links from first principles".
HOST_LINKS: dict[str, dict[str, object]] = {
    "pcie3x16": {"protocol": "pcie", "generation": 3, "lanes": 16},
    "pcie4x16": {"protocol": "pcie", "generation": 4, "lanes": 16},
    "pcie5x16": {"protocol": "pcie", "generation": 5, "lanes": 16},
    "nvlink2x3": {"protocol": "nvlink", "nvlink_links": 3, "nvlink_rate": "25GB/s"},
    "nvlink1x4": {"protocol": "nvlink", "nvlink_links": 4, "nvlink_rate": "20GB/s"},
    "nvlink_c2c": {"protocol": "nvlink_c2c", "c2c_rate": "450GB/s"},
}
