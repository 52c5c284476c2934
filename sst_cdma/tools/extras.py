"""Which optional extra each command needs, and the one-line error when it is missing.

``pip install sst-cdma`` installs what one run needs (``sst``, ``sst-info``,
:func:`sst_cdma.run`, the codecs); sweeps, reports, the kernel-model fit and PyTorch capture
each come with an extra of their own (``pyproject.toml``, ``[project.optional-dependencies]``).
"""
from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

__all__ = ["EXTRAS", "MissingExtra", "missing_modules", "require"]

#: extra -> the modules it installs that the commands needing it import
EXTRAS: dict[str, tuple[str, ...]] = {
    "sweep": ("dask", "distributed", "tqdm", "pyarrow"),
    "report": ("matplotlib",),
    "calibrate": ("scipy",),
    "capture": ("torch",),
    # the suite's own needs; of them, the PHOLD benchmark (benchmarks/bench_phold.py) imports
    # SimPy, the kernel it measures ours against
    "test": ("simpy",),
}


class MissingExtra(ImportError):
    """A command needs an extra that is not installed; the message names the extra."""


def missing_modules(extra: str, modules: Optional[Sequence[str]] = None) -> list[str]:
    """The modules of ``extra`` (or those of ``modules``) that cannot be imported here (found
    without importing)."""
    out = []
    for module in EXTRAS[extra] if modules is None else modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(module)
    return out


def require(extra: str, what: str, modules: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`MissingExtra` (``WHAT needs dask, which is not installed: pip install
    'sst-cdma[sweep]'``) when a module of ``extra`` (of ``modules``, those of it that ``what``
    uses, when given) is missing."""
    absent = missing_modules(extra, modules)
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        raise MissingExtra(f"{what} needs {', '.join(absent)}, which {verb} not installed: "
                           f"pip install 'sst-cdma[{extra}]'")
