"""EVALUATION.md's "Beyond activations": the 13B network it adds loads, every case of
sweeps/beyond_activations.py is a command the topology scripts accept (built, not simulated),
the section runs the script and shows a row for each of its cases, and the ``set by`` column
names the largest of the three figures; the DDR5-host column is the H100 PCIe on a DDR5
platform of the host table."""
from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

import pytest

from sst_cdma.engine.runner import apply_overrides, execute_script
from sst_cdma.model.hosts import DEFAULT_PLATFORM, PLATFORMS
from workloads import load_network

REPO = Path(__file__).resolve().parents[2]
SECTION = re.compile(r"^## \d+\. Beyond activations\n(.*?)(?=^## )", re.M | re.S)


@lru_cache(maxsize=1)
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("beyond_activations",
                                                  REPO / "sweeps" / "beyond_activations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def section() -> str:
    match = SECTION.search((REPO / "EVALUATION.md").read_text(encoding="utf-8"))
    assert match, "EVALUATION.md has no 'Beyond activations' section"
    return match.group(1)


def test_the_13b_network_loads_with_the_llama_paper_shape():
    net = load_network("llama_13b")
    assert net.param_count() == 13_015_864_320
    names = {layer.name.split("/")[0] for layer in net.layers}
    assert {f"blk{i}" for i in range(40)} <= names and "blk40" not in names


def test_every_case_is_a_command_its_topology_accepts():
    cases = script().cases()
    assert len({(c.network, c.row, c.system) for c in cases}) == len(cases)
    for case in cases:
        graph = execute_script(REPO / case.script, list(case.options))
        if case.overrides:
            apply_overrides(graph, case.overrides)


def test_the_section_runs_the_script_and_shows_every_case():
    text = section()
    assert "python sweeps/beyond_activations.py" in text
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[:2])
            for line in text.splitlines() if line.startswith("| ")}
    missing = [(c.row, c.system) for c in script().cases() if (c.row, c.system) not in rows]
    assert missing == []


def test_the_ddr5_column_is_the_h100_pcie_on_a_ddr5_platform_for_zero_offload_rows_only():
    module = script()
    label, path, options = module.DDR5_HOST
    h100 = next(s for s in module.SYSTEMS if s[0] == "H100 PCIe")
    assert path == h100[1] and options[:len(h100[2])] == h100[2]
    host = PLATFORMS[options[options.index("--cpu") + 1]]
    assert host.memory.startswith("DDR5") and host.dram_bandwidth > DEFAULT_PLATFORM.dram_bandwidth
    assert host.core.match[0] in label and f"{host.sockets}x" in label
    rows = {c.row for c in module.cases(["llama_7b"]) if c.system == label}
    assert rows and all(r.startswith("ZeRO-Offload") for r in rows)
    assert len(rows) == sum(r.startswith("ZeRO-Offload") for r, _ in module.PLACEMENTS)


@pytest.mark.parametrize("compute, utilization, cpu, written, expected", [
    (0.2, 0.1, 2.0, 0, "host CPU"), (0.2, 0.9, 0.5, 0, "host link"),
    (1.0, 0.1, 0.0, 0, "GPU compute"), (0.2, 0.1, 2.0, 30e9, "NVMe")])
def test_set_by_names_the_largest_figure(compute, utilization, cpu, written, expected):
    summary = {"iteration_time_s": 2.0, "compute_time_s": compute,
               "pcie_utilization": {"d2h": utilization, "h2d": utilization / 2},
               "model_states": {"cpu_step_time_s": cpu},
               "nvme": {"drives": 2, "bytes_read": 1e9, "bytes_written": written,
                        "read_rate_Bps": 5e9, "write_rate_Bps": 5e9}}
    nvme = max(1e9, written) / 10e9
    assert script().bound_by(summary) == (compute, utilization * 2.0, cpu, nvme, expected)


def test_a_run_without_drives_has_no_nvme_time():
    assert script().nvme_busy_s({"iteration_time_s": 1.0}) == 0.0


def test_a_refused_run_shows_the_bytes_the_planner_lacked():
    reason = ("gpu0:workload[0]: policy auto: cannot fit in 85899345920 bytes (80.00 GiB) of "
              "GPU memory: the plan of least memory the planner reaches holds 107945721856 "
              "bytes, 22046375936 bytes (20.53 GiB) short")
    cells = script().refused_cells(reason)
    assert cells[0] == "refused: 22.0 GB short with the least-memory plan"
    assert len(cells) == len(script().HEADER) - 2
