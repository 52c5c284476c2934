"""Batch regression in the manner of SST's test engine: a suite of cases, each a simulation
whose chosen figures are compared, within tolerances, against blessed reference files.

    from sst_cdma.tools.regress import run_suite
    outcome = run_suite("regress/")            # or update=True to re-bless
"""
from __future__ import annotations

from sst_cdma.tools.regress.compare import Difference, format_table
from sst_cdma.tools.regress.run import CaseOutcome, SuiteOutcome, run_suite
from sst_cdma.tools.regress.suite import Case, Suite, Tolerance, load_suite

__all__ = ["run_suite", "load_suite", "Suite", "Case", "Tolerance", "SuiteOutcome",
           "CaseOutcome", "Difference", "format_table"]
