"""``sst-cdma time-cpu-adam``: measure the host CPU's Adam throughput for a host-CPU model.

Example (on the machine whose CPU you want to model)::

    sst-cdma time-cpu-adam --output host_adam.json
    sst-cdma time-cpu-adam --sizes 1Mi,16Mi --threads 1,all --output host_adam.json

``main(argv)`` returns the exit status: 0 on success, 2 on bad arguments (with a one-line
``sst-cdma time-cpu-adam: error: ...`` on stderr). The file format is
:mod:`sst_cdma.model.cpu_adam`'s (``docs/host_cpu.md``).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Sequence

from sst_cdma.engine.atomic_files import write_text_whole
from sst_cdma.model.cpu_adam import DEFAULT_CPU_ADAM, IMPLEMENTATIONS, CpuAdamError
from sst_cdma.engine.units import UnitAlgebra, UnitError
from sst_cdma.engine.machine import memory_fault
from sst_cdma.model.cpu_adam import MAX_CORES, MAX_CORES_WHY, stepped_rates
from sst_cdma.tools.capture.cpu_adam_timing import (BYTES_HELD_PER_PARAM, AdamTiming, available_cores,
                              cpu_adam_document, machine_description, time_cpu_adam)
from sst_cdma.tools.capture.tool_main import run_tool
from sst_cdma.tools.capture.tool_parsers import CPU_ADAM_PROG as PROG
from sst_cdma.tools.capture.tool_parsers import DEFAULT_SIZES
from sst_cdma.tools.capture.tool_parsers import cpu_adam_parser as build_parser
from sst_cdma.tools.capture.errors import CaptureError

__all__ = ["main", "build_parser", "DEFAULT_SIZES"]

#: the most of ``--repeat`` and ``--warmup``: the fastest of 1,000 timed steps is as close to
#: the CPU's floor as a measurement gets, and more only lengthen the run
MAX_STEPS = 1000
#: the most ``--tensors``: each tensor is an object the for-loop implementation steps in turn,
#: so more would time Python's overhead rather than the CPU's Adam
MAX_TENSORS = 65536


def _list(option: str, text: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise CaptureError(f"{option}: empty list")
    return items


def _sizes(text: str) -> list[int]:
    sizes = []
    for item in _list("--sizes", text):
        try:  # a count with the units' prefixes: 4Mi = 4 MiB's worth, 4M = 4e6
            exact = UnitAlgebra(item + "B").value
        except (UnitError, ValueError):
            exact = 0  # type: ignore[assignment]
        value = int(exact)
        if value != exact or value < 1:
            raise CaptureError(f"--sizes: {item!r} is not a positive whole number of "
                               f"parameters")
        fault = memory_fault(value * BYTES_HELD_PER_PARAM,
                             f"{BYTES_HELD_PER_PARAM} bytes a parameter: fp32 weight, gradient "
                             "and two moments, a bfloat16 copy")
        if fault:
            raise CaptureError(f"--sizes: {item} {fault}")
        sizes.append(int(value))
    return sorted(set(sizes))


def _threads(text: str) -> list[int]:
    cores = available_cores()
    out = []
    for item in _list("--threads", text):
        # (a number of more digits than Python reads is as far past the bound as 10**18)
        value = cores if item == "all" else 0 if not item.isdigit() else \
            int(item) if len(item) <= 18 else 10 ** 18
        if value < 1:
            raise CaptureError(f"--threads: {item!r} is not a positive whole number or 'all'")
        if value > min(cores, MAX_CORES):
            why = f"({MAX_CORES_WHY})" if value > MAX_CORES else \
                "(more threads than cores time the scheduler sharing them, not the CPU's Adam)"
            raise CaptureError(f"--threads: {item} is more than the {min(cores, MAX_CORES)} "
                               f"cores this process may use {why}")
        out.append(value)
    return sorted(set(out))


def _check(args: argparse.Namespace) -> Path:
    for name, least, most, why in (
            ("repeat", 1, MAX_STEPS, "the fastest of that many steps is the measurement"),
            ("warmup", 0, MAX_STEPS, "the steps are warm long before"),
            ("tensors", 1, MAX_TENSORS, "each is stepped in turn by the for-loop "
                                        "implementation: more would time Python, not Adam")):
        if getattr(args, name) < least:
            raise CaptureError(f"--{name}: must be at least {least}, got {getattr(args, name)}")
        if getattr(args, name) > most:
            raise CaptureError(f"--{name}: must be at most {most} ({why}), got "
                               f"{getattr(args, name)}")
    for name in _list("--implementations", args.implementations):
        if name not in IMPLEMENTATIONS:
            raise CaptureError(f"--implementations: {name!r} is not one of "
                               f"{', '.join(IMPLEMENTATIONS)}")
    out = DEFAULT_CPU_ADAM if args.write_default else Path(args.output)
    if not out.parent.is_dir():
        raise CaptureError(f"--output: folder {str(out.parent)!r} does not exist")
    return out


def _show(timing: AdamTiming) -> None:
    print(f"{timing.implementation:<10}{timing.params:>12}{timing.threads:>9}"
          f"{timing.min_s * 1e3:>12.3f}{timing.params_per_s / 1e6:>14.1f}", flush=True)


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    out = _check(args)
    sizes, threads = _sizes(args.sizes), _threads(args.threads)
    machine = machine_description()
    if not args.quiet:
        print(f"{'impl':<10}{'params':>12}{'threads':>9}{'fastest ms':>12}{'Mparams/s':>14}")
    timings, unavailable = time_cpu_adam(
        sizes, threads, _list("--implementations", args.implementations),
        tensors=args.tensors, repeat=args.repeat, warmup=args.warmup,
        show=None if args.quiet else _show)
    doc = cpu_adam_document(timings, unavailable, machine,
                            shlex.join(["sst-cdma", "time-cpu-adam", *argv]))
    try:
        write_text_whole(out, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write it: {exc.strerror or exc}",
                      f"--output {out}") from None
    for name, why in unavailable.items():
        print(f"{name}: unavailable ({why.removeprefix(name + ': ')})")
    print(f"at {doc['size_params']} parameters: {doc['params_per_s_per_core'] / 1e6:.1f} M "
          f"parameters/s on 1 core ({doc['best_implementation']}), "
          f"{doc['params_per_s'] / 1e6:.1f} M on {doc['cores_measured']} "
          f"({doc['best_implementation_all_cores']}); wrote {out}")
    rates = stepped_rates(doc)
    if rates is not doc:
        print(f"a host steps with {rates['best_implementation']} (what ZeRO-Offload runs): "
              f"{rates['params_per_s_per_core'] / 1e6:.1f} M on 1 core, "
              f"{rates['params_per_s'] / 1e6:.1f} M on {rates['cores_measured']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sst-cdma time-cpu-adam`` with ``argv`` (default ``sys.argv[1:]``); returns the
    status."""
    return run_tool(PROG, _run, argv, (CaptureError, CpuAdamError, OSError))


if __name__ == "__main__":
    sys.exit(main())
