"""``sst [options] script.py|graph.json [-- model options]``: run a topology like SST-core's
``sst``. Errors are one line (``sst: FILE[:LINE]: message``) and exit 1; ``-v`` adds the
traceback."""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Callable, NoReturn, Optional, Sequence, Union

from sst_cdma import __version__
from sst_cdma.engine.cyclic_gc import done_with_collecting, held_back
from sst_cdma.tools.cli.blas_threads import one_blas_thread

one_blas_thread()  # before the engine's imports load NumPy (and OpenBLAS's thread pool)
with held_back():  # the engine's imports (networkx, numpy among them) make no cyclic garbage
    from sst_cdma.engine.config import PROGRAM_OPTIONS, RUN_MODES, program_option_fault
    from sst_cdma.engine.progress import PHASES
    from sst_cdma.engine.runner import RunError, RunResult, StructureRunError, run
    from sst_cdma.engine.stop_signals import exit_status, stop_message, stop_on_signals
    from sst_cdma.engine.units import UnitAlgebra


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 1, as every sst-cdma command's."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        """Print ``prog: error: message`` and exit 1."""
        self.exit(1, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="sst", usage="sst [options] config-file [-- model options]", allow_abbrev=False,
        add_help=False,
        description="Run an SST-style Python topology (or a configuration graph written with "
                    "--output-json) on the sst-cdma event kernel.",
        epilog="Model options after '--' (or in --model-options) reach the script as "
               "sys.argv[1:]. Example: sst topologies/pascal_cdma.py -- --network vgg16")
    p.add_argument("config_file", nargs="?", help="topology script (.py) or graph (.json)")
    p.add_argument("-h", "--usage", action="store_true", help="print this help and exit")
    p.add_argument("--help", dest="usage", action="store_true",
                   help="the same; --help=OPTION prints the help of one option")
    p.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more output; errors show a traceback")
    p.add_argument("--sdl-file", default=None, metavar="FILE",
                   help="the configuration file (as SST's option; usually given without it)")
    p.add_argument("--model-options", default=None, metavar="STR",
                   help="options for the configuration script (split like a shell would)")
    p.add_argument("--stop-at", default=None, metavar="TIME",
                   help="simulated time at which to end the run (e.g. 10us)")
    p.add_argument("--timing-info", "--print-timing-info", dest="timing_info",
                   action="store_const", const=2, default=None,
                   help="print build/run wall time, simulated time, events and events/s "
                        "(--timing-info=LEVEL sets a level; 0 turns it off)")
    p.add_argument("--exit-after", default=None, metavar="TIME",
                   help="wall-clock limit: end the run cleanly (finish, statistics and outputs "
                        "written, status 0) once this much real time has passed; H:M:S, M:S, "
                        "S, Hh, Mm or Ss")
    p.add_argument("--heartbeat-sim-period", "--heartbeat-period", default=None,
                   dest="heartbeat_sim_period", metavar="PERIOD",
                   help="print a heartbeat every PERIOD of simulated time (e.g. 2us)")
    p.add_argument("--heartbeat-wall-period", default=None, metavar="PERIOD",
                   help="print a heartbeat every PERIOD of wall time (H:M:S, M:S, S, Hh, Mm, "
                        "Ss)")
    p.add_argument("--output-directory", default=None, metavar="DIR",
                   help="directory for every output file (statistics, reports)")
    p.add_argument("--output-json", default=None, metavar="FILE",
                   help="write the configuration graph as JSON (runnable with sst FILE.json)")
    p.add_argument("--output-config", default=None, metavar="FILE",
                   help="write the configuration graph as a Python script that rebuilds it")
    p.add_argument("--output-dot", default=None, metavar="FILE",
                   help="write the configuration graph as Graphviz DOT")
    p.add_argument("--run-mode", default=PROGRAM_OPTIONS["run-mode"], choices=RUN_MODES,
                   help="init: build and check only; run/both: build and run (default both)")
    p.add_argument("-n", "--num-threads", type=int, default=1, metavar="NUM",
                   help="accepted for compatibility; the kernel runs one thread")
    _add_compatibility_options(p)
    return p


def _add_compatibility_options(p: argparse.ArgumentParser) -> None:
    """SST-core options that job files carry: taken with SST's meaning, or with a warning
    where sst-cdma cannot act on them (docs/sst_compatibility.md)."""
    p.add_argument("--timebase", default=None, metavar="TIMEBASE",
                   help="the simulation's time step; only SST's default 1ps (the kernel counts "
                        "picoseconds), anything else is refused")
    p.add_argument("--partitioner", default=None, metavar="PARTITIONER",
                   help="one of SST-core's partitioners (sst.single, sst.linear, ...); one rank "
                        "runs everything, whichever is named")
    p.add_argument("--lib-path", default=None, metavar="LIBPATH",
                   help="accepted with a warning: element libraries are Python packages "
                        "(entry points), not files on a path")
    p.add_argument("--add-lib-path", default=None, metavar="LIBPATH",
                   help="accepted with a warning, as --lib-path")
    p.add_argument("--output-prefix-core", default=None, metavar="STR",
                   help="accepted with a warning: sst-cdma's core messages have no prefix")
    p.add_argument("--dot-verbosity", type=int, default=None, metavar="INT",
                   help="accepted: --output-dot writes one level of detail (names, types, "
                        "ports, latencies)")
    p.add_argument("--print-env", action="store_true",
                   help="print the environment variables the run sees, then run")
    p.add_argument("--no-env-config", action="store_true",
                   help="accepted: sst-cdma reads no SST environment configuration")


#: warnings for options sst-cdma takes but cannot act on
_CANNOT_ACT = {
    "lib_path": "--lib-path: sst-cdma's element libraries are Python packages found through "
                "entry points; the path is not searched",
    "add_lib_path": "--add-lib-path: sst-cdma's element libraries are Python packages found "
                    "through entry points; the path is not searched",
    "output_prefix_core": "--output-prefix-core: sst-cdma's core messages carry no prefix; "
                          "the option is kept in graph files only",
}


def split_model_options(text: str) -> list[str]:
    """``--model-options`` as SST-core splits it: on whitespace, where double quotes keep a
    part whole (and are removed); single quotes and backslashes are ordinary characters.
    ValueError for an unterminated double quote."""
    out: list[str] = []
    current: list[str] = []
    started = quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
            started = True
        elif ch.isspace() and not quoted:
            if started:
                out.append("".join(current))
            current, started = [], False
        else:
            current.append(ch)
            started = True
    if quoted:
        raise ValueError("no closing double quote")
    if started:
        out.append("".join(current))
    return out


def _option_help(parser: argparse.ArgumentParser, name: str) -> Optional[str]:
    """The help of one option (``--help=stop-at``), or None when there is no such option."""
    wanted = "--" + name.lstrip("-")
    for action in parser._actions:
        if wanted in action.option_strings or ("-" + name.lstrip("-")) in action.option_strings:
            metavar = f"={action.metavar}" if action.metavar else ""
            return f"{', '.join(action.option_strings)}{metavar}\n    {action.help}"
    return None


def _compatibility_fault(args: argparse.Namespace) -> str:
    """Why a compatibility option's value is refused ("" when none is)."""
    for name in ("timebase", "partitioner"):
        value = getattr(args, name)
        if value is not None:
            fault = program_option_fault(name, value)
            if fault:
                return f"argument --{name}: {fault}"
    return ""


def _split_model_options(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def _model_options_hint(own: list[str], unknown: list[str], positional: Optional[str]) -> str:
    """When options sst does not know sit beside a topology script, the likely mistake is a
    missing ``--``: say where model options go."""
    script = next((a for a in own if a.endswith((".py", ".json")) and not a.startswith("-")),
                  None)
    extra = set(unknown) | ({positional} if positional and positional != script else set())
    model = [a for a in own if a in extra and a != script]
    if script is None or not model:
        return ""
    return (f" (model options go after '--': sst [options] {script} -- {' '.join(model)}; "
            "or in --model-options)")


def _human_time(ps: int) -> str:
    return UnitAlgebra(f"{ps}ps").toStringBestSI(6) if ps else "0 s"


def _run(args: argparse.Namespace, model_opts: list[str]) -> RunResult:
    """The run ``sst``'s options ask for, its console on standard output (``run`` prints
    nothing unless given one)."""
    return run(args.config_file, model_opts, output_directory=args.output_directory,
               stop_at=args.stop_at, run_mode=args.run_mode, output_json=args.output_json,
               output_config=args.output_config, output_dot=args.output_dot,
               console=sys.stdout, progress=sys.stderr, record_statistics=False,
               program_options={
                   "exit-after": args.exit_after,
                   "heartbeat-sim-period": args.heartbeat_sim_period,
                   "heartbeat-wall-period": args.heartbeat_wall_period,
                   "timebase": args.timebase, "partitioner": args.partitioner,
                   "output-prefix-core": args.output_prefix_core,
                   "num-threads": str(args.num_threads) if args.num_threads != 1
                   else None})  # type: ignore[dict-item]


def _equals_forms(parser: argparse.ArgumentParser, own: list[str]
                  ) -> tuple[Optional[str], Optional[int], Optional[int]]:
    """SST's optional-argument forms ``--help=OPTION``, ``--timing-info=LEVEL`` and
    ``--verbose=LEVEL``, taken out of ``own``: (the help text of ``--help=OPTION``, the timing
    level, the verbose level). The first ``--help=OPTION`` ends the scan; a bad option or level
    is a parser error."""
    level_given, verbose_given = None, None
    for arg in list(own):
        name, eq, value = arg.partition("=")
        if eq and name == "--help":
            text = _option_help(parser, value)
            if text is None:
                parser.error(f"--help={value}: no such option")
            return text, None, None
        if eq and name in ("--timing-info", "--print-timing-info", "--verbose"):
            if not value.isdigit():
                parser.error(f"argument {name}: invalid level {value!r}")
            if name == "--verbose":
                verbose_given = int(value)
            else:
                level_given = int(value)
            own.remove(arg)
    return None, level_given, verbose_given


def _parse(parser: argparse.ArgumentParser, own: list[str], level_given: Optional[int],
           verbose_given: Optional[int]) -> argparse.Namespace:
    """``sst``'s own options parsed (``--sdl-file`` as the config file; the levels of the
    ``=LEVEL`` forms applied); a parser error on an unrecognized argument, with a hint when it
    looks like a model option."""
    args, unknown = parser.parse_known_args(own)
    if args.sdl_file and not args.config_file:
        args.config_file = args.sdl_file
    elif args.sdl_file:
        unknown.append(args.config_file)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}"
                     f"{_model_options_hint(own, unknown, args.config_file)}")
    if level_given is not None:
        args.timing_info = level_given
    if verbose_given is not None:
        args.verbose += verbose_given
    return args


def _run_or_status(args: argparse.Namespace, model_opts: list[str]) -> Union[RunResult, int]:
    """The run's result, or the exit status of a run that failed or was stopped, its message
    printed as SST-core prints it (``-v`` adds the traceback)."""
    try:
        with stop_on_signals(ending=True):  # SIGTERM, SIGHUP: as Ctrl-C, with 128 + their number
            try:
                return _run(args, model_opts)
            except KeyboardInterrupt as exc:  # the staging folder is removed by now
                print(f"sst: {stop_message(exc)}", file=sys.stderr)
                return exit_status(exc)
    except StructureRunError as exc:  # as SST-core prints it (warnings on stdout)
        for line in exc.warnings:
            print(f"WARNING:  {line}", flush=True)
        print("FATAL: # SST Core: Structure errors found in the ConfigGraph.", file=sys.stderr)
        return 1
    except RunError as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"sst: {exc}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # the script printed its own --help
        return int(exc.code or 0)
    except BrokenPipeError:  # stdout went to a pipe its reader closed: run_main ends quietly
        raise
    except Exception as exc:  # a bug in a component or in the engine
        if args.verbose:
            traceback.print_exc()
        print(f"sst: internal error: {type(exc).__name__}: {exc} (run with -v for the "
              "traceback)", file=sys.stderr)
        return 1


def _say_done(args: argparse.Namespace, result: RunResult) -> None:
    """What ``sst`` prints after a run: the checked configuration (run-mode init), else
    SST-core's last line and, at a timing level (the command line's, else the script's),
    the timing block."""
    graph = result.graph
    assert graph is not None, "run() returns the graph it built"
    if args.run_mode == "init":
        print(f"Configuration checked: {len(graph.components)} components, "
              f"{len(graph.links)} links (run-mode init: not run)")
        return
    # SST-core's last line, also when --stop-at or --exit-after ended the run
    print(f"Simulation is complete, simulated time: {_human_time(result.sim_time_ps)}")
    level = args.timing_info
    if level is None:
        level = int(graph.program_options.get("timing-info") or
                    graph.program_options.get("print-timing-info") or 0)
    if level:
        print(timing_info(result), end="")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``sst`` command."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    own, after = _split_model_options(args_list)
    parser = _parser()
    text, level_given, verbose_given = _equals_forms(parser, own)
    if text is not None:
        print(text)
        return 0
    args = _parse(parser, own, level_given, verbose_given)
    if args.usage:
        parser.print_help()
        return 0
    fault = _compatibility_fault(args)
    if fault:
        parser.error(fault)
    if args.version:
        print(f"SST-Core-compatible sst-cdma Version ({__version__})")
        return 0
    if not args.config_file:
        parser.print_usage(sys.stderr)
        print("sst: error: no configuration file given", file=sys.stderr)
        return 1
    try:
        model_opts = split_model_options(args.model_options) if args.model_options else []
    except ValueError as exc:  # an unterminated double quote
        parser.error(f"argument --model-options: {exc} in {args.model_options!r}")
    for key, message in _CANNOT_ACT.items():
        if getattr(args, key) is not None:
            print(f"sst: warning: {message}", file=sys.stderr)
    if args.print_env:
        for key in sorted(os.environ):
            print(f"{key}={os.environ[key]}")
    model_opts += after
    with held_back():  # the element libraries the script imports, the build and the run
        result = _run_or_status(args, model_opts)
    if isinstance(result, int):
        return result
    _say_done(args, result)
    return 0


def timing_info(result: "RunResult") -> str:
    """The ``--timing-info`` block: SST's lines (build, run loop and total wall time, simulated
    time, events), then the wall time of every phase of the run, which add up to the total."""
    t = result.timing
    rate = result.events / t["run_s"] if t.get("run_s") else 0.0
    total = sum(t.values())
    lines = ["", "-" * 60, "Simulation Timing Information:",
             f"{'Build time:':<33}{t.get('script_s', 0) + t.get('build_s', 0):.6f} s",
             f"{'Run loop time:':<33}{t.get('run_s', 0):.6f} s",
             f"{'Total time:':<33}{total:.6f} s",
             f"{'Simulated time:':<33}{_human_time(result.sim_time_ps)}",
             f"{'Events delivered:':<33}{result.events}",
             f"{'Events per second:':<33}{rate:,.0f}",
             f"{'End reason:':<33}{result.end_reason}",
             "Wall time by phase (they add up to the total):"]
    for key, what in PHASES.items():
        if key in t:
            share = 100 * t[key] / total if total else 0.0
            lines.append(f"  {what + ':':<55}{t[key]:10.6f} s {share:5.1f}%")
    return "\n".join(lines) + "\n"


def run_main() -> int:
    """``main`` for the console script: a closed stdout pipe (``sst ... | head``) ends quietly;
    the process's last garbage collections are skipped (it exits next)."""
    with held_back():  # switched back on after the freeze: no pass over the run's objects
        code = quiet_on_closed_pipe(main)
        done_with_collecting()
    return code


def quiet_on_closed_pipe(entry: Callable[[], int]) -> int:
    """Run a command's ``main``; when its reader closes stdout (``... | head``), end quietly
    with status 0: no traceback, and no second error when Python flushes stdout at exit."""
    try:
        code = entry()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(run_main())
