"""What the measuring commands' ``main`` share: run, turn ``--help``'s exit into a status and a
known error into one line on standard error with status 2."""
from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn, Sequence

from .errors import CaptureError

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
    """Run ``run`` on ``argv`` (default ``sys.argv[1:]``); ``errors`` (and, with
    ``torch_errors``, PyTorch's RuntimeError: out of device memory, a kernel missing for a
    dtype) print ``PROG: error: ...`` and return 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except errors as exc:
        print(f"{prog}: error: {_say(exc)}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if not torch_errors:
            raise
        print(f"{prog}: error: PyTorch: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
