"""The routes to the SSDs (``components.storage_path``): which resources a bounce and a
GPUDirect transfer load, by how much, with what start-up latency, on hand-made paths."""
from __future__ import annotations

import pytest

from components.messages import DrivePath, PathInfo
from components.storage_path import storage_route
from sst_cdma.engine.interfaces import InterfaceError

HOST = object()  # stands for the host store both paths end at


def gpu_path(*links: str, latency: int = 1000) -> PathInfo:
    """A GPU's path through ``links`` (nearest first) to host memory ``dram``."""
    return PathInfo([f"{n}.d2h" for n in links] + ["dram"], [f"{n}.h2d" for n in links] +
                    ["dram"], latency, HOST, list(links))  # type: ignore[arg-type]


def drive(name: str, *above: str, host=HOST) -> DrivePath:
    links = (name, *above)
    to_host = PathInfo([f"{n}.d2h" for n in links] + ["dram"],
                       [f"{n}.h2d" for n in links] + ["dram"], 50, host, list(links))
    return DrivePath(name, f"{name}.read", f"{name}.write", 80_000, 15_000, 50, to_host)


def test_bounce_crosses_host_dram_twice_and_every_link_on_both_sides():
    route = storage_route("e", gpu_path("gpu.pcie", "sw"), [drive("ssd", "sw")], "bounce")
    assert route.weights["offload"] == {"gpu.pcie.d2h": 1.0, "sw.d2h": 1.0, "dram": 2.0,
                                        "sw.h2d": 1.0, "ssd.h2d": 1.0, "ssd.write": 1.0}
    assert route.weights["prefetch"] == {"gpu.pcie.h2d": 1.0, "sw.h2d": 1.0, "dram": 2.0,
                                         "sw.d2h": 1.0, "ssd.d2h": 1.0, "ssd.read": 1.0}
    # both DMA set-ups (the GPU's path, the drive's) and the command
    assert route.latency_ps == {"offload": 1000 + 50 + 15_000, "prefetch": 1000 + 50 + 80_000}


def test_gds_turns_at_the_shared_switch_and_loads_nothing_above_it():
    route = storage_route("e", gpu_path("gpu.pcie", "sw", "rc"), [drive("ssd", "sw", "rc")],
                          "gds")
    assert route.weights["offload"] == {"gpu.pcie.d2h": 1.0, "ssd.h2d": 1.0, "ssd.write": 1.0}
    assert route.weights["prefetch"] == {"gpu.pcie.h2d": 1.0, "ssd.d2h": 1.0, "ssd.read": 1.0}
    assert route.latency_ps["offload"] == 1000 + 50 + 15_000


def test_gds_between_switches_crosses_both_upstream_ports_but_not_host_dram():
    route = storage_route("e", gpu_path("gpu.pcie", "swA"), [drive("ssd", "swB")], "gds")
    assert route.weights["offload"] == {"gpu.pcie.d2h": 1.0, "swA.d2h": 1.0, "swB.h2d": 1.0,
                                        "ssd.h2d": 1.0, "ssd.write": 1.0}


def test_stripes_load_each_drive_with_its_share_and_the_gpu_side_with_all():
    route = storage_route("e", gpu_path("gpu.pcie"), [drive(f"ssd{i}") for i in range(4)],
                          "gds")
    out = route.weights["offload"]
    assert out["gpu.pcie.d2h"] == pytest.approx(1.0)
    assert [out[f"ssd{i}.write"] for i in range(4)] == [0.25] * 4
    assert [out[f"ssd{i}.h2d"] for i in range(4)] == [0.25] * 4
    assert "dram" not in out


def test_a_drive_of_another_host_or_no_drive_is_a_wiring_error():
    with pytest.raises(InterfaceError, match="SSD ssd sits on another host"):
        storage_route("e", gpu_path("gpu.pcie"), [drive("ssd", host=object())], "bounce")
    with pytest.raises(InterfaceError, match="needs an SSD on a port nvme0"):
        storage_route("e", gpu_path("gpu.pcie"), [], "gds")
