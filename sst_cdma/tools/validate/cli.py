"""``sst-cdma validate``: measure one NVIDIA GPU in one call and put the simulator beside it.

Example (on the machine whose GPU you want to check; about seven minutes)::

    sst-cdma validate --output validate-h100
    sst-cdma validate --cpu --output /tmp/v     # the reduced check on the CPU (seconds)

It times each layer of a transformer block and of a CNN (16-bit and float32), the device's
memory bandwidth, pinned host copies (each direction and both at once), a training step with
and without activations offloaded to pinned host memory, and the host CPU's Adam; writes them
in the formats the simulator reads, with their provenance; simulates the same configurations
on the matching ``--gpu`` preset and writes the comparison (docs/validate.md).

``main(argv)`` returns the exit status: 0 on success, 2 on a bad request (no GPU without
``--cpu``, a bad option) with one line ``sst-cdma validate: error: ...`` on stderr.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from workloads.errors import WorkloadError

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.engine.errors import RunError
from sst_cdma.engine.file_safety import remove_tree
from sst_cdma.engine.output_folder import (check_output_directory, prepare_staging,
                                           publish_outputs)
from sst_cdma.engine.stop_signals import signals_deferred
from sst_cdma.model.cpu_adam import CpuAdamError
from sst_cdma.model.gpus import GPUS, gpu_choices, gpu_preset
from sst_cdma.tools.capture.errors import CaptureError
from sst_cdma.tools.capture.tool_main import ToolParser, run_tool
from sst_cdma.tools.validate import compare
from sst_cdma.tools.validate.bandwidth import BandwidthFigure, measure_device_bandwidth
from sst_cdma.tools.validate.copies import measure_host_copies
from sst_cdma.tools.validate.cpu_adam import measure_cpu_adam
from sst_cdma.tools.validate.device import Probe, out_of_memory, probe_for, threads_for
from sst_cdma.tools.validate.files import (calibration_name, write_calibration, write_json,
                                           write_timeline)
from sst_cdma.tools.validate.kernels import (ConvKernel, GemmKernel, time_convolutions,
                                             time_gemms)
from sst_cdma.tools.validate.layers import LayerRun, half_dtype, network_file, time_all_layers
from sst_cdma.tools.validate.plan import (DEFAULT_BUDGET_S, MIN_BUDGET_S, Plan, Progress,
                                          plan_for)
from sst_cdma.tools.validate.provenance import (device_facts, device_name, preset_of,
                                                provenance)
from sst_cdma.tools.validate.training import StepTiming, time_training_step

__all__ = ["main", "build_parser", "PROG", "MAX_BUDGET_S"]

PROG = "sst-cdma validate"
#: the most ``--budget-s``: the default plan's sizes are the largest, more time only waits
MAX_BUDGET_S = 3600.0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sst-cdma validate``."""
    p = ToolParser(prog=PROG, description="Measure one NVIDIA GPU (per-layer kernel times, "
                   "memory bandwidth, pinned host copies, a training step with and without "
                   "activation offload, the host CPU's Adam), write the figures in the "
                   "simulator's formats with their provenance, simulate the same "
                   "configurations and print simulated against measured (docs/validate.md).")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="folder to write (created; files of an earlier run are replaced): "
                        "the run writes beside it and moves its files in when it ends, so a "
                        "stopped run leaves none")
    p.add_argument("--cpu", action="store_true",
                   help="run the reduced check on the CPU (small sizes, seconds): the same "
                        "code without a GPU")
    p.add_argument("--device", default="cuda", help="the CUDA device (default cuda)")
    p.add_argument("--budget-s", type=float, default=None, metavar="SECONDS",
                   help=f"time the GPU run is planned to fit (default {DEFAULT_BUDGET_S:g}; "
                        f"{MIN_BUDGET_S:g} to {MAX_BUDGET_S:g}): less scales the repetitions "
                        "down and, under half, drops the largest copy sizes")
    p.add_argument("--gpu", type=gpu_preset, choices=sorted(GPUS), metavar=gpu_choices(),
                   default=None, help="the simulator's preset to compare with (default: "
                   "the preset whose product the device's name names; none: no simulation)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines or table")
    return p


@dataclass
class Measured:
    """Everything a run measured."""

    layers: list[LayerRun] = field(default_factory=list)
    convs: list[ConvKernel] = field(default_factory=list)
    gemms: list[GemmKernel] = field(default_factory=list)
    skipped_convs: int = 0
    device: list[BandwidthFigure] = field(default_factory=list)
    copies: list[BandwidthFigure] = field(default_factory=list)
    steps: list[StepTiming] = field(default_factory=list)
    adam: Optional[dict[str, Any]] = None
    #: what was left out, and why (a network that did not fit the device...)
    notes: list[str] = field(default_factory=list)


def _check(args: argparse.Namespace) -> Path:
    """The output folder, resolved (its missing parents made); a bad option is one line."""
    out = Path(args.output)
    if not out.parent.is_dir():
        raise CaptureError(f"--output: folder {str(out.parent)!r} does not exist")
    if args.cpu and args.device != "cuda":
        raise CaptureError(f"--device {args.device}: not with --cpu (the reduced run measures "
                           "the CPU)")
    budget = args.budget_s
    if budget is not None and not MIN_BUDGET_S <= budget <= MAX_BUDGET_S:
        raise CaptureError(f"--budget-s: must be {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g} "
                           f"seconds, got {budget:g}")
    try:
        return check_output_directory(out)
    except RunError as exc:
        raise CaptureError(f"--output {out}: {exc.message}") from None


def _measure_kernels(probe: Probe, plan: Plan, networks: dict[str, str], found: Measured,
                     progress: Progress) -> None:
    """Part (a), kernel by kernel: the CNN's convolutions and the transformer's GEMMs, in
    the 16-bit type and float32."""
    for dtype in (half_dtype(probe), "float32"):
        convs, skipped = time_convolutions(probe, networks["cnn"], plan.cnn.batch, dtype,
                                           plan.repeat, plan.warmup, progress.say)
        found.convs += convs
        found.skipped_convs = skipped
        found.gemms += time_gemms(probe, networks["transformer"], plan.transformer.batch,
                                  dtype, plan.repeat, plan.warmup, progress.say)


def _measure(probe: Probe, plan: Plan, networks: dict[str, str], out: Path,
             measured_by: tuple[Optional[str], str], command: str,
             progress: Progress) -> Measured:
    """Parts (a) to (e), in order, each announced."""
    found = Measured()
    progress.begin("layers", "each layer's forward and backward, 16-bit and float32")
    found.layers = time_all_layers(probe, plan, networks, out / "layer_times",
                                   measured_by[0], measured_by[1], progress.say,
                                   found.notes)
    progress.begin("kernels", "convolution passes and GEMMs one by one")
    _measure_kernels(probe, plan, networks, found, progress)
    progress.begin("bandwidth", "device memory: copy and add kernels")
    found.device = measure_device_bandwidth(probe, plan.hbm_sizes, plan.bandwidth_repeat,
                                            progress.say)
    progress.begin("copies", "pinned host copies: each direction, both at once")
    found.copies = measure_host_copies(probe, plan.copy_sizes, plan.bandwidth_repeat,
                                       progress.say)
    progress.begin("training", "training steps with and without save_on_cpu(pin_memory)")
    _measure_steps(probe, plan, networks, out, found, progress)
    progress.begin("cpu-adam", "the host CPU's Adam step")
    found.adam = measure_cpu_adam(plan, out / "cpu_adam.json", command, progress.say)
    progress.end()
    return found


def _measure_steps(probe: Probe, plan: Plan, networks: dict[str, str], out: Path,
                   found: Measured, progress: Progress) -> None:
    """Part (d): each network's step without and with offload; one that runs out of device
    memory is left out and noted."""
    for role, choice in (("cnn", plan.cnn), ("transformer", plan.transformer)):
        for offload in (False, True):
            try:
                step = time_training_step(probe, networks[role], choice.batch, offload,
                                          plan.train_steps, plan.train_warmup, progress.say)
            except RuntimeError as exc:
                if not out_of_memory(exc):
                    raise
                found.notes.append(f"{role} step{' offloaded' if offload else ''}: left "
                                   f"out: out of device memory ({str(exc).splitlines()[0]})")
                progress.say(found.notes[-1])
                if probe.is_gpu:
                    torch.cuda.empty_cache()
                continue
            found.steps.append(step)
            write_timeline(out / "steps" / f"{step.network}_{_mode(step)}.csv", step)


def _mode(step: StepTiming) -> str:
    return "offload" if step.offload else "no_offload"


def _simulate(preset: str, found: Measured,
              progress: Progress) -> tuple[list[dict[str, Any]], list[str]]:
    """Every measured configuration simulated on ``preset``: the rows and notes."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    link: Optional[float] = None
    for run in found.layers:
        progress.say(f"simulating {run.times.network} batch {run.batch} {run.dtype}")
        summary = compare.simulate(run.network, run.batch, run.dtype, preset,
                                   ["--policy", "none"])
        if isinstance(summary, str):
            notes.append(f"{run.times.network} {run.dtype}: {summary}")
        rows += compare.layer_rows(run, summary)
    definitions = {r.times.network: r.network for r in found.layers}
    for step in found.steps:
        progress.say(f"simulating the {step.network} step ({_mode(step).replace('_', ' ')})")
        summary = compare.simulate(definitions[step.network], step.batch, step.dtype, preset,
                                   ["--optimizer", "adam", "--algorithm", "none", "--policy",
                                    "all" if step.offload else "none"])
        if isinstance(summary, str):
            notes.append(f"{step.network} step: {summary}")
        else:
            link = summary["pcie_bandwidth_Bps"]
        rows += compare.step_rows(step, summary)
    rows = compare.rate_rows(preset, found.device, found.copies, link, found.adam) + rows
    return rows, notes


def _compare(preset: Optional[str], probe: Probe, name: str, found: Measured, out: Path,
             progress: Progress) -> str:
    """Simulate (where a preset is known), write comparison.csv and .md; the markdown."""
    progress.begin("simulation", f"the same configurations on --gpu {preset}" if preset
                   else "no preset: nothing to simulate")
    notes = [f"measured on {name}; simulated on `topologies/{compare.TOPOLOGY}.py --gpu "
             f"{preset}`" if preset else f"measured on {name}", *found.notes]
    if preset is None:
        notes.append(f"no GPU preset matches {name!r}: give --gpu PRESET to simulate the "
                     "same configurations")
        rows = compare.rate_rows(None, found.device, found.copies, None, found.adam)
        rows += [r for run in found.layers for r in compare.layer_rows(run, "")]
        rows += [r for step in found.steps for r in compare.step_rows(step, "")]
    else:
        rows, more = _simulate(preset, found, progress)
        notes += more
    if not probe.is_gpu:
        notes.append("the reduced run on the CPU: it checks the code, its figures say nothing "
                     "of a GPU")
    table = compare.comparison(rows)
    table.to_csv(out / "comparison.csv", index=False)
    text = compare.markdown(table, notes)
    write_text_whole(out / "comparison.md", text + "\n")
    progress.end()
    return text


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    target = _check(args)
    probe = probe_for(args.cpu, args.device)
    plan = plan_for(probe.reduced, args.budget_s)
    progress = Progress(plan.budget_s, None if args.quiet else sys.stdout)
    out = Path(args.output)
    try:
        staging: Optional[Path] = prepare_staging(out, target)
    except RunError as exc:
        raise CaptureError(f"--output {out}: {exc.message}") from None
    assert staging is not None
    try:
        text = _run_into(args, argv, probe, plan, progress, staging)
        with signals_deferred():  # the files appear together, or the earlier ones stay
            try:
                publish_outputs(staging, target, out)
            except RunError as exc:
                raise CaptureError(f"--output {out}: {exc.message}") from None
        staging = None
    finally:
        if staging is not None:
            remove_tree(staging)
    if not args.quiet:
        print(text)
    late = progress.over_budget()
    if late:
        print(f"{PROG}: note: {late}", file=sys.stderr)
    print(f"wrote {out} ({progress.elapsed_s:.0f} s)")
    return 0


def _run_into(args: argparse.Namespace, argv: list[str], probe: Probe, plan: Plan,
              progress: Progress, out: Path) -> str:
    """Measure, write every file into ``out`` (the staging folder), compare; the comparison's
    markdown."""
    name = device_name(probe)
    preset = (args.gpu or preset_of(name)) if probe.is_gpu else args.gpu
    command = shlex.join(["sst-cdma", "validate", *argv])
    facts = device_facts(probe)
    record = provenance(probe, facts, command, preset, "--gpu" if args.gpu else
                        "the device's name" if preset else "none matches", plan.budget_s)
    write_json(out / "provenance.json", record)
    progress.say(f"{name}: {'GPU' if probe.is_gpu else 'reduced CPU'} run, preset "
                 f"{preset or 'none'}, writing {args.output}")
    networks = {"transformer": network_file(plan.transformer, out / "networks"),
                "cnn": network_file(plan.cnn, out / "networks")}
    measured_by = (f"sst-cdma validate on {name}, driver {facts['driver']}, CUDA "
                   f"{facts['cuda']}, cuDNN {facts['cudnn']}")
    with threads_for(probe):
        found = _measure(probe, plan, networks, out, (preset if probe.is_gpu else None,
                                                      measured_by), command, progress)
    write_calibration(out / "calibration", calibration_name(name), facts, found.convs,
                      found.gemms, found.device + found.copies)
    text = _compare(preset, probe, name, found, out, progress)
    write_json(out / "measurements.json", {"provenance": record, "plan": plan,
                                           "measured": found, "part_seconds": progress.parts},
               root=out)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sst-cdma validate`` with ``argv`` (default ``sys.argv[1:]``); returns the
    status."""
    return run_tool(PROG, _run, argv, (CaptureError, WorkloadError, CpuAdamError, OSError),
                    torch_errors=True)


if __name__ == "__main__":
    sys.exit(main())
