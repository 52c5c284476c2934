"""Element libraries found by name: ``cdma.GPU`` is element ``GPU`` of library ``cdma``.

A library is a Python package; every module in it is imported and each concrete
:class:`~sst_cdma.engine.element.Element` subclass defined there becomes an element named after its
class (or its ``element_name``). Only the engine's test libraries are built in; every other
library, this distribution's ``cdma`` (the package ``components``) included, registers its
package under the entry-point group ``sst_cdma.elements``.

A package may also let a run import only the modules of the elements it uses
(:func:`find_element`) rather than the whole library, by declaring ``OPEN_ELEMENT_MODULES``:
the modules that make elements at import whose names are not known beforehand (the codec
units). Its other elements are found through its modules' source text, each top-level
``class NAME`` naming where a class of that name is defined (read once, without importing
anything), so adding an element stays one file. A name found in neither is looked up in the
whole library, as for a package without the declaration; listing (``sst-info``,
:func:`load_library`) always imports every module.

Topology scripts ship the same way: a package registered under ``sst_cdma.topologies`` holds
scripts (``*.py`` beside its ``__init__.py``) that ``sst NAME.py`` finds by name when no such
file is in the working folder (:func:`shipped_topologies`, :func:`find_topology`).
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path
from types import ModuleType
from typing import Optional

from sst_cdma.engine.element import Element, SubComponent, SubComponentSlot

ENTRY_POINT_GROUP = "sst_cdma.elements"
#: packages of topology scripts, found by name (``sst NAME.py``)
TOPOLOGY_ENTRY_POINT_GROUP = "sst_cdma.topologies"
#: the engine's own test elements; every other library (the cdma element library included)
#: registers under :data:`ENTRY_POINT_GROUP`
BUILTIN_LIBRARIES = {"testElement": "sst_cdma.engine.testelements",
                     "coreTestElement": "sst_cdma.engine.testelements.core"}


class ElementNotFound(LookupError):
    """No library or element of that name."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0])


@lru_cache(maxsize=1)
def library_modules() -> dict[str, str]:
    """Library name -> package import path, built-ins first, then entry points."""
    libs = dict(BUILTIN_LIBRARIES)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        libs.setdefault(ep.name, ep.value)
    return libs


@lru_cache(maxsize=1)
def _own_libraries() -> dict[str, str]:
    """Library name -> package of the libraries the distribution that ships this engine
    registers, read from its own metadata ({} where it is not installed)."""
    try:
        own = distribution(__name__.partition(".")[0])
    except PackageNotFoundError:
        return {}
    return {ep.name: ep.value for ep in own.entry_points if ep.group == ENTRY_POINT_GROUP}


def library_package(name: str) -> Optional[str]:
    """The package import path of library ``name`` (None: no such library): a built-in one,
    one this engine's own distribution registers, else any distribution's
    (:func:`library_modules`). A run that names only those libraries reads one distribution's
    entry points rather than every installed distribution's (a few milliseconds of each
    run's start with a hundred distributions installed, more with more)."""
    return BUILTIN_LIBRARIES.get(name) or _own_libraries().get(name) \
        or library_modules().get(name)


@lru_cache(maxsize=None)
def load_library(name: str) -> dict[str, type[Element]]:
    """Element name -> class for library ``name`` (imports every module of the package)."""
    package = _library_package(name)
    found: dict[str, type[Element]] = {}
    module_names = [package.__name__]
    if hasattr(package, "__path__"):
        module_names += [f"{package.__name__}.{m.name}"
                         for m in pkgutil.iter_modules(package.__path__) if not m.ispkg]
    for mod_name in sorted(module_names):
        for element_name, obj in _module_elements(importlib.import_module(mod_name)):
            obj.library = name
            found[element_name] = obj
    return dict(sorted(found.items()))


def _library_package(name: str) -> ModuleType:
    """The package of library ``name``; ElementNotFound with close matches where there is no
    such library."""
    package = library_package(name)
    if package is None:
        from difflib import get_close_matches  # only when a name is wrong

        modules = library_modules()
        close = get_close_matches(name, modules, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else \
            f" (available: {', '.join(sorted(modules))})"
        raise ElementNotFound(f"unknown element library {name!r}{hint}")
    return importlib.import_module(package)


def _module_elements(module: ModuleType) -> list[tuple[str, type[Element]]]:
    """(element name, class) of every concrete element class ``module`` defines."""
    return [(obj.element_name or obj.__name__, obj) for obj in list(vars(module).values())
            if isinstance(obj, type) and issubclass(obj, Element)
            and obj.__module__ == module.__name__ and not obj.__dict__.get("ABSTRACT", False)]


_CLASS = re.compile(r"^class ([A-Za-z_][A-Za-z0-9_]*)\b", re.MULTILINE)


@lru_cache(maxsize=None)
def class_index(folder: str) -> dict[str, tuple[str, ...]]:
    """Class name -> the modules (of the package in ``folder``) whose source defines a
    top-level class of that name, read from the files without importing them."""
    index: dict[str, list[str]] = {}
    for path in sorted(Path(folder).glob("*.py")):
        if path.name.startswith("_"):
            continue
        for name in _CLASS.findall(path.read_text(encoding="utf-8")):
            index.setdefault(name, []).append(path.stem)
    return {name: tuple(modules) for name, modules in index.items()}


def indexed_element(library: str, element: str) -> Optional[type[Element]]:
    """Element ``element`` of ``library`` found through the modules of the package whose
    source defines a class of that name (:func:`class_index`; for a name none defines, its
    ``OPEN_ELEMENT_MODULES``), importing only those; None where there is no such library, the
    package does not declare ``OPEN_ELEMENT_MODULES`` or the modules define no such element
    (the caller then looks in the whole library, which says what is wrong)."""
    path = library_package(library)
    if path is None:
        return None
    package = importlib.import_module(path)
    open_modules = getattr(package, "OPEN_ELEMENT_MODULES", None)
    init = getattr(package, "__file__", None)
    if open_modules is None or init is None:
        return None
    where = list(class_index(str(Path(init).parent)).get(element, ())) or list(open_modules)
    for module_name in where:
        module = importlib.import_module(f"{package.__name__}.{module_name}")
        for name, obj in _module_elements(module):
            if name == element:
                obj.library = library
                return obj
    return None


#: (library package, ``library.Element``) -> (the module that defines it, its class), as
#: :func:`indexed_element` found it: a build looks up each element of its graph, a sweep every
#: point's again; a hit stands while that module is still the one imported and still holds the
#: class under its name (a module that makes elements at run time may drop one)
_FOUND: dict[tuple[Optional[str], str], tuple[ModuleType, type[Element]]] = {}


def find_element(type_name: str) -> type[Element]:
    """The class for ``library.Element``, importing only its module where the library's
    package says which it is (:func:`indexed_element`, remembered); ElementNotFound with close
    matches otherwise."""
    if "." not in type_name:
        raise ElementNotFound(f"element type {type_name!r} must be 'library.Element'")
    lib, elem = type_name.split(".", 1)
    key = (library_package(lib), type_name)
    found = _FOUND.get(key)
    if found is not None and sys.modules.get(found[0].__name__) is found[0] \
            and vars(found[0]).get(found[1].__name__) is found[1]:
        return found[1]
    indexed = indexed_element(lib, elem)
    if indexed is not None:
        module = sys.modules.get(indexed.__module__)
        if module is not None:
            _FOUND[key] = (module, indexed)
        return indexed
    elements = load_library(lib)
    if elem not in elements:
        from difflib import get_close_matches  # only when a name is wrong

        close = get_close_matches(elem, elements, n=3)
        hint = f" (did you mean {', '.join(f'{lib}.{c}' for c in close)}?)" if close else \
            f" (library {lib} has: {', '.join(elements)})"
        raise ElementNotFound(f"unknown element {type_name!r}{hint}")
    return elements[elem]


def elements_deriving_from(base: type) -> list[str]:
    """``library.Element`` of every element of the libraries that load whose class derives
    from ``base`` (what fills a subcomponent slot that accepts ``base``), sorted. A library
    that fails to import is left out: this only lists."""
    out: list[str] = []
    for lib in library_modules():
        try:
            elements = load_library(lib)
        except Exception:  # noqa: BLE001 - a broken third-party library lists nothing
            continue
        out += [f"{lib}.{name}" for name, cls in elements.items() if issubclass(cls, base)]
    return sorted(out)


def _package_folders(package: str) -> list[Path]:
    """The folders of ``package``, found without importing it (none when it is missing)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


@lru_cache(maxsize=1)
def shipped_topologies() -> dict[str, Path]:
    """Script file name (``pascal_cdma.py``) -> path, for every script of the packages
    registered under :data:`TOPOLOGY_ENTRY_POINT_GROUP`; the first package to ship a name
    keeps it."""
    found: dict[str, Path] = {}
    for ep in entry_points(group=TOPOLOGY_ENTRY_POINT_GROUP):
        for folder in _package_folders(ep.value):
            for path in sorted(folder.glob("*.py")):
                if not path.name.startswith("_"):
                    found.setdefault(path.name, path)
    return found


def find_topology(name: str) -> Optional[Path]:
    """The shipped script ``name`` (``pascal_cdma.py`` or ``pascal_cdma``) names, or None. Only
    a bare file name is looked up: a path with a folder in it names that file alone."""
    if not name or Path(name).name != name:
        return None
    shipped = shipped_topologies()
    return shipped.get(name) or shipped.get(f"{name}.py")


# -- what fills a slot: the libraries' elements, asked by the slot's owner -------------------------
def slot_interface(slot: SubComponentSlot) -> type:
    """The class every element filling ``slot`` derives from: its ``accepts``, the class of the
    element type it names (imported now), or :class:`SubComponent` where it accepts any."""
    if isinstance(slot.accepts, str):
        return find_element(slot.accepts)
    return slot.accepts or SubComponent


def slot_fillers(slot: SubComponentSlot) -> list[str]:
    """Every element type of the known libraries that can fill ``slot``, sorted."""
    return elements_deriving_from(slot_interface(slot))


def describe_slot(slot: SubComponentSlot) -> str:
    """What ``slot`` takes, for error messages: the interface and the elements that implement
    it."""
    fillers = slot_fillers(slot)
    return f"a {slot.interface} ({', '.join(fillers) if fillers else 'none known'})"


def slot_refusal(slot: SubComponentSlot, owner: str, element: type, slot_num: int = 0
                 ) -> Optional[str]:
    """Why ``element`` cannot go into ``slot`` of ``owner`` at ``slot_num`` (None: it can)."""
    where = f"{owner}: slot {slot.name!r}"
    if not issubclass(element, SubComponent):
        name = element.type_name()  # type: ignore[attr-defined]  # not a SubComponent
        return f"{where} takes {describe_slot(slot)}; {name} is a component, not a " \
               "subcomponent"
    if slot.accepts is not None and not issubclass(element, slot_interface(slot)):
        kinds = [base.__name__ for base in element.__mro__[1:]
                 if issubclass(base, SubComponent) and base is not SubComponent
                 and base.__dict__.get("ABSTRACT", False)]
        what = f" (a {kinds[0]})" if kinds else ""
        return f"{where} takes {describe_slot(slot)}, not {element.type_name()}{what}"
    if slot_num and not slot.multiple:
        return f"{where} takes one subcomponent, in slot number 0 (not {slot_num})"
    return None
