"""``--cpu NAME`` (docs/host_cpu.md, "Host platforms"): each topology's host is its platform's,
the host memory and the host CPU step on one DRAM figure which ``--cpu-memory-bandwidth`` sets
(within the CPU step's traffic floor and the channels' raw rate), the CPU Adam rate is the
measured one scaled to the platform's cores and bounded by its DRAM, and a CPU Adam file from
another CPU than the platform's is one warning naming both CPUs, recorded in the summary."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import sst_cdma
from sst_cdma.engine.runner import RunError
from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM, load_cpu_adam
from sst_cdma.model.hosts import PLATFORMS, SHIPPED_ADAM_CPU

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
ALEX = ["--network", "alexnet", "--batch", "16", "--no-baselines"]
#: ZeRO-Offload: the host CPU steps Adam on the states in host memory
ZERO = [*ALEX, "--dtype", "bfloat16", "--optimizer", "adam", "--optimizer-states", "host"]
SHIPPED = load_cpu_adam()


def run(topology: Path, opts: list[str], **kwargs: Any) -> Any:
    """One in-process run, its console kept."""
    return sst_cdma.run(topology, opts, console=io.StringIO(), **kwargs)


def refused(topology: Path, opts: list[str]) -> str:
    """The one-line refusal of a run."""
    with pytest.raises(RunError) as err:
        run(topology, opts)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def test_the_default_host_is_todays_so_earlier_results_hold():
    result = run(PASCAL, ZERO)
    cpu = result.simulation.components["cpu"]
    assert (cpu.host.name, cpu.cores, cpu.scale) == ("ddr4-2400-socket", 32, 1.0)
    assert cpu.rate == SHIPPED.params_per_s_per_core
    assert result.simulation.components["host"].params["bandwidth"] == 76.8e9
    published = result.results["cpu"]
    assert published.platform == "ddr4-2400-socket" and published.scale == 1.0
    # 32 cores at 511 M parameters/s want far more than 76.8 GB/s at 28 bytes a parameter
    assert published.dram_bound
    assert published.params_per_s == pytest.approx(76.8e9 / 28)


def test_cpu_picks_the_platform_the_cores_the_rate_and_the_one_dram_figure():
    result = run(PASCAL, [*ZERO, "--cpu", "dgx-h100"])
    cpu = result.simulation.components["cpu"]
    h100 = PLATFORMS["dgx-h100"]
    assert cpu.cores == 56
    assert cpu.scale == pytest.approx(SHIPPED_ADAM_CPU.speed_of(h100.core))
    assert cpu.rate == pytest.approx(SHIPPED.params_per_s_per_core * 2 * 2.0 / 2.45)
    host = result.simulation.components["host"]
    assert host.params["bandwidth"] == 307.2e9
    # the CPU's step has no DRAM figure of its own: its flow crosses the host memory's
    assert cpu.own is None
    assert [res.name for res, _ in cpu.route.pairs] == [host.resource.name]
    assert "scaled x1.633 to Intel Xeon Platinum 8480C by vector width and clock" in cpu.source
    published = result.results["cpu"]
    assert published.dram_bandwidth == 307.2e9 and published.platform == "dgx-h100"
    assert published.platform_line.startswith("NVIDIA DGX H100: 2 x Intel Xeon Platinum 8480C")


def test_a_faster_host_shortens_a_cpu_bound_step():
    slow = run(PASCAL, ZERO).results["gpu0"].iteration_time_ps
    fast = run(PASCAL, [*ZERO, "--cpu", "dgx-h100"]).results["gpu0"].iteration_time_ps
    assert fast < slow


@pytest.mark.parametrize("script, name, cores, dram", [
    ("gh200_cdma.py", "grace", 72, 500e9),
    ("gb200_cdma.py", "grace", 72, 500e9),
    ("dgx1_cdma.py", "dgx1", 20, 4 * 2133e6 * 8),
    ("hgx_h100_cdma.py", "dgx-h100", 56, 307.2e9),
])
def test_each_topology_defaults_to_its_systems_host(script, name, cores, dram):
    opts = [*ZERO, "--gpus", "1", "--gpus-per-host", "1", "--gpus-per-switch", "0"]
    if script == "hgx_h100_cdma.py":
        opts.append("--no-data-parallel")
    result = run(REPO / "topologies" / script, opts)
    cpu = result.simulation.components["cpu"]
    assert (cpu.host.name, cpu.cores) == (name, cores)
    assert result.simulation.components["host"].params["bandwidth"] == dram


def test_a_superchip_gpu_brings_its_own_host_on_any_topology():
    result = run(PASCAL, [*ZERO, "--gpu", "gh200"])
    assert result.simulation.components["cpu"].host.name == "grace"
    # --cpu says otherwise
    other = run(PASCAL, [*ZERO, "--gpu", "gh200", "--cpu", "dgx-h100"])
    assert other.simulation.components["cpu"].host.name == "dgx-h100"


def test_an_unknown_platform_is_one_line_with_the_closest_name():
    text = refused(PASCAL, [*ALEX, "--cpu", "grase"])
    assert "--cpu 'grase' is not a host platform (did you mean grace?" in text


def test_cpu_memory_bandwidth_sets_the_host_memory_without_a_host_cpu():
    # 2 GB/s of host DRAM under a 12.4 GB/s link: the offloads wait on the DRAM
    result = run(PASCAL, [*ALEX, "--policy", "all", "--cpu-memory-bandwidth", "2GB/s"])
    assert result.simulation.components["host"].params["bandwidth"] == 2e9
    wide = run(PASCAL, [*ALEX, "--policy", "all"])
    assert result.results["gpu0"].iteration_time_ps > wide.results["gpu0"].iteration_time_ps


def test_cpu_memory_bandwidth_is_what_the_host_cpu_steps_on():
    result = run(PASCAL, [*ZERO, "--cpu", "dgx-h100", "--cpu-memory-bandwidth", "100GB/s"])
    assert result.simulation.components["host"].params["bandwidth"] == 100e9
    assert result.results["cpu"].dram_bandwidth == 100e9


def test_a_dram_below_the_cpu_steps_floor_is_refused_naming_both():
    text = refused(PASCAL, [*ALEX, "--cpu-memory-bandwidth", "10MB/s"])
    assert "--cpu-memory-bandwidth 10MB/s is below the host CPU step's traffic floor, 30 MB/s" \
        in text


def test_a_dram_above_the_channels_raw_rate_is_refused_naming_both():
    text = refused(PASCAL, [*ALEX, "--cpu", "dgx1", "--cpu-memory-bandwidth", "100GB/s"])
    assert "--cpu-memory-bandwidth 100GB/s is above the raw rate of the --cpu dgx1 platform's " \
           "memory channels, 68.256 GB/s per socket (4 channels of DDR4-2133)" in text


def adam_file(tmp_path: Path, cpu: str) -> Path:
    """The shipped CPU Adam file as if measured on ``cpu``."""
    doc = json.loads(DEFAULT_CPU_ADAM.read_text(encoding="utf-8"))
    doc["machine"]["cpu"] = cpu
    path = tmp_path / "adam.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_file_from_an_unknown_cpu_warns_naming_both(tmp_path, capsys):
    path = adam_file(tmp_path, "AMD Ryzen 9 7950X 16-Core Processor")
    result = run(PASCAL, [*ZERO, "--cpu", "dgx-h100", "--cpu-adam-file", str(path)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "--cpu-adam-file" in line]
    assert len(lines) == 1, err
    assert "'AMD Ryzen 9 7950X 16-Core Processor'" in lines[0]
    assert "Intel Xeon Platinum 8480C (--cpu dgx-h100)" in lines[0]
    assert result.simulation.components["cpu"].scale == 1.0
    summary = result.reports["summary"]["host_cpu"]
    assert (summary["adam_scaling"], summary["adam_other_cpu"]) == ("unscaled", True)


def test_a_file_from_the_platforms_own_cpu_is_taken_as_measured(tmp_path, capsys):
    path = adam_file(tmp_path, "Intel(R) Xeon(R) Platinum 8480C")
    own = run(PASCAL, [*ZERO, "--cpu", "dgx-h100", "--cpu-adam-file", str(path)])
    assert own.simulation.components["cpu"].scale == 1.0
    assert "--cpu-adam-file" not in capsys.readouterr().err
    summary = own.reports["summary"]["host_cpu"]
    assert (summary["adam_scaling"], summary["adam_other_cpu"]) == ("as measured", False)
    assert summary["adam_measured_on"] == "Intel(R) Xeon(R) Platinum 8480C"


def test_a_file_from_another_table_cpu_is_scaled_and_warns_naming_both(tmp_path, capsys):
    path = adam_file(tmp_path, "Intel(R) Xeon(R) Platinum 8480C")
    other = run(PASCAL, [*ZERO, "--cpu", "dgx-a100", "--cpu-adam-file", str(path)])
    a100, h100 = PLATFORMS["dgx-a100"].core, PLATFORMS["dgx-h100"].core
    assert other.simulation.components["cpu"].scale == pytest.approx(h100.speed_of(a100))
    lines = [x for x in capsys.readouterr().err.splitlines() if "--cpu-adam-file" in x]
    assert len(lines) == 1
    assert "'Intel(R) Xeon(R) Platinum 8480C', not on the host's AMD EPYC 7742 (--cpu " \
           "dgx-a100): its per-core rate is scaled x0.562 from the Intel Xeon Platinum " \
           "8480C's by vector width and clock" in lines[0]
    summary = other.reports["summary"]["host_cpu"]
    assert (summary["adam_scaling"], summary["adam_other_cpu"]) == \
        ("vector width and clock", True)


def test_an_unknown_cpu_that_recorded_its_width_and_clock_is_scaled_by_them(tmp_path, capsys):
    doc = json.loads(DEFAULT_CPU_ADAM.read_text(encoding="utf-8"))
    doc["machine"].update(cpu="Intel(R) Xeon(R) Processor", simd=["avx512f", "avx2"],
                          cpu_mhz=2600.0)
    path = tmp_path / "adam.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    console = io.StringIO()
    result = sst_cdma.run(PASCAL, [*ZERO, "--cpu", "dgx-h100", "--cpu-adam-file", str(path)],
                          console=console)
    # 512-bit vectors at 2.6 GHz against the 8480C's 512-bit at 2.0 GHz (the pipes taken alike)
    assert result.simulation.components["cpu"].scale == pytest.approx(2.0 / 2.6)
    lines = [x for x in capsys.readouterr().err.splitlines() if "--cpu-adam-file" in x]
    assert len(lines) == 1 and "'Intel(R) Xeon(R) Processor'" in lines[0]
    assert "Intel Xeon Platinum 8480C (--cpu dgx-h100)" in lines[0]
    assert "by the vector width (512-bit) and clock (2.60 GHz) the file recorded" in lines[0]
    summary = result.reports["summary"]["host_cpu"]
    line = next(x for x in console.getvalue().splitlines() if x.startswith("host CPU:"))
    assert "each (fused measured x0.769, by its recorded width and clock)," in line
    assert summary["adam_scaling"] == "recorded vector width and clock"
    assert summary["adam_other_cpu"] and summary["adam_implementation"] == "fused"


def test_the_summary_says_which_platform_the_scaled_rate_and_whether_dram_bound():
    from components.summary_schema import check_summary

    console = io.StringIO()
    result = sst_cdma.run(PASCAL, [*ZERO, "--cpu", "dgx-h100"], console=console)
    summary = result.reports["summary"]
    assert check_summary(summary) == []
    cpu = summary["host_cpu"]
    assert (cpu["platform"], cpu["cores"], cpu["hosts"]) == ("dgx-h100", 56, 1)
    assert cpu["adam_scale"] == pytest.approx(2 * 2.0 / 2.45)
    assert cpu["adam_per_core_params_per_s"] == pytest.approx(
        SHIPPED.params_per_s_per_core * cpu["adam_scale"])
    assert cpu["dram_bound"] and cpu["dram_bandwidth_Bps"] == 307.2e9
    # which measurement and how it was scaled: the shipped one, from its Zen 3 core
    assert (cpu["adam_implementation"], cpu["adam_measured_on"]) == ("fused", "AMD EPYC")
    assert (cpu["adam_scaling"], cpu["adam_other_cpu"]) == ("vector width and clock", True)
    line = next(x for x in console.getvalue().splitlines() if x.startswith("host CPU:"))
    assert "dgx-h100: 56 cores at 835 M Adam parameters/s each (fused measured x1.633)" in line
    assert line.endswith("on 307.2 GB/s of DRAM: DRAM-bound")
    # a run without a host CPU's step has no host_cpu
    assert "host_cpu" not in run(PASCAL, ALEX).reports["summary"]


def test_a_given_rate_is_recorded_as_given():
    result = run(PASCAL, [*ZERO, "--cpu", "dgx-h100", "--cpu-adam-throughput", "1e9"])
    summary = result.reports["summary"]["host_cpu"]
    assert (summary["adam_scaling"], summary["adam_other_cpu"]) == ("given", False)
    assert summary["adam_measured_on"] == summary["adam_implementation"] == ""
    assert summary["adam_per_core_params_per_s"] == 1e9
