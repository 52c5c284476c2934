"""``sst-info [lib[.Element] ...]``: document element libraries the way SST-core's sst-info
does: each element's params (with defaults in []), ports, subcomponent slots and statistics."""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from ..element import Component, Element, SubComponent
from ..library import ElementNotFound, library_modules, load_library
from .sst_main import OneLineParser

KIND_UNITS = {"time": "time", "frequency": "Hz", "bandwidth": "B/s", "bytes": "B"}


def interface_lines(cls: type[Element]) -> list[str]:
    """A subcomponent's ``Interface:`` line (as SST-core's sst-info prints it): the slot
    interfaces it implements, nearest first."""
    if issubclass(cls, Component):
        return []
    kinds = [base.__name__ for base in cls.__mro__[1:]
             if issubclass(base, SubComponent) and base.__dict__.get("ABSTRACT", False)]
    return [f"      Interface: {', '.join(kinds) or 'SubComponent'}"]


def describe_element(index: int, cls: type[Element]) -> list[str]:
    """The sst-info block of one element."""
    kind = "Component" if issubclass(cls, Component) else "SubComponent"
    lines = [f"   {kind} {index}: {cls.element_name or cls.__name__}",
             f"      Description: {cls.description()}",
             f"      Defined in: {cls.__module__}",
             *interface_lines(cls),
             f"      Parameters ({len(cls.PARAMS)} total)"]
    for p in cls.PARAMS:
        unit = f" ({KIND_UNITS[p.kind]})" if p.kind in KIND_UNITS else ""
        choices = f" one of: {', '.join(map(str, p.choices))}." if p.choices else ""
        default = "REQUIRED" if p.required else p.default
        lines.append(f"         {p.name}: {p.doc}{unit}.{choices}  [{default}]")
    lines.append(f"      Ports ({len(cls.PORTS)} total)")
    for port in cls.PORTS:
        req = " (required)" if port.required else ""
        provides = f" [provides {', '.join(i.__name__ for i in port.provides)}]" \
            if port.provides else ""
        lines.append(f"         {port.name}: {port.doc}{req}{provides}")
    lines.append(f"      SubComponent Slots ({len(cls.SLOTS)} total)")
    for slot in cls.SLOTS:
        how = "required" if slot.required else f"default {slot.default}" if slot.default \
            else "optional"
        fillers = slot.fillers()
        lines.append(f"         {slot.name}: {slot.doc} [{slot.interface}; {how}"
                     f"{'; several' if slot.multiple else ''}]")
        if fillers:
            lines.append(f"            filled by: {', '.join(fillers)}")
    lines.append(f"      Statistics ({len(cls.STATISTICS)} total)")
    for s in cls.STATISTICS:
        lines.append(f"         {s.name}: {s.doc},  (units = \"{s.units}\") "
                     f"Enable level = {s.level}")
    return lines


def describe_library(index: int, name: str, only: Optional[str] = None) -> list[str]:
    """The sst-info block of one library (optionally one element of it)."""
    elements = load_library(name)
    module = library_modules()[name]
    lines = [f"ELEMENT LIBRARY {index} = {name} ({module})"]
    comps = [(n, c) for n, c in elements.items() if issubclass(c, Component)]
    subs = [(n, c) for n, c in elements.items() if not issubclass(c, Component)]
    for title, group in (("Components", comps), ("SubComponents", subs)):
        lines.append(f"{title} ({len(group)} total)")
        for i, (elem_name, cls) in enumerate(group):
            if only is None or only == elem_name:
                lines += describe_element(i, cls)
    return lines


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
