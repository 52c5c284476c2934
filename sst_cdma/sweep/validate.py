"""Checking points before anything runs: each point's topology script is executed with its
model options (the cheap part of a run: no simulation) and its param overrides are applied to
the graph, so an unknown option, a bad value or an override matching nothing is reported with
the spec line before the first simulation starts."""
from __future__ import annotations

import contextlib
import io
import tempfile
from typing import Iterable, Optional

from .execute import clean_message, in_directory, script_error
from .marks import SpecError, display_path
from .spec import Point


def check_point(point: Point) -> Optional[str]:
    """Execute ``point``'s script and apply its overrides; the one-line error, or None when it
    is fine. Runs in a scratch working directory, with the script's output captured."""
    from ..runner import RunError, apply_overrides, execute_script

    shown = display_path(point.topology)
    output = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="sst-cdma-check-") as scratch:
        with in_directory(scratch), contextlib.redirect_stdout(output), \
                contextlib.redirect_stderr(output):
            try:
                graph = execute_script(point.topology, point.model_options())
                if point.params:
                    apply_overrides(graph, point.overrides())
            except RunError as exc:
                return clean_message(script_error(exc, output.getvalue()), str(point.topology),
                                     shown, scratch)
            except SystemExit as exc:
                return f"the topology script exited (status {exc.code}) instead of building"
            except Exception as exc:  # execute_script wraps script faults; be safe anyway
                return clean_message(f"{type(exc).__name__}: {exc}", str(point.topology),
                                     shown, scratch)
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
