"""Every count and size option has an upper bound that says why, every rate a floor (issue
#34): the attack is a number past any sensible range (a typo, ``1e23``, ``1e-300``), which
used to crash, hang, overflow or simulate years; each is now one line naming the option, the
bound and its reason, before anything is simulated."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

import sst_cdma
from sst_cdma.engine.element import MAX_BYTES, SIM_TIME_LIMIT_PS, ParamError
from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM, headline
from sst_cdma.builder.model_options import ELEMENT_OPTIONS, option_param
from sst_cdma.engine.runner import RunError
from sst_cdma.builder.topology import NVME_COUNT

REPO = Path(__file__).resolve().parents[2]
PASCAL = REPO / "topologies" / "pascal_cdma.py"
ALEX = ["--network", "alexnet", "--no-baselines"]
HOST = [*ALEX, "--optimizer", "adam", "--optimizer-states", "host"]

#: every whole-number option that counts something (a PCIe generation is a choice)
COUNTS = [o for o in ELEMENT_OPTIONS if option_param(o).kind == "int"
          and not option_param(o).choices]
#: the options whose value is a rate or a fraction of a peak rate given as a plain number
NUMBER_RATES = ("--cpu-adam-throughput", "--compute-efficiency")


def refused(opts: list[str], **kwargs: Any) -> str:
    """The one-line refusal of a pascal_cdma.py run."""
    with pytest.raises(RunError) as err:
        sst_cdma.run(PASCAL, opts, console=io.StringIO(), **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("opt", COUNTS + [None], ids=lambda o: o.flag if o else "--nvme")
def test_every_count_option_has_an_upper_bound_that_says_why(opt):
    param = option_param(opt) if opt else NVME_COUNT
    assert param.maximum is not None and param.why_maximum, param.name
    with pytest.raises(ParamError, match=re.escape(f"({param.why_maximum})")):
        param.parse(str(10 ** 30))
    assert param.parse(str(int(param.maximum))) == param.maximum     # the bound itself is taken


@pytest.mark.parametrize("opt", [o for o in ELEMENT_OPTIONS
                                 if option_param(o).kind in ("bytes", "time", "bandwidth")],
                         ids=lambda o: o.flag)
def test_every_size_time_and_rate_option_is_bounded_by_its_kind(opt):
    param = option_param(opt)
    past = {"bytes": f"{MAX_BYTES + 1}B", "time": f"{SIM_TIME_LIMIT_PS + 1}ps",
            "bandwidth": "1e-300B/s"}[param.kind]
    with pytest.raises(ParamError, match="2\\*\\*64 B|213 days|1e\\+06 B/s"):
        param.parse(past)


@pytest.mark.parametrize("flag", NUMBER_RATES)
def test_every_rate_given_as_a_number_has_a_floor(flag):
    param = option_param(next(o for o in ELEMENT_OPTIONS if o.flag == flag))
    with pytest.raises(ParamError, match="slower than|must be >= 0.0001"):
        param.parse("1e-300")


@pytest.mark.parametrize("opts, message", [
    (["--grad-accum", "1000000000"], "argument --grad-accum: '1000000000' must be <= 4096 (each "
     "micro-batch is simulated in turn"),
    ([*HOST[3:], "--cpu-cores", "1e9"], "argument --cpu-cores: '1e9' must be <= 8192 (the most "
     "CPUs a Linux x86-64 kernel can be built for"),
    ([*HOST[3:], "--cpu-adam-throughput", "1e-300"], "argument --cpu-adam-throughput: "
     "'1e-300': slower than 1e+06 parameters/s per core"),
    ([*HOST[3:], "--cpu-memory-bandwidth", "1e-300B/s"], "argument --cpu-memory-bandwidth: "
     "'1e-300B/s' is slower than 1e+06 B/s (no memory, link, drive or codec"),
    (["--kernel-model", "roofline", "--compute-efficiency", "1e-300"], "argument "
     "--compute-efficiency: '1e-300' must be >= 0.0001 (below 1e-4 of its peak"),
    (["--gpus", "2", "--data-parallel", "--allreduce-step-latency", "1e30s"], "argument "
     "--allreduce-step-latency: '1e30s' is more than 18446744073709551615 ps, about 213 days"),
])
def test_a_number_past_its_bound_is_one_line_naming_the_option_and_why(opts, message):
    assert message in refused([*ALEX, *opts])


def test_a_drive_slower_than_any_rate_is_refused_naming_the_param():
    # it simulated a step of 1.3e+19 Es
    text = refused([*ALEX, "--nvme", "1", "--offload-to", "nvme"],
                   overrides={"nvme0": {"read_bandwidth": "1e-30B/s"}})
    assert "nvme0 (cdma.NVMe): parameter 'read_bandwidth': '1e-30B/s' is slower than " \
           "1e+06 B/s" in text


def adam_file(tmp_path: Path, rate: float = 0.0, threads: int = 0) -> Path:
    """The shipped CPU Adam file with every measurement at ``rate`` parameters/s, or with
    ``threads`` threads, its headline figures recomputed (a file that passes every other
    check)."""
    doc = json.loads(DEFAULT_CPU_ADAM.read_text(encoding="utf-8"))
    for m in doc["measurements"]:
        if rate:
            m["seconds"] = [m["params"] / rate]
            m["median_s"] = m["min_s"] = m["params"] / rate
            m["params_per_s"] = m["params"] / m["min_s"]
        if threads and m["threads"] > 1:
            m["threads"] = threads
    if threads:
        doc["cores_measured"] = doc["machine"]["cores"] = threads
    doc.update(headline(doc["measurements"], doc["cores_measured"]))
    path = tmp_path / "adam.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_cpu_adam_file_slower_than_any_cpu_is_refused(tmp_path):
    # it simulated a 118-year step with exit 0
    text = refused([*HOST, "--cpu-adam-file", str(adam_file(tmp_path, rate=5e-4))])
    assert "cpu (cdma.HostCPU): --cpu-adam-file: " in text
    assert re.search(r"measurements\[0\]\.params_per_s: slower than 1e\+06 parameters/s per "
                     r"core: no CPU of a GPU host is slower", text), text


def test_a_cpu_adam_file_of_more_threads_than_a_kernel_schedules_is_refused(tmp_path):
    text = refused([*HOST, "--cpu-adam-file", str(adam_file(tmp_path, threads=100000))])
    assert "machine.cores: 100000 is more than 8192 (the most CPUs a Linux x86-64 kernel" in text


def test_a_valid_cpu_adam_file_at_a_plausible_rate_runs(tmp_path):
    result = sst_cdma.run(PASCAL, [*HOST, "--cpu-adam-file", str(adam_file(tmp_path, 2e6))],
                          console=io.StringIO())
    assert result.results["gpu0"].model_states


@pytest.mark.parametrize("opts", [["--cpu-cores", "5"], ["--cpu-adam-file", "GARBAGE"],
                                  ["--cpu-adam-throughput", "1e8"]])
def test_host_cpu_options_without_a_host_cpu_stepping_are_refused(opts):
    # they were silently ignored: nothing steps on the host (--cpu-memory-bandwidth sets the
    # host memory's DRAM, which offloads use too: tests/topologies/test_host_platforms.py)
    text = refused([*ALEX, *opts])
    assert f"{opts[0]} needs the host CPU to step the optimizer" in text


def test_a_throughput_and_a_cpu_adam_file_together_are_refused(tmp_path):
    # the file was never read (an invalid one passed) since the throughput won
    garbage = tmp_path / "garbage.json"
    garbage.write_text("GARBAGE")
    text = refused([*HOST, "--cpu-adam-throughput", "1e8", "--cpu-adam-file", str(garbage)])
    assert "--cpu-adam-throughput contradicts --cpu-adam-file" in text
