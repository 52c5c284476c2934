"""``sst-info [lib[.Element] ...]``: document element libraries the way SST-core's sst-info
does: each element's params (with defaults in []), ports, subcomponent slots and statistics."""
from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from sst_cdma import __version__
from sst_cdma.engine.element import Component, Element, SubComponent
from sst_cdma.engine.library import ElementNotFound, library_modules, load_library, slot_fillers
from sst_cdma.tools.cli.sst_main import OneLineParser

KIND_UNITS = {"time": "time", "frequency": "Hz", "bandwidth": "B/s", "bytes": "B"}


def interface_lines(cls: type[Element]) -> list[str]:
    """A subcomponent's ``Interface:`` line (as SST-core's sst-info prints it): the slot
    interfaces it implements, nearest first."""
    if issubclass(cls, Component):
        return []
    kinds = [base.__name__ for base in cls.__mro__[1:]
             if issubclass(base, SubComponent) and base.__dict__.get("ABSTRACT", False)]
    return [f"      Interface: {', '.join(kinds) or 'SubComponent'}"]


def plain(text: str) -> str:
    """Docstring text without reStructuredText markup (````x````, ``:class:`x```)."""
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def _source_file(cls: type[Element]) -> str:
    """The element's source file, relative to the installed package's parent folder."""
    try:
        path = Path(inspect.getfile(cls)).resolve()
    except (TypeError, OSError):
        return cls.__module__
    root = Path(__file__).resolve().parents[2]
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _param_line(p: Any) -> str:
    unit = f" ({KIND_UNITS[p.kind]})" if p.kind in KIND_UNITS else ""
    choices = f" (one of: {', '.join(map(str, p.choices))})" if p.choices else ""
    default = "REQUIRED" if p.required else p.default
    return f"         {p.name}: {plain(p.doc)}{unit}{choices}  [{default}]"


def describe_element(index: int, cls: type[Element]) -> list[str]:
    """The sst-info block of one element, with SST-core 16's lines."""
    component = issubclass(cls, Component)
    kind = "Component" if component else "SubComponent"
    lines = [f"   {kind} {index}: {cls.element_name or cls.__name__}",
             f"      Description: {plain(cls.description())}",
             f"      ELI version: {__version__}",
             f"      Compiled using file: {_source_file(cls)}",
             *interface_lines(cls),
             *(["      Category: UNCATEGORIZED COMPONENT"] if component else []),
             f"      Parameters ({len(cls.PARAMS)} total)"]
    lines += [_param_line(p) for p in cls.PARAMS]
    lines.append(f"      Ports ({len(cls.PORTS)} total)")
    for port in cls.PORTS:
        req = " (required)" if port.required else ""
        provides = f" [provides {', '.join(i.__name__ for i in port.provides)}]" \
            if port.provides else ""
        lines.append(f"         {port.name}: {plain(port.doc)}{req}{provides}")
    lines.append(f"      SubComponent Slots ({len(cls.SLOTS)} total)")
    for slot in cls.SLOTS:
        how = "required" if slot.required else f"default {slot.default}" if slot.default \
            else "optional"
        fillers = slot_fillers(slot)
        lines.append(f"         {slot.name}: {plain(slot.doc)} [{slot.interface}; {how}"
                     f"{'; several' if slot.multiple else ''}]")
        if fillers:
            lines.append(f"            filled by: {', '.join(fillers)}")
    lines.append(f"      Statistics ({len(cls.STATISTICS)} total)")
    for s in cls.STATISTICS:
        lines.append(f"         {s.name}: {plain(s.doc)},  (units = \"{s.units}\") "
                     f"Enable level = {s.level}")
    # sst-cdma elements cannot be checkpointed and declare no profile points or attributes
    lines += ["      Checkpointable: false", "      Profile Points (0 total)",
              "      Attributes (0 total)"]
    return lines


def _library_doc(module: str) -> str:
    """A library's one-line description: the first sentence of its package docstring."""
    import importlib

    doc = (importlib.import_module(module).__doc__ or "").strip()
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(": ")[0].split(". ")[0].rstrip(".")


def describe_library(index: int, name: str, only: Optional[str] = None) -> list[str]:
    """The sst-info block of one library (optionally one element of it)."""
    elements = load_library(name)
    module = library_modules()[name]
    lines = [f"ELEMENT LIBRARY {index} = {name} ({plain(_library_doc(module))})"]
    comps = [(n, c) for n, c in elements.items() if issubclass(c, Component)]
    subs = [(n, c) for n, c in elements.items() if not issubclass(c, Component)]
    for title, group in (("Components", comps), ("SubComponents", subs)):
        lines.append(f"{title} ({len(group)} total)")
        shown = [cls for elem_name, cls in group if only is None or only == elem_name]
        for i, cls in enumerate(shown):  # numbered from 0 among those shown, as SST's
            lines += describe_element(i, cls)
        if title == "Components" and shown:
            lines.append("")
    # no sst-cdma library provides modules or port modules
    return lines + ["Modules (0 total)", "PortModules (0 total)"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``sst-info``."""
    parser = OneLineParser(prog="sst-info", description="Document element libraries: params "
                           "with defaults, ports, subcomponent slots and statistics.")
    parser.add_argument("elements", nargs="*", metavar="lib[.Element]",
                        help="libraries or elements to show (default: all)")
    parser.add_argument("-l", "--list", action="store_true",
                        help="list libraries and element names only")
    args = parser.parse_args(argv)
    out: list[str] = []
    try:
        targets = args.elements or list(library_modules())
        for i, target in enumerate(targets):
            lib, _, elem = target.partition(".")
            elements = load_library(lib)
            if elem and elem not in elements:
                raise ElementNotFound(f"library {lib} has no element {elem!r} (elements: "
                                      f"{', '.join(elements)})")
            if args.list:
                out.append(f"{lib}: {', '.join(elements)}")
                continue
            if elem:
                out.append(f'Filtering output on Element = "{target}"')
                out.append("=" * 80)
            out += describe_library(i, lib, elem or None)
            out.append("")
    except ElementNotFound as exc:
        print(f"sst-info: {exc}", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
