"""The host platforms (``sst_cdma/model/hosts.py``): one socket's DRAM bandwidth is computed from
its channels and their data rate, docs/host_cpu.md's table is the code's, an unknown name is
refused naming the closest, a superchip GPU's host agrees with its preset's host memory, and a
measured per-core CPU Adam rate is carried to a platform's cores by vector width and clock,
bounded by the DRAM."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sst_cdma.model.gpus import GPUS
from sst_cdma.model.hosts import (DEFAULT_PLATFORM, GPU_HOSTS, PLATFORMS, SHIPPED_ADAM_CPU,
                                  HostPlatformError, adam_origin, core_of_machine, platform,
                                  scale_adam)

DOC = Path(__file__).resolve().parents[2] / "docs" / "host_cpu.md"


def doc_rows() -> dict[str, list[str]]:
    """The platform table of docs/host_cpu.md, by ``--cpu`` name."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Host platforms"):]
    rows = re.findall(r"^\| `([\w.-]+)` \| (.*) \|$", section, re.M)
    return {name: [c.strip() for c in cells.split(" | ")] for name, cells in rows
            if name in PLATFORMS and len(cells.split(" | ")) == 8}


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_dram_per_socket_is_channels_times_rate_times_eight_bytes(name):
    host = PLATFORMS[name]
    if host.transfer_mts:
        assert host.dram_bandwidth == host.channels_per_socket * host.transfer_mts * 1e6 * 8
        assert host.memory.endswith(str(host.transfer_mts))
    else:  # only a datasheet's stated figure where the data rate is not published
        assert host.stated_bandwidth > 0
    assert float(host.dram_text.removesuffix("GB/s")) * 1e9 == host.dram_bandwidth


def test_the_figures_the_issue_names():
    assert PLATFORMS["dgx-h100"].dram_bandwidth == 307.2e9
    assert PLATFORMS["dgx-a100"].dram_bandwidth == 204.8e9
    assert PLATFORMS["dgx2"].core.name == "Intel Xeon Platinum 8168"
    assert (PLATFORMS["grace"].cores_per_socket, PLATFORMS["grace"].memory) == (72, "LPDDR5X")
    assert PLATFORMS["epyc-9654"].dram_bandwidth == 460.8e9
    # the default is today's host: 32 cores of the measured kind on four DDR4-2400 channels
    assert (DEFAULT_PLATFORM.cores_per_socket, DEFAULT_PLATFORM.dram_bandwidth) == (32, 76.8e9)
    assert DEFAULT_PLATFORM.core is SHIPPED_ADAM_CPU


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_the_docs_table_is_the_code(name):
    row = doc_rows()[name]
    host = PLATFORMS[name]
    assert row[2] == f"{host.sockets} x {host.cores_per_socket}"
    assert row[5].startswith(f"{host.channels_per_socket} x {host.memory}") or \
        row[5] == f"{host.memory}, {host.channels_per_socket} channels"
    assert float(row[6].split()[0]) == pytest.approx(host.dram_bandwidth / 1e9, abs=0.05)
    assert row[7] == str(host.numa_nodes)
    assert f"{host.core.simd_bits}-bit" in row[3] and row[3].startswith(f"{host.core.fma_pipes} x")
    assert float(row[4].split()[0]) == pytest.approx(host.core.base_ghz, abs=0.005)


def test_the_docs_scale_factors_are_the_code():
    text = DOC.read_text(encoding="utf-8")
    for name, host in PLATFORMS.items():
        factor = SHIPPED_ADAM_CPU.speed_of(host.core)
        shown = f"`{name}` {factor:.3f}" if factor != 1 else f"`{name}` 1"
        assert shown in text, shown


def test_an_unknown_platform_is_one_line_with_the_closest_name():
    with pytest.raises(HostPlatformError) as err:
        platform("dgx-h10")
    assert str(err.value).startswith("'dgx-h10' is not a host platform (did you mean dgx-h100?")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("gpu, host", sorted(GPU_HOSTS.items()))
def test_a_superchip_presets_host_memory_is_its_platforms(gpu, host):
    # the preset's own figure (docs/gpus.md) and the platform's must not drift apart
    assert GPUS[gpu].host_memory_bandwidth == PLATFORMS[host].dram_text


@pytest.mark.parametrize("cpu, name", [
    ("Intel(R) Xeon(R) Platinum 8480C", "Intel Xeon Platinum 8480C"),
    ("AMD EPYC 7742 64-Core Processor", "AMD EPYC 7742"),
    ("Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz", "Intel Xeon E5-2698 v4"),
    ("Neoverse-V2", "NVIDIA Grace (Arm Neoverse V2)"),
])
def test_a_measured_cpu_is_known_by_its_model_name(cpu, name):
    core = core_of_machine(cpu, shipped=False)
    assert core is not None and core.name == name


def test_an_unknown_cpu_is_none_and_the_shipped_file_is_its_own_core():
    assert core_of_machine("AMD Ryzen 9 7950X 16-Core Processor", shipped=False) is None
    # the shipped file's "AMD EPYC" is the measured Zen 3 guest, not any EPYC of the table
    assert core_of_machine("AMD EPYC", shipped=True) is SHIPPED_ADAM_CPU
    assert core_of_machine("AMD EPYC", shipped=False) is None


def test_scaling_is_vector_throughput_times_clock():
    h100 = PLATFORMS["dgx-h100"]
    # a 512-bit core with two FMA pipes at 2.0 GHz against a 256-bit one at 2.45 GHz
    assert SHIPPED_ADAM_CPU.speed_of(h100.core) == pytest.approx(2 * 2.0 / 2.45)
    adam = scale_adam(511e6, SHIPPED_ADAM_CPU, h100, 56, 28.0, h100.dram_bandwidth)
    assert adam.per_core == pytest.approx(511e6 * 2 * 2.0 / 2.45)
    assert adam.compute_rate == pytest.approx(adam.per_core * 56)
    # 56 cores at 834 M/s want 1.3 TB/s at 28 bytes a parameter: the DDR5 binds
    assert adam.dram_bound and adam.rate == pytest.approx(307.2e9 / 28)
    slow = scale_adam(1e6, None, h100, 1, 28.0, h100.dram_bandwidth)
    assert slow.factor == 1.0 and not slow.dram_bound and slow.rate == 1e6


def test_the_origin_of_a_rate_says_how_it_reaches_the_hosts_core():
    h100, a100 = PLATFORMS["dgx-h100"], PLATFORMS["dgx-a100"]
    own = adam_origin("Intel(R) Xeon(R) Platinum 8480C", False, h100)
    assert (own.factor, own.scaling, own.other_cpu, own.note("f")) == \
        (1.0, "as measured", False, "")
    table = adam_origin("Intel(R) Xeon(R) Platinum 8480C", False, a100)
    assert table.scaling == "vector width and clock" and table.other_cpu
    assert table.factor == pytest.approx(h100.core.speed_of(a100.core))
    assert adam_origin("AMD EPYC", True, DEFAULT_PLATFORM).scaling == "as measured"
    # a CPU the table does not know: by the width and clock its file recorded, else unscaled
    recorded = adam_origin("Intel(R) Xeon(R) Processor", False, a100, 512, 2600.0)
    assert recorded.scaling == "recorded vector width and clock"
    assert recorded.factor == pytest.approx((256 * 2.25) / (512 * 2.6))
    unknown = adam_origin("Intel(R) Xeon(R) Processor", False, a100)
    assert (unknown.core, unknown.factor, unknown.scaling) == (None, 1.0, "unscaled")
    assert "'Intel(R) Xeon(R) Processor', not on the host's AMD EPYC 7742 (--cpu dgx-a100)" \
        in unknown.note("f")
