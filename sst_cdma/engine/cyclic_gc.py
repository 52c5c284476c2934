"""Python's cyclic garbage collector, held back where a run only grows its objects.

Each of the collector's passes scans the objects the interpreter holds; a full pass scans
every one. While a run imports its modules, builds its components and runs its events, the
objects only accumulate (modules, classes, functions, components, streams, results), so the
collector finds nothing worth freeing and its cost grows with everything held so far (with
the square of a simulated system's size over a build):
importing the packages a run needs set off well over a hundred collections
(``benchmarks/bench_startup.py`` counts them). This stdlib-only module holds the collector
back over such stretches; it imports nothing else, so an entry point can use it before its
own heavy imports. A command whose work is done has it skip the interpreter's collections at
exit too (:func:`done_with_collecting`).
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def held_back() -> Iterator[None]:
    """Run the block without the cyclic garbage collector, switched back on afterwards where
    it was on before (nested blocks leave it to the outermost). Reference counting still frees
    everything that is not part of a cycle at once; peak memory is the same without the
    collector because a run makes no cyclic garbage worth collecting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def done_with_collecting() -> None:
    """For a command whose work is done, just before its process exits: every object it holds
    frozen (``gc.freeze``), so that the full passes the interpreter makes as it shuts down
    (one as it clears its modules, more after) scan nothing. A run holds everything it made
    until then (memos of rendered streams and plans, results), so those passes find nothing
    worth freeing and cost a large share of a short run's CPU (a quarter of a ``--policy
    auto`` GPT-2 XL point); reference counting still frees what it frees, and the exit
    handlers run as before."""
    gc.freeze()
