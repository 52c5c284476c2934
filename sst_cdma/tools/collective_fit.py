"""``python -m sst_cdma.tools.collective_fit --fit``: the collective cost model's fitted lines
and their residuals against the published nccl-tests measurements
(:mod:`sst_cdma.model.collectives`), the tables docs/clusters.md shows."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence

from sst_cdma.model.collectives import fit_table, fits, residual_table

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sst_cdma.tools.collective_fit --fit``: print the fits and their residuals."""
    parser = argparse.ArgumentParser(prog="python -m sst_cdma.tools.collective_fit",
                                     description="The collective cost model's fits to "
                                     "published nccl-tests measurements.")
    parser.add_argument("--fit", action="store_true",
                        help="print the fitted lines of every data set and their residuals")
    args = parser.parse_args(argv)
    if not args.fit:
        parser.print_help()
        return 0
    fitted = list(fits().values())
    lines = fit_table(fitted)
    for f in fitted:
        lines += ["", *residual_table(f)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
