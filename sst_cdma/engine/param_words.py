"""The words an error uses for an element param: below the command line, the param's own name
(``optimizer_states=nvme``), which is what a topology script set; where a command line parsed
the options, the flag that sets it (``--optimizer-states nvme``), which is what its user typed.

Elements, workloads and the model name a param through :func:`param_word` and never spell a
flag. The layer that maps flags to params (the builder's model options) installs the
vocabulary once, when it parses the options (:func:`speak_flags`); a run that builds its graph
by hand speaks in params (:func:`speak_params`)."""
from __future__ import annotations

from typing import Mapping

from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["Flag", "param_word", "speak_flags", "speak_params", "forget_flag", "NO_VALUE"]


@frozen_record
class Flag(FrozenRecord):
    """The command-line flag that sets a param; ``invert``: the flag sets a boolean param
    false (``--no-contention``)."""

    flag: str
    invert: bool = False


class _NoValue:
    """The marker of "no value given" (a param named on its own)."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE = _NoValue()

#: (element type, param) -> its flag, while a command line's options are being run
_vocabulary: dict[tuple[str, str], Flag] = {}


def speak_flags(flags: Mapping[tuple[str, str], Flag]) -> None:
    """From now on, name the params of ``flags`` (keyed by element type and param name) by
    their flags: the options of this process's run came from a command line."""
    _vocabulary.clear()
    _vocabulary.update(flags)


def speak_params() -> None:
    """From now on, name every param by its own name (a graph built by hand)."""
    _vocabulary.clear()


def forget_flag(element: str, param: str) -> None:
    """Name ``param`` of ``element`` by itself from now on: its value came from elsewhere than
    the command line (a param override), so its flag is not what the user typed."""
    _vocabulary.pop((element, param), None)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def param_word(element: str, param: str, value: object = NO_VALUE) -> str:
    """How an error names ``param`` of an element of type ``element`` (``cdma.GPU``; a
    subcomponent's own type, ``cdma.NetworkWorkload``; for the element in a slot whose
    interface declares the params every filler shares, ``OWNER:SLOT``, as a codec in the
    engine's slot names ``cdma.CDMAEngine:codec``), with ``value`` when given: the flag
    (``--optimizer-states nvme``; a boolean as the flag alone, or its ``--no-`` form) under a
    command line that sets it, else ``optimizer_states=nvme``."""
    flag = _vocabulary.get((element, param))
    if flag is None:
        return param if value is NO_VALUE else f"{param}={_text(value)}"
    if value is NO_VALUE:
        return flag.flag
    if isinstance(value, bool):
        on = value != flag.invert
        if flag.flag.startswith("--no-"):
            return flag.flag if on else "--" + flag.flag[len("--no-"):]
        return flag.flag if on else "--no-" + flag.flag[2:]
    return f"{flag.flag} {_text(value)}"
