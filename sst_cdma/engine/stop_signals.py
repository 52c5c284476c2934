"""SIGTERM and SIGHUP stop a command as Ctrl-C does (what ``timeout``, ``kill``, SLURM,
``docker stop`` and a closed terminal send): the handler raises :class:`Stopped`, a
``KeyboardInterrupt``, so every clean-up written for Ctrl-C runs; the command then says one
line (:func:`stop_message`) and exits with ``128 + signal number`` (:func:`exit_status`: 130,
143, 129), as a Unix tool killed by the signal would report."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Iterator

__all__ = ["STOP_SIGNALS", "Stopped", "exit_status", "stop_message", "stop_on_signals",
           "signals_deferred", "default_stop_signals"]

#: the signals, besides SIGINT, that stop a command as Ctrl-C does
STOP_SIGNALS: tuple[int, ...] = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                                      if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """A stop signal (``signum``) arrived; raised where the main thread was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _signum(exc: BaseException) -> int:
    return exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT)


def exit_status(exc: BaseException) -> int:
    """``128 + signal number`` of the interrupt ``exc`` (130 for Ctrl-C)."""
    return 128 + _signum(exc)


def stop_message(exc: BaseException) -> str:
    """``interrupted`` for Ctrl-C, ``stopped by SIGTERM`` (or SIGHUP) for a stop signal."""
    if isinstance(exc, Stopped):
        return f"stopped by {signal.Signals(exc.signum).name}"
    return "interrupted"


#: the stop under way (its signal's number) while :func:`stop_on_signals` holds: a second
#: signal (Ctrl-C, then SIGTERM from a supervisor a moment later) is not raised over the first
#: one's clean-up
_stopping: list[int] = []


def _raise_stopped(signum: int, frame: Any) -> None:
    """The handler :func:`stop_on_signals` sets: the first stop signal raises (SIGINT as
    ``KeyboardInterrupt``, others as :class:`Stopped`); any after it, while the first one's
    clean-up runs, is let go."""
    if _stopping:
        return
    _stopping.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _ours(handler: Any) -> bool:
    """True when ``handler`` is Python's Ctrl-C handler or :func:`stop_on_signals`'."""
    return handler is signal.default_int_handler or handler is _raise_stopped


@contextlib.contextmanager
def stop_on_signals(ending: bool = False) -> Iterator[None]:
    """While it holds, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread, as Ctrl-C
    raises ``KeyboardInterrupt`` (outside it, where handlers cannot be set, the block simply
    runs); only the first of them raises: one arriving while the first one's clean-up runs is
    let go, so the command ends as the first signal asked. The handlers before are put back
    after. A signal the process was started ignoring stays ignored (``nohup`` ignores SIGHUP:
    closing the terminal then does not stop the run); so does Ctrl-C where a handler of
    the caller's own holds it. Report the stop inside the block. ``ending``: for a command's
    ``main``, whose process ends after the block: once a stop arrived, the signals stay
    ignored instead of put back, so that one arriving while the interpreter shuts down does
    not kill the process with another status."""
    if not _main_thread():
        yield
        return
    saved = {signum: signal.signal(signum, _raise_stopped) for signum in STOP_SIGNALS
             if signal.getsignal(signum) is not signal.SIG_IGN}
    if _ours(signal.getsignal(signal.SIGINT)):
        saved[int(signal.SIGINT)] = signal.signal(signal.SIGINT, _raise_stopped)
    _stopping.clear()
    try:
        yield
    finally:
        stopped = bool(_stopping)
        for signum, handler in saved.items():
            signal.signal(signum, signal.SIG_IGN if ending and stopped else handler)
        _stopping.clear()


def _quiet_child() -> None:
    """In a process forked while :func:`stop_on_signals` holds (a Dask worker starting, a
    pool's process), the stop signals have their default action and Ctrl-C is ignored: only
    the process that started it reports a stop, never a child's ``KeyboardInterrupt``
    traceback."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is _raise_stopped:
            signal.signal(signum, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is _raise_stopped:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _stopping.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_quiet_child)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the block runs, then raise the interrupt the
    first of them would have (KeyboardInterrupt or :class:`Stopped`), so that a step such as
    moving a run's outputs into place is not cut in half. A signal whose handler was not
    Python's Ctrl-C or :func:`stop_on_signals`' (ignored, or the default) is not held. Outside
    the main thread the block simply runs."""
    if not _main_thread():
        yield
        return
    caught: list[int] = []
    saved: dict[int, Any] = {}
    for signum in (int(signal.SIGINT), *STOP_SIGNALS):
        if _ours(signal.getsignal(signum)):
            saved[signum] = signal.signal(signum, lambda s, frame: caught.append(s))
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    if caught and not _stopping:  # (a stop already under way is not raised again)
        if any(handler is _raise_stopped for handler in saved.values()):
            _stopping.append(caught[0])  # stop_on_signals holds: the first stop
        if caught[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(caught[0])


@contextlib.contextmanager
def default_stop_signals() -> Iterator[None]:
    """While it holds, SIGTERM and SIGHUP have their default action (end the process quietly;
    one ignored stays so) and SIGINT is ignored: for starting worker processes (forked or spawned, they inherit
    these), so that only the process that started them reports a stop, and shuts them down."""
    if not _main_thread():
        yield
        return
    saved = {int(signal.SIGINT): signal.signal(signal.SIGINT, signal.SIG_IGN)}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # (nohup's SIGHUP stays ignored)
            saved[signum] = signal.signal(signum, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
