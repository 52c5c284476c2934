"""Element libraries: found by name, third-party ones through the entry point group."""
from __future__ import annotations

import sys
import textwrap
from importlib.metadata import EntryPoint

import pytest

from sst_cdma.engine import library
from sst_cdma.engine.library import ElementNotFound, find_element, load_library


def test_builtin_libraries_list_their_elements():
    assert {"GPU", "HBM", "CDMAEngine", "PCIeBridge", "PCIeSwitch", "HostMemory",
            "Reporter"} <= set(load_library("cdma"))
    assert find_element("testElement.PHOLD").type_name() == "testElement.PHOLD"


def test_third_party_library_registers_through_an_entry_point(tmp_path, monkeypatch):
    pkg = tmp_path / "acme_elements"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "widget.py").write_text(textwrap.dedent('''
        from sst_cdma.engine.element import Component, Param

        class Widget(Component):
            """A third-party widget."""
            PARAMS = (Param("size", "int", 1, "how big"),)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = [EntryPoint("acme", "acme_elements", library.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(library, "entry_points", lambda group: fake)
    library.library_modules.cache_clear()
    load_library.cache_clear()
    try:
        cls = find_element("acme.Widget")
        assert cls.description() == "A third-party widget."
        assert cls.validate_params({"size": "3"}, "w") == {"size": 3}
    finally:
        library.library_modules.cache_clear()
        load_library.cache_clear()
        sys.modules.pop("acme_elements", None)
        sys.modules.pop("acme_elements.widget", None)


def test_unknown_names_suggest_close_matches():
    with pytest.raises(ElementNotFound, match="did you mean cdma.GPU"):
        find_element("cdma.GPUs")
    with pytest.raises(ElementNotFound, match="must be 'library.Element'"):
        find_element("GPU")


def test_a_found_element_is_remembered_until_its_module_is_imported_again(tmp_path,
                                                                          monkeypatch):
    pkg = tmp_path / "gadget_elements"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("OPEN_ELEMENT_MODULES = ()\n")
    source = textwrap.dedent('''
        from sst_cdma.engine.element import Component

        class Gadget(Component):
            """{doc}"""
    ''')
    (pkg / "gadget.py").write_text(source.format(doc="The first gadget."))
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = [EntryPoint("gadgets", "gadget_elements", library.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(library, "entry_points", lambda group: fake)
    library.library_modules.cache_clear()
    try:
        first = find_element("gadgets.Gadget")
        assert find_element("gadgets.Gadget") is first
        # the module imported again (a reload, an edited source): the new class, not the kept one
        import importlib

        (pkg / "gadget.py").write_text(source.format(doc="The second gadget."))
        importlib.invalidate_caches()
        sys.modules.pop("gadget_elements.gadget")
        again = find_element("gadgets.Gadget")
        assert again is not first and again.description() == "The second gadget."
    finally:
        library.library_modules.cache_clear()
        load_library.cache_clear()
        sys.modules.pop("gadget_elements", None)
        sys.modules.pop("gadget_elements.gadget", None)


def test_the_engines_own_libraries_are_found_without_reading_every_distribution(monkeypatch):
    if not library._own_libraries():
        pytest.skip("the project is not installed: no metadata of its own to read")

    def every_distribution(group: str) -> list[EntryPoint]:
        raise AssertionError("read every installed distribution's entry points")

    monkeypatch.setattr(library, "entry_points", every_distribution)
    library.library_modules.cache_clear()
    try:
        assert library.library_package("cdma") == "components"
        assert library.library_package("testElement") == "sst_cdma.engine.testelements"
        with pytest.raises(AssertionError, match="every installed"):
            library.library_package("no_such_library")  # only the full listing can say
    finally:
        library.library_modules.cache_clear()
