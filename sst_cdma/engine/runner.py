"""Running a topology: execute the script (or load a saved graph), build, run, and return the
results in-process. The ``sst`` CLI and :func:`sst_cdma.run` both go through here."""
from __future__ import annotations

import importlib
import io
import json
import os
import shlex
import sys
import traceback
from functools import partial
from dataclasses import field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional, Sequence, Union

from sst_cdma.engine import config_api, graph_files
from sst_cdma.engine.config import (PROGRAM_OPTIONS, RUN_MODES, ConfigComponent, ConfigError, ConfigGraph,
                     StructureError, beyond_sim_range)
from sst_cdma.engine.atomic_files import replace_whole, write_text_whole
from sst_cdma.engine.errors import RunError
from sst_cdma.engine.file_safety import remove_tree
from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json, read_text
from sst_cdma.engine.output_folder import (cannot_write, check_output_directory, prepare_staging,
                            publish_outputs, write_failure)
from sst_cdma.engine.progress import PhaseClock, Progress
from sst_cdma.engine.records import Record, record
from sst_cdma.engine.stop_signals import signals_deferred
from sst_cdma.engine.simulation import Simulation, warn
from sst_cdma.engine.kernel import SimulationError
from sst_cdma.engine.library import find_topology
from sst_cdma.engine.units import UnitAlgebra, UnitError, abbreviate

#: a configuration graph (``--output-json``): a component per layer, each with its params
GRAPH_FILE = FileKind("a configuration graph", 512 * MIB)
#: a topology script, written by hand
SCRIPT_FILE = FileKind("a topology script", 16 * MIB)


class StructureRunError(RunError):
    """SST's structural check failed (unused or dangling links); ``warnings`` are SST's lines
    (``Found unused link: l0``), which ``sst`` prints as SST-core does."""

    def __init__(self, warnings: list[str], where: str = "") -> None:
        super().__init__("Structure errors found in the ConfigGraph: " + "; ".join(warnings),
                         where)
        self.warnings = warnings


@record
class RunResult(Record):
    """What one run produced: the statistics (a DataFrame with the CSV's columns, built on
    first use so that runs which never look at it do not import pandas), simulated time, events
    delivered, why the run ended, wall-clock timing and the components' reports (the cDMA
    topologies' ``reports["summary"]`` is what ``summary.json`` holds), with or without an
    output directory; ``console_text`` is what the run printed to its console, whether or not
    the caller had it shown."""

    table: Callable[[], Any] = field(repr=False)
    sim_time_ps: int
    events: int
    end_reason: str
    timing: dict[str, float]
    reports: dict[str, Any] = field(default_factory=dict)
    #: element name -> the typed result record the element published (a GPU's ``GPUResult``...)
    results: dict[str, Any] = field(default_factory=dict)
    output_directory: Optional[Path] = None
    graph: Optional[ConfigGraph] = None
    simulation: Any = None
    #: what the run printed to its console (the console summary, console statistics,
    #: heartbeats): ``sst``'s standard output for the same run, up to its closing
    #: ``Simulation is complete`` line; kept whether or not ``console=`` showed it
    console_text: str = ""

    @cached_property
    def statistics(self) -> Any:
        """Every statistic dump as a pandas DataFrame with the CSV's columns."""
        return self.table()

    def statistics_csv(self) -> str:
        """:attr:`statistics` as the CSV text its ``to_csv(index=False, lineterminator="\\n")``
        writes (empty when no statistic was dumped), made without pandas where the run's
        statistics are at hand."""
        if self.simulation is not None:
            text: str = self.simulation.statistics.table_csv()
            return text
        table = self.statistics
        return table.to_csv(index=False, lineterminator="\n") if len(table) else ""

    @property
    def sim_time_s(self) -> float:
        """Simulated time in seconds."""
        return self.sim_time_ps * 1e-12


class _Console(io.StringIO):
    """A run's console: keeps every line the run prints (:attr:`RunResult.console_text`) and
    writes each, as it comes, to ``shown`` when the caller gave a stream (``sst`` gives its
    standard output); without one the run prints nothing."""

    def __init__(self, shown: Optional[IO[str]]) -> None:
        super().__init__()
        self.shown = shown

    def write(self, text: str) -> int:
        """Keep ``text`` and write it to the shown stream."""
        if self.shown is not None:
            self.shown.write(text)
        return super().write(text)

    def flush(self) -> None:
        """Flush the shown stream (the kept text needs none)."""
        if self.shown is not None:
            self.shown.flush()
        super().flush()


def _display(path: str) -> str:
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


def _where_display(where: str) -> str:
    if not where:
        return where
    file, _, line = where.rpartition(":")
    if file and line.isdigit():
        return f"{_display(file)}:{line}"
    return _display(where)


def _script_frame(exc: BaseException, script: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if fr.filename == script:
            return f"{script}:{fr.lineno}"
    return script


def _script_path(script: Union[str, Path]) -> str:
    """The absolute path of ``script``: the file it names, else, for a bare file name, the
    shipped topology of that name (:func:`~sst_cdma.engine.library.find_topology`); RunError when
    neither exists."""
    path = str(Path(script).resolve())
    if os.path.exists(path) and not os.path.isdir(path):  # a FIFO or device: refused on reading
        return path
    shipped = find_topology(str(script))
    if shipped is not None:
        return str(shipped)
    known = find_topology(Path(script).name) if str(script).endswith(".py") else None
    hint = f" (the shipped {known.name} is found by its bare name: {known.name})" if known \
        else ""
    raise RunError(f"no such topology file{hint}", str(script))


class _WatchedArgv(list):
    """A script's ``sys.argv`` that notes whether the script looked at its options (iterated,
    measured, sliced or indexed past the script's own path): model options given to a script
    that never looks would be silently ignored."""

    looked = False

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice) or not isinstance(key, int) or key != 0:
            self.looked = True
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[Any]:
        self.looked = True
        return super().__iter__()

    def __len__(self) -> int:
        self.looked = True
        return super().__len__()


def execute_script(script: Union[str, Path], model_options: Sequence[str] = (),
                   program_options: Optional[dict[str, str]] = None) -> ConfigGraph:
    """Run a topology script with ``import sst`` available and ``sys.argv`` = [script, *options];
    return the graph it built. ``program_options`` (the command line's) are visible to the
    script through ``sst.getProgramOptions()`` and win over what it sets. Faults become
    RunError naming the script line; so do model options the script never looked at (it
    never read ``sys.argv`` past its own path: they would be ignored)."""
    path = _script_path(script)
    if path.endswith(".json"):
        try:
            data = load_json(path, GRAPH_FILE)
        except FileReadError as exc:
            raise RunError(f"cannot read configuration graph: {exc}", _display(path)) from None
        try:
            graph = graph_files.from_json(data, _display(path))
        except ConfigError as exc:
            raise RunError(str(exc), exc.where) from None
        _check_structure(graph)
        return graph
    graph = ConfigGraph()
    graph.source = path
    cli_options = {k: v for k, v in (program_options or {}).items() if v}
    graph.program_options.update(cli_options)
    saved_argv, saved_sst, saved_path = sys.argv, sys.modules.get("sst"), list(sys.path)
    loaded = set(sys.modules)
    config_api._reset(graph, path)
    argv = _WatchedArgv(["sstsim.x", *model_options])  # SST-core's argv[0]
    sys.argv = argv
    sys.modules["sst"] = config_api  # type: ignore[assignment]
    sys.path.insert(0, os.path.dirname(path))
    importlib.invalidate_caches()  # a helper module written since the last run is seen
    try:
        try:
            source = read_text(path, SCRIPT_FILE)
            code = compile(source, path, "exec")
        except FileReadError as exc:
            raise RunError(f"cannot read topology script: {exc}", _display(path)) from None
        except SyntaxError as exc:
            raise RunError(f"syntax error: {exc.msg}", _where_display(f"{path}:{exc.lineno}")) \
                from None
        try:
            exec(code, {"__name__": "__main__", "__file__": path})
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise RunError(f"the script exited with status {exc.code}", _display(path)) \
                    from None
            raise
        except ConfigError as exc:
            raise RunError(str(exc), _where_display(exc.where or _script_frame(exc, path))) \
                from exc
        except (RunError, BrokenPipeError):  # a closed stdout is the caller's to handle
            raise
        except Exception as exc:
            raise RunError(f"{type(exc).__name__}: {exc}",
                           _where_display(_script_frame(exc, path))) from exc
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        _forget_script_modules(os.path.dirname(path), loaded)
        if saved_sst is None:
            sys.modules.pop("sst", None)
        else:
            sys.modules["sst"] = saved_sst
    if model_options and not argv.looked:
        raise RunError(f"the script reads no model options (it never looks at sys.argv), so "
                       f"{shlex.join(model_options)} would be ignored: run it without them (docs/topologies.md says which "
                       "topologies take options)",
                       _display(path))
    graph.program_options.update(cli_options)
    _check_structure(graph)
    try:
        graph.resolve_shared_params()
    except ConfigError as exc:
        raise RunError(str(exc), _where_display(exc.where)) from None
    return graph


def _say_notices(graph: ConfigGraph, options: dict[str, str]) -> None:
    """Warn, once each, where the run accepted what sst-cdma does not act on as asked."""
    notes = list(graph.notices)
    partitioner = options.get("partitioner") or ""
    if partitioner and partitioner != "sst.single":
        notes.append(f"partitioner {partitioner}: this run has one rank, so every component is "
                     "placed on it (as any partitioner places them on one rank)")
    threads = options.get("num-threads") or "1"
    if threads.isdigit() and int(threads) > 1:
        notes.append(f"num-threads {threads}: this kernel runs one thread; the results "
                     "are those of a one-thread run")
    for note in notes:
        warn(note)


def _forget_script_modules(folder: str, loaded: set[str]) -> None:
    """Drop the modules a script imported from its own folder (packages of it included), so
    that the next script, in another folder or after an edit, imports its own helpers rather
    than these (sweep workers run many scripts in one process). ``loaded``: the modules loaded
    before the script ran; they stay, and so do the new modules of their packages (this
    project's own): only the modules the script added are looked at."""
    root = os.path.join(os.path.abspath(folder), "")
    for name in sys.modules.keys() - loaded:
        if name.partition(".")[0] in loaded:
            continue
        module = sys.modules[name]
        # a namespace package (a folder without __init__.py) has a __path__ but no __file__
        places = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", ())]
        if any(place and os.path.abspath(place).startswith(root) for place in places):
            del sys.modules[name]


def _check_structure(graph: ConfigGraph) -> None:
    """SST's check after the script ran: unused or dangling links stop the run
    (StructureRunError), then a fault SST reports later (an unknown element type)."""
    try:
        graph.check_structure()
    except StructureError as exc:
        raise StructureRunError(exc.warnings, _display(graph.source)) from None
    except ConfigError as exc:
        raise RunError(str(exc), _where_display(exc.where)) from None


def configured_elements(graph: ConfigGraph) -> list[ConfigComponent]:
    """Every component of ``graph`` and, after each, the subcomponents in its slots (named
    ``COMPONENT:SLOT[N]``), theirs included."""
    out: list[ConfigComponent] = []

    def add(element: ConfigComponent) -> None:
        out.append(element)
        for sub in element.subcomponents:
            add(sub)

    for comp in graph.components.values():
        add(comp)
    return out


def apply_overrides(graph: ConfigGraph, overrides: dict[str, dict[str, Any]]) -> None:
    """Set element params after the script ran: ``{"gpu*": {"peak_flops": "20e12"}}``; keys are
    component or subcomponent names (``gpu0.dma:codec[0]``) or fnmatch patterns of them
    (``*.dma:codec*``), each must match at least one element."""
    import fnmatch

    from sst_cdma.engine.element import ParamError
    from sst_cdma.engine.param_words import forget_flag

    elements = configured_elements(graph)
    for pattern, params in overrides.items():
        # a subcomponent's own name holds [0], which fnmatch would read as a character class
        matched = [c for c in elements
                   if c.name == pattern or fnmatch.fnmatchcase(c.name, pattern)]
        if not matched:
            raise RunError(f"param override: no component matches {pattern!r} (nor a "
                           "subcomponent, named COMPONENT:SLOT[N])",
                           _display(graph.source))
        for comp in matched:
            decl = {p.name: p for p in comp.element.PARAMS}
            for key, value in params.items():
                if key not in decl:
                    try:
                        comp.element.validate_params({key: value}, f"{comp.name} ({comp.type})")
                    except ParamError as exc:
                        raise RunError(f"param override: {exc}", _display(graph.source)) from None
                try:
                    decl[key].parse(value)
                except ParamError as exc:
                    raise RunError(f"param override: {comp.name} ({comp.type}): parameter "
                                   f"{key!r}: {exc}", _display(graph.source)) from None
                comp.params[key] = str(value)
                comp.param_where[key] = "param override"
                forget_flag(comp.type, key)  # an error names what the user set: the param


def resolve_options(graph: ConfigGraph, cli: dict[str, Optional[str]]) -> dict[str, str]:
    """Program options in force: defaults, then the script's, then the command line's."""
    out = dict(PROGRAM_OPTIONS)
    out.update(graph.program_options)
    out.update({k: v for k, v in cli.items() if v is not None})
    return out


def _script_arguments(script: Union[str, Path],
                      model_options: Union[str, Sequence[str], None]) -> list[str]:
    """The script's ``sys.argv[1:]`` from :func:`run`'s ``model_options`` (one string is split
    like a shell would). RunError on a string that cannot be split (an unterminated quote) and
    on any option given to a JSON graph."""
    if isinstance(model_options, str):
        try:
            opts = shlex.split(model_options)
        except ValueError as exc:  # an unterminated quote or a trailing backslash
            raise RunError(f"model options {model_options!r}: {str(exc).lower()}") from None
    else:
        opts = list(model_options or [])
    if opts and str(script).endswith(".json"):
        raise RunError(f"{script}: a JSON graph takes no model options (they shaped the graph "
                       f"when it was written), got: {shlex.join(opts)}")
    return opts


def run(script: Union[str, Path], model_options: Union[str, Sequence[str], None] = None,
        output_directory: Union[str, Path, None] = None, stop_at: Optional[str] = None,
        run_mode: str = PROGRAM_OPTIONS["run-mode"], console: Optional[IO[str]] = None,
        output_json: Optional[str] = None, output_dot: Optional[str] = None,
        overrides: Optional[dict[str, dict[str, Any]]] = None,
        progress: Optional[IO[str]] = None, full_trace: bool = True,
        record_statistics: bool = True, output_config: Optional[str] = None,
        program_options: Optional[dict[str, str]] = None) -> RunResult:
    """Run a topology in this process and return its results.

    ``model_options`` is a list of arguments (or one string, split like a shell would) given to
    the script as ``sys.argv[1:]`` (RunError when the string cannot be split: an unterminated
    quote). ``output_directory`` receives statistic files and whatever
    the components write. The run prints nothing unless ``console`` names a stream (``sst``
    gives ``sys.stdout``), which then receives, as they come, the lines ``sst`` prints: the
    console summary, console statistics, heartbeats. The result's ``console_text`` holds that
    text either way (warnings go to standard error, as ``sst``'s do).

    The result's ``statistics`` (a pandas DataFrame with the CSV's columns) and ``reports``
    (the cDMA topologies' ``reports["summary"]``, what ``summary.json`` holds) come back with or
    without an output directory. A run with no output directory whose script enables no
    statistic (the cDMA topologies enable theirs only to write them) records every statistic
    the components declare, in memory only, as the CSV would hold them; ``record_statistics=False``
    leaves them out (``sst`` does: it has nowhere to show them), which saves a little time.
    ``progress`` (e.g. ``sys.stderr``, as ``sst`` gives it) receives a line now and then once
    the run has taken a few seconds (:class:`~sst_cdma.engine.progress.Progress`).
    ``program_options`` are more command-line options by SST's names (``heartbeat-sim-period``,
    ``heartbeat-wall-period``, ``exit-after``); like all command-line options they win over
    the script's. ``full_trace=False``
    asks the elements that write a trace for a summary one (:attr:`Simulation.full_trace`; the
    cDMA topologies' ``trace.json`` then holds the GPU memory counters only, what sweep points
    keep).

    The outputs appear together or not at all: the run writes them into a staging folder beside
    ``output_directory`` (``DIR.partial-*``), which takes the folder's place in one step once
    the run has ended (:mod:`~sst_cdma.engine.output_folder`); a run that fails or is interrupted
    removes its staging folder and leaves the previous run's files as they were.
    """
    opts = _script_arguments(script, model_options)
    phases = PhaseClock()
    if progress is not None:
        phases.progress = Progress(progress)
    default_mode = PROGRAM_OPTIONS["run-mode"]
    cli = {"stop-at": stop_at, "run-mode": run_mode if run_mode != default_mode else None,
           "output-directory": str(output_directory) if output_directory is not None else None,
           "output-json": output_json, "output-dot": output_dot, "output-config": output_config,
           **(program_options or {})}
    with phases.active(), phases.phase("script_s"):
        graph = execute_script(script, opts, {k: v for k, v in cli.items() if v is not None})
        if overrides:
            apply_overrides(graph, overrides)
    options = resolve_options(graph, cli)
    _say_notices(graph, options)
    out_dir = Path(options["output-directory"]) if options["output-directory"] else None
    target = check_output_directory(out_dir) if out_dir is not None else None
    staging = prepare_staging(out_dir, target) if out_dir is not None and target else None
    kept = _Console(console)
    try:
        record_all = record_statistics and out_dir is None and not _enables_statistics(graph)
        try:
            result = _run_graph(graph, options, out_dir, staging, kept, phases, full_trace,
                                record_all)
        except OSError as exc:  # a full disk while the components write their files
            if out_dir is None or staging is None or not cannot_write(exc, staging):
                raise
            raise write_failure(exc, out_dir, staging) from None
        if staging is not None and out_dir is not None and target is not None:
            with signals_deferred(), phases.phase("writing_s"):
                publish_outputs(staging, target, out_dir)
            staging = None
            if result.simulation is not None:
                result.simulation.output_directory = out_dir
        result.console_text = kept.getvalue()
        return result
    finally:
        if staging is not None:
            remove_tree(staging)


def _enables_statistics(graph: ConfigGraph) -> bool:
    """Whether the script enabled any statistic of any component or subcomponent."""
    return any(cfg.statistics or any(sub.statistics for sub in cfg.subcomponents)
               for cfg in graph.components.values())


def _output_file(key: str, target: str, out_dir: Optional[Path], staging: Optional[Path]
                 ) -> Path:
    """Where ``--output-json``/``--output-dot`` goes: relative to the output directory (its
    folders created there), or as given (its folder must exist, and it must not be one)."""
    given = Path(target)
    inside = staging is not None and out_dir is not None and not given.is_absolute()
    shown = out_dir / given if inside else given  # type: ignore[operator]
    if shown.is_dir():
        raise RunError("is a folder, not a file", f"--{key} {shown}")
    if inside:
        path = staging / given  # type: ignore[operator]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot create its folder: {exc.strerror or exc}",
                           f"--{key} {shown}") from None
        return path
    if not given.parent.is_dir():
        raise RunError(f"no such folder {given.parent}", f"--{key} {shown}")
    return given


def _watch_progress(simulation: Simulation, options: dict[str, str], console: IO[str],
                    progress: Optional[Progress], source: str) -> None:
    """Install the heartbeats (on ``console``), the --exit-after limit and the progress lines
    the options ask for; a malformed period is a RunError naming the option."""
    from sst_cdma.engine.progress import SimHeartbeat, WallWatch, parse_wall_time

    def stream() -> IO[str]:  # the heartbeats look their stream up as they print
        return console

    def wall(key: str) -> Optional[int]:
        text = options.get(key) or ""
        if text in ("", "0"):
            return None
        try:
            return parse_wall_time(text)
        except ValueError as exc:
            raise RunError(f"--{key}: {exc}", _display(source)) from None

    key = "heartbeat-sim-period" if options.get("heartbeat-sim-period") else "heartbeat-period"
    period = options.get(key) or ""
    if period:
        try:
            period_ps = UnitAlgebra(period).to_picoseconds()
        except UnitError as exc:
            raise RunError(f"--{key} {abbreviate(period)}: {exc}", _display(source)) from None
        if period_ps <= 0:
            raise RunError(f"--{key} {period}: must be a positive time", _display(source))
        if beyond_sim_range(period_ps):
            raise RunError(f"--{key} {period}: {beyond_sim_range(period_ps)}", _display(source))
        stream().write(f"# Creating simulation heartbeat at simulated time period of "
                       f"{period}.\n")
        SimHeartbeat(simulation.sim, period_ps, stream).start()
    beat_s, exit_s = wall("heartbeat-wall-period"), wall("exit-after")
    if beat_s is not None or exit_s is not None:
        simulation.sim.progress = WallWatch(simulation.sim, stream, beat_s, exit_s,
                                            options.get("exit-after", ""), progress)
    elif progress is not None:
        simulation.sim.progress = progress


def _run_graph(graph: ConfigGraph, options: dict[str, str], out_dir: Optional[Path],
               staging: Optional[Path], console: IO[str], phases: PhaseClock,
               full_trace: bool = True, record_all: bool = False) -> RunResult:
    """Write the graph files, build and run; outputs go to ``staging`` (or nowhere), what the
    run prints to ``console``, the phases' wall time to ``phases`` (its ``progress`` gets the
    progress lines).
    ``record_all`` records every declared statistic in memory only."""
    for key, writer in (("output-json", partial(graph_files.write_json, graph)),
                        ("output-config", partial(graph_files.write_python, graph)),
                        ("output-dot", None)):
        target = options[key]
        if target:
            path = _output_file(key, target, out_dir, staging)
            try:
                graph.check()
            except ConfigError as exc:
                raise RunError(str(exc), _where_display(exc.where)) from None
            try:
                with phases.phase("writing_s"):  # aside, then over the old file: whole
                    if writer is not None:
                        replace_whole(path, writer)
                    else:
                        write_text_whole(path, graph.to_dot())
            except OSError as exc:
                raise RunError(f"cannot write it: {exc.strerror or exc}", f"--{key} {target}") \
                    from None
    stop_ps = None
    if options["stop-at"]:
        try:
            stop_ps = UnitAlgebra(options["stop-at"]).to_picoseconds()
        except UnitError as exc:
            raise RunError(f"--stop-at: {exc}", _display(graph.source)) from None
        if stop_ps <= 0:
            raise RunError(f"--stop-at {options['stop-at']}: must be a positive time (the run "
                           "would end before its first event)", _display(graph.source))
        if beyond_sim_range(stop_ps):
            raise RunError(f"--stop-at {options['stop-at']}: {beyond_sim_range(stop_ps)}",
                           _display(graph.source))
    mode = options["run-mode"]
    if mode not in RUN_MODES:
        raise RunError(f"--run-mode {mode!r} is not one of {', '.join(RUN_MODES)}")
    try:
        simulation = Simulation(graph, staging, console, record_all, phases)
        simulation.full_trace = full_trace
        simulation.build()
    except ConfigError as exc:
        raise RunError(str(exc), _where_display(exc.where)) from None
    if mode == "init":
        return RunResult(simulation.statistics.table, 0, 0, "run-mode init", simulation.timing,
                         simulation.reports, simulation.results, out_dir, graph)
    _watch_progress(simulation, options, console, phases.progress, graph.source)
    try:
        simulation.run(stop_ps)
    except ConfigError as exc:
        raise RunError(str(exc), _where_display(exc.where)) from None
    except SimulationError as exc:
        raise RunError(f"at {simulation.sim.now} ps: {exc}", _display(graph.source)) from None
    if simulation.statistics.suppressed_by_level and not simulation.statistics.stats:
        warn("statistics were enabled but none loaded: the statistic load level is below their "
             "enable level (call sst.setStatisticLoadLevel(N))")
    if staging is not None:
        with phases.phase("writing_s"):
            (staging / "config.json").write_text(json.dumps(simulation.resolved_config(),
                                                            indent=2) + "\n", encoding="utf-8")
    return RunResult(simulation.statistics.table, simulation.reported_end_ps,
                     simulation.sim.events_delivered, simulation.sim.end_reason, simulation.timing,
                     simulation.reports, simulation.results, out_dir, graph, simulation)
