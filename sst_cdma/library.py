"""Element libraries found by name: ``cdma.GPU`` is element ``GPU`` of library ``cdma``.

A library is a Python package; every module in it is imported and each concrete
:class:`~sst_cdma.element.Element` subclass defined there becomes an element named after its
class (or its ``element_name``). Only the engine's test libraries are built in; every other
library, this distribution's ``cdma`` (the package ``components``) included, registers its
package under the entry-point group ``sst_cdma.elements``.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points

from .element import Element

ENTRY_POINT_GROUP = "sst_cdma.elements"
#: the engine's own test elements; every other library (the cdma element library included)
#: registers under :data:`ENTRY_POINT_GROUP`
BUILTIN_LIBRARIES = {"testElement": "sst_cdma.testelements",
                     "coreTestElement": "sst_cdma.testelements.core"}


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


@lru_cache(maxsize=None)
def load_library(name: str) -> dict[str, type[Element]]:
    """Element name -> class for library ``name`` (imports every module of the package)."""
    modules = library_modules()
    if name not in modules:
        from difflib import get_close_matches  # only when a name is wrong

        close = get_close_matches(name, modules, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else \
            f" (available: {', '.join(sorted(modules))})"
        raise ElementNotFound(f"unknown element library {name!r}{hint}")
    package = importlib.import_module(modules[name])
    found: dict[str, type[Element]] = {}
    module_names = [package.__name__]
    if hasattr(package, "__path__"):
        module_names += [f"{package.__name__}.{m.name}"
                         for m in pkgutil.iter_modules(package.__path__) if not m.ispkg]
    for mod_name in sorted(module_names):
        module = importlib.import_module(mod_name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, Element) and obj.__module__ == mod_name
                    and not obj.__dict__.get("ABSTRACT", False)):
                obj.library = name
                found[obj.element_name or obj.__name__] = obj
    return dict(sorted(found.items()))


def find_element(type_name: str) -> type[Element]:
    """The class for ``library.Element``; ElementNotFound with close matches otherwise."""
    if "." not in type_name:
        raise ElementNotFound(f"element type {type_name!r} must be 'library.Element'")
    lib, elem = type_name.split(".", 1)
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
