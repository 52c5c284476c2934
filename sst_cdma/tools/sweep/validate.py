"""Checking points before anything runs: each point's topology script is executed with its
model options, its param overrides are applied to the graph and its elements are built (the
cheap part of a run: no simulation), so an unknown option, a bad value, options that
contradict one another or an override matching nothing is reported with the spec line before
the first simulation starts."""
from __future__ import annotations

import contextlib
import fnmatch
import io
import tempfile
from typing import Iterable, Optional

from sst_cdma.engine.config import ConfigError, ConfigGraph
from sst_cdma.tools.sweep.execute import clean_message, in_directory, script_error, shown_paths
from sst_cdma.tools.sweep.marks import SpecError, display_path
from sst_cdma.tools.sweep.spec import Point


def check_point(point: Point) -> Optional[str]:
    """Execute ``point``'s script and apply its overrides; the one-line error, or None when it
    is fine. Runs in a scratch working directory, with the script's output captured. Files the
    point's options and params name are given as absolute paths, as in the run, and shown in
    the error as the spec wrote them."""
    from sst_cdma.engine.runner import RunError, apply_overrides, execute_script

    shown = display_path(point.topology)
    options = point.model_options()
    overrides = point.overrides()
    paths = shown_paths([*options, *(v for params in overrides.values()
                                    for v in params.values())])
    options = [str(arg) for arg in options]
    overrides = {pattern: {name: str(value) for name, value in params.items()}
                 for pattern, params in overrides.items()}
    output = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="sst-cdma-check-") as scratch:
        with in_directory(scratch), contextlib.redirect_stdout(output), \
                contextlib.redirect_stderr(output):
            try:
                graph = execute_script(point.topology, options)
                if point.params:
                    apply_overrides(graph, overrides)
                    behind = _behind_the_options(graph, overrides)
                    if behind is not None:
                        return behind
                for final_check in graph.final_checks:
                    final_check(graph)
                _build(graph)
            except ConfigError as exc:
                return clean_message(str(exc), str(point.topology), shown, scratch, paths)
            except RunError as exc:
                return clean_message(script_error(exc, output.getvalue()), str(point.topology),
                                     shown, scratch, paths)
            except SystemExit as exc:
                return f"the topology script exited (status {exc.code}) instead of building"
            except Exception as exc:  # execute_script wraps script faults; be safe anyway
                return clean_message(f"{type(exc).__name__}: {exc}", str(point.topology),
                                     shown, scratch, paths)
    return None


def _build(graph: ConfigGraph) -> None:
    """Construct the point's elements, as its run will before anything runs: each element's
    own checks of its params together (the options that contradict one another: ``--weights
    nvme`` with the optimizer states on the GPU) raise their ConfigError here, before the
    sweep starts, rather than failing the point."""
    from sst_cdma.engine.simulation import Simulation

    Simulation(graph).build()


def _behind_the_options(graph: ConfigGraph, overrides: dict[str, dict[str, str]]
                        ) -> Optional[str]:
    """The error for an override that sets a network workload's param a model option sets
    (``network``, ``batch``, ...): the point would be tabled under the option's value while
    running another workload. None when there is none."""
    from sst_cdma.builder.model_options import ELEMENT_OPTIONS, NETWORK
    from sst_cdma.engine.runner import configured_elements

    flags = {opt.param: opt.flag for opt in ELEMENT_OPTIONS
             if opt.element == NETWORK and opt.declaration is None}
    elements = configured_elements(graph)
    for pattern, params in overrides.items():
        if not any(e.type == NETWORK and (e.name == pattern or fnmatch.fnmatchcase(e.name, pattern))
                   for e in elements):
            continue
        for name in params:
            if name in flags:
                option = flags[name].lstrip("-")
                return (f"params: {pattern!r} sets the workload's {name!r} behind the model "
                        f"options' backs (the point would be tabled under the {option!r} option's "
                        f"value): set the model option {option!r} (options: or grid:) instead")
    return None


def validate_points(spec_path: str, points: Iterable[Point]) -> None:
    """Check every point; SpecError naming the spec file and the line at fault on the first
    bad one."""
    for point in points:
        error = check_point(point)
        if error is not None:
            raise SpecError(f"point {point.index} ({point.describe()}): {error}", spec_path,
                            point.line_for(error))


__all__ = ["check_point", "validate_points"]
