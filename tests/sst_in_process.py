"""The ``sst`` command run through its console script's ``main`` in the test's own process (no
interpreter to start, no package to import again): its exit status and what it printed, as
``subprocess.run(..., capture_output=True, text=True)`` returns them. tests/core/test_cli.py
starts the console scripts themselves."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path
from typing import Optional

from sst_cdma.tools.cli.sst_main import main

__all__ = ["run_sst"]


def run_sst(*args: object, cwd: Optional[Path] = None) -> "subprocess.CompletedProcess[str]":
    """``sst ARGS`` (run from ``cwd``, by default the current folder)."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # a topology script's own argument parser
                code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["sst", *argv], code, out.getvalue(), err.getvalue())
