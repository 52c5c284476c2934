"""The sweep report takes the summary keys it does not plot (the simulated system's shape) from
the hook each element library declares on its package (``SUMMARY_SYSTEM_KEYS``), not from the
cDMA summary schema: the cdma library declares its schema's system keys, another library its
own, and the figures the report plots leave them out."""
from __future__ import annotations

import sys
import types

import pandas as pd
import pytest

from components.summary_schema import SYSTEM_SHAPE
from sst_cdma.tools.sweep import report
from sst_cdma.tools.sweep.report import ReportError, system_keys, write_report


def test_the_cdma_library_declares_its_schemas_system_keys():
    assert SYSTEM_SHAPE <= system_keys()


@pytest.fixture
def widget_library(monkeypatch):
    """A library ``widgets`` whose package declares ``gadget_count`` a system key."""
    package = types.ModuleType("widget_library")
    package.SUMMARY_SYSTEM_KEYS = frozenset({"gadget_count"})
    monkeypatch.setitem(sys.modules, "widget_library", package)
    monkeypatch.setattr(report, "library_modules", lambda: {"widgets": "widget_library"})


def test_a_library_declares_its_own_system_keys(widget_library):
    assert system_keys() == {"gadget_count"}


def test_the_figures_leave_the_declared_system_keys_out(widget_library, tmp_path):
    pd.DataFrame([{"point": i, "key": f"k{i}", "status": "ok", "opt.n": i, "speed": 1.0 + i,
                   "gadget_count": 2 + i} for i in range(2)]).to_csv(tmp_path / "results.csv",
                                                                      index=False)
    plots = {p.name for p in write_report(tmp_path).plots}
    assert "speed.png" in plots and "gadget_count.png" not in plots


def test_a_library_that_cannot_be_imported_is_named(monkeypatch):
    monkeypatch.setattr(report, "library_modules", lambda: {"broken": "no_such_package_here"})
    with pytest.raises(ReportError, match=r"element library broken \(package "
                                          r"no_such_package_here\) cannot be imported"):
        system_keys()
