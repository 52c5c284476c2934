"""Parameter sweeps: a YAML spec expands to points (one simulation each) that run on Dask,
are cached by a hash of their inputs, and are gathered into one results table. See
``docs/sweeps.md``.

    from sst_cdma.tools.sweep import run_sweep
    outcome = run_sweep("sweeps/pcie.yaml", output="results/pcie", workers=4)
"""
from __future__ import annotations

from sst_cdma.tools.sweep.driver import SweepInterrupted, SweepOutcome, run_sweep
from sst_cdma.tools.sweep.marks import SpecError
from sst_cdma.tools.sweep.spec import Point, SweepSpec, load_spec

__all__ = ["run_sweep", "load_spec", "SweepSpec", "Point", "SweepOutcome", "SweepInterrupted",
           "SpecError"]
