"""The measuring commands' shared main: a file error is one line naming the file."""
from __future__ import annotations

import errno

from sst_cdma.tools.capture.tool_main import run_tool


def test_a_file_error_names_the_file_not_an_errno(capsys):
    def run(args):
        raise OSError(errno.ENOSPC, "cannot write it: No space left on device",
                      "--output /dev/full")

    assert run_tool("sst-cdma time-cpu-adam", run, [], (OSError,)) == 2
    assert capsys.readouterr().err == ("sst-cdma time-cpu-adam: error: --output /dev/full: "
                                       "cannot write it: No space left on device\n")
