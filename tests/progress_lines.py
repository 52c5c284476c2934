"""The progress lines ``sst`` writes to stderr once a run has taken a few seconds of wall time
(:class:`sst_cdma.engine.progress.Progress`): whether a run prints them depends on how loaded the
machine is, so a test that compares a run's stderr, or counts its lines, takes them out first.
``tests/core/test_progress.py`` checks that every line Progress writes is recognised here."""
from __future__ import annotations

import re

#: ``sst: simulated 1.234 ms, 20,000 events, 5 s`` (the event loop) or
#: ``sst: pricing kernels: layer 3 of 23, 5 s`` (a long phase outside it)
PROGRESS_LINE = re.compile(r"sst: (simulated [^,]+, [\d,]+ events|.+ [\d,]+ of [\d,]+), \d+ s")


def without_progress(text: str) -> str:
    """``text`` (a run's stderr) less its progress lines, the other lines as they were."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not PROGRESS_LINE.fullmatch(line.rstrip("\n")))
