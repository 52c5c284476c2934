"""``sst-cdma``: the project's own command — parameter sweeps, batch regression, reports,
activation capture and kernel timing.

    sst-cdma sweep SPEC.yaml [--output DIR] [--workers N] [--executor pool|dask]
                   [--scheduler tcp://HOST:PORT] [--no-progress] [--retry-failed]
    sst-cdma regress [SUITE_DIR] [--update] [--workers N] [--case NAME] [--keep DIR]
    sst-cdma report RESULTS [--output DIR] [--x COLUMN]
    sst-cdma table RESULTS --rows P --value V [--cols Q] [--divide-by C] [--invert]
    sst-cdma plans RESULTS [--where KEY=VALUE]
    sst-cdma calibrate [--data DIR] [--output FILE] [--check]
    sst-cdma topologies [--path NAME]
    sst-cdma capture ...                     (see sst-cdma capture --help)
    sst-cdma time-layers ...                 (see sst-cdma time-layers --help)
    sst-cdma time-cpu-adam ...               (see sst-cdma time-cpu-adam --help)
    sst-cdma capture-states ...              (see sst-cdma capture-states --help)
    sst-cdma validate ...                    (see sst-cdma validate --help)

Errors are one line, ``sst-cdma: FILE[:LINE]: message``, and exit 1; so is a command whose
extra is not installed (``sst_cdma.tools.extras``). ``python -m sst_cdma`` runs the same command.
"""
from __future__ import annotations

import argparse
import logging
import shlex
import sys
import traceback
from typing import Any, NoReturn, Optional, Sequence

from sst_cdma import __version__
from sst_cdma.engine.stop_signals import (exit_status, signals_deferred, stop_message,
                                          stop_on_signals)
from sst_cdma.tools.cli.sst_main import OneLineParser

PROG = "sst-cdma"


def _fail(message: str, code: int = 1) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


class _Parser(OneLineParser):
    """OneLineParser whose errors read ``sst-cdma: [COMMAND: ]error: message`` (exit 1)."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        """Print the one-line error and exit 1."""
        command = self.prog[len(PROG):].strip()
        self.exit(1, f"{PROG}: {command + ': ' if command else ''}error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _add_sweep(sub: argparse._SubParsersAction[_Parser],
               common: _Parser) -> None:
    """``sst-cdma sweep``: run every point of a sweep spec."""
    s = sub.add_parser("sweep", parents=[common],
                       help="run every point of a sweep spec (cached, resumable)",
                       description="Run a sweep spec: every point is one simulation, run in "
                                   "a pool of worker processes on this machine (or on Dask: "
                                   "--scheduler, --executor dask), cached under "
                                   "DIR/points/<key>/; the table goes to DIR/results.csv and "
                                   "DIR/results.parquet. Exit 1 when a point failed.")
    s.add_argument("spec", metavar="SPEC.yaml", help="sweep spec (see docs/sweeps.md)")
    s.add_argument("--output", "-o", metavar="DIR", default=None,
                   help="results folder (default results/<spec name>)")
    s.add_argument("--workers", "-w", type=_positive, default=2, metavar="N",
                   help="worker processes on this machine (default 2; 1: the points run in "
                        "this process)")
    s.add_argument("--executor", choices=("pool", "dask"), default=None,
                   help="pool: a plain process pool on this machine (the default); dask: a "
                        "local Dask cluster of N workers")
    s.add_argument("--scheduler", metavar="tcp://HOST:PORT", default=None,
                   help="run the points on the workers of this Dask scheduler instead (they "
                        "must see the same file system)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--retry-failed", action="store_true",
                   help="rerun points that failed in an earlier run (otherwise kept)")


def _add_regress(sub: argparse._SubParsersAction[_Parser],
                 common: _Parser) -> None:
    """``sst-cdma regress``: run a regression suite against its references."""
    r = sub.add_parser("regress", parents=[common],
                       help="run a regression suite against its references",
                       description="Run every case of a suite and compare its figures with "
                                   "reference/<case>.json; print the differences and exit 1 on "
                                   "any. --update re-blesses the references.")
    r.add_argument("suite", nargs="?", default="regress", metavar="SUITE_DIR",
                   help="folder holding suite.yaml (default regress/)")
    r.add_argument("--update", action="store_true",
                   help="rewrite the references from this run")
    r.add_argument("--workers", "-w", type=_positive, default=1, metavar="N",
                   help="run cases on N local Dask workers (default 1: in this process)")
    r.add_argument("--case", "-k", action="append", default=[], metavar="NAME",
                   help="run only this case (repeatable)")
    r.add_argument("--keep", metavar="DIR", default=None,
                   help="keep the runs' outputs in DIR")


def _add_report(sub: argparse._SubParsersAction[_Parser],
                common: _Parser) -> None:
    """``sst-cdma report``: markdown and plots from a sweep's results."""
    rp = sub.add_parser("report", parents=[common],
                        help="markdown and plots from a sweep's results",
                        description="Write report.md and PNG plots from a sweep's "
                                    "results.csv: every numeric figure against the swept "
                                    "parameter, and speed-ups per network when the columns "
                                    "exist.")
    rp.add_argument("results", metavar="RESULTS",
                    help="a sweep's output folder or its results.csv")
    rp.add_argument("--output", "-o", metavar="DIR", default=None,
                    help="report folder (default RESULTS/report)")
    rp.add_argument("--timeline", metavar="POINT", type=int, default=None,
                    help="point whose per-layer timeline and GPU memory are drawn (default: "
                         "the one that stalls most)")
    rp.add_argument("--x", metavar="COLUMN", default=None,
                    help="the parameter on the x axis (default: the first swept one)")


def _add_table(sub: argparse._SubParsersAction[_Parser],
               common: _Parser) -> None:
    """``sst-cdma table``: a results table as a markdown pivot."""
    t = sub.add_parser("table", parents=[common],
                       help="print a results table as a markdown pivot (rows x columns)")
    t.add_argument("results", help="a sweep's output folder or its results.csv")
    t.add_argument("--rows", required=True, help="parameter or column for the rows")
    t.add_argument("--cols", default=None, help="parameter or column for the columns")
    t.add_argument("--value", required=True,
                   help="the figure in the cells (gpus.N.FIELD: GPU N's FIELD, from gpus.csv)")
    t.add_argument("--divide-by", default=None, help="divide the figure by this column")
    t.add_argument("--invert", action="store_true", help="show 1 / the figure")
    t.add_argument("--scale", type=float, default=1.0,
                   help="multiply the figure (a finite number, e.g. 1e-9)")
    t.add_argument("--digits", type=int, default=3, help="decimals shown (0 to 30, default 3)")
    t.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only points where this parameter has this value (repeatable)")


def _add_plans(sub: argparse._SubParsersAction[_Parser],
               common: _Parser) -> None:
    """``sst-cdma plans``: what each point's per-tensor plan chose."""
    pl = sub.add_parser("plans", parents=[common],
                        help="print what each point's per-tensor plan chose (markdown)",
                        description="One row per tensor (a transformer's blocks together), "
                                    "one column per point of a sweep, each cell the choices "
                                    "and their counts, from each point's summary.json.")
    pl.add_argument("results", help="a sweep's output folder or its results.csv")
    pl.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                    help="only points where this parameter has this value (repeatable)")


def _add_calibrate(sub: argparse._SubParsersAction[_Parser],
                   common: _Parser) -> None:
    """``sst-cdma calibrate``: fit the kernel model to measured kernels."""
    c = sub.add_parser("calibrate", parents=[common],
                       help="fit the kernel model to measured kernels (kernel_params.json)",
                       description="Fit the kernel model's parameters to each GPU's measured "
                                   "training kernels (DeepBench), write them to FILE and print "
                                   "the in-sample fit error per GPU and kernel. --check refits "
                                   "and exits 1 if FILE differs (docs/kernel_model.md).")
    c.add_argument("--data", metavar="DIR", default=None,
                   help="folder with conv_train_fp32.csv, gemm_train_fp32.csv and gpus.csv "
                        "(default: the shipped DeepBench copy)")
    c.add_argument("--output", "-o", metavar="FILE", default=None,
                   help="parameters file to write (--check: to compare; default there: "
                        "sst_cdma/model/kernel_params.json)")
    c.add_argument("--into-package", action="store_true",
                   help="write the package's own sst_cdma/model/kernel_params.json, which "
                        "every later run uses (instead of --output)")
    c.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 unless FILE holds what the fit gives")


def _add_topologies(sub: argparse._SubParsersAction[_Parser],
                    common: _Parser) -> None:
    """``sst-cdma topologies``: list the shipped topology scripts."""
    tp = sub.add_parser("topologies", parents=[common],
                        help="list the shipped topology scripts (sst NAME.py runs one)",
                        description="List the topology scripts installed with the package; "
                                    "'sst NAME.py' runs one when the working folder has no "
                                    "file of that name.")
    tp.add_argument("--path", metavar="NAME", default=None,
                    help="print only the path of this shipped script (to copy and edit it)")


def _add_torch_tools(sub: argparse._SubParsersAction[_Parser]) -> None:
    """The PyTorch-based tools (``capture``, ``time-layers``, ``time-cpu-adam``,
    ``capture-states``, ``validate``): each parses its own arguments (:func:`_torch_tool`)."""
    sub.add_parser("capture", help="measure activation density profiles from a PyTorch model "
                                   "(sst-cdma capture --help)", add_help=False)
    sub.add_parser("time-layers", help="measure per-layer kernel times in PyTorch for "
                                       "--layer-times (sst-cdma time-layers --help)",
                   add_help=False)
    sub.add_parser("time-cpu-adam", help="measure the host CPU's Adam throughput for the "
                                         "host-CPU model (sst-cdma time-cpu-adam --help)",
                   add_help=False)
    sub.add_parser("capture-states", help="measure what each codec does to weights, gradients "
                                          "and Adam moments (sst-cdma capture-states --help)",
                   add_help=False)
    sub.add_parser("validate", help="measure one NVIDIA GPU and print the simulator beside "
                                    "it (sst-cdma validate --help)", add_help=False)


def _parser() -> argparse.ArgumentParser:
    """The ``sst-cdma`` parser: the global options and every command's subparser, in the
    order ``--help`` lists them."""
    p = _Parser(prog=PROG, description="sst-cdma tools: parameter sweeps (on this machine's "
                      "processes or on Dask), batch regression against reference outputs, "
                      "reports, activation capture.",
                      epilog="Run 'sst-cdma COMMAND --help' for a command's options; "
                             "docs/sweeps.md describes spec and suite files.")
    p.add_argument("-V", "--version", action="version", version=f"sst-cdma {__version__}")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="errors show a traceback")
    common = _Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="errors show a traceback")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in (_add_sweep, _add_regress, _add_report, _add_table, _add_plans,
                _add_calibrate, _add_topologies):
        add(sub, common)
    _add_torch_tools(sub)
    return p


def _torch_tool(command: str, module: str, argv: list[str]) -> int:
    """Run a PyTorch-based tool (``capture``, ``time-layers``, ``time-cpu-adam``,
    ``capture-states``, ``validate``) with its own argument parser; ``module`` is its module
    under ``sst_cdma.tools`` (``capture.timing_cli``)."""
    import importlib

    from sst_cdma.tools.extras import MissingExtra, require

    try:
        require("capture", command)
    except MissingExtra as exc:
        return _fail(str(exc))
    status = _tool_help(command, argv)
    if status is not None:
        return status
    # a stop while PyTorch imports (seconds) is one line too, as the tool's own run reports it
    with stop_on_signals(ending=True):
        try:
            try:
                # a stop is raised once the import has ended: PyTorch's C++ initializers cannot
                # pass an interrupt through (the process would abort with "terminate called")
                with signals_deferred():
                    tool = importlib.import_module(f"..{module}", __package__)
            except Exception as exc:  # the tool or its dependencies (PyTorch) are missing
                return _fail(f"{command}: not available ({type(exc).__name__}: {exc})")
            return int(tool.main(argv) or 0)
        except KeyboardInterrupt as exc:  # as the tool says it: ``sst-cdma COMMAND: ...``
            print(f"{PROG} {command}: {stop_message(exc)}", file=sys.stderr)
            return exit_status(exc)


def _tool_help(command: str, argv: list[str]) -> Optional[int]:
    """``--help`` (or ``-h``) of a measuring command whose parser needs no PyTorch
    (:data:`~sst_cdma.tools.capture.tool_parsers.HELP_PARSERS`): the help, or the one-line error
    that comes first, and the status, without importing PyTorch; None where no help is asked
    for (or the parser read ``--help`` as an option's value: the command itself runs)."""
    head = argv[:argv.index("--")] if "--" in argv else argv
    if not {"-h", "--help"} & set(head):
        return None
    from sst_cdma.tools.capture.errors import CaptureError
    from sst_cdma.tools.capture.tool_parsers import HELP_PARSERS
    if command not in HELP_PARSERS:
        return None
    parser = HELP_PARSERS[command]()
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except CaptureError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    return None


def _sweep(args: argparse.Namespace) -> int:
    from sst_cdma.tools.sweep import SpecError, SweepInterrupted, run_sweep
    from sst_cdma.tools.sweep.marks import display_path

    if args.executor == "pool" and args.scheduler:
        return _fail("sweep: error: --executor pool runs the points on this machine and "
                     "--scheduler on Dask's workers: give one of them")
    try:
        outcome = run_sweep(args.spec, output=args.output, workers=args.workers,
                            scheduler=args.scheduler, progress=not args.no_progress,
                            retry_failed=args.retry_failed, executor=args.executor)
    except SpecError as exc:
        return _fail(str(exc))
    except SweepInterrupted as exc:
        return _fail(f"{display_path(args.spec)}: {exc}", exc.status)
    print(f"{outcome.spec.name}: {outcome.total} points: {outcome.ran} run, {outcome.cached} "
          f"cached, {outcome.failed} failed -> {display_path(outcome.csv)}")
    return 1 if outcome.failed else 0  # run_sweep said each failed point on stderr


def _regress(args: argparse.Namespace) -> int:
    from sst_cdma.tools.regress import format_table, run_suite
    from sst_cdma.tools.sweep import SpecError

    try:
        outcome = run_suite(args.suite, update=args.update, workers=args.workers,
                            names=args.case, keep=args.keep)
    except SpecError as exc:
        return _fail(str(exc))
    width = max(len(c.case.name) for c in outcome.cases)
    for case in outcome.cases:
        print(f"{case.status.upper():9s} {case.case.name.ljust(width)}"
              f"{_case_note(args, outcome.suite, case)}".rstrip())
    if outcome.differences:
        print()
        print(format_table(outcome.differences))
    counts: dict[str, int] = {}
    for case in outcome.cases:
        counts[case.status] = counts.get(case.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    print(f"\n{outcome.suite.name}: {len(outcome.cases)} cases: {summary}")
    if args.keep:
        print(f"outputs kept in {args.keep}")
    return 0 if outcome.ok else 1


def _case_note(args: argparse.Namespace, suite: Any, case: Any) -> str:
    """What the regress table adds after a case: its differences, its error, or (without a
    reference) the command that writes one."""
    from sst_cdma.tools.sweep.marks import display_path

    n = len(case.differences)
    if case.status == "failed":
        return f"  ({n} difference{'s' if n != 1 else ''})"
    if case.status == "error":
        return f"  ({case.error})"
    if case.status == "missing":
        return (f"  (no reference {display_path(suite.reference_path(case.case))}: "
                f"`sst-cdma regress {shlex.quote(args.suite)} --update --case "
                f"{shlex.quote(case.case.name)}` writes it from this run)")
    return ""


def _report(args: argparse.Namespace) -> int:
    from sst_cdma.tools.sweep.report import ReportError, write_report

    try:
        report = write_report(args.results, output=args.output, x=args.x,
                              timeline=args.timeline)
    except ReportError as exc:
        return _fail(str(exc))
    print(f"report: {report.markdown} ({len(report.plots)} plots)")
    return 0


def _table(args: argparse.Namespace) -> int:
    from sst_cdma.tools.sweep.pivot import PivotError, pivot_markdown

    try:
        print(pivot_markdown(args.results, args.rows, args.value, args.cols, args.divide_by,
                             args.invert, args.scale, args.digits, args.where))
    except PivotError as exc:
        return _fail(str(exc))
    return 0


def _plans(args: argparse.Namespace) -> int:
    from sst_cdma.tools.sweep.pivot import PivotError
    from sst_cdma.tools.sweep.plan_table import plan_markdown

    try:
        print(plan_markdown(args.results, args.where))
    except PivotError as exc:
        return _fail(str(exc))
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    import shlex

    from sst_cdma.model.calibration import (CalibrationError, check_params, format_fit_errors, load,
                                     params_document, write_params)
    from sst_cdma.model.fitted import PARAMS_PATH

    if args.into_package and args.output:
        return _fail("calibrate: give --output FILE or --into-package, not both")
    if not (args.output or args.into_package or args.check):
        return _fail("calibrate: --output FILE is required: writing the package's own "
                     f"{PARAMS_PATH.name}, which every later run uses, takes --into-package")
    output = args.output or PARAMS_PATH
    try:
        sets = load(args.data)
        if args.check:
            doc = params_document(sets)
            differences = check_params(output, doc)
        else:
            doc = write_params(output, sets=sets)
    except CalibrationError as exc:
        return _fail(str(exc))
    print(format_fit_errors(doc))
    if args.check:
        if differences:
            more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
            # the user's own --data and --output: a bare refit would rewrite the shipped file
            refit = " ".join([PROG, "calibrate"] + [
                f"{flag} {shlex.quote(str(value))}"
                for flag, value in (("--data", args.data), ("--output", args.output)) if value]
                + ([] if args.output else ["--into-package"]))
            mark = '"' if "'" in refit else "'"
            return _fail(f"{differences[0]}{more}; run {mark}{refit}{mark} to refit it")
        print(f"{output}: matches the refit")
    else:
        print(f"wrote {output}")
    return 0


def _topologies(args: argparse.Namespace) -> int:
    from sst_cdma.tools.cli.topology_list import listing, path_of

    if args.path is None:
        print(listing(), end="")
        return 0
    try:
        print(path_of(args.path))
    except LookupError as exc:
        return _fail(str(exc.args[0]))
    return 0


#: command -> the extra it needs (regress needs the sweep extra for --workers N only)
_COMMAND_EXTRAS = {"sweep": "sweep", "report": "report", "calibrate": "calibrate"}


def _missing_extra(args: argparse.Namespace) -> Optional[str]:
    """The one-line error for a command whose extra is not installed, or None."""
    from sst_cdma.tools.extras import MissingExtra, require

    try:
        if args.command in _COMMAND_EXTRAS:
            require(_COMMAND_EXTRAS[args.command], args.command)
        elif args.command == "regress" and args.workers > 1:
            require("sweep", "regress --workers", ("dask", "distributed"))
    except MissingExtra as exc:
        return str(exc)
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``sst-cdma`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = [a for a in argv if a not in ("-v", "--verbose")]
    tools = {"capture": "capture.cli", "time-layers": "capture.timing_cli",
             "time-cpu-adam": "capture.cpu_adam_cli", "capture-states": "capture.states_cli",
             "validate": "validate.cli"}
    if rest and rest[0] in tools:
        return _torch_tool(rest[0], tools[rest[0]], rest[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return _fail("error: no command given (sweep, regress, report, table, plans, "
                     "calibrate, topologies, capture, time-layers, time-cpu-adam, "
                     "capture-states or validate; see sst-cdma --help)")
    handler = {"sweep": _sweep, "regress": _regress, "report": _report,
               "table": _table, "plans": _plans, "calibrate": _calibrate,
               "topologies": _topologies}[args.command]
    missing = _missing_extra(args)
    if missing is not None:
        return _fail(missing)
    if not args.verbose:  # Dask's own error logs (a lost scheduler...) would add tracebacks
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
    try:
        with stop_on_signals(ending=True):  # SIGTERM, SIGHUP: as Ctrl-C, with 128 + their number
            try:
                return handler(args)
            except KeyboardInterrupt as exc:
                return _fail(stop_message(exc), exit_status(exc))
    except BrokenPipeError:  # stdout's reader closed it (| head): run_main ends quietly
        raise
    except Exception as exc:  # a bug: one line, traceback with -v
        if args.verbose:
            traceback.print_exc()
        return _fail(f"internal error: {type(exc).__name__}: {exc} (run with -v for the "
                     "traceback)")


def run_main() -> int:
    """``main`` for the console script: a closed stdout pipe (``sst-cdma ... | head``) ends
    quietly; the process's last garbage collections are skipped (it exits next)."""
    from sst_cdma.engine.cyclic_gc import done_with_collecting
    from sst_cdma.tools.cli.sst_main import quiet_on_closed_pipe

    code = quiet_on_closed_pipe(main)  # (the collector stays on: a sweep's points need it)
    done_with_collecting()
    return code


if __name__ == "__main__":
    sys.exit(run_main())
