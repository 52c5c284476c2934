"""cyclic_gc: the collector held back over a block, and left out at a command's exit."""
from __future__ import annotations

import gc
import subprocess
import sys

from sst_cdma.engine.cyclic_gc import held_back


def test_held_back_switches_the_collector_back_on_only_where_it_was_on():
    assert gc.isenabled()
    with held_back():
        assert not gc.isenabled()
        with held_back():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_done_with_collecting_freezes_what_the_process_holds():
    # in a process of its own: a frozen collector would stay so for the rest of this one
    code = ("import gc; from sst_cdma.engine.cyclic_gc import done_with_collecting; "
            "held = [[] for _ in range(1000)]; before = gc.get_freeze_count(); "
            "done_with_collecting(); print(before, gc.get_freeze_count() >= 1000 + before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["0", "True"]
