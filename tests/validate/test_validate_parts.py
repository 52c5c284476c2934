"""The parts of ``sst-cdma validate`` on the CPU: the plan and its budget, the device-name
mapping, the per-layer timeline (with an injected clock, and a real step with and without
``save_on_cpu``), the copies and bandwidth kernels, the calibration files read back by the
calibration loader, and the comparison rows."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from sst_cdma.model import calibration  # noqa: E402
from sst_cdma.model.calibration_data import __file__ as _data_init  # noqa: E402
from sst_cdma.model.gpus import GPUS  # noqa: E402
from sst_cdma.tools.validate import compare  # noqa: E402
from sst_cdma.tools.validate.bandwidth import measure_device_bandwidth  # noqa: E402
from sst_cdma.tools.validate.copies import DIRECTIONS, measure_host_copies  # noqa: E402
from sst_cdma.tools.validate.device import HostClock, Probe, probe_for  # noqa: E402
from sst_cdma.tools.validate.files import (ROW_COLUMNS, calibration_name,  # noqa: E402
                                           write_calibration)
from sst_cdma.tools.validate.kernels import ConvKernel, GemmKernel  # noqa: E402
from sst_cdma.tools.validate.plan import (DEFAULT_BUDGET_S, Progress,  # noqa: E402
                                          plan_for)
from sst_cdma.tools.validate.provenance import PRESET_NAMES, preset_of  # noqa: E402
from sst_cdma.tools.validate.training import (Span, spans_of,  # noqa: E402
                                              time_training_step)

quiet = [].append


def test_the_default_gpu_budget_is_under_eight_minutes_and_a_smaller_one_scales_down():
    full = plan_for(False, None)
    assert full.budget_s == DEFAULT_BUDGET_S < 8 * 60
    quarter = plan_for(False, DEFAULT_BUDGET_S / 4)
    assert quarter.repeat < full.repeat and quarter.bandwidth_repeat < full.bandwidth_repeat
    assert quarter.train_steps >= 1 and quarter.adam_repeat >= 1
    # under half the budget the largest copy and kernel sizes go
    assert quarter.copy_sizes == full.copy_sizes[:-1]
    assert quarter.hbm_sizes == full.hbm_sizes[:-1]
    assert plan_for(False, DEFAULT_BUDGET_S * 0.6).hbm_sizes == full.hbm_sizes
    reduced = plan_for(True, None)
    assert max(reduced.hbm_sizes) < min(full.hbm_sizes[1:])


def test_progress_names_the_part_and_says_when_the_budget_was_overrun():
    now = [0.0]
    out = io.StringIO()
    progress = Progress(100.0, out, clock=lambda: now[0])
    progress.begin("layers", "timing")
    now[0] = 30.0
    progress.begin("copies", "pinned")
    now[0] = 130.0
    progress.end()
    assert out.getvalue().splitlines() == ["[    0s of 100s] layers (30 s planned): timing",
                                           "[   30s of 100s] copies (6 s planned): pinned"]
    assert progress.parts == {"layers": 30.0, "copies": 100.0}
    assert progress.over_budget() == ("the run took 130 s, more than its budget of 100 s "
                                      "(over their share: copies 100 s of 6 s)")


@pytest.mark.parametrize("name,preset", [
    ("NVIDIA H100 80GB HBM3", "hopper"), ("NVIDIA H100 PCIe", "h100_pcie"),
    ("NVIDIA H200", "h200"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA A100-SXM4-80GB", "a100_80gb"), ("Tesla V100-SXM2-16GB", "volta"),
    ("Tesla T4", "t4"), ("NVIDIA GeForce RTX 4090", None), ("CPU Intel(R) Xeon(R)", None)])
def test_a_device_name_maps_to_the_preset_of_its_product(name, preset):
    assert preset_of(name) == preset


def test_every_mapped_preset_exists():
    assert {preset for _, preset in PRESET_NAMES} <= set(GPUS)


class _Ticks:
    """A clock whose marks are the numbers it is given, in seconds."""

    def __init__(self) -> None:
        self.now = 0

    def mark(self) -> int:
        return self.now

    def seconds(self, start: int, end: int) -> float:
        return float(end - start)


def test_the_timeline_splits_the_backward_pass_at_each_output_gradient():
    clock = _Ticks()
    marks = [("a", "start", 0), ("a", "end", 2), ("b", "start", 2), ("b", "end", 5),
             ("b", "gradient", 6), ("a", "gradient", 9)]
    spans = spans_of(marks, clock, (0, 5, 12, 13, 13))
    assert spans == [Span("a", "forward", 0, 2), Span("b", "forward", 2, 5),
                     Span("b", "backward", 6, 9), Span("a", "backward", 9, 12),
                     Span("optimizer", "update", 12, 13)]


@pytest.mark.parametrize("offload", [False, True])
def test_a_training_step_times_every_layer_and_offloads_through_save_on_cpu(monkeypatch,
                                                                            offload):
    packed = []
    real = torch.autograd.graph.save_on_cpu

    def spy(pin_memory=False, **kw):
        hooks = real(pin_memory=pin_memory, **kw)
        pack = hooks.pack_hook
        hooks.pack_hook = lambda t: packed.append(
            (pin_memory, t.numel() * t.element_size())) or pack(t)
        return hooks

    monkeypatch.setattr(torch.autograd.graph, "save_on_cpu", spy)
    step = time_training_step(probe_for(True), "digits_cnn", 2, offload, 2, 1, quiet)
    forward = [s.layer for s in step.spans if s.phase == "forward"]
    backward = [s.layer for s in step.spans if s.phase == "backward"]
    assert forward == ["conv1", "relu1", "conv2", "relu2", "pool", "fc1", "relu3", "fc2",
                       "loss"]
    assert backward == forward[::-1]
    assert len(step.steps) == 2 and step.step_s in step.steps
    assert math.isclose(step.step_s, step.forward_s + step.backward_s + step.update_s)
    ends = [s.end_s for s in step.spans]
    assert all(s.start_s <= s.end_s for s in step.spans) and max(ends) <= step.step_s + 1e-9
    # saved tensors went through save_on_cpu(pin_memory=True) only when offloading
    assert (len(packed) > 0) == offload and all(pin for pin, _ in packed)
    # the same bytes each of the three steps (one warm-up, two timed), the step counts one's
    assert step.offloaded_bytes * 3 == sum(size for _, size in packed)
    if offload:  # weights too: a convolution or a linear layer saves its weight for dx
        from workloads.torch_builder import build_torch
        weights = sum(p.numel() * 4 for p in build_torch("digits_cnn").parameters()
                      if p.dim() > 1)
        assert step.offloaded_bytes > weights


def _counting_probe() -> tuple[Probe, list[int]]:
    entered: list[int] = []
    probe = probe_for(True)

    class _Stream:
        def __enter__(self) -> None:
            entered.append(1)

        def __exit__(self, *exc: object) -> None:
            return None

    probe.stream_factory = _Stream  # type: ignore[assignment]
    return probe, entered


def test_pinned_copies_time_each_direction_and_both_on_two_streams():
    probe, entered = _counting_probe()
    sizes = (64 * 1024, 256 * 1024)
    figures = measure_host_copies(probe, sizes, 3, quiet)
    assert [(f.what, f.size) for f in figures] == [(d, s) for s in sizes for d in DIRECTIONS]
    for f in figures:
        assert f.traffic == (2 if f.what == "both directions" else 1) * f.size
        assert f.seconds > 0 and math.isfinite(f.bytes_per_s)
    # "both": two streams per run, warm-up (3 // 4 -> 1) and three timed runs, at each size
    assert len(entered) == 2 * (1 + 3) * len(sizes)


def test_device_bandwidth_counts_what_each_kernel_moves():
    figures = measure_device_bandwidth(probe_for(True), (1 << 16,), 3, quiet)
    assert [(f.what, f.traffic) for f in figures] == [("device copy", 2 << 16),
                                                      ("add kernel", 3 << 16)]


def test_the_calibration_files_are_what_the_calibration_loader_reads(tmp_path, monkeypatch):
    name = calibration_name("NVIDIA H100 PCIe")
    assert name == "NVIDIA_H100_PCIe"
    shape = {"W": 56, "H": 56, "C": 64, "N": 8, "K": 64, "R": 3, "S": 3, "pad_h": 1,
             "pad_w": 1, "stride_h": 1, "stride_w": 1}
    convs = [ConvKernel("conv1", "float32", dict(shape, C=3), 1e-3, math.nan, 2e-3),
             ConvKernel("conv2", "float32", shape, 1.5e-3, 1.4e-3, 1.6e-3),
             ConvKernel("conv2", "bfloat16", shape, 0.5e-3, 0.4e-3, 0.6e-3)]
    gemms = [GemmKernel("fc", "float32", 1024, 4096, 1024, 0.5e-3),
             GemmKernel("fc", "bfloat16", 1024, 4096, 1024, 0.1e-3)]
    facts = {"name": "NVIDIA H100 PCIe", "cudnn": "91002", "cuda": "12.8"}
    write_calibration(tmp_path, name, facts, convs, gemms, [])
    # a preset naming this set as its calibration, as one would be added to gpus.py
    from dataclasses import replace
    monkeypatch.setitem(calibration.GPUS, "h100_pcie_measured",
                        replace(GPUS["h100_pcie"], calibration=name, architecture="Hopper"))
    sets = calibration.load(tmp_path)
    assert list(sets) == [name]
    assert sets[name].rows("fwd") == 2 and sets[name].rows("gemm") == 1
    bf16 = (tmp_path / "conv_train_bf16_tensor_op.csv").read_text().splitlines()
    assert len(bf16) == 2 and bf16[1].split(",")[12:15] == ["0.5", "0.4", "0.6"]


def test_the_bandwidth_rows_have_the_columns_of_the_shipped_measurement_rows():
    shipped = Path(_data_init).parent / "attention" / "gemm_bf16_peak.csv"
    assert tuple(shipped.read_text().splitlines()[0].split(",")) == ROW_COLUMNS


def test_the_comparison_puts_each_layer_beside_its_simulated_kernel():
    from workloads.layer_times import LayerTimes
    from sst_cdma.tools.validate.layers import LayerRun
    times = LayerTimes("net", 4, "float32", "cpu", {"conv1": {"fwd": 2_000_000_000,
                                                               "bwd": 4_000_000_000}})
    run = LayerRun("cnn", "net", 4, "float32", times, Path("x.json"))
    summary = {"layers": [{"layer": "conv1", "phase": "forward", "kernel_ps": 1_000_000_000},
                          {"layer": "conv1", "phase": "backward", "kernel_ps": 6_000_000_000}]}
    rows = compare.layer_rows(run, summary)
    assert [(r["what"], r["measured"], r["simulated"], r["simulated_over_measured"])
            for r in rows] == [("forward", 2.0, 1.0, 0.5), ("backward", 4.0, 6.0, 1.5),
                               ("forward", 2.0, 1.0, 0.5), ("backward", 4.0, 6.0, 1.5)]
    assert [r["layer"] for r in rows] == ["conv1", "conv1", "(all)", "(all)"]
    refused = compare.layer_rows(run, "the simulator refused it: ...")
    assert all(math.isnan(r["simulated"]) for r in refused)
    table = compare.markdown(compare.comparison(rows), ["a note"])
    assert "- a note" in table and "| net batch 4 float32 | conv1 | forward | 2 | 1 | ms | 0.5 |" \
        in table


def test_a_cuda_device_gets_its_index_and_a_cpu_one_is_refused(monkeypatch):
    from sst_cdma.tools.validate.device import NoGPU, cuda_device
    assert cuda_device("cuda", lambda: 3) == torch.device("cuda", 3)
    assert cuda_device("cuda:1", lambda: 3) == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="not a CUDA device"):
        cuda_device("cpu", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU, asked for the CPU
    with pytest.raises(NoGPU, match="^--device cpu: not usable here: not a CUDA device"):
        probe_for(False, "cpu")


def test_a_clock_measures_host_work_in_seconds():
    clock = HostClock()
    start = clock.mark()
    sum(range(10000))
    assert 0 < clock.seconds(start, clock.mark()) < 5


def test_sizes_that_do_not_fit_the_device_are_left_out_and_said():
    probe = probe_for(True)
    probe.fits = lambda nbytes: nbytes <= 3 * 4096  # type: ignore[method-assign]
    said: list[str] = []
    figures = measure_device_bandwidth(probe, (4096, 1 << 20), 2, said.append)
    assert {f.size for f in figures} == {4096}
    assert said[-1] == "1 MiB: left out (the add's three operands do not fit)"
    copies = measure_host_copies(probe, (4096, 1 << 20), 2, said.append)
    assert {f.size for f in copies} == {4096}
    assert said[-1] == "1 MiB: left out (two device buffers do not fit)"


def test_a_step_that_runs_out_of_device_memory_is_left_out_and_noted(monkeypatch, tmp_path):
    from sst_cdma.tools.validate import cli

    def fake(probe, network, batch, offload, steps, warmup, say):
        if offload:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return time_training_step(probe, network, batch, offload, steps, warmup, say)

    monkeypatch.setattr(cli, "time_training_step", fake)
    plan = plan_for(True, None)
    found = cli.Measured()
    networks = {"cnn": "digits_cnn", "transformer": "digits_cnn"}
    cli._measure_steps(probe_for(True), plan, networks, tmp_path, found,
                       Progress(60.0, None))
    assert [s.offload for s in found.steps] == [False, False]
    assert found.notes == [f"{role} step offloaded: left out: out of device memory (CUDA out of "
                           "memory. Tried to allocate 2.00 GiB)" for role in ("cnn", "transformer")]

    def broken(*args, **kw):
        raise RuntimeError("an illegal memory access was encountered")

    monkeypatch.setattr(cli, "time_training_step", broken)
    with pytest.raises(RuntimeError, match="illegal"):
        cli._measure_steps(probe_for(True), plan, networks, tmp_path, cli.Measured(),
                           Progress(60.0, None))


def test_the_event_clock_reads_cuda_events_in_seconds(monkeypatch):
    from sst_cdma.tools.validate.device import EventClock
    recorded = []

    class _Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.at = len(recorded)

        def record(self) -> None:
            recorded.append(self)

        def elapsed_time(self, end: "_Event") -> float:  # milliseconds, as CUDA's
            return 250.0 * (end.at - self.at)

    monkeypatch.setattr(torch.cuda, "Event", _Event)
    clock = EventClock()
    start, end = clock.mark(), clock.mark()
    assert recorded == [start, end] and clock.seconds(start, end) == 0.25


def test_a_gpus_provenance_names_its_driver_cuda_and_cudnn(monkeypatch, tmp_path):
    from types import SimpleNamespace
    from sst_cdma.tools.validate import provenance
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 550.54.15\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "NVIDIA H100 PCIe")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev=None: SimpleNamespace(
        total_memory=85 * 2**30, multi_processor_count=114, major=9, minor=0))
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    probe = Probe(torch.device("cuda", 0), HostClock(), lambda: None, reduced=False, pin=True)
    facts = provenance.device_facts(probe)
    assert facts == {"name": "NVIDIA H100 PCIe", "driver": "550.54.15", "cuda": "12.8",
                     "cudnn": "91002", "memory_bytes": 85 * 2**30, "sms": 114,
                     "compute_capability": "9.0"}
    assert provenance.preset_of(str(facts["name"])) == "h100_pcie"
    record = provenance.provenance(probe, facts, "sst-cdma validate -o x", "h100_pcie",
                                   "the device's name", 420.0)
    assert record["mode"] == "gpu" and record["device"] is facts
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert provenance.device_facts(probe)["driver"] == "unknown (no nvidia-smi on the PATH)"


@pytest.mark.parametrize("native,dtype", [(True, "bfloat16"), (False, "float16")])
def test_the_16_bit_type_is_bfloat16_only_where_the_gpu_runs_it_natively(monkeypatch, native,
                                                                        dtype):
    from sst_cdma.tools.validate.layers import half_dtype
    asked = []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: asked.append(including_emulation)
                        or native)
    probe = Probe(torch.device("cuda", 0), HostClock(), lambda: None, reduced=False, pin=True)
    assert half_dtype(probe) == dtype and asked == [False]
    assert half_dtype(probe_for(True)) == "bfloat16"
