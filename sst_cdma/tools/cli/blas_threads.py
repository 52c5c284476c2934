"""One BLAS thread for a command's process, unless the user chose a number.

NumPy's wheels link OpenBLAS, which starts its pool of threads as NumPy is imported; on a busy
machine the pool's idle threads spin and cost CPU time that a run never gets back: measured
here, ``import numpy`` took 161 ms of CPU with the pool and 99 ms with one thread, and the
main job (``sst topologies/pascal_cdma.py``) 426 ms and 317 ms (2-core machine, medians of 11
fresh processes). A run's arrays are small (one kernel's candidate tiles, one network's
layers): the elementwise operations it does run on one thread whatever the pool, and its few
matrix products and least-squares fits are tiny, so it gains nothing from the pool and its
results are the same (the calibration's fit already runs on one BLAS thread for the same
reason). Stdlib only, so an entry point can call it before its imports load NumPy.

OpenBLAS reads its thread count from the environment as it loads, with the priority
``OPENBLAS_NUM_THREADS`` > ``GOTO_NUM_THREADS`` > ``OMP_NUM_THREADS`` (OpenBLAS README,
"Set the number of threads with environment variables",
github.com/OpenMathLib/OpenBLAS/blob/085cf236c237973b490ff02076f85115a7eeb0f8/README.md);
a user who sets any of them keeps that number.
"""
from __future__ import annotations

import os
import sys
from typing import MutableMapping, Optional

#: the variables OpenBLAS reads its thread count from, in its order of priority
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread(environ: Optional[MutableMapping[str, str]] = None) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` in ``environ`` (the process's environment by default)
    where none of :data:`THREAD_VARIABLES` is set and NumPy is not loaded yet (OpenBLAS reads
    the variable once, as it loads); whether it set it. Child processes inherit the setting."""
    env = os.environ if environ is None else environ
    if "numpy" in sys.modules or any(name in env for name in THREAD_VARIABLES):
        return False
    env["OPENBLAS_NUM_THREADS"] = "1"
    return True
