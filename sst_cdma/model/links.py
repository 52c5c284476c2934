"""Link bandwidth from first principles: PCIe generations with their line encoding, TLP and
DLLP overheads; NVLink as bricks of fixed signalling rate; NVLink-C2C (Grace Hopper's chip-to-chip
link) as one link of fixed per-direction rate."""
from __future__ import annotations

from dataclasses import dataclass

# Per-lane transfer rate (GT/s) and line-code efficiency of each PCIe generation.
PCIE_GENERATIONS = {
    1: (2.5, 8 / 10),
    2: (5.0, 8 / 10),
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
    6: (64.0, 242 / 256),  # FLIT mode: 236 B payload of 256 B FLIT incl. FEC/CRC (approx.)
}

#: The smallest chunk-mode burst (bytes): one 4 KiB page, the unit GPU copy engines and the
#: driver's pinned host buffers map and move. A smaller "burst" is no real DMA burst: the wire
#: efficiency of small packets is already priced in the link bandwidth (``max_payload``), and
#: each burst costs the simulation events, so 1 B bursts would take hours for one iteration.
MIN_DMA_BURST = 4096


@dataclass(frozen=True)
class PCIeLink:
    """A PCIe link's per-direction bandwidth.

    ``raw`` is the signalling rate after line coding; ``effective`` removes the per-TLP
    overhead (framing 2 B + sequence 2 B + 4DW header 16 B + LCRC 4 B + ECRC/STP 2 B = 26 B by
    default) for payloads of ``max_payload`` bytes and the DLLP traffic (ACK/NAK and flow-control
    updates, a fraction of link time).
    """

    generation: int
    lanes: int
    max_payload: int = 128  # many x86 root complexes negotiate 128 B
    tlp_overhead: int = 26
    dllp_overhead: float = 0.05

    @property
    def raw(self) -> float:
        """Bytes per second after line coding, one direction."""
        gts, code = PCIE_GENERATIONS[self.generation]
        return gts * 1e9 * code * self.lanes / 8

    @property
    def tlp_efficiency(self) -> float:
        """Payload share of every TLP."""
        return self.max_payload / (self.max_payload + self.tlp_overhead)

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
