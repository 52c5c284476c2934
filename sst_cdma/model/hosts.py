"""Host platforms: the CPUs and DRAM of the servers GPUs are trained in (a host CPU's
``platform``), each figure from a datasheet or a system document named in ``docs/host_cpu.md`` ("Host platforms"),
and the scaling of a measured per-core CPU Adam rate to a platform's cores.

A platform is a system's host: its sockets, the cores of each, each core's vector units and
clock, and each socket's memory channels and their data rate. A socket's DRAM bandwidth is
computed from those, ``channels x MT/s x bytes per transfer`` (8 B for a DDR4/DDR5 channel):
it is the one figure the host memory and the host CPU both read. The simulator's host (one
``cdma.HostMemory`` with its ``cdma.HostCPU``) is one socket: a NUMA node's cores beside its
own channels, as a process bound to the GPU's socket sees them.

A CPU Adam rate measured on one core of one CPU (``sst-cdma time-cpu-adam``) is carried to
another core by the ratio of their vector throughput (vector bits x FMA pipes per cycle) and
their base clocks: the fused Adam kernel is a stream of vector multiply-adds, one pass over
memory per parameter. The socket's DRAM bounds what all its cores together reach. A CPU the
table does not know is carried by the vector width and clock its file recorded, where it
recorded them (:func:`adam_origin`).
"""
from __future__ import annotations

import difflib
from typing import Optional

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["CpuCore", "HostPlatform", "PLATFORMS", "DEFAULT_PLATFORM", "GPU_HOSTS",
           "SHIPPED_ADAM_CPU", "HostPlatformError", "platform", "platform_fault", "platform_names",
           "closest_platform", "core_of_machine", "AdamScaling", "scale_adam", "AdamOrigin",
           "adam_origin", "SCALINGS"]


class HostPlatformError(ValueError):
    """A host platform name that is not in :data:`PLATFORMS` (one line, the closest name)."""


@frozen_record
class CpuCore(FrozenRecord):
    """One CPU model's core, as the CPU Adam kernel sees it: ``simd_bits`` the vector width
    its fp32 multiply-adds run at (AVX2: 256, AVX-512: 512; Zen 4 runs AVX-512 on 256-bit
    data paths: 256), ``fma_pipes`` the vector FMA pipes a core issues to each cycle, and
    ``base_ghz`` its base clock (``all_core_ghz`` where a source gives the all-core turbo; 0
    where none does). ``match`` are the words of the CPU's model name (Linux's
    ``/proc/cpuinfo`` "model name", what ``sst-cdma time-cpu-adam`` records as
    ``machine.cpu``) that name this CPU and no other here."""

    name: str
    match: tuple[str, ...]
    simd_bits: int
    fma_pipes: int
    base_ghz: float
    all_core_ghz: float = 0.0

    @property
    def vector_bits_per_cycle(self) -> int:
        """The fp32 vector bits the core multiplies and adds per cycle."""
        return self.simd_bits * self.fma_pipes

    def speed_of(self, other: "CpuCore") -> float:
        """How much faster ``other``'s core runs a vector-bound kernel than this one: the
        ratio of their vector bits per cycle times the ratio of their base clocks."""
        return (other.vector_bits_per_cycle * other.base_ghz) / \
            (self.vector_bits_per_cycle * self.base_ghz)


@frozen_record
class HostPlatform(FrozenRecord):
    """A system's host: ``sockets`` CPUs of ``cores_per_socket`` ``core`` each, each socket
    with ``channels_per_socket`` memory channels of ``memory`` at ``transfer_mts`` million
    transfers per second, ``channel_bytes`` per transfer; ``numa_nodes`` in the whole system
    as it ships. Where a datasheet states the bandwidth but not the data rate (Grace's
    LPDDR5X), ``transfer_mts`` is 0 and ``stated_bandwidth`` (B/s per socket) is the figure.
    ``system`` names the machine, ``why`` what the figures stand for."""

    name: str
    system: str
    core: CpuCore
    sockets: int
    cores_per_socket: int
    memory: str
    channels_per_socket: int
    transfer_mts: int
    numa_nodes: int
    channel_bytes: int = 8
    stated_bandwidth: float = 0.0
    why: str = ""

    @property
    def dram_bandwidth(self) -> float:
        """One socket's DRAM bandwidth in B/s: channels x MT/s x bytes per transfer (or the
        datasheet's stated figure where the data rate is not published)."""
        if self.transfer_mts:
            return self.channels_per_socket * self.transfer_mts * 1e6 * self.channel_bytes
        return self.stated_bandwidth

    @property
    def dram_text(self) -> str:
        """:attr:`dram_bandwidth` as an element param's text (``76.8GB/s``)."""
        return f"{self.dram_bandwidth / 1e9:.12g}GB/s"

    def describe(self) -> str:
        """One line: the system, its CPU and one socket's DRAM."""
        return (f"{self.system}: {self.sockets} x {self.core.name}, {self.cores_per_socket} "
                f"cores and {self.dram_bandwidth / 1e9:.1f} GB/s of {self.memory} per socket")


# -- the cores ------------------------------------------------------------------------------
#: the core of the shipped CPU Adam measurement (``cpu_adam_default.json``, machine "AMD
#: EPYC"): a KVM guest of an AMD EPYC of family 25, model 1 (Zen 3, "Milan"); the guest did
#: not report its model number, so its clock is an **assumption**: the base clock of the EPYC
#: 7763, the Milan part of the cloud VMs this machine resembles (docs/host_cpu.md)
SHIPPED_ADAM_CPU = CpuCore("AMD EPYC (Zen 3, model not reported)", (), 256, 2, 2.45)
E5_2698_V4 = CpuCore("Intel Xeon E5-2698 v4", ("E5-2698 v4",), 256, 2, 2.2)
PLATINUM_8168 = CpuCore("Intel Xeon Platinum 8168", ("Platinum 8168",), 512, 2, 2.7, 3.4)
EPYC_7742 = CpuCore("AMD EPYC 7742", ("EPYC 7742",), 256, 2, 2.25)
PLATINUM_8480C = CpuCore("Intel Xeon Platinum 8480C", ("Platinum 8480C",), 512, 2, 2.0)
EPYC_9654 = CpuCore("AMD EPYC 9654", ("EPYC 9654",), 256, 2, 2.4)
#: Grace's clock is not published in the sources searched: 3.08 GHz is what its FP64 peak
#: (7.1 TFLOP/s for the superchip's 144 cores) gives at 16 FP64 FLOPs per core per cycle (4
#: SVE2 pipes of 128 bits, 2 lanes each, 2 FLOPs a multiply-add)
GRACE = CpuCore("NVIDIA Grace (Arm Neoverse V2)", ("Grace", "Neoverse-V2"), 128, 4,
                7.1e12 / (144 * 16) / 1e9)

# -- the platforms --------------------------------------------------------------------------
PLATFORMS: dict[str, HostPlatform] = {p.name: p for p in (
    HostPlatform("ddr4-2400-socket", "the default host (an assumption, not a datasheet "
                 "system)", SHIPPED_ADAM_CPU, 1, 32, "DDR4-2400", 4, 2400, 1,
                 why="the host every topology had before platforms: 32 cores of the shipped "
                     "CPU Adam measurement's kind beside one socket of four DDR4-2400 "
                     "channels (a 2016 server); kept for the topologies whose paper does not "
                     "document its host"),
    HostPlatform("dgx1", "NVIDIA DGX-1", E5_2698_V4, 2, 20, "DDR4-2133", 4, 2133, 2),
    HostPlatform("dgx2", "NVIDIA DGX-2", PLATINUM_8168, 2, 24, "DDR4-2666", 6, 2666, 2),
    HostPlatform("dgx-a100", "NVIDIA DGX A100", EPYC_7742, 2, 64, "DDR4-3200", 8, 3200, 8),
    HostPlatform("dgx-h100", "NVIDIA DGX H100", PLATINUM_8480C, 2, 56, "DDR5-4800", 8, 4800,
                 2),
    HostPlatform("epyc-9654", "a two-socket AMD EPYC 9654 (Genoa) server", EPYC_9654, 2, 96,
                 "DDR5-4800", 12, 4800, 2),
    HostPlatform("grace", "NVIDIA Grace (GH200, GB200)", GRACE, 1, 72, "LPDDR5X", 16, 0, 1,
                 stated_bandwidth=500e9),
)}

#: the platform of a host no topology or GPU names: today's element defaults
DEFAULT_PLATFORM = PLATFORMS["ddr4-2400-socket"]

#: GPU presets that come with their host in one package (a superchip): a system of that GPU
#: has this platform's host unless the host CPU's ``platform`` names another
GPU_HOSTS: dict[str, str] = {"gh200": "grace"}


def platform_names() -> list[str]:
    """Every platform's name, sorted."""
    return sorted(PLATFORMS)


def closest_platform(name: str) -> Optional[str]:
    """The platform name closest to ``name`` (None when none is close)."""
    close = difflib.get_close_matches(name, PLATFORMS, n=1, cutoff=0.4)
    return close[0] if close else None


def platform_fault(name: str) -> str:
    """Why ``name`` is not a platform, naming the closest ("" when it is one)."""
    if name in PLATFORMS:
        return ""
    close = closest_platform(name)
    hint = f"did you mean {close}? " if close else ""
    return f"not a host platform ({hint}one of {', '.join(platform_names())}; docs/host_cpu.md)"


def platform(name: str) -> HostPlatform:
    """The platform ``name``; an unknown one is a :class:`HostPlatformError` naming the
    closest."""
    fault = platform_fault(name)
    if fault:
        raise HostPlatformError(f"{name!r} is {fault}")
    return PLATFORMS[name]


def core_of_machine(cpu: str, shipped: bool) -> Optional[CpuCore]:
    """The core a CPU Adam file's ``machine.cpu`` names: the shipped measurement's core for
    the shipped file, else the first platform core one of whose model words it contains
    (None: a CPU this table does not know)."""
    if shipped:
        return SHIPPED_ADAM_CPU
    text = cpu.lower()
    for host in PLATFORMS.values():
        if any(word.lower() in text for word in host.core.match):
            return host.core
    return None


@frozen_record
class AdamScaling(FrozenRecord):
    """A measured per-core CPU Adam rate carried to a platform: ``per_core`` the rate on one
    of the platform's cores (parameters/s), ``factor`` the ratio it was scaled by (1: taken
    as measured), ``cores`` the cores stepping, ``dram_bound`` whether their traffic
    (``bytes_per_param`` a parameter) exceeds the socket's DRAM bandwidth ``dram``."""

    per_core: float
    factor: float
    cores: int
    bytes_per_param: float
    dram: float

    @property
    def compute_rate(self) -> float:
        """Parameters/s every core steps together, DRAM aside."""
        return self.per_core * self.cores

    @property
    def rate(self) -> float:
        """Parameters/s the cores reach, bounded by the DRAM bandwidth (no traffic: their
        own)."""
        if self.bytes_per_param <= 0:
            return self.compute_rate
        return min(self.compute_rate, self.dram / self.bytes_per_param)

    @property
    def dram_bound(self) -> bool:
        """True when the DRAM, not the cores, sets the rate."""
        return self.compute_rate * self.bytes_per_param > self.dram


def scale_adam(per_core: float, measured_on: Optional[CpuCore], host: HostPlatform,
               cores: int, bytes_per_param: float, dram: float) -> AdamScaling:
    """The measured one-core rate ``per_core`` (on ``measured_on``; None: on ``host`` itself,
    taken as it is) carried to ``host``'s cores, ``cores`` of them, on ``dram`` B/s."""
    factor = measured_on.speed_of(host.core) if measured_on is not None else 1.0
    return AdamScaling(per_core * factor, factor, cores, bytes_per_param, dram)


#: how a measured per-core rate reaches the host's core: ``as measured`` (on the host's own
#: CPU), ``vector width and clock`` (from a CPU of this table), ``recorded vector width and
#: clock`` (from a CPU this table does not know, by what its file recorded), ``unscaled`` (a
#: CPU this table does not know, whose file recorded no width or clock: taken as the host's)
SCALINGS = ("as measured", "vector width and clock", "recorded vector width and clock",
            "unscaled")


@frozen_record
class AdamOrigin(FrozenRecord):
    """Where a CPU Adam file's one-core rate was measured and how it is carried to ``host``'s
    core: ``cpu`` the file's CPU name, ``core`` the measuring core (None: not known),
    ``factor`` the ratio applied and ``scaling`` one of :data:`SCALINGS`."""

    cpu: str
    core: Optional[CpuCore]
    host: HostPlatform
    factor: float
    scaling: str

    @property
    def other_cpu(self) -> bool:
        """True when the file was measured on a CPU other than the host's."""
        return self.core is not self.host.core

    def note(self, what: str) -> str:
        """One line saying that ``what`` (the file, as the user gave it) was measured on
        another CPU than the host's, both named, and what was done with its rate ("" when it
        was measured on the host's CPU)."""
        if not self.other_cpu:
            return ""
        head = (f"{what} was measured on {self.cpu!r}, not on the host's "
                f"{self.host.core.name} (--cpu {self.host.name})")
        if self.scaling == "unscaled":
            return (f"{head}: the platform table does not know that CPU, so its per-core rate "
                    "is taken as the host's, unscaled")
        assert self.core is not None
        if self.scaling == "vector width and clock":
            return (f"{head}: its per-core rate is scaled x{self.factor:.3f} from the "
                    f"{self.core.name}'s by vector width and clock")
        return (f"{head}: the platform table does not know that CPU, so its per-core rate is "
                f"scaled x{self.factor:.3f} by the vector width ({self.core.simd_bits}-bit) "
                f"and clock ({self.core.base_ghz:.2f} GHz) the file recorded (FMA pipes taken "
                "as the host's)")


def adam_origin(cpu: str, shipped: bool, host: HostPlatform, simd_bits: int = 0,
                mhz: float = 0.0) -> AdamOrigin:
    """How a rate measured on ``cpu`` (the shipped measurement where ``shipped``) reaches
    ``host``'s core: from a CPU of the table by its vector width and clock; from one the table
    does not know by the vector width ``simd_bits`` and clock ``mhz`` its file recorded, its
    FMA pipes taken as the host core's (a CPU's flags do not say them); unscaled where the
    file recorded neither."""
    core = core_of_machine(cpu, shipped)
    if core is not None:
        factor = core.speed_of(host.core)
        same = core is host.core or factor == 1.0
        return AdamOrigin(cpu, core, host, 1.0 if same else factor,
                          "as measured" if core is host.core else
                          "vector width and clock")
    if simd_bits > 0 and mhz > 0:
        core = CpuCore(cpu, (), simd_bits, host.core.fma_pipes, mhz / 1000)
        return AdamOrigin(cpu, core, host, core.speed_of(host.core),
                          "recorded vector width and clock")
    return AdamOrigin(cpu, None, host, 1.0, "unscaled")
