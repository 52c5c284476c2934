"""What the measuring commands' ``main`` share: run, turn ``--help``'s exit into a status and a
known error into one line on standard error with status 2."""
from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn, Sequence

from sst_cdma.engine.stop_signals import exit_status, stop_message, stop_on_signals
from sst_cdma.tools.capture.errors import CaptureError

__all__ = ["ToolParser", "run_tool"]


class ToolParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and raise instead of exiting (the parser of
    every measuring command: ``capture``, ``time-layers``, ``time-cpu-adam``,
    ``capture-states``)."""

    def error(self, message: str) -> NoReturn:
        """Raise :class:`CaptureError` (reported as one line by :func:`run_tool`)."""
        raise CaptureError(f"{message} (see --help)")


def _say(exc: BaseException) -> str:
    """The error's text: an OSError as ``FILE: reason`` (never ``[Errno 28] ...``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def run_tool(prog: str, run: Callable[[list[str]], int], argv: Sequence[str] | None,
             errors: tuple[type[BaseException], ...], torch_errors: bool = False) -> int:
    """Run ``run`` on ``argv`` (default ``sys.argv[1:]``); ``errors``, an allocation that
    failed (sizes past this machine's memory) and, with ``torch_errors``, PyTorch's
    RuntimeError (out of device memory, a kernel missing for a dtype) print
    ``PROG: error: ...`` and return 2. Ctrl-C, SIGTERM and SIGHUP stop it as they stop
    ``sst``: ``PROG: stopped by SIGTERM`` (or ``interrupted``) and 128 + the signal's number."""
    args = list(sys.argv[1:] if argv is None else argv)
    with stop_on_signals(ending=True):  # SIGTERM, SIGHUP: as Ctrl-C, with 128 + their number
        try:
            return _run_reporting(prog, run, args, errors, torch_errors)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: one line, 128 + signal
            print(f"{prog}: {stop_message(exc)}", file=sys.stderr)
            return exit_status(exc)


def _out_of_memory(exc: BaseException) -> bool:
    """True for an allocation that failed: Python's MemoryError, or PyTorch's allocator
    refusing (a RuntimeError naming the allocation)."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "alloc" in str(exc).lower())


def _run_reporting(prog: str, run: Callable[[list[str]], int], args: list[str],
                   errors: tuple[type[BaseException], ...], torch_errors: bool) -> int:
    """``run(args)``, each known error one line on standard error and status 2."""
    try:
        return run(args)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except errors as exc:
        print(f"{prog}: error: {_say(exc)}", file=sys.stderr)
        return 2
    except (RuntimeError, MemoryError) as exc:
        if _out_of_memory(exc):
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"{prog}: error: out of memory: {first} (ask for smaller sizes)",
                  file=sys.stderr)
            return 2
        if not torch_errors:
            raise
        print(f"{prog}: error: PyTorch: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
